"""The C extension crmm._fastalloc where Python code runs in the middle of its work (a collection's
callbacks, finalizers, another thread): a CuPy memory's owner made once however its reads
interleave, a MemoryPointer made with the layout of its own type when another type is probed
meanwhile, and owner types it cannot make refused instead of half made. Each runs in a process of
its own (the memory type is made once per process, and a failure here would crash the process).
The fake CuPy types come from fake_cupy_memory.c, as in test_device_buffer_alloc.py."""

import os
import subprocess
import sys

import pytest

from crmm import _alloc

PRELUDE = """
import gc, importlib.util, sys
sys.path.insert(0, sys.argv[1])
import test_device_buffer_alloc as t
spec = importlib.util.spec_from_file_location("_fake_cupy_memory", sys.argv[2])
fake = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fake)
ext = t._alloc.extension
"""

# the allocator over `memory`, a CuPy memory type whose owners are `Owner`s
COMMON_OVER_OWNER = """
memory = ext.cupy_memory_type(fake.BaseMemory, Owner)
host = t.HostAsDevice()
streams = {0: (t.DEFAULT_STREAM, t.DEFAULT_STREAM._cstream)}
class Current:  # cupy's current stream: the legacy default one; reading it allocates nothing
    ptr = 0
allocate = ext.cupy_allocator(lambda: Current, streams, memory, fake.MemoryPointer, Owner,
                              host.mr._handle, t.crmm._lib, lambda n: None)
"""
COMMON = PRELUDE + "Owner = t.DeviceBuffer" + COMMON_OVER_OWNER

# Python runs inside the first read of mem._owner (as a collection's finalizers or another thread
# may while the owner is made: here the owner type's _stream setter) and reads mem._owner again:
# both reads must give one owner, and the memory must go back once.
OWNER_READ_INSIDE_OWNER_READ = PRELUDE + """
inner, state = [], {"mem": None}
class Owner(t.DeviceBuffer):
    __slots__ = ()
    @property
    def _stream(self):
        return t.DeviceBuffer._stream.__get__(self)
    @_stream.setter
    def _stream(self, value):
        t.DeviceBuffer._stream.__set__(self, value)
        mem, state["mem"] = state["mem"], None
        if mem is not None:
            inner.append(mem._owner)
""" + COMMON_OVER_OWNER + """
p = allocate(4096)
mem = p.mem
state["mem"] = mem
outer = mem._owner
assert state["mem"] is None and len(inner) == 1, "the owner's setter did not run inside the read"
assert inner[0] is outer and mem._owner is outer and type(outer) is Owner, (inner[0], outer, mem._owner)
assert outer.size == 4096 and outer.ptr == p.ptr
assert len(host.live) == 1, host.live
del p, mem, outer, inner
gc.collect()
assert host.live == {}, host.live
print("ok")
"""

# A collection inside the making of a MemoryPointer (its tp_new allocates) makes an allocator over
# another pointer type, whose probe changes the layout the extension keeps: the pointer being
# made still gets its own type's layout.
LAYOUT_CHANGED_INSIDE_A_POINTER = COMMON + """
import ctypes
libc = ctypes.CDLL(None)
address = lambda name: ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
# C functions as the allocator, so that no Python runs in an allocation but the collection's
c_memory = t.MemoryResource("callback", {"allocate_fn": address("valloc"), "deallocate_fn": address("free")})
stats = t.StatisticsResourceAdaptor(c_memory)
allocate = ext.cupy_allocator(lambda: Current, streams, memory, fake.MemoryPointer, t.DeviceBuffer,
                              stats._handle, t.crmm._lib, lambda n: None)
state = {"armed": False, "done": False}
def probe_another(phase, info):
    if phase == "start" and state["armed"] and not state["done"] and sys._getframe(1).f_code.co_name == "make_one":
        state["done"] = True
        ext.cupy_allocator(lambda: Current, streams, memory, fake.ObjectDevicePointer, t.DeviceBuffer,
                           stats._handle, t.crmm._lib, lambda n: None)
def make_one():
    return allocate(256)
gc.callbacks.append(probe_another)
gc.set_threshold(1)
held = []
for i in range(500):
    state["armed"] = True
    p = make_one()
    state["armed"] = False
    held.append(p)
    if state["done"]:
        break
gc.set_threshold(700)
gc.callbacks.remove(probe_another)
assert state["done"], "no collection ran inside the making of a pointer"
for p in held:
    assert type(p) is fake.MemoryPointer and p.mem.ptr == p.ptr and p.mem.size == 256, (type(p), p.ptr, p.mem.ptr)
assert stats.query("bytes_in_use") == 256 * len(held)
del held, p
gc.collect()
assert stats.query("bytes_in_use") == 0
print("ok")
"""


