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


def test_a_descriptor_beyond_c_int_is_refused_not_cut_to_another():
    """A descriptor number past C's int would reach C as another one (2**32 + fd as fd), which
    the handle would then own and close; it is refused, the valid ones given with it closed."""
    keep = plain_fds(["mine"])[0]
    fds = plain_fds(["given"])
    try:
        with pytest.raises(ValueError, match="not a file descriptor"):
            crmm.ipc.IpcHandle(b"nonsense" * 20, fds + [(1 << 32) + keep])
        assert is_open(keep), "a descriptor nobody handed over was closed"
        assert not is_open(fds[0])
        h = vmm_handle(["a"])
        for sock in ((1 << 32) + keep, -1):
            with pytest.raises(ValueError, match="not a file descriptor"):
                crmm.ipc.send(sock, h)
            with pytest.raises(ValueError, match="not a file descriptor"):
                crmm.ipc.recv(sock)
        h.close()
    finally:
        os.close(keep)


def test_host_memory_is_refused():
    host = MemoryResource("host")
    pool = MemoryResource("pool", "initial_size=1MiB", upstream=host)
    ptr = pool.allocate(4096)
    try:
        with pytest.raises(crmm.UnsupportedError, match="host memory"):
            crmm.ipc.export_pointer(pool, ptr, 4096)
    finally:
        pool.deallocate(ptr, 4096)


def test_export_pointer_refuses_bad_arguments_and_a_released_resource():
    host = MemoryResource("host")
    for ptr, size, error in ((4096, -1, ValueError), (-1, 16, OverflowError), (4096, 1 << 64, OverflowError),
                             ("4096", 16, TypeError)):
        with pytest.raises(error):
            crmm.ipc.export_pointer(host, ptr, size)
    host.__del__()  # released by hand: refused, never taken for a NULL resource
    with pytest.raises(crmm.StateError, match="released"):
        crmm.ipc.export_pointer(host, 4096, 16)


CLOSE_FROM_TWO_THREADS = """
import os, struct, sys, tempfile, threading
sys.path.insert(0, sys.argv[1])
import crmm.ipc
from test_ipc import is_open, vmm_handle

for _ in range(200):
    handle = vmm_handle(["x"] * 8)
    fds = handle.fds
    start = threading.Barrier(3)
    errors = []

    def close():
        start.wait()
        handle.close()

    def read():
        start.wait()
        try:
            handle.data, handle.fds
        except crmm.ipc.InvalidArgumentError:
            pass  # closed first
        except BaseException as e:  # anything else is the failure
            errors.append(e)

    threads = [threading.Thread(target=f) for f in (close, close, read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not any(is_open(fd) for fd in fds)
    assert repr(handle) == "<crmm.ipc.IpcHandle closed>"
print("ok")
"""


