#!/usr/bin/env python3
"""What PyTorch's caching allocator with expandable_segments:True would hold over a crmm allocation
log, without a GPU: a model of its placement, replayed call by call, for comparing crmm's pool
(tests/pool_expandable_replay) with PyTorch's on the same requests.

The model follows PyTorch's documented behaviour (c10/cuda/CUDACachingAllocator.cpp, torch 2.x):
- a request is rounded up to a multiple of 512 bytes (512 at least);
- requests of up to 1 MiB come from the small pool, larger ones from the large pool; each
  stream has one expandable segment per pool, whose physical memory is mapped in pages of 2 MiB
  (small) or 20 MiB (large, PyTorch's large_segment_size);
- a request takes the smallest free block of its stream and pool that holds it (the lowest
  address among equal sizes) and splits off what it does not need when that is at least 512
  bytes, keeping the low part;
- when no free block holds it, the segment maps the fewest pages past its end that, with the free
  block at its end, hold the request, and the request takes the start of that merged block;
- a free merges the block with its free neighbours; nothing is unmapped (a program that never
  calls empty_cache and never runs out).

Usage: python3 bench/pytorch_expandable_model.py LOG.csv[.gz] ... [--large-page BYTES]
[--small-page BYTES] [--one-pool]; prints, per log, the most the model held, the most that was
live and their ratio. --one-pool serves every request from the large pool (PyTorch without its
small pool). Checked by python/tests/test_pytorch_expandable_model.py."""

import argparse
import bisect
import gzip
import sys

MIN_BLOCK = 512
SMALL_REQUEST = 1 << 20
MiB = 1 << 20


class Block:
    __slots__ = ("addr", "size", "used", "prev", "next")

    def __init__(self, addr, size):
        self.addr, self.size, self.used, self.prev, self.next = addr, size, False, None, None


class Segment:
    """One stream's expandable segment of one pool: blocks in address order from `base`, mapped up
    to base + mapped, and the free ones sorted by (size, address)."""

    def __init__(self, base, page):
        self.base, self.page, self.mapped = base, page, 0
        self.last = None  # the block at the end of the mapped memory
        self.free = []    # (size, addr) of the free blocks
        self.by_addr = {}

    def _take_free(self, b):
        del self.free[bisect.bisect_left(self.free, (b.size, b.addr))]

    def _put_free(self, b):
        bisect.insort(self.free, (b.size, b.addr))

    def allocate(self, size):
        i = bisect.bisect_left(self.free, (size, -1))
        if i < len(self.free):
            b = self.by_addr[self.free[i][1]]
            self._take_free(b)
        else:
            tail = self.last if self.last is not None and not self.last.used else None
            grow = -(-(size - (tail.size if tail else 0)) // self.page) * self.page
            self.mapped += grow
            if tail:
                self._take_free(tail)
                tail.size += grow
                b = tail
            else:
                b = Block(self.base + self.mapped - grow, grow)
                b.prev = self.last
                if self.last is not None:
                    self.last.next = b
                self.last = b
                self.by_addr[b.addr] = b
        rest = b.size - size
        if rest >= MIN_BLOCK:
            r = Block(b.addr + size, rest)
            r.prev, r.next = b, b.next
            if b.next is not None:
                b.next.prev = r
            b.next, b.size = r, size
            if self.last is b:
                self.last = r
            self.by_addr[r.addr] = r
            self._put_free(r)
        b.used = True
        return b

    def free_block(self, b):
        b.used = False
        if b.prev is not None and not b.prev.used:
            self._take_free(b.prev)
            b = self._absorb(b.prev, b)
        if b.next is not None and not b.next.used:
            self._take_free(b.next)
            self._absorb(b, b.next)
        self._put_free(b)

    def _absorb(self, keep, gone):
        """Merge block `gone` into its neighbour below, `keep`; returns keep."""
        keep.size += gone.size
        keep.next = gone.next
        if gone.next is not None:
            gone.next.prev = keep
        if self.last is gone:
            self.last = keep
        del self.by_addr[gone.addr]
        return keep


class Model:
    def __init__(self, large_page=20 * MiB, small_page=2 * MiB, small_pool=True):
        self.pages = {False: large_page, True: small_page}
        self.small_pool = small_pool
        self.segments = {}

    def held(self):
        return sum(s.mapped for s in self.segments.values())

    def allocate(self, size, stream):
        size = MIN_BLOCK if size < MIN_BLOCK else -(-size // MIN_BLOCK) * MIN_BLOCK
        small = self.small_pool and size <= SMALL_REQUEST
        key = (stream, small)
        seg = self.segments.get(key)
        if seg is None:
            seg = self.segments[key] = Segment(len(self.segments) << 48, self.pages[small])
        return seg, seg.allocate(size)


def read_log(path):
    """(action, pointer, size, stream) of each line of a crmm allocation log."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        header = f.readline().strip().split(",")
        col = {name: i for i, name in enumerate(header)}
        for line in f:
            t = line.rstrip("\n").split(",")
            if len(t) == len(header):
                yield t[col["Action"]], t[col["Pointer"]], int(t[col["Size"]]), t[col["Stream"]]


def replay(path, model):
    """(most held, most live) in bytes over the log at `path`."""
    live, held_peak, live_now, live_peak = {}, 0, 0, 0
    for action, ptr, size, stream in read_log(path):
        if action == "allocate" and size > 0:
            live[ptr] = model.allocate(size, stream) + (size,)
            live_now += size
            live_peak = max(live_peak, live_now)
            held_peak = max(held_peak, model.held())
        elif action == "free" and ptr in live:
            seg, block, asked = live.pop(ptr)
            seg.free_block(block)
            live_now -= asked
    return held_peak, live_peak


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", metavar="LOG")
    ap.add_argument("--large-page", type=int, default=20 * MiB, help="bytes per mapping of the large pool (20 MiB)")
    ap.add_argument("--small-page", type=int, default=2 * MiB, help="bytes per mapping of the small pool (2 MiB)")
    ap.add_argument("--one-pool", action="store_true", help="no small pool: every request from the large one")
    args = ap.parse_args(argv)
    for p in (args.large_page, args.small_page):
        if p < MIN_BLOCK or p % MIN_BLOCK:
            ap.error(f"a page must be a multiple of {MIN_BLOCK} bytes, not {p}")
    print("log  held_peak_MiB  live_peak_MiB  ratio")
    for path in args.logs:
        held, live = replay(path, Model(args.large_page, args.small_page, not args.one_pool))
        print(f"{path}  {held / MiB:.1f}  {live / MiB:.1f}  {held / live if live else 0:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
