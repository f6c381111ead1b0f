"""What a Python user pays to create and drop a 4 KiB buffer: crmm's DeviceBuffer, crmm's CuPy
and Numba allocators, and for reference CuPy's own memory pool and torch.empty, each the median
of R repeats of N create+drop in this one process (a framework that is missing is skipped with a
line saying so).

    python3 bench/python_alloc.py                 # on a GPU: the current device's resource
                                                  # (CRMM_CONFIG=conf/crmm.ini: a pool)
    python3 bench/python_alloc.py --host          # no GPU needed: a pool over host memory
    python3 bench/python_alloc.py --breakdown     # also the cost of each step, one by one
    python3 bench/python_alloc.py --rounds 5      # then CuPy's pool and crmm's CuPy allocator
                                                  # in turn, batch by batch, five rounds; and
                                                  # the allocators' own calls beside pool.malloc

crmm's rows run once through each implementation of DeviceBuffer's calls into libcrmm
(crmm._fastalloc, the C extension, and ctypes; crmm/_alloc.py), where both are there.
--host measures the Python side alone: a `pool` over a `callback` resource whose memory is host
memory that libcrmm is told is device memory (no CUDA call is made, nothing is zero-filled, and no
framework rows run). Run it from a build tree with the environment `make check` sets
(CRMM_LIBRARY, PYTHONPATH=python, CRMM_PLUGIN_PATH; CRMM_FASTALLOC for the built extension).
"""

import argparse
import ctypes
import os
import statistics
import sys
import time

SIZE = 4096


def median_us(fn, n, repeats):
    """Median over `repeats` of the mean time of one fn() in microseconds, over n calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(times)


def host_pool():
    """A pool over host memory handed out as device memory (for --host), and what keeps its
    callbacks alive."""
    from crmm.pylibrmm.memory_resource import MemoryResource

    libc = ctypes.CDLL(None)
    libc.aligned_alloc.restype = ctypes.c_void_p
    libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    alloc_t = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
    free_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
    alloc = alloc_t(lambda n, stream, arg: libc.aligned_alloc(256, (n + 255) // 256 * 256))
    free = free_t(lambda p, n, stream, arg: libc.free(p))
    address = lambda f: ctypes.cast(f, ctypes.c_void_p).value  # noqa: E731
    upstream = MemoryResource("callback", {"allocate_fn": address(alloc), "deallocate_fn": address(free)})
    pool = MemoryResource("pool", {"initial_size": "64MiB"}, upstream=upstream)
    return pool, (alloc, free, upstream)


def implementations():
    """(name, switch) for each implementation of DeviceBuffer's calls that is there."""
    try:
        from crmm import _alloc
    except ImportError:  # a crmm without crmm/_alloc.py
        return [("ctypes", lambda: None)]
    names = ["extension", "ctypes"] if _alloc.extension is not None else ["ctypes"]
    if _alloc.extension is None:
        print("# crmm._fastalloc is not built here: ctypes only")
    return [(name, lambda name=name: _alloc.use(name)) for name in names]


def crmm_rows(args, mr):
    import crmm

    uninitialized = crmm.DeviceBuffer._uninitialized
    for name, switch in implementations():
        switch()
        if not args.host:
            report(f"crmm.DeviceBuffer(size=4096), zero-filled [{name}]", lambda: crmm.DeviceBuffer(size=SIZE), args)
        report(f"crmm DeviceBuffer, not zero-filled: the allocators' path [{name}]",
               lambda: uninitialized(SIZE, mr=mr), args)
        if not args.host:
            cupy_row(name, args)


def cupy_row(name, args):
    try:
        import cupy
    except ImportError:
        print("# CuPy is not installed: crmm's CuPy allocator is skipped")
        return
    from crmm.allocators import cupy as crmm_cupy

    # the extension's row is the allocator a user sets (the extension's C allocator where it is
    # built); the ctypes row is the Python allocator it passes other streams to
    allocator = crmm_cupy.rmm_cupy_allocator if name == "extension" else crmm_cupy._allocate
    report(f"cupy.empty through crmm's allocator [{name}]", (allocator, lambda: cupy.empty(SIZE, cupy.uint8)), args)


def paired_us(calls, n, repeats):
    """For each of `repeats`: one batch of n calls of each (setup, call) in `calls`, back to back
    (setup runs untimed before its batch). Returns, per call, the µs of one call in each batch:
    batches of one repeat ran seconds apart at most, so their ratio is free of the machine's
    slower and faster phases."""
    times = [[] for _ in calls]
    for _ in range(repeats):
        for i, (setup, call) in enumerate(calls):
            setup()
            start = time.perf_counter()
            for _ in range(n):
                call()
            times[i].append((time.perf_counter() - start) / n * 1e6)
    return times


