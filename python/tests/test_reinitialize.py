"""crmm.reinitialize's hooks and argument checks (no device needed): hooks run last registered
first with their arguments, before anything is built; bad arguments are refused before any hook
runs."""

import os

import pytest

import crmm
from conftest import host_config, run_python
from crmm import _reinitialize


@pytest.fixture(autouse=True)
def no_hooks_left():
    saved = list(_reinitialize._hooks)
    _reinitialize._hooks.clear()
    yield
    _reinitialize._hooks[:] = saved


class Stop(Exception):
    """Raised by the last hook so that no resource is built."""


def stop():
    raise Stop


def test_hooks_run_last_registered_first_with_their_arguments():
    calls = []
    crmm.register_reinitialize_hook(stop)
    crmm.register_reinitialize_hook(calls.append, "first registered")
    crmm.register_reinitialize_hook(lambda *a, **k: calls.append((a, k)), 1, 2, key="v")
    with pytest.raises(Stop):
        crmm.reinitialize()
    assert calls == [((1, 2), {"key": "v"}), "first registered"]


def test_register_returns_the_function_for_use_as_a_decorator():
    def hook():
        pass

    assert crmm.register_reinitialize_hook(hook) is hook


def test_unregister_removes_every_registration():
    calls = []

    def hook():
        calls.append("hook")

    crmm.register_reinitialize_hook(stop)
    crmm.register_reinitialize_hook(hook)
    crmm.register_reinitialize_hook(hook)
    crmm.unregister_reinitialize_hook(hook)
    crmm.unregister_reinitialize_hook(print)  # never registered: nothing happens
    with pytest.raises(Stop):
        crmm.reinitialize()
    assert calls == []


def test_a_hook_must_be_callable():
    with pytest.raises(TypeError, match="callable"):
        crmm.register_reinitialize_hook("not a function")


@pytest.mark.parametrize(
    "kwargs,exc",
    [
        ({"devices": "0"}, TypeError),
        ({"devices": True}, TypeError),
        ({"devices": [0, 1.5]}, TypeError),
        ({"devices": -1}, ValueError),
        ({"devices": 2**40}, ValueError),
        ({"pool_allocator": True, "initial_pool_size": -1}, ValueError),
        ({"pool_allocator": True, "initial_pool_size": 2**64}, OverflowError),
        ({"pool_allocator": True, "maximum_pool_size": "lots"}, ValueError),
        ({"pool_allocator": True, "maximum_pool_size": 1.5}, TypeError),
        ({"logging": True, "log_file_name": "a\0b"}, ValueError),
    ],
)
def test_bad_arguments_are_refused_before_any_hook_runs(kwargs, exc):
    calls = []
    crmm.register_reinitialize_hook(calls.append, "ran")
    with pytest.raises(exc):
        crmm.reinitialize(**kwargs)
    assert calls == []


@pytest.mark.parametrize("sizes", [{"initial_pool_size": "abc"}, {"maximum_pool_size": 1.5}, {"initial_pool_size": -1}])
def test_pool_sizes_without_a_pool_are_ignored_as_rmm_ignores_them(sizes):
    calls = []
    crmm.register_reinitialize_hook(stop)
    crmm.register_reinitialize_hook(calls.append, "ran")
    with pytest.raises(Stop):
        crmm.reinitialize(pool_allocator=False, **sizes)
    assert calls == ["ran"]


def test_logging_needs_a_file_name(monkeypatch):
    monkeypatch.delenv("RMM_LOG_FILE", raising=False)
    monkeypatch.delenv("CRMM_LOG_FILE", raising=False)
    with pytest.raises(ValueError, match="log_file_name"):
        crmm.reinitialize(logging=True)


def test_per_device_log_names_are_rmm_s():
    assert _reinitialize._log_file_for("/tmp/rmm_log.csv", 0) == "/tmp/rmm_log.dev0.csv"
    assert _reinitialize._log_file_for("log", 3) == os.path.abspath("log.dev3")  # absolute, as RMM's
    assert _reinitialize._log_file_for(os.devnull, 1) == os.devnull  # not a regular file: as it is


def test_without_a_device_the_hooks_run_then_cuda_errors(no_gpu):
    calls = []
    crmm.register_reinitialize_hook(calls.append, "ran")
    with pytest.raises(crmm.CudaError):
        crmm.reinitialize()
    assert calls == ["ran"]


REINIT_LOGGING_TWICE = """
import contextlib, sys
import crmm, crmm._lib as _lib
from crmm.pylibrmm.memory_resource import _memory_resource as m
# no device here: a host resource stands for cudaMalloc's, device 0 for the device
_lib.device_context = lambda device: contextlib.nullcontext()
m.CudaMemoryResource = m.HostMemoryResource
log = sys.argv[1]
for attempt in (1, 2):  # the second opens the file the first's logging layer writes
    crmm.reinitialize(logging=True, log_file_name=log + ".csv")
    mr = m.get_per_device_resource(0)
    assert isinstance(mr, m.LoggingResourceAdaptor) and mr.get_file_name() == log + ".dev0.csv", attempt
    mr.deallocate(mr.allocate(64), 64)
    mr.flush()
    del mr
kept = m.get_per_device_resource(0)  # a holder of the layer: the next one writes its file with it
crmm.reinitialize(logging=True, log_file_name=log + ".csv")
now = m.get_per_device_resource(0)
assert isinstance(now, m.LoggingResourceAdaptor) and now is not kept, type(now)
assert now.get_file_name() == kept.get_file_name() == log + ".dev0.csv"
for mr in (kept, now):
    mr.deallocate(mr.allocate(64), 64)
    mr.flush()
text = open(log + ".dev0.csv").read()
assert text.count("Thread,Time") == 1 and text.count(",allocate,") >= 2, text
print("ok")
"""


