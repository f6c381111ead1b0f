"""Replay an RMM-format allocation log (CSV, optionally gzipped) on PyTorch's caching allocator,
on cudaMallocAsync (the device's default memory pool), or on crmm through its PyTorch entry
points, with one Python loop for all three, on one non-blocking stream, in log order.

Reports ns per operation of that loop (Python's own cost included, the same for every
allocator; `crmm replay` gives crmm's figure without it) and the memory each allocator reserved
at its peak divided by the peak of bytes live in the log.

    python3 replay_torch.py --allocator torch|async|crmm [--libcrmm PATH --config FILE] LOG...

One allocator per process (PyTorch's allocator is chosen once); prints one JSON line per log."""
import argparse
import ctypes
import gzip
import json
import statistics
import sys
import time


def read_log(path):
    """[(is_alloc, slot, size)] with pointers renamed to dense slots; frees of pointers the log
    never allocated are dropped; also the peak of live bytes."""
    opener = gzip.open if path.endswith(".gz") else open
    events, slots, live, peak, next_slot = [], {}, 0, 0, 0
    sizes = {}
    with opener(path, "rt") as f:
        header = f.readline().strip().split(",")
        ia, ip, isz = header.index("Action"), header.index("Pointer"), header.index("Size")
        for line in f:
            parts = line.rstrip("\n").split(",")
            if len(parts) < len(header):
                continue
            action, ptr, size = parts[ia], int(parts[ip], 16), int(parts[isz])
            if action == "allocate":
                slots[ptr] = next_slot
                sizes[next_slot] = size
                events.append((True, next_slot, size))
                next_slot += 1
                live += size
                peak = max(peak, live)
            elif action == "free" and ptr in slots:
                s = slots.pop(ptr)
                events.append((False, s, sizes[s]))
                live -= sizes[s]
    return events, next_slot, peak


class Torch:
    name = "pytorch-caching"

    def __init__(self, torch, stream):
        self.torch, self.stream, self.dev = torch, stream, torch.cuda.current_device()
        self.alloc = torch.cuda.caching_allocator_alloc
        self.free = torch.cuda.caching_allocator_delete

    def run(self, events, n):
        ptrs = [0] * n
        a, f, dev, st = self.alloc, self.free, self.dev, self.stream
        for is_alloc, s, size in events:
            if is_alloc:
                ptrs[s] = a(size, dev, st)
            else:
                f(ptrs[s])
        return ptrs

    def reset(self):
        self.torch.cuda.empty_cache()
        self.torch.cuda.reset_peak_memory_stats()

    def reserved_peak(self):
        return self.torch.cuda.memory_stats()["reserved_bytes.all.peak"]


class Async:
    name = "cudaMallocAsync"

    def __init__(self, torch, stream):
        self.torch = torch
        self.rt = ctypes.CDLL("libcudart.so.13")
        self.stream = ctypes.c_void_p(stream.cuda_stream)
        self.pool = ctypes.c_void_p()
        assert self.rt.cudaDeviceGetDefaultMemPool(ctypes.byref(self.pool), torch.cuda.current_device()) == 0

    def run(self, events, n):
        ptrs = [None] * n
        m, f, st = self.rt.cudaMallocAsync, self.rt.cudaFreeAsync, self.stream
        for is_alloc, s, size in events:
            if is_alloc:
                p = ctypes.c_void_p()
                if m(ctypes.byref(p), ctypes.c_size_t(size), st) != 0:
                    raise MemoryError("cudaMallocAsync(%d) failed" % size)
                ptrs[s] = p
            else:
                f(ptrs[s], st)
        return ptrs

    def _attr(self, which, value=None):
        v = ctypes.c_uint64(0 if value is None else value)
        if value is None:
            self.rt.cudaMemPoolGetAttribute(self.pool, which, ctypes.byref(v))
        else:
            self.rt.cudaMemPoolSetAttribute(self.pool, which, ctypes.byref(v))
        return v.value

    def reset(self):
        self.torch.cuda.synchronize()
        self.rt.cudaMemPoolTrimTo(self.pool, ctypes.c_size_t(0))
        self._attr(6, 0)  # cudaMemPoolAttrReservedMemHigh: reset

    def reserved_peak(self):
        return self._attr(6)


class Crmm:
    name = "crmm"

    def __init__(self, torch, stream, libcrmm):
        self.torch = torch
        self.lib = ctypes.CDLL(libcrmm)
        self.lib.crmm_torch_allocate.restype = ctypes.c_void_p
        self.lib.crmm_torch_allocate.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.lib.crmm_torch_deallocate.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.stream, self.dev = stream.cuda_stream, torch.cuda.current_device()

    def run(self, events, n):
        ptrs = [0] * n
        a, f, dev, st = self.lib.crmm_torch_allocate, self.lib.crmm_torch_deallocate, self.dev, self.stream
        for is_alloc, s, size in events:
            if is_alloc:
                p = a(size, dev, st)
                if not p:
                    raise MemoryError("crmm_torch_allocate(%d) failed" % size)
                ptrs[s] = p
            else:
                f(ptrs[s], size, dev, st)
        return ptrs

    def reset(self):
        pass

    def reserved_peak(self):
        return None  # crmm's own figure comes from `crmm replay`


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--allocator", choices=["torch", "async", "crmm"], required=True)
    ap.add_argument("--libcrmm")
    ap.add_argument("--config")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    import os
    if a.config:
        os.environ["CRMM_CONFIG"] = a.config
    import torch
    torch.cuda.init()
    stream = torch.cuda.Stream()
    alloc = {"torch": lambda: Torch(torch, stream), "async": lambda: Async(torch, stream),
             "crmm": lambda: Crmm(torch, stream, a.libcrmm)}[a.allocator]()
    for path in a.logs:
        events, n, peak_live = read_log(path)
        # Unfreed pointers at the end of the log are freed after each repeat (outside the timing).
        times, reserved = [], []
        for _ in range(a.repeats + 1):
            alloc.reset()
            t0 = time.perf_counter_ns()
            ptrs = alloc.run(events, n)
            t1 = time.perf_counter_ns()
            times.append((t1 - t0) / len(events))
            reserved.append(alloc.reserved_peak())
            freed = {s for is_alloc, s, _ in events if not is_alloc}
            leftover = [(False, s, 0) for s in range(n) if s not in freed]
            if a.allocator == "crmm":
                sizes = {s: size for is_alloc, s, size in events if is_alloc}
                leftover = [(False, s, sizes[s]) for _, s, _ in leftover]
            if leftover:
                _free_left(alloc, ptrs, leftover)
            torch.cuda.synchronize()
        times = times[1:]
        r = reserved[1] if reserved[1] is not None else None
        print(json.dumps({"log": os.path.basename(path), "allocator": alloc.name, "events": len(events),
                          "ns_per_op_median": round(statistics.median(times), 1),
                          "ns_per_op_all": [round(t, 1) for t in times],
                          "peak_live": peak_live, "reserved_peak": r,
                          "reserved_over_peak_live": round(r / peak_live, 4) if r else None}))
        sys.stdout.flush()


def _free_left(alloc, ptrs, leftover):
    if isinstance(alloc, Torch):
        for _, s, _ in leftover:
            alloc.free(ptrs[s])
    elif isinstance(alloc, Async):
        for _, s, _ in leftover:
            alloc.rt.cudaFreeAsync(ptrs[s], alloc.stream)
    else:
        for _, s, size in leftover:
            alloc.lib.crmm_torch_deallocate(ptrs[s], size, alloc.dev, alloc.stream)


if __name__ == "__main__":
    main()