def cupy_rounds(args):
    """--rounds K: CuPy's own pool and crmm's allocator (the one a user sets) take turns K times,
    batch by batch, so that each pair of batches ran under the same conditions; each round
    prints both medians and the median of the pairs' ratios."""
    import cupy

    from crmm.allocators.cupy import rmm_cupy_allocator

    pool = cupy.get_default_memory_pool().malloc
    empty = lambda: cupy.empty(SIZE, cupy.uint8)  # noqa: E731
    calls = [(lambda: cupy.cuda.set_allocator(pool), empty), (lambda: cupy.cuda.set_allocator(rmm_cupy_allocator), empty)]
    try:
        for r in range(args.rounds):
            theirs, ours = paired_us(calls, args.n, args.repeats)
            ratio = statistics.median(o / t for o, t in zip(ours, theirs))
            print(f"{statistics.median(theirs):8.3f} us  round {r + 1}: cupy.empty over CuPy's own pool")
            print(f"{statistics.median(ours):8.3f} us  round {r + 1}: cupy.empty over crmm's allocator "
                  f"(median ratio of the {args.repeats} pairs of batches: {ratio:.3f})")
    finally:
        cupy.cuda.set_allocator(pool)


def allocator_rounds(args):
    """--rounds K, the allocators' own calls: CuPy's bare pool.malloc and, in turn batch by batch,
    crmm's CuPy allocator's call, the DeviceBuffer those allocators make, and (where the Numba
    rows ran) crmm's Numba memalloc and Numba's own pointer object around no memory; each round
    prints every call's median and the median of its ratios to pool.malloc's batch beside it."""
    import cupy

    import crmm
    from crmm.allocators.cupy import rmm_cupy_allocator

    pool = cupy.get_default_memory_pool()
    nothing = lambda: None  # noqa: E731
    implementations()[0][1]()  # the rows before left the last implementation in use: the first
    uninitialized = crmm.DeviceBuffer._uninitialized
    calls = [("CuPy's pool.malloc(4096)", nothing, lambda: pool.malloc(SIZE)),
             ("cupy.cuda.alloc(4096) through crmm's allocator", lambda: cupy.cuda.set_allocator(rmm_cupy_allocator),
              lambda: cupy.cuda.alloc(SIZE)),
             ("crmm DeviceBuffer, the allocators' path", lambda: cupy.cuda.set_allocator(pool.malloc),
              lambda: uninitialized(SIZE))]
    try:
        from numba import cuda
        from numba.cuda import MemoryPointer

        from crmm.allocators.numba import RMMNumbaManager, _device_pointer

        context = cuda.current_context()
        manager = getattr(context, "memory_manager", None)
        if isinstance(manager, RMMNumbaManager):
            calls.append(("Numba's memalloc(4096) through crmm's manager", nothing, lambda: manager.memalloc(SIZE)))
            calls.append(("Numba's own MemoryPointer around no memory", nothing,
                          lambda: MemoryPointer(context, _device_pointer(0), SIZE)))
    except ImportError:
        print("# Numba is not installed: its calls are left out of the rounds")
    try:
        for r in range(args.rounds):
            times = paired_us([(setup, call) for _, setup, call in calls], args.n, args.repeats)
            for (label, _, _), t in zip(calls, times):
                ratio = statistics.median(o / b for o, b in zip(t, times[0]))
                print(f"{statistics.median(t):8.3f} us  round {r + 1}: {label} ({ratio:.3f}x pool.malloc)")
    finally:
        cupy.cuda.set_allocator(pool.malloc)


def report(label, fn, args):
    if isinstance(fn, tuple):  # (CuPy allocator to set, the call)
        import cupy

        allocator, call = fn
        cupy.cuda.set_allocator(allocator)
        try:
            us = median_us(call, args.n, args.repeats)
        finally:
            cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
    else:
        us = median_us(fn, args.n, args.repeats)
    print(f"{us:8.3f} us  {label}")


def numba_native_rows(args):
    """Numba's own memory manager (the reference a Numba user switches from): run in a process
    of its own, since the manager is fixed when Numba makes its context."""
    import subprocess

    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--numba-native", "-n", str(args.n),
                           "--repeats", str(args.repeats)], capture_output=True, text=True, timeout=600)
    print(done.stdout.rstrip() or f"# Numba's own manager's rows failed: {done.stderr.strip()[-300:]}")


def numba_native(args):
    import numpy as np
    from numba import cuda

    context = cuda.current_context()
    report("numba.cuda.device_array through Numba's own manager (reference, a process of its own)",
           lambda: cuda.device_array(SIZE, dtype=np.uint8), args)
    report("Numba's own memalloc(4096), the MemoryPointer dropped (reference, a process of its own)",
           lambda: context.memory_manager.memalloc(SIZE), args)