def run(script, tmp_path):
    where = os.environ.get("CRMM_FAKE_CUPY_MEMORY", "off")
    if _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    if where == "off":
        pytest.skip("the fake CuPy memory module is not built here (no Python headers)")
    path = tmp_path / "race.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path), os.path.dirname(__file__), where], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, CRMM_FASTALLOC=os.environ.get("CRMM_FASTALLOC", "")))


def test_a_cupy_memory_s_owner_is_made_once_when_reads_interleave(tmp_path):
    done = run(OWNER_READ_INSIDE_OWNER_READ, tmp_path)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


def test_a_pointer_keeps_its_type_s_layout_when_another_is_probed_meanwhile(tmp_path):
    done = run(LAYOUT_CHANGED_INSIDE_A_POINTER, tmp_path)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


OWNER_TYPES = """
import sys
sys.path.insert(0, sys.argv[1])
import test_device_buffer_alloc as t
ext = t._alloc.extension
host = t.HostAsDevice()
for owner_type in (memoryview, type, staticmethod, int):
    try:
        ext.create_wrapped(16, None, host.mr._handle, lambda *a: a, lambda m, o: (m, o), owner_type, t.DEFAULT_STREAM)
    except TypeError as e:
        assert "owner_type" in str(e), e
    else:
        raise AssertionError("create_wrapped took owner_type %r" % owner_type)
assert host.live == {}, host.live
print("ok")
"""


def test_owner_types_object_new_cannot_make_are_refused(tmp_path):
    """The extension makes owners with object.__new__: a type whose instances need their own
    __new__ (memoryview, type) is refused with TypeError, nothing allocated, where it would have
    been half made."""
    if _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    path = tmp_path / "owner_types.py"
    path.write_text(OWNER_TYPES)
    done = subprocess.run([sys.executable, str(path), os.path.dirname(__file__)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, CRMM_FASTALLOC=os.environ.get("CRMM_FASTALLOC", "")))
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


@pytest.mark.parametrize("size, error, says", [(-1, ValueError, "got -1"), (1 << 64, OverflowError, str(1 << 64))])
def test_the_extension_names_a_bad_size_as_the_ctypes_path_does(size, error, says):
    if _alloc.extension is None:
        pytest.skip("crmm._fastalloc is not built here")
    with pytest.raises(error, match=says):
        _alloc.extension.create(size, None, None)


# A pointer type whose __new__ gives an instance of another, smaller type (Python then skips
# __init__): the extension must never treat that object as laid out like the declared type (its
# probe would read, and its direct making write, past the object's end); allocations go the
# public way and give what the type's call gives.
POINTER_NEW_GIVES_ANOTHER_TYPE = COMMON + """
class Small:
    __slots__ = ("mem", "ptr", "device_id")
class Declared:
    __slots__ = tuple("pad%d" % i for i in range(24))  # larger than Small
    def __new__(cls, mem=None, offset=0):
        s = Small()
        s.mem, s.ptr, s.device_id = mem, (mem.ptr + offset) if mem is not None else 0, 0
        return s
allocate = ext.cupy_allocator(lambda: Current, streams, memory, Declared, t.DeviceBuffer,
                              host.mr._handle, t.crmm._lib, lambda n: None)
held = [allocate(4096) for _ in range(8)]
for p in held:
    assert type(p) is Small and p.ptr == p.mem.ptr and p.mem.size == 4096, (type(p), p.ptr)
assert len(host.live) == 8
del held, p
import gc; gc.collect()
assert host.live == {}, host.live
print("ok")
"""


def test_a_pointer_type_whose_new_gives_another_type_is_made_the_public_way(tmp_path):
    done = run(POINTER_NEW_GIVES_ANOTHER_TYPE, tmp_path)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr
