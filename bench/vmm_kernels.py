#!/usr/bin/env python3
"""bench/vmm_kernels.py — do kernels run slower on memory the driver maps page by page?

Every VMM-backed allocator (crmm's expandable pool, PyTorch's expandable_segments) replays a
captured decoder step 0.4-1.7 % slower than PyTorch's own allocator over cudaMalloc, and serves
tokens slower (bench/RESULTS.md). This runs the same kernels over the same bytes placed four ways
and reports each kernel's time per placement, rounds alternated:

  cudaMalloc    one cudaMalloc of the region
  vmm_2m        cuMemAddressReserve + one cuMemCreate per 2 MiB page (as crmm's pool maps)
  vmm_whole     cuMemAddressReserve + one cuMemCreate of the whole region
  crmm_pool     a DeviceBuffer from the current crmm resource (CRMM_CONFIG: the default pool)

Kernels (CuPy): a device-to-device copy of half the region (bandwidth), a gather at random
indices over the whole region (TLB reach), and a half-precision GEMV over a weight matrix that
fills it (a decode step's shape). Needs CuPy and a GPU; prints one line per kernel and
placement: the median microseconds of --repeats batches of --iters launches.

    python3 bench/vmm_kernels.py [--mib 512] [--rounds 3]
"""

import argparse
import ctypes
import statistics
import sys

MiB = 1 << 20


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int), ("loc_type", ctypes.c_int),
                ("loc_id", ctypes.c_int), ("win32", ctypes.c_void_p), ("compression", ctypes.c_ubyte),
                ("rdma", ctypes.c_ubyte), ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("loc_type", ctypes.c_int), ("loc_id", ctypes.c_int), ("flags", ctypes.c_int)]


def _check(r, what):
    if r != 0:
        raise RuntimeError(f"{what} failed with CUresult {r}")


def vmm_region(cu, device, size, page, align=0):
    """A region of `size` bytes mapped from handles of `page` bytes, its address a multiple of
    `align` (0: of `page`); returns (address, keep)."""
    ptr = ctypes.c_uint64()
    _check(cu.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(align or page),
                                  ctypes.c_uint64(0), ctypes.c_uint64(0)), "cuMemAddressReserve")
    prop = _Prop(type=1, handle_types=0, loc_type=1, loc_id=device)
    for off in range(0, size, page):
        h = ctypes.c_uint64()
        _check(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(page), ctypes.byref(prop), ctypes.c_uint64(0)),
               "cuMemCreate")
        _check(cu.cuMemMap(ctypes.c_uint64(ptr.value + off), ctypes.c_size_t(page), ctypes.c_size_t(0), h,
                           ctypes.c_uint64(0)), "cuMemMap")
    access = _Access(loc_type=1, loc_id=device, flags=3)
    _check(cu.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)),
           "cuMemSetAccess")
    return ptr.value, None


def granularity(cu, device):
    """The device's minimum allocation granularity for device memory (2 MiB on current GPUs)."""
    gran = ctypes.c_size_t()
    _check(cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(_Prop(type=1, loc_type=1, loc_id=device)),
                                            0), "cuMemGetAllocationGranularity")
    return gran.value


def placements(cupy, size):
    """{name: (address, owner)} for each placement of `size` bytes."""
    cu = ctypes.CDLL("libcuda.so.1")
    device = cupy.cuda.Device().id
    out = {}
    m = cupy.cuda.runtime.malloc(size)
    out["cudaMalloc"] = (m, None)
    out["vmm_2m"] = vmm_region(cu, device, size, granularity(cu, device))
    out["vmm_whole"] = vmm_region(cu, device, size, size)
    try:
        import crmm

        buf = crmm.DeviceBuffer(size=size)
        out["crmm_pool"] = (buf.ptr, buf)
    except Exception as e:  # noqa: BLE001 -- crmm missing or not configured: that row is skipped
        print(f"# crmm_pool skipped: {e}")
    return out


def array(cupy, address, owner, size, dtype, shape):
    mem = cupy.cuda.UnownedMemory(address, size, owner)
    return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(mem, 0))


def time_us(cupy, fn, iters, repeats):
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    fn()
    times = []
    for _ in range(repeats):
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / iters)
    return statistics.median(times)


def kernels(cupy, address, owner, size):
    """[(name, fn)] over the region at `address`."""
    half = size // 2
    src = array(cupy, address, owner, half, cupy.uint8, (half,))
    dst = array(cupy, address + half, owner, half, cupy.uint8, (half,))
    floats = array(cupy, address, owner, size, cupy.float32, (size // 4,))
    rng = cupy.random.default_rng(1)
    idx = rng.integers(0, size // 4, 1 << 22, dtype=cupy.int64)
    cols = 4096
    rows = size // 2 // cols
    w = array(cupy, address, owner, rows * cols * 2, cupy.float16, (rows, cols))
    x = cupy.ones((cols, 1), cupy.float16)
    return [("copy half the region", lambda: cupy.copyto(dst, src)),
            ("gather 4M random floats", lambda: cupy.take(floats, idx)),
            (f"fp16 GEMV {rows}x{cols}", lambda: cupy.matmul(w, x))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=512, help="region size in MiB (a multiple of 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    try:
        import cupy
    except ImportError:
        print("# CuPy is not installed: nothing to measure")
        return 0
    size = a.mib * MiB
    where = placements(cupy, size)
    rng = cupy.random.default_rng(0)
    for name, (address, owner) in where.items():  # the same bytes in every placement
        array(cupy, address, owner, size, cupy.float16, (size // 2,))[...] = rng.standard_normal(size // 2, cupy.float32).astype(cupy.float16)
    cupy.cuda.Device().synchronize()
    results = {}
    for r in range(a.rounds):
        order = list(where.items())
        order = order[r % len(order):] + order[:r % len(order)]
        for name, (address, owner) in order:
            for kernel, fn in kernels(cupy, address, owner, size):
                results.setdefault((kernel, name), []).append(time_us(cupy, fn, a.iters, a.repeats))
    print(f"# {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, region {a.mib} MiB, "
          f"median of {a.repeats} x {a.iters} launches per round, {a.rounds} rounds (us per launch)")
    for (kernel, name), ts in sorted(results.items()):
        print(f"{kernel:28s} {name:11s} " + " ".join(f"{t:9.2f}" for t in ts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