def numba_row(args):
    """crmm's Numba memory manager: set before Numba makes its context (this script uses Numba
    nowhere before)."""
    try:
        from numba import cuda
    except ImportError:
        print("# Numba is not installed: its row is skipped")
        return
    import numpy as np

    from crmm.allocators.numba import RMMNumbaManager

    cuda.set_memory_manager(RMMNumbaManager)
    # the floor of any Numba memory manager: Numba's own pointer object, around no memory
    from numba.cuda import MemoryPointer

    from crmm.allocators.numba import _device_pointer

    context = cuda.current_context()
    report("Numba's own MemoryPointer around no memory, dropped (what any Numba manager's pointer costs)",
           lambda: MemoryPointer(context, _device_pointer(0), SIZE), args)
    manager = getattr(context, "memory_manager", None)
    for name, switch in implementations():
        switch()
        # the manager, made with the extension in use, allocates in C; through ctypes, its method
        in_c = manager.__dict__.pop("memalloc", None) if manager is not None and name == "ctypes" else None
        report(f"numba.cuda.device_array through crmm's manager [{name}]",
               lambda: cuda.device_array(SIZE, dtype=np.uint8), args)
        # the allocator's own call, without Numba's array around it
        if manager is None:
            print("# this Numba's context has no memory_manager: memalloc's row is skipped")
            continue
        report(f"Numba's memalloc(4096) through crmm's manager, the MemoryPointer dropped [{name}]",
               lambda: manager.memalloc(SIZE), args)
        if in_c is not None:
            manager.memalloc = in_c


def crmm_allocator():
    from crmm.allocators.cupy import rmm_cupy_allocator

    return rmm_cupy_allocator


def reference_rows(args):
    try:
        import cupy
    except ImportError:
        print("# CuPy is not installed: CuPy's pool is skipped")
    else:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
        report("cupy.empty over CuPy's own memory pool (reference)", lambda: cupy.empty(SIZE, cupy.uint8), args)
        report("cupy.zeros over CuPy's own memory pool (reference for the zero-filled row)",
               lambda: cupy.zeros(SIZE, cupy.uint8), args)
        pool = cupy.get_default_memory_pool()
        report("CuPy's pool.malloc(4096), the MemoryPointer dropped (reference for the allocators' own calls)",
               lambda: pool.malloc(SIZE), args)
        cupy.cuda.set_allocator(crmm_allocator())
        report("cupy.cuda.alloc(4096) through crmm's allocator, the MemoryPointer dropped",
               lambda: cupy.cuda.alloc(SIZE), args)
        cupy.cuda.set_allocator(pool.malloc)
    try:
        import torch
    except ImportError:
        print("# PyTorch is not installed: torch.empty is skipped")
    else:
        if torch.cuda.is_available():
            report("torch.empty(4096, uint8, cuda) (reference)",
                   lambda: torch.empty(SIZE, dtype=torch.uint8, device="cuda"), args)
            report("torch.zeros(4096, uint8, cuda) (reference for the zero-filled row)",
                   lambda: torch.zeros(SIZE, dtype=torch.uint8, device="cuda"), args)
        else:
            print("# PyTorch sees no GPU: torch.empty is skipped")