def test_reinitialize_with_logging_twice_replaces_the_log_writer(tmp_path):
    config = host_config(tmp_path, "[crmm]\ndefault = h\n[resource.h]\nplugin = host\n")
    done = run_python(REINIT_LOGGING_TWICE.replace("sys.argv[1]", repr(str(tmp_path / "run"))),
                      env={"CRMM_CONFIG": config}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr
    assert (tmp_path / "run.dev0.csv").read_text().startswith("Thread,Time,Action,Pointer,Size,Stream")


REINIT_TWO_DEVICES = """
import contextlib, sys
import crmm, crmm._lib as _lib
from crmm.pylibrmm.memory_resource import _memory_resource as m
# two devices stood in for: host resources, and the registry's slots kept in Python alone
current = [0]
@contextlib.contextmanager
def device_context(device):  # what the adaptor sees as the current device
    current[0], old = device, current[0]
    try:
        yield
    finally:
        current[0] = old
_lib.device_context = device_context
m.current_device = lambda: current[0]
m.CudaMemoryResource = m.HostMemoryResource
def set_per_device_resource(device, mr):
    m._per_device[device] = mr
m.set_per_device_resource = set_per_device_resource
log = sys.argv[1]
crmm.reinitialize(logging=True, log_file_name=log + ".csv", devices=[0, 1])
kept = m._per_device[0]  # held: device 0's new layer writes its file with it
m._per_device[1].from_the_first_call = True
crmm.reinitialize(logging=True, log_file_name=log + ".csv", devices=[0, 1])
for device in (0, 1):  # each on its new chain, logging to its own file
    assert isinstance(m._per_device[device], m.LoggingResourceAdaptor), type(m._per_device[device])
    assert not hasattr(m._per_device[device], "from_the_first_call")
    assert m._per_device[device].get_file_name() == log + ".dev%d.csv" % device
assert m._per_device[0] is not kept
print("ok")
"""


def test_a_log_file_still_held_is_shared_and_no_device_stays_on_its_old_chain(tmp_path):
    done = run_python(REINIT_TWO_DEVICES.replace("sys.argv[1]", repr(str(tmp_path / "run"))), timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


def test_a_log_name_that_is_a_directory_gets_rmm_s_suffix(tmp_path):
    # RMM appends ".dev<N>" whatever the name is: a directory "logs" logs to "logs.dev0"; only
    # a device file or a FIFO (which cannot have files beside it written for it) is kept
    (tmp_path / "logs").mkdir()
    assert _reinitialize._log_file_for(str(tmp_path / "logs"), 0) == str(tmp_path / "logs.dev0")
    log = crmm.mr.LoggingResourceAdaptor(crmm.mr.HostMemoryResource(), str(tmp_path / "logs"))
    assert log.get_file_name() == str(tmp_path / "logs.dev0")


REINIT_NO_DEVICES = """
import crmm
import crmm.mr as mr
before = mr.get_per_device_resource(0)
ran = []
crmm.register_reinitialize_hook(ran.append, "hook")
crmm.reinitialize(pool_allocator=True, devices=[])
assert ran == ["hook"], ran
assert mr.get_per_device_resource(0) is before, mr.get_per_device_resource(0)
print("ok")
"""


def test_an_empty_device_list_runs_the_hooks_and_changes_no_device(tmp_path):
    """RMM builds a resource for each device listed: for none, it runs the hooks and sets
    nothing (no error)."""
    config = host_config(tmp_path, "[crmm]\ndefault = h\n[resource.h]\nplugin = host\n")
    done = run_python(REINIT_NO_DEVICES, env={"CRMM_CONFIG": config}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


REINIT_ONE_OF_TWO_DEVICES = """
import contextlib
import crmm, crmm._lib as _lib
from crmm.pylibrmm.memory_resource import _memory_resource as m
# two devices stood in for: host resources, and C's table of device resources a dict
_lib.device_context = lambda device: contextlib.nullcontext()
m.CudaMemoryResource = m.HostMemoryResource
resources = {0: m.HostMemoryResource(), 1: m.HostMemoryResource()}
m.set_per_device_resource = resources.__setitem__
before = dict(resources)
crmm.reinitialize(devices=[1])
assert resources[0] is before[0], "device 0 was not listed but got a new resource"
assert resources[1] is not before[1] and type(resources[1]) is m.HostMemoryResource
print("ok")
"""


def test_devices_not_listed_keep_their_resource():
    """As in RMM, reinitialize sets the resource of the devices listed and of no other."""
    done = run_python(REINIT_ONE_OF_TWO_DEVICES, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


def test_reinitialize_without_a_visible_device_warns_and_changes_nothing(monkeypatch):
    """As RMM: with no device visible (CUDA_VISIBLE_DEVICES=""), reinitialize warns with CUDA's
    message and leaves every device's resource as it was."""
    import crmm._errors as errors
    from crmm.pylibrmm.memory_resource import _memory_resource as m

    before = dict(m._per_device)

    def no_device():
        raise errors.error_for(4, "CUDA error: cudaGetDevice: no CUDA-capable device is detected (cudaErrorNoDevice)")

    monkeypatch.setattr(m, "current_device", no_device)
    with pytest.warns(UserWarning, match="cudaErrorNoDevice"):
        crmm.reinitialize(pool_allocator=True)
    assert m._per_device == before
