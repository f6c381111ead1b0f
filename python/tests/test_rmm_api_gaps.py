"""Names and behaviours of RMM's Python API (26.06) that code written for RMM reaches and that
RMM's own test suite does not check: each test fails where crmm lacked the name or behaved
otherwise. No device needed (a host resource or a host config stands in for the device's)."""

import warnings

import pytest

import crmm
import crmm.mr as mr
from conftest import HOST_POOL_CONFIG, host_config, run_python
from crmm import statistics as st
from crmm.pylibrmm import memory_resource as mrmod


@pytest.fixture
def current(monkeypatch):
    """A settable stand-in for the current device's resource, starting as host memory."""
    slot = {"mr": mr.HostMemoryResource()}
    monkeypatch.setattr(mrmod, "get_current_device_resource", lambda: slot["mr"])
    monkeypatch.setattr(mrmod, "set_current_device_resource", lambda res: slot.update(mr=mrmod._mr_arg(res)))
    return slot


# ---- rmm.statistics ----------------------------------------------------------------------


def test_profiler_returns_rmm_s_public_profiler_context(current):
    assert "ProfilerContext" in st.__all__
    records = st.ProfilerRecords()
    ctx = st.profiler(records=records, name="block")
    assert isinstance(ctx, st.ProfilerContext)
    st.enable_statistics()
    with st.ProfilerContext(records, "made directly"):  # RMM's constructor: (records, name)
        res = current["mr"]
        res.deallocate(res.allocate(64), 64)
    assert records.records["made directly"] == st.ProfilerRecords.MemoryRecord(1, 64, 64)


def test_report_has_rmm_s_layout():
    records = st.ProfilerRecords()
    records.add("f", st.Statistics(0, 0, 30, 1, 50, 2))
    assert records.report().splitlines() == [
        "Memory Profiling",
        "================",
        "",
        "Legends:",
        "  ncalls       - number of times the function or code block was called",
        "  memory_peak  - peak memory allocated in function or code block (in bytes)",
        "  memory_total - total memory allocated in function or code block (in bytes)",
        "",
        "Ordered by: memory_peak",
        "",
        "ncalls     memory_peak    memory_total  filename:lineno(function)",
        "     1              30              50  f",
    ]


def test_a_profiler_block_without_a_name_is_refused_in_rmm_s_words(current):
    with pytest.raises(ValueError, match="When profiler is used as a context manager, a name must be provided"):
        with st.profiler():
            pass


def test_a_resource_changed_inside_statistics_is_refused_in_rmm_s_words(current):
    with pytest.raises(ValueError, match="RMM memory source stack was changed while in the statistics context"):
        with st.statistics():
            current["mr"] = mr.HostMemoryResource()


# ---- logging levels ----------------------------------------------------------------------


def test_level_enum_has_rmm_s_n_levels():
    assert [lv.name for lv in crmm.level_enum] == ["trace", "debug", "info", "warn", "error", "critical", "off", "n_levels"]
    assert crmm.level_enum.n_levels == 7


@pytest.mark.parametrize("setter,getter", [("set_logging_level", "get_logging_level"), ("set_flush_level", "get_flush_level")])
def test_every_level_enum_member_is_set_and_read_back(setter, getter):
    """As RMM's test of the levels does for each member, n_levels included (a count: as a level
    it passes nothing, as off)."""
    set_level, get_level = getattr(crmm, setter), getattr(crmm, getter)
    old = get_level()
    try:
        for level in crmm.level_enum:
            set_level(level)
            assert get_level() is level
        set_level(crmm.level_enum.n_levels)
        assert not any(crmm.should_log(lv) for lv in crmm.level_enum) or setter == "set_flush_level"
        set_level(crmm.level_enum.off)
        assert get_level() is crmm.level_enum.off
    finally:
        set_level(old)
    assert get_level() is old


# ---- rmm.mr -------------------------------------------------------------------------------

