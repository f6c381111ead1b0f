#!/usr/bin/env python3
"""bench/vmm_call_costs.py — what the CUDA driver's virtual memory calls cost a process: the time
of cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap and cuMemRelease for one page of the
device's granularity (µs per call, over 256 pages), with the device idle and while a kernel spins
on another stream for about a second (side_done_at_end=False: no call waited for it), and
mapping one physical page at a second address while the first mapping stays (what the expandable
pool's moves without waiting do), checking that both addresses see the same bytes. Needs torch
(for the spinning kernel) and a driver:

    python3 bench/vmm_call_costs.py
"""
import ctypes
import time

import torch

cu = ctypes.CDLL("libcuda.so.1")
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()

class Loc(ctypes.Structure): _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class AllocFlags(ctypes.Structure): _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte), ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]
class Prop(ctypes.Structure): _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Loc), ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]
class Access(ctypes.Structure): _fields_ = [("location", Loc), ("flags", ctypes.c_int)]

prop = Prop(); prop.type = 1; prop.location = Loc(1, 0)
gran = ctypes.c_size_t()
assert cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0) == 0
page = gran.value
N = 256
base = ctypes.c_uint64()
assert cu.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(4 * N * page), ctypes.c_size_t(page), ctypes.c_uint64(0), ctypes.c_uint64(0)) == 0
acc = Access(Loc(1, 0), 3)
def addr(i): return ctypes.c_uint64(base.value + i * page)

def timed(fn, n):
    t = time.perf_counter_ns()
    for i in range(n):
        r = fn(i)
        if r: raise SystemExit(f"driver error {r}")
    return (time.perf_counter_ns() - t) / n / 1000.0

def one_round(busy):
    hs = [ctypes.c_uint64() for _ in range(N)]
    side = torch.cuda.Stream()
    if busy:
        with torch.cuda.stream(side): torch.cuda._sleep(2_000_000_000)  # ~1 s spin on another stream
    out = {}
    t0 = time.perf_counter()
    out["create"] = timed(lambda i: cu.cuMemCreate(ctypes.byref(hs[i]), ctypes.c_size_t(page), ctypes.byref(prop), ctypes.c_uint64(0)), N)
    out["map"] = timed(lambda i: cu.cuMemMap(addr(i), ctypes.c_size_t(page), ctypes.c_size_t(0), hs[i], ctypes.c_uint64(0)), N)
    out["set_access_per_page"] = timed(lambda i: cu.cuMemSetAccess(addr(i), ctypes.c_size_t(page), ctypes.byref(acc), ctypes.c_size_t(1)), N)
    out["alias_map"] = timed(lambda i: cu.cuMemMap(addr(N + i), ctypes.c_size_t(page), ctypes.c_size_t(0), hs[i], ctypes.c_uint64(0)), N)
    out["alias_set_access_run"] = timed(lambda i: cu.cuMemSetAccess(addr(N), ctypes.c_size_t(N * page), ctypes.byref(acc), ctypes.c_size_t(1)) if i == 0 else 0, 1)
    out["unmap"] = timed(lambda i: cu.cuMemUnmap(addr(i), ctypes.c_size_t(page)), N)
    out["unmap_alias"] = timed(lambda i: cu.cuMemUnmap(addr(N + i), ctypes.c_size_t(page)), N)
    out["release"] = timed(lambda i: cu.cuMemRelease(hs[i]), N)
    out["wall_ms"] = (time.perf_counter() - t0) * 1000
    out["side_done_at_end"] = side.query()
    torch.cuda.synchronize()
    return out

for busy in (False, True, False, True):
    r = one_round(busy)
    print(("busy " if busy else "idle ") + " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()), flush=True)

# aliasing: data written through one mapping reads through the other
h = ctypes.c_uint64()
assert cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(page), ctypes.byref(prop), ctypes.c_uint64(0)) == 0
assert cu.cuMemMap(addr(0), ctypes.c_size_t(page), ctypes.c_size_t(0), h, ctypes.c_uint64(0)) == 0
assert cu.cuMemMap(addr(2 * N), ctypes.c_size_t(page), ctypes.c_size_t(0), h, ctypes.c_uint64(0)) == 0
assert cu.cuMemSetAccess(addr(0), ctypes.c_size_t(page), ctypes.byref(acc), ctypes.c_size_t(1)) == 0
assert cu.cuMemSetAccess(addr(2 * N), ctypes.c_size_t(page), ctypes.byref(acc), ctypes.c_size_t(1)) == 0
src = torch.arange(256, dtype=torch.uint8, device="cuda")
res = torch.empty(256, dtype=torch.uint8, device="cuda")
cu.cuMemcpyDtoD_v2(addr(0), ctypes.c_uint64(src.data_ptr()), ctypes.c_size_t(256))
cu.cuMemcpyDtoD_v2(ctypes.c_uint64(res.data_ptr()), addr(2 * N), ctypes.c_size_t(256))
torch.cuda.synchronize()
print("alias shares data:", bool(torch.equal(src, res)))
