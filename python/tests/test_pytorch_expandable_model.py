"""bench/pytorch_expandable_model.py: the model of PyTorch's expandable segments that crmm's pool is
compared with over allocation logs. Small logs whose answer follows from PyTorch's rules by hand:
rounding, the small pool, 20 MiB mappings, best fit at the lowest address, growth that joins the
free block at the segment's end, merging on free, streams apart. Needs no GPU and no torch."""

import gzip
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import pytorch_expandable_model as pem  # noqa: E402

MiB = 1 << 20


def write_log(tmp_path, calls, name="log.csv", gz=False):
    """A crmm allocation log of (action, pointer, size[, stream]) calls."""
    lines = ["Thread,Time,Action,Pointer,Size,Stream"]
    for c in calls:
        action, ptr, size = c[:3]
        stream = c[3] if len(c) > 3 else "0"
        lines.append(f"1,00:00:00.000000,{action},{ptr},{size},{stream}")
    path = tmp_path / name
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return str(path)


def held_and_live(tmp_path, calls, **model):
    return pem.replay(write_log(tmp_path, calls), pem.Model(**model))


def test_large_requests_map_20_mib_and_small_ones_2_mib_of_their_own(tmp_path):
    assert held_and_live(tmp_path, [("allocate", "0xa", MiB + 1)]) == (20 * MiB, MiB + 1)
    assert held_and_live(tmp_path, [("allocate", "0xa", 100)]) == (2 * MiB, 100)
    both = [("allocate", "0xa", MiB + 1), ("allocate", "0xb", MiB)]  # 1 MiB exactly is small
    assert held_and_live(tmp_path, both) == (22 * MiB, 2 * MiB + 1)
    assert held_and_live(tmp_path, both, small_pool=False) == (20 * MiB, 2 * MiB + 1)  # fits the tail


def test_requests_are_rounded_to_512_bytes(tmp_path):
    model = pem.Model(small_page=1024)
    seg, a = model.allocate(1, "0")
    _, b = model.allocate(513, "0")
    assert (a.size, b.size, b.addr - a.addr) == (512, 1024, 512)
    assert model.held() == 2048  # 1536 rounded up to the 1 KiB pages of this model


def test_a_hole_too_small_grows_the_end_joined_to_its_free_block(tmp_path):
    calls = [("allocate", "0xa", 8 * MiB), ("allocate", "0xb", 8 * MiB), ("free", "0xa", 8 * MiB),
             ("allocate", "0xc", 10 * MiB),  # 8 MiB hole at 0; 4 MiB free at the end: one more 20 MiB page
             ("allocate", "0xd", 8 * MiB)]   # the hole, not the end's 14 MiB
    path = write_log(tmp_path, calls)
    model = pem.Model()
    held, live = pem.replay(path, model)
    assert (held, live) == (40 * MiB, 26 * MiB)
    seg = model.segments[("0", False)]
    assert [(b[1] - seg.base, b[0]) for b in seg.free] == [(26 * MiB, 14 * MiB)]


def test_the_smallest_free_block_is_taken_at_the_lowest_address(tmp_path):
    model = pem.Model(large_page=64 * MiB)
    blocks = [model.allocate(s, "0")[1] for s in (4 * MiB, 2 * MiB, 3 * MiB, 2 * MiB, 3 * MiB, 2 * MiB)]
    seg = model.segments[("0", False)]
    for b in (blocks[0], blocks[2], blocks[4]):  # holes of 4, 3 and 3 MiB, apart
        seg.free_block(b)
    taken = model.allocate(3 * MiB, "0")[1]
    assert taken.addr == blocks[2].addr
    taken = model.allocate(3 * MiB, "0")[1]
    assert taken.addr == blocks[4].addr  # then the other 3 MiB hole, not the 4 MiB one


def test_a_free_merges_with_both_neighbours(tmp_path):
    model = pem.Model(large_page=64 * MiB)
    a, b, c = (model.allocate(4 * MiB, "0")[1] for _ in range(3))
    seg = model.segments[("0", False)]
    seg.free_block(a)
    seg.free_block(c)  # merges with the free end
    seg.free_block(b)
    assert [(size, addr - seg.base) for size, addr in seg.free] == [(64 * MiB, 0)]
    assert model.allocate(64 * MiB, "0")[1].addr == seg.base and model.held() == 64 * MiB


def test_streams_keep_segments_of_their_own(tmp_path):
    calls = [("allocate", "0xa", 4 * MiB, "s1"), ("free", "0xa", 4 * MiB, "s1"), ("allocate", "0xb", 4 * MiB, "s2")]
    assert held_and_live(tmp_path, calls) == (40 * MiB, 4 * MiB)


def test_the_command_reads_gzipped_logs_and_refuses_bad_pages(tmp_path):
    script = os.path.join(os.path.dirname(pem.__file__), "pytorch_expandable_model.py")
    path = write_log(tmp_path, [("allocate", "0xa", 3 * MiB), ("free", "0xa", 3 * MiB)], "log.csv.gz", gz=True)
    done = subprocess.run([sys.executable, script, path], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"{path}  20.0  3.0  6.6667"
    bad = subprocess.run([sys.executable, script, path, "--large-page", "1000"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "multiple of 512" in bad.stderr


def test_empty_requests_and_unknown_frees_are_skipped(tmp_path):
    calls = [("allocate", "0xa", 0), ("free", "0xb", 64), ("allocate", "0xc", 64)]
    assert held_and_live(tmp_path, calls) == (2 * MiB, 64)