RESOURCE_TYPE_WARNS = """
import warnings
import crmm, crmm.mr as mr
crmm.install_as_rmm(rmm_version="26.06")  # RMM 26.08 removed them
for fn, args, name in [(mr.get_current_device_resource_type, (), "get_current_device_resource_type"),
                       (mr.get_per_device_resource_type, (0,), "get_per_device_resource_type")]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fn(*args)
    assert got is mr.PoolMemoryResource, got
    assert [w.category for w in caught] == [FutureWarning], caught
    assert name + " is deprecated" in str(caught[0].message), caught[0].message
    assert caught[0].filename == "<string>", caught[0].filename  # the caller's line (stacklevel 2)
print("ok")
"""


def test_the_resource_type_functions_are_deprecated_as_in_rmm(tmp_path):
    """RMM 26.06 deprecates get_current_device_resource_type and get_per_device_resource_type
    with a FutureWarning (use type(get_current_device_resource())); 26.08 removed them
    (test_rmm_2608_gaps.py)."""
    done = run_python(RESOURCE_TYPE_WARNS, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


AS_OLDER_RELEASE = """
import sys, warnings
import crmm, crmm.mr as mr
crmm.install_as_rmm(rmm_version=sys.argv[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert mr.get_current_device_resource_type() is mr.PoolMemoryResource
    assert mr.get_per_device_resource_type(0) is mr.PoolMemoryResource
print(sorted({w.category.__name__ for w in caught}))
"""


@pytest.mark.parametrize("release, warned", [("25.10", []), ("26.02", []), ("26.06", ["FutureWarning"]),
                                             ("26.06.00", ["FutureWarning"])])
def test_the_resource_type_functions_warn_only_from_the_release_that_deprecated_them(tmp_path, release, warned):
    """A program written for RMM 25.10 asks for its behaviour and gets no FutureWarning there
    (a test suite run with warnings as errors would fail on one)."""
    code = AS_OLDER_RELEASE.replace("sys.argv[1]", repr(release))
    done = run_python(code, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == f"{warned}\n", done.stdout + done.stderr


class _HookRan(Exception):
    pass


def _stop(*args):
    raise _HookRan(args)


def test_reinitialize_takes_devices_none_as_device_0():
    """RMM's reinitialize passes devices=None on to _initialize, which takes it as [0]: the
    arguments are accepted and the hooks run (the hook stops the call before any device use)."""
    crmm.register_reinitialize_hook(_stop, "ran")
    try:
        with pytest.raises(_HookRan):
            crmm.reinitialize(devices=None)
        with pytest.raises(_HookRan):
            crmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB", devices=None)
    finally:
        crmm.unregister_reinitialize_hook(_stop)


def test_initialize_takes_devices_none_as_device_0(no_gpu):
    with pytest.raises(crmm.CudaError):  # not TypeError: device 0's chain is built, and needs CUDA
        mr._initialize(devices=None)


@pytest.mark.parametrize("args", [(), (10,), (10, -1), (-1, 12), (-1, -1)])
def test_binning_without_both_exponents_has_no_bins_as_in_rmm(args):
    """RMM builds bins only when neither exponent is -1 (its default): a lone exponent makes a
    binning resource without bins, whose requests go to the upstream as they are."""
    stats = mr.StatisticsResourceAdaptor(mr.HostMemoryResource())
    binning = mr.BinningMemoryResource(stats, *args)
    p = binning.allocate(100)
    assert stats.allocation_counts.current_bytes == 100  # no bin preallocated blocks upstream
    binning.deallocate(p, 100)


def test_binning_with_both_exponents_has_bins():
    stats = mr.StatisticsResourceAdaptor(mr.HostMemoryResource())
    binning = mr.BinningMemoryResource(stats, 10, 12)
    p = binning.allocate(100)
    assert stats.allocation_counts.current_bytes > 100  # the 1 KiB bin's blocks
    binning.deallocate(p, 100)


def test_a_logging_adaptor_without_any_file_name_is_a_value_error(monkeypatch):
    monkeypatch.delenv("RMM_LOG_FILE", raising=False)
    monkeypatch.delenv("CRMM_LOG_FILE", raising=False)
    with pytest.raises(ValueError, match="RMM log file must be specified either using log_file_name= argument"):
        mr.LoggingResourceAdaptor(mr.HostMemoryResource())


def test_a_logging_adaptor_without_a_name_still_takes_crmm_log_file(monkeypatch, tmp_path):
    monkeypatch.delenv("RMM_LOG_FILE", raising=False)
    monkeypatch.setenv("CRMM_LOG_FILE", str(tmp_path / "crmm.csv"))
    log = mr.LoggingResourceAdaptor(mr.HostMemoryResource())
    assert log.get_file_name() == str(tmp_path / "crmm.csv")


DISABLE_UNWRAPS = """
import sys
import crmm, crmm.mr as mr
here = mr.get_current_device_resource()
log = mr.LoggingResourceAdaptor(here, log_file_name=sys.argv[1])
mr.set_current_device_resource(log)  # what reinitialize(logging=True) does on a device
assert crmm.get_log_filenames() == {0: sys.argv[1].replace(".csv", ".dev0.csv")}, crmm.get_log_filenames()
crmm.disable_logging()
assert mr.get_current_device_resource() is here, mr.get_current_device_resource()
assert crmm.get_log_filenames() == {0: None}, crmm.get_log_filenames()
crmm.disable_logging()  # nothing left to undo
assert mr.get_current_device_resource() is here
print("ok")
"""


def test_disable_logging_removes_a_logging_adaptor_set_as_the_device_s_resource(tmp_path):
    """RMM's disable_logging puts back the upstream of each device whose resource is a
    LoggingResourceAdaptor: it undoes reinitialize(logging=True) as well as enable_logging."""
    code = DISABLE_UNWRAPS.replace("sys.argv[1]", repr(str(tmp_path / "log.csv")))
    done = run_python(code, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


LOG_FILENAMES_OF_RECORDED_DEVICES = """
import sys
import crmm, crmm.mr as mr
assert crmm.get_log_filenames() == {}, crmm.get_log_filenames()  # no device's resource read or set yet
here = mr.get_current_device_resource()
assert crmm.get_log_filenames() == {0: None}, crmm.get_log_filenames()
log = mr.LoggingResourceAdaptor(here, log_file_name=sys.argv[1])
mr.set_current_device_resource(log)
assert crmm.get_log_filenames() == {0: log.get_file_name()}, crmm.get_log_filenames()
mr.set_current_device_resource(mr.StatisticsResourceAdaptor(log))  # a logging layer below the top
assert crmm.get_log_filenames() == {0: None}, crmm.get_log_filenames()
print("ok")
"""


def test_get_log_filenames_lists_every_recorded_device_with_none_where_it_does_not_log(tmp_path):
    """RMM's get_log_filenames has an entry for each device whose resource it has recorded (set,
    or read through get_current_device_resource): the file when that resource is a
    LoggingResourceAdaptor, None otherwise."""
    code = LOG_FILENAMES_OF_RECORDED_DEVICES.replace("sys.argv[1]", repr(str(tmp_path / "log.csv")))
    done = run_python(code, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


ENABLE_LOGGING_ONCE = """
import os, sys
import crmm, crmm.mr as mr
first, second, third = sys.argv[1], sys.argv[2], sys.argv[3]
here = mr.get_current_device_resource()
set_log = mr.LoggingResourceAdaptor(here, log_file_name=first)
mr.set_current_device_resource(set_log)  # what reinitialize(logging=True) does on a device
crmm.enable_logging(second)  # device 0 logs already: left as it is
assert mr.get_current_device_resource() is set_log, mr.get_current_device_resource()
assert crmm.get_log_filenames() == {0: set_log.get_file_name()}, crmm.get_log_filenames()
crmm.disable_logging()
assert mr.get_current_device_resource() is here
crmm.enable_logging(second)
logged = mr.get_current_device_resource()
assert type(logged) is mr.LoggingResourceAdaptor and logged.upstream_mr is here, (logged, logged.upstream_mr)
crmm.enable_logging(third)  # on already: nothing changes, no second layer
assert mr.get_current_device_resource() is logged, mr.get_current_device_resource()
assert crmm.get_log_filenames() == {0: logged.get_file_name()}, crmm.get_log_filenames()
logged.deallocate(logged.allocate(64), 64)
mr._flush_logs()
lines = open(logged.get_file_name()).read().splitlines()
assert sum(",allocate," in line for line in lines) == 1, lines
assert not os.path.exists(third.replace(".csv", ".dev0.csv"))
crmm.disable_logging()
assert mr.get_current_device_resource() is here
assert crmm.get_log_filenames() == {0: None}, crmm.get_log_filenames()
print("ok")
"""


def test_enable_logging_wraps_only_devices_that_do_not_log_already(tmp_path):
    """RMM's enable_logging wraps a device's resource in a LoggingResourceAdaptor only where that
    resource is not one already: a second call, or one after reinitialize(logging=True), logs
    nothing twice."""
    code = ENABLE_LOGGING_ONCE
    for i, name in enumerate(["first.csv", "second.csv", "third.csv"], 1):
        code = code.replace(f"sys.argv[{i}]", repr(str(tmp_path / name)))
    done = run_python(code, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


# ---- rmm.RMMError and the modules RMM has -------------------------------------------------


def test_rmm_error_takes_rmm_s_errcode_and_message():
    e = crmm.RMMError(12, "something failed")
    assert str(e) == "something failed" and e.errcode == 12
    with pytest.raises(crmm.RMMError, match="something failed"):
        raise e


def test_crmm_s_errors_carry_an_errcode_as_rmm_error_does():
    with pytest.raises(crmm.RMMError) as info:
        mr.PoolMemoryResource(mr.HostMemoryResource(), initial_pool_size="2KiB", maximum_pool_size="1KiB")
    assert info.value.errcode == 5 and info.value.status == "CRMM_ERROR_CONFIG"
    assert crmm.CrmmError("no status").errcode == -1


def test_rmm_rmm_is_the_module_of_reinitialize_and_rmm_error():
    import crmm.rmm as rmm_rmm

    for name in ["RMMError", "is_initialized", "register_reinitialize_hook", "reinitialize", "unregister_reinitialize_hook"]:
        assert getattr(rmm_rmm, name) is getattr(crmm, name), name
    assert rmm_rmm.mr is crmm.mr


def test_rmm_version_module_has_the_package_s_version():
    import crmm._version as version

    assert version.__version__ == crmm.__version__ and version.__version__
    assert version.__git_commit__ == crmm.__git_commit__


ALIASED_MODULES = """
import crmm
crmm.install_as_rmm(replace_installed=True)
from rmm.rmm import RMMError, reinitialize
from rmm._version import __version__, __git_commit__
import rmm
assert RMMError is rmm.RMMError and reinitialize is rmm.reinitialize
assert __version__ == rmm.__version__
print("ok")
"""


def test_rmm_rmm_and_rmm_version_import_under_the_alias():
    done = run_python(ALIASED_MODULES, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


AS_RMM_INITIALIZED = """
import crmm
assert not crmm.is_initialized()  # crmm's own meaning: no config loaded yet
crmm.install_as_rmm()
import rmm
if not rmm.is_initialized():  # RMM code that sets up a pool only where RMM has none
    rmm.reinitialize(pool_allocator=True)
r = rmm.mr.get_current_device_resource()
print(type(r).__name__, type(r.upstream_mr).__name__, rmm.is_initialized(), crmm.is_initialized())
crmm.uninstall_as_rmm()
print(crmm.is_initialized())
"""


def test_under_the_alias_is_initialized_is_true_as_rmm_s(tmp_path):
    """RMM's is_initialized() is True from import on (each device has a resource), so code that
    reinitializes only when it is False never replaces crmm's configured resource."""
    done = run_python(AS_RMM_INITIALIZED, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == "PoolMemoryResource HostMemoryResource True True\nTrue\n", done.stdout + done.stderr


# ---- rmm.DeviceBuffer ---------------------------------------------------------------------

COPY_FROM_THE_CURRENT_RESOURCE = """
import copy, ctypes
import crmm, crmm.mr as mr
libc = ctypes.CDLL(None)
libc.aligned_alloc.restype = ctypes.c_void_p
libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
asked = []

def resource(name):  # host memory that libcrmm takes for device memory, noting each request
    def allocate(nbytes, stream):
        asked.append((name, nbytes))
        return libc.aligned_alloc(256, max(256, (nbytes + 255) // 256 * 256))
    return mr.CallbackMemoryResource(allocate, lambda ptr, nbytes, stream: libc.free(ptr))

own, current = resource("own"), resource("current")
mr.set_current_device_resource(current)
empty = crmm.DeviceBuffer(size=0, mr=own)
assert empty.mr is own
for how in (crmm.DeviceBuffer.copy, copy.copy, copy.deepcopy):
    assert how(empty).mr is current, how
full = crmm.DeviceBuffer._uninitialized(64, mr=own)  # no zero fill: that needs CUDA
del asked[:]
try:
    full.copy()
except crmm.CudaError:  # without a GPU the bytes cannot be copied, once the memory is allocated
    pass
assert asked[:1] == [("current", 64)], asked
print("ok")
"""


def test_a_device_buffer_s_copy_comes_from_the_current_device_resource(tmp_path):
    """RMM's DeviceBuffer.copy (and so copy.copy; copy.deepcopy goes through to_device) builds the
    new buffer with the current device's resource, not the resource of the buffer copied."""
    done = run_python(COPY_FROM_THE_CURRENT_RESOURCE, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


ENABLE_LOGGING_LEAVES_UNUSED_DEVICES = """
import sys
import crmm, crmm.mr as mr
from crmm import _lib

_lib.device_count = lambda: 2  # a second device the program never used


class NoSecondDevice:
    def __init__(self, device):
        assert device == 0, "enable_logging touched device %d, which the program never used" % device

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_lib.device_context = NoSecondDevice
mr.get_current_device_resource()  # device 0 is the one in use
crmm.enable_logging(sys.argv[1])
names = crmm.get_log_filenames()
assert list(names) == [0] and names[0].endswith("log.dev0.csv"), names
crmm.disable_logging()
print("ok")
"""


def test_enable_logging_leaves_devices_the_program_never_used_alone(tmp_path):
    """RMM's enable_logging wraps the devices it has recorded a resource for (device 0 when none):
    a device the program never used gets no context and no resource of its own."""
    code = ENABLE_LOGGING_LEAVES_UNUSED_DEVICES.replace("sys.argv[1]", repr(str(tmp_path / "log.csv")))
    done = run_python(code, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stdout + done.stderr


NUMPY_DEVICE_ORDINALS = """
    import numpy as np
    import crmm, crmm.mr as mr
    mine = mr.get_per_device_resource(np.int64(0))
    assert mine is mr.get_per_device_resource(0)
    mr.set_per_device_resource(np.int32(0), mine)

    def stop():  # the devices are checked before the hooks run: reaching it is enough
        raise SystemExit(0)

    crmm.register_reinitialize_hook(stop)
    crmm.reinitialize(devices=[np.int64(0)])
    raise SystemExit(1)
    """


def test_a_device_ordinal_may_be_a_numpy_int_as_rmm_s_int_arguments_take_it(tmp_path):
    # RMM's get_per_device_resource(int device) takes any object with __index__
    done = run_python(NUMPY_DEVICE_ORDINALS, env={"CRMM_CONFIG": host_config(tmp_path, HOST_POOL_CONFIG)}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("device", [0.0, "0", None])
def test_a_device_ordinal_that_is_no_integer_is_still_refused(device):
    with pytest.raises(TypeError):
        mr.get_per_device_resource(device)
