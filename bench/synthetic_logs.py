#!/usr/bin/env python3
"""Synthetic allocation logs, in the logging plugin's CSV format, for patterns the recorded
PyTorch logs of bench/logs lack. Each is deterministic for a seed, so a replay of it is repeatable:

  kv_growth        a server whose requests' caches grow by reallocation (allocate the larger
                   size, free the old), up to 16 requests at once, with short-lived temporaries
                   between steps; sizes never repeat, unlike a training step's
  random_lifetimes sizes log-uniform from 256 B to 64 MiB, each freed at a random later point,
                   about 1 500 live at once
  two_streams      two streams, each allocating blocks of 1-32 MiB and freeing them at random on
                   the stream that allocated them, about 40 live in all
  shape_drift      training steps whose activations scale with a batch size that changes every
                   step, gradients freed in reverse order, parameters live throughout

  python3 bench/synthetic_logs.py [--seed N] [--out DIR] [PATTERN ...]

writes DIR/PATTERN.csv (default: every pattern, into the current directory) for `crmm replay`
or tests/pool_expandable_replay (`--streams` keeps two_streams' streams apart)."""
import argparse
import math
import os
import random

MiB = 1 << 20


class Log:
    """Allocations at made-up, never overlapping addresses, and their frees."""

    def __init__(self):
        self.events = []
        self.next_address = 0x100000000
        self.live = {}

    def allocate(self, size, stream=0):
        address = self.next_address
        self.next_address += (size + 4095) // 4096 * 4096 + 4096
        self.live[address] = size
        self.events.append(("allocate", address, size, stream))
        return address

    def free(self, address, stream=0):
        self.events.append(("free", address, self.live.pop(address), stream))

    def write(self, path):
        with open(path, "w") as f:
            f.write("Thread,Time,Action,Pointer,Size,Stream\n")
            for i, (action, address, size, stream) in enumerate(self.events):
                seconds = i / 1e6
                f.write(f"1,00:{int(seconds // 60):02d}:{seconds % 60:09.6f},{action},0x{address:x},{size},{stream}\n")


def kv_growth(rnd):
    log, caches = Log(), {}
    for step in range(3000):
        if len(caches) < 16 and rnd.random() < 0.3:
            caches[step] = (log.allocate(2 * MiB), 2 * MiB)
        for request in list(caches):
            address, size = caches[request]
            if rnd.random() < 0.05 or size > 400 * MiB:
                log.free(address)
                del caches[request]
            elif rnd.random() < 0.3:
                grown = size + rnd.choice([1, 2, 4]) * MiB + rnd.randrange(4096)
                caches[request] = (log.allocate(grown), grown)
                log.free(address)
        for address in [log.allocate(rnd.randrange(1, 8 * MiB)) for _ in range(4)]:
            log.free(address)
    for address, _ in caches.values():
        log.free(address)
    return log


def random_lifetimes(rnd):
    log, live = Log(), []
    low, high = math.log(256), math.log(64 * MiB)
    for _ in range(60000):
        if live and (rnd.random() < 0.5 or len(live) > 1500):
            log.free(live.pop(rnd.randrange(len(live))))
        else:
            live.append(log.allocate(int(math.exp(rnd.uniform(low, high)))))
    for address in live:
        log.free(address)
    return log


def two_streams(rnd):
    log, live = Log(), []
    for i in range(20000):
        stream = 1 + i % 2
        live.append((log.allocate(rnd.randrange(MiB, 32 * MiB), stream), stream))
        if len(live) > 40:
            log.free(*live.pop(rnd.randrange(len(live))))
    for address, stream in live:
        log.free(address, stream)
    return log


def shape_drift(rnd):
    log = Log()
    parameters = [log.allocate(rnd.randrange(MiB, 40 * MiB)) for _ in range(100)]
    for _ in range(200):
        batch = rnd.choice([1, 2, 3, 5, 8, 13])
        activations = [log.allocate(batch * rnd.choice([1, 3, 7]) * MiB + rnd.randrange(1 << 16)) for _ in range(60)]
        gradients = []
        for activation in reversed(activations):
            gradients.append(log.allocate(rnd.randrange(1 << 10, 4 * MiB)))
            log.free(activation)
            if len(gradients) > 4:
                log.free(gradients.pop(0))
        for address in gradients:
            log.free(address)
    for address in parameters:
        log.free(address)
    return log


PATTERNS = {f.__name__: f for f in (kv_growth, random_lifetimes, two_streams, shape_drift)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=".")
    parser.add_argument("patterns", nargs="*", metavar="PATTERN", help=", ".join(sorted(PATTERNS)))
    args = parser.parse_args()
    unknown = [name for name in args.patterns if name not in PATTERNS]
    if unknown:
        parser.error(f"unknown pattern {unknown[0]!r}; the patterns: {', '.join(sorted(PATTERNS))}")
    os.makedirs(args.out, exist_ok=True)
    for name in args.patterns or sorted(PATTERNS):
        path = os.path.join(args.out, name + ".csv")
        log = PATTERNS[name](random.Random(f"{name}/{args.seed}"))
        log.write(path)
        print(f"{path}: {len(log.events)} calls")


if __name__ == "__main__":
    main()