def breakdown(args, mr):
    """The steps of one DeviceBuffer create+drop, each timed alone (their sum is near, not
    exactly, the whole: each step runs in a loop of its own)."""
    import crmm
    from crmm import _lib
    from crmm._host import size_arg
    from crmm.pylibrmm.stream import DEFAULT_STREAM, as_stream

    print("# breakdown (us per call)")
    handle = mr._handle if mr is not None else None
    cstream = DEFAULT_STREAM._cstream
    steps = [
        ("size_arg(4096)", lambda: size_arg(SIZE, "size")),
        ("as_stream(DEFAULT_STREAM)", lambda: as_stream(DEFAULT_STREAM)),
        ("crmm_current_config() through ctypes (the old init check)", _lib.lib.crmm_current_config),
        ("an empty Python object with __slots__ and __del__", _Empty),
    ]
    try:
        from crmm import _alloc
    except ImportError:
        _alloc = None
    if _alloc is not None and _alloc.extension is not None:
        _alloc.use("extension")  # the DeviceBuffer rows below: the path a user gets
    out = ctypes.c_void_p()
    lib = _lib.lib

    def ctypes_create_destroy():
        lib.crmm_device_buffer_create(SIZE, cstream, handle, ctypes.byref(out))
        lib.crmm_device_buffer_destroy(out.value)

    steps.append(("crmm_device_buffer_create + _destroy through ctypes", ctypes_create_destroy))
    if _alloc is not None and _alloc.extension is not None:
        ext = _alloc.extension
        steps.append(("crmm_device_buffer_create + _destroy through crmm._fastalloc (its owner object)",
                      lambda: ext.create(SIZE, cstream, handle)))
        owner = ext.create(SIZE, cstream, handle)
        steps.append(("crmm_device_buffer_ptr through crmm._fastalloc", owner.ptr))
    db = crmm.DeviceBuffer._uninitialized(SIZE, mr=mr)
    steps.append(("crmm_device_buffer_ptr through ctypes", lambda: lib.crmm_device_buffer_ptr(db._buf)))
    steps.append(("DeviceBuffer.ptr (property)", lambda: db.ptr))
    if not args.host:
        from crmm._alloc import memset_zero

        dev = db.device
        steps.append(("zero-fill through ctypes: cudaMemsetAsync + synchronize of the default stream",
                      lambda: memset_zero(db._buf, SIZE, None, True, cstream)))
        try:
            import cupy
        except ImportError:
            pass
        else:
            from crmm.pylibrmm.stream import Stream

            p = db.ptr
            mem = cupy.cuda.UnownedMemory(p, SIZE, db, dev)
            memptr = cupy.cuda.memory.MemoryPointer(mem, 0)
            steps += [
                ("cupy.cuda.get_current_stream()", cupy.cuda.get_current_stream),
                ("crmm Stream view of CuPy's stream (made and freed)", lambda: Stream(obj=cupy.cuda.get_current_stream())),
                ("cupy UnownedMemory + MemoryPointer", lambda: cupy.cuda.memory.MemoryPointer(cupy.cuda.UnownedMemory(p, SIZE, db, dev), 0)),
                ("cupy.ndarray over a MemoryPointer", lambda: cupy.ndarray((SIZE,), cupy.uint8, memptr)),
                ("cupy MemoryPointer(mem, 0) around an existing memory", lambda: cupy.cuda.memory.MemoryPointer(mem, 0)),
                ("CuPy's pool.malloc(4096), dropped", lambda pool=cupy.get_default_memory_pool(): pool.malloc(SIZE)),
            ]
            from crmm.allocators.cupy import rmm_cupy_allocator

            cmem = rmm_cupy_allocator(SIZE).mem

            def stores(m=cmem, ptr=cmem.ptr):
                m.ptr = ptr
                m.size = SIZE
                m.device_id = dev

            steps += [
                ("crmm's rmm_cupy_allocator(4096) called directly, dropped", lambda: rmm_cupy_allocator(SIZE)),
                ("its memory's three attribute stores (ptr, size, device_id), from Python", stores),
            ]
    libc_released, libc_held = ctypes.CDLL(None).getpid, ctypes.PyDLL(None).getpid
    steps += [
        ("getpid through ctypes.CDLL (the GIL released and taken again)", libc_released),
        ("getpid through ctypes.PyDLL (the GIL kept): the difference is one GIL release", libc_held),
    ]
    for label, fn in steps:
        print(f"{median_us(fn, args.n, args.repeats):8.3f} us  {label}")


class _Empty:
    __slots__ = ("a", "b", "c")

    def __init__(self):
        self.a = self.b = self.c = None

    def __del__(self):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", action="store_true", help="a pool over host memory: no GPU needed")
    parser.add_argument("--breakdown", action="store_true", help="also time each step alone")
    parser.add_argument("-n", type=int, default=20000, help="create+drop per repeat (20000)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats; the median is shown (5)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="then K rounds of CuPy's pool and crmm's CuPy allocator in turn, batch by batch, "
                        "and K of the allocators' own calls beside CuPy's pool.malloc (0)")
    parser.add_argument("--numba-native", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.numba_native:
        numba_native(args)
        return
    import crmm

    keep = None
    mr = None
    if args.host:
        mr, keep = host_pool()
    if args.host:
        where = "a pool over host memory"
    else:
        import crmm.mr

        current = crmm.mr.get_current_device_resource()
        where = (f"the current device's resource: {current.kind} "
                 f"($CRMM_CONFIG {os.environ.get('CRMM_CONFIG', 'not set')})")
    print(f"# Python {sys.version.split()[0]}, crmm {crmm.__version__}; median of {args.repeats} x {args.n} "
          f"create+drop of {SIZE} bytes; {where}")
    crmm_rows(args, mr)
    if not args.host:
        reference_rows(args)
        try:
            numba_row(args)
            numba_native_rows(args)
        except Exception as e:  # Numba's memory manager must come before its context: say why
            print(f"# Numba row failed: {type(e).__name__}: {e}")
        if args.rounds:
            cupy_rounds(args)
            allocator_rounds(args)
    if args.breakdown:
        breakdown(args, mr)
    del keep


if __name__ == "__main__":
    main()
