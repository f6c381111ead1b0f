"""crmm.ipc on a GPU: two Python processes share a DeviceBuffer's memory, from async
(enable_ipc=true) and from an expandable pool (ipc=true). The child is started with `spawn`:
a process that has used CUDA cannot fork a child that uses it too."""

import multiprocessing

import numpy as np
import pytest

import crmm
import crmm.ipc
from crmm.mr import MemoryResource

N = (4 << 20) + 12345


def _read_in_child(handle, queue):
    with handle.open() as shared:
        data = shared.tobytes()
        size = shared.size
    try:
        shared.tobytes()
        after_close = "read"
    except crmm.InvalidArgumentError:
        after_close = "refused"
    queue.put((size, bytes(np.frombuffer(data, dtype=np.uint8)[:: (1 << 16)]), after_close))


@pytest.mark.parametrize("kind", ["async", "pool"])
def test_two_processes_share_a_buffer(gpu, kind):
    if kind == "async":
        mr = MemoryResource("async", "enable_ipc=true")
    else:
        mr = MemoryResource("pool", "expandable=true ipc=true", upstream=MemoryResource("cuda"))
    pattern = (np.arange(N) % 251).astype(np.uint8)
    buf = crmm.DeviceBuffer(size=N, mr=mr)
    buf.copy_from_host(pattern)
    handle = crmm.ipc.export(buf)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(handle, queue))
    child.start()
    size, sample, after_close = queue.get(timeout=300)
    child.join(300)
    assert child.exitcode == 0
    assert size == N
    assert sample == bytes(pattern[:: (1 << 16)])
    assert after_close == "refused"  # a closed mapping is never read
    del buf  # after the importer closed: the driver's rule for async memory


def test_memory_that_cannot_be_shared_is_refused(gpu):
    mr = MemoryResource("async")
    buf = crmm.DeviceBuffer(size=4096, mr=mr)
    with pytest.raises(crmm.UnsupportedError, match="enable_ipc"):
        crmm.ipc.export(buf)