def test_closing_a_handle_from_two_threads_frees_it_once(tmp_path):
    """close() from two threads at once, or against data and fds: the handle is freed once and
    never used after (libcrmm's calls run without the GIL, so a close that freed before clearing
    its pointer let another thread free or read it again). In a process of its own: a double
    free aborts it."""
    import subprocess
    import sys

    script = tmp_path / "close_race.py"
    script.write_text(CLOSE_FROM_TWO_THREADS)
    done = subprocess.run([sys.executable, str(script), os.path.dirname(__file__)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr[-2000:]


class _Received:
    def __init__(self, fd):
        self.fd = fd

    def detach(self):
        return self.fd


class _SenderGone:
    def detach(self):
        raise ConnectionRefusedError("the sender has gone")


def test_a_handle_whose_descriptors_stop_arriving_closes_those_that_came():
    """Unpickling a handle whose second descriptor cannot be received (the sender has gone)
    raises, and closes the first one, which nobody else owns."""
    data = struct.pack(WIRE, b"crmmIPC1", 2, 1, 0, 2, 100, 4096, 0, bytes(64))
    (fd,) = plain_fds(["first"])
    with pytest.raises(ConnectionRefusedError):
        crmm.ipc._rebuild(data, [_Received(fd), _SenderGone()])
    assert not is_open(fd)


def test_a_closed_imported_buffer_refuses_every_use():
    """After close() an ImportedBuffer names itself closed and refuses ptr, size, the array
    interface and tobytes() with an error, rather than pointing at address 0; closing again is
    harmless."""
    buf = crmm.ipc.ImportedBuffer(None)  # what close() leaves
    for use in (lambda: buf.ptr, lambda: buf.size, lambda: buf.nbytes, lambda: buf.__cuda_array_interface__,
                buf.tobytes):
        with pytest.raises(crmm.InvalidArgumentError, match="closed"):
            use()
    assert repr(buf) == "<crmm.ipc.ImportedBuffer closed>"
    buf.close()
    with buf:
        pass


def test_an_imported_buffer_refuses_to_be_copied_or_pickled():
    """An ImportedBuffer owns its mapping: a copy would unmap it a second time (a double free
    of the mapping's record). Copying, deep-copying and pickling raise TypeError."""
    import copy
    import pickle

    buf = crmm.ipc.ImportedBuffer(None)
    for use in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="ImportedBuffer"):
            use(buf)


def test_close_waits_for_a_send_of_the_handle_under_way():
    """send() reads the handle's bytes and descriptors while the socket takes them; a close()
    from another thread meanwhile waits for it, so the peer gets the handle whole."""
    import threading
    import time

    h = vmm_handle(["a", "b"])
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        junk = 0
        try:
            while True:  # fill the socket: the send below waits for the reader
                junk += left.send(b"x" * 4096)
        except BlockingIOError:
            pass
        left.setblocking(True)
        errors = []

        def sender():
            try:
                crmm.ipc.send(left, h)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        sending = threading.Thread(target=sender)
        sending.start()
        for _ in range(3000):  # the send is under way, the handle's lock held, before close() starts
            if h._lock.locked():
                break
            time.sleep(0.01)
        closing = threading.Thread(target=h.close)
        closing.start()
        closing.join(0.5)
        assert closing.is_alive(), "close() returned while the send was reading the handle"
        while junk:
            junk -= len(right.recv(min(junk, 65536)))
        got = crmm.ipc.recv(right)
        sending.join(30)
        closing.join(30)
    assert not errors
    assert [read_fd(fd) for fd in got.fds] == ["a", "b"]
    got.close()


def test_a_descriptor_given_twice_is_refused_and_closed_once():
    """A handle closes each of its descriptors; one given twice would be closed twice, the second
    time perhaps another thread's new descriptor. It is refused, and closed once."""
    (fd,) = plain_fds(["twice"])
    data = struct.pack(WIRE, b"crmmIPC1", 2, 1, 0, 2, 100, 4096, 0, bytes(64))
    with pytest.raises(crmm.InvalidArgumentError, match="given twice"):
        crmm.ipc.IpcHandle(data, [fd, fd])
    assert not is_open(fd)


def _in_thread(fn, *args):
    """Run fn(*args) in a thread; (thread, box): box[0] is its result or exception."""
    import threading

    box = []

    def run():
        try:
            box.append(fn(*args))
        except Exception as e:  # noqa: BLE001 - the caller checks it
            box.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_sockets_with_a_timeout_wait_as_blocking_ones_do():
    """A Python socket with a timeout is non-blocking underneath: recv on one whose handle comes
    later, and send on one whose buffer is full, wait for the peer instead of failing with
    EAGAIN."""
    import time

    h = vmm_handle(["a", "b"])
    left, right = socket.socketpair()
    with left, right:
        right.settimeout(30)
        receiving, got = _in_thread(crmm.ipc.recv, right)
        time.sleep(0.2)  # the receiver is waiting by now
        crmm.ipc.send(left, h)
        receiving.join(30)
        assert isinstance(got[0], crmm.ipc.IpcHandle), got
        assert [read_fd(fd) for fd in got[0].fds] == ["a", "b"]
        got[0].close()

        left.setblocking(False)
        junk = 0
        try:
            while True:
                junk += left.send(b"x" * 4096)
        except BlockingIOError:
            pass
        left.settimeout(30)
        sending, sent = _in_thread(crmm.ipc.send, left, h)
        time.sleep(0.2)
        right.settimeout(None)
        while junk:
            junk -= len(right.recv(min(junk, 65536)))
        again = crmm.ipc.recv(right)
        sending.join(30)
        assert sent == [None], sent
        assert [read_fd(fd) for fd in again.fds] == ["a", "b"]
        again.close()
    h.close()


def test_a_bad_header_is_refused_before_the_rest_is_awaited():
    """The frame announces the handle's size; a header that is not a crmm handle's is refused as
    soon as it arrives, not after waiting for (and allocating) all the bytes announced."""
    left, right = socket.socketpair()
    with left, right:
        size = struct.calcsize(WIRE)
        left.sendall(struct.pack("<QQ", size + 64 * 1000, 0) + b"\x00" * size)  # the rest never comes
        receiving, got = _in_thread(crmm.ipc.recv, right)
        receiving.join(30)
        assert not receiving.is_alive(), "recv waited for bytes a bad header announced"
        assert isinstance(got[0], crmm.InvalidArgumentError) and "out of step" in str(got[0]), got


def _receive_at_the_open_file_limit(sock, outbox):
    import resource

    open_now = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    filler = []
    try:
        while True:  # every number below the limit taken ...
            filler.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for fd in filler[:4]:  # ... but four: room for 4 of the 40 descriptors
        os.close(fd)
    try:
        crmm.ipc.recv(sock)
        outbox.put("received")
    except Exception as e:  # noqa: BLE001 - sent back
        outbox.put(f"{type(e).__name__}: {e}")


def test_descriptors_cut_short_at_the_open_file_limit_say_so():
    """A receiver at its open-file limit gets fewer descriptors than were sent (MSG_CTRUNC): an
    I/O error naming the limit, not a claim that the peer sent descriptors it should not have."""
    ctx = multiprocessing.get_context("fork")
    outbox = ctx.Queue()
    left, right = socket.socketpair()
    with left, right:
        child = ctx.Process(target=_receive_at_the_open_file_limit, args=(right, outbox))
        child.start()
        h = vmm_handle([str(i) for i in range(40)])
        crmm.ipc.send(left, h)
        h.close()
        said = outbox.get(timeout=60)
        child.join(60)
    assert said.startswith("CrmmIOError") or "IOError" in said.split(":")[0], said
    assert "open-file limit" in said, said
