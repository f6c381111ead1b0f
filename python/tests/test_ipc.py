"""crmm.ipc without a GPU: handles keep their bytes and descriptors through pickling across
processes and over a socket, bad bytes are refused with their descriptors closed, and memory
that cannot be shared is refused."""

import multiprocessing
import os
import socket
import struct
import tempfile

import pytest

import crmm
import crmm.ipc
from crmm.mr import MemoryResource

# crmm/ipc.h's wire header: magic, kind, handle type, device, count, size, page, offset, pointer data
WIRE = "<8sIIiIQQQ64s"


def plain_fds(texts):
    """Descriptors of fresh plain files holding `texts`."""
    fds = []
    for text in texts:
        f = tempfile.TemporaryFile()
        f.write(text.encode())
        f.flush()
        fds.append(os.dup(f.fileno()))
        f.close()
    return fds


def vmm_handle(texts):
    """A well-formed handle of len(texts) pages whose descriptors are plain files."""
    data = struct.pack(WIRE, b"crmmIPC1", 2, 1, 0, len(texts), 100, 4096, 0, bytes(64))
    return crmm.ipc.IpcHandle(data, plain_fds(texts))


def read_fd(fd):
    return os.pread(fd, 64, 0).decode()


def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _child_reads(inbox, outbox):
    handle = inbox.get(timeout=60)
    outbox.put((handle.data, [read_fd(fd) for fd in handle.fds]))


def test_a_pickled_handle_crosses_to_another_process_with_its_descriptors():
    ctx = multiprocessing.get_context("fork")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_child_reads, args=(inbox, outbox))
    child.start()
    # made after the fork, so the child has none of its descriptors: pickling sends them
    h = vmm_handle(["page zero", "page one"])
    inbox.put(h)
    data, texts = outbox.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert data == h.data
    assert texts == ["page zero", "page one"]


def test_a_handle_crosses_a_socket():
    h = vmm_handle(["a", "b", "c"])
    left, right = socket.socketpair()
    with left, right:
        crmm.ipc.send(left, h)
        got = crmm.ipc.recv(right)
    assert got.data == h.data
    assert [read_fd(fd) for fd in got.fds] == ["a", "b", "c"]
    fds = got.fds
    got.close()
    assert not any(is_open(fd) for fd in fds)


def test_bad_handles_are_refused_and_their_descriptors_closed():
    fds = plain_fds(["x"])
    with pytest.raises(crmm.InvalidArgumentError, match="not a crmm IPC handle"):
        crmm.ipc.IpcHandle(b"nonsense" * 20, fds)
    assert not is_open(fds[0])
    good = struct.pack(WIRE, b"crmmIPC1", 2, 1, 0, 2, 100, 4096, 0, bytes(64))
    fds = plain_fds(["only one"])
    with pytest.raises(crmm.InvalidArgumentError, match="descriptors"):
        crmm.ipc.IpcHandle(good, fds)
    assert not is_open(fds[0])
    for data in ("not a handle", 7, None):  # not bytes at all: refused, and the descriptors closed still
        fds = plain_fds(["y"])
        with pytest.raises(TypeError):
            crmm.ipc.IpcHandle(data, fds)
        assert not is_open(fds[0])
    h = vmm_handle(["a"])
    h.close()
    with pytest.raises(crmm.InvalidArgumentError, match="closed"):
        h.open()
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"\xff" * 16)
        with pytest.raises(crmm.InvalidArgumentError):
            crmm.ipc.recv(right)


def test_host_memory_is_refused():
    host = MemoryResource("host")
    pool = MemoryResource("pool", "initial_size=1MiB", upstream=host)
    ptr = pool.allocate(4096)
    try:
        with pytest.raises(crmm.UnsupportedError, match="host memory"):
            crmm.ipc.export_pointer(pool, ptr, 4096)
    finally:
        pool.deallocate(ptr, 4096)
