"""rmm._cuda.gpu without a device: each device call raises CUDARuntimeError (CUDADriverError for
deviceGetName) with CUDA's error name and reason, arguments of the wrong type raise TypeError
before any CUDA call, and the runtime's version needs no device."""

import pickle
import subprocess
import sys

import pytest

from conftest import run_python
from crmm._cuda import gpu


@pytest.mark.parametrize(
    "call",
    [
        gpu.getDevice,
        gpu.getDeviceCount,
        lambda: gpu.setDevice(0),
        lambda: gpu.getDeviceAttribute(1, 0),
    ],
    ids=["getDevice", "getDeviceCount", "setDevice", "getDeviceAttribute"],
)
def test_device_calls_raise_cuda_runtime_error(no_gpu, call):
    with pytest.raises(gpu.CUDARuntimeError, match=r"^cudaError\w+: \S") as info:
        call()
    assert isinstance(info.value, RuntimeError) and info.value.status != 0


def test_device_name_raises_cuda_driver_error(no_gpu):
    with pytest.raises(gpu.CUDADriverError, match=r"^cudaError\w+: \S") as info:
        gpu.deviceGetName(0)
    assert info.value.status != 0


def test_runtime_version_needs_no_device():
    version = gpu.runtimeGetVersion()
    assert isinstance(version, int) and version >= 11000 and version % 10 == 0


def test_driver_version_is_an_int():
    assert gpu.driverGetVersion() >= 0


@pytest.mark.parametrize("cls", [gpu.CUDARuntimeError, gpu.CUDADriverError])
def test_errors_name_the_status_and_pickle(cls):
    err = cls(100)
    assert err.status == 100 and str(err).startswith("cudaErrorNoDevice: ")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and back.status == 100 and str(back) == str(err)


@pytest.mark.parametrize(
    "call",
    [
        lambda: gpu.setDevice("0"),
        lambda: gpu.setDevice(0.0),
        lambda: gpu.setDevice(True),
        lambda: gpu.getDeviceAttribute("x", 0),
        lambda: gpu.getDeviceAttribute(1, None),
        lambda: gpu.deviceGetName("0"),
    ],
)
def test_wrong_argument_types_raise_type_error(call):
    with pytest.raises(TypeError):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: gpu.setDevice(1 << 32),
        lambda: gpu.setDevice(-(1 << 31) - 1),
        lambda: gpu.getDeviceAttribute(1, (1 << 32) + 1),
        lambda: gpu.getDeviceAttribute((1 << 32) + 1, 0),
        lambda: gpu.deviceGetName(1 << 32),
    ],
)
def test_arguments_outside_c_int_raise_overflow_error(call):
    """Passed on, ctypes would cut them to another int (device 2**32 to device 0, made current
    with a GPU); they are refused before any CUDA call."""
    with pytest.raises(OverflowError):
        call()


def test_the_rmm_name_is_the_same_module():
    r = run_python(
        """
        import crmm, crmm._cuda.gpu
        crmm.install_as_rmm(replace_installed=True)
        from rmm._cuda.gpu import CUDARuntimeError, getDeviceCount
        import rmm._cuda.gpu
        assert rmm._cuda.gpu is crmm._cuda.gpu and CUDARuntimeError is crmm._cuda.gpu.CUDARuntimeError
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_rmm_cuda_gpu_is_reached_as_an_attribute_after_import_crmm():
    # RMM's own tests say `import rmm` and then call rmm._cuda.gpu.getDevice()
    code = "import crmm; print(callable(crmm._cuda.gpu.getDevice))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def _fake_bindings(monkeypatch, status, prop):
    """A cuda.bindings.runtime whose cudaGetDeviceProperties answers (status, prop), noting the
    devices asked for."""
    import types

    asked = []
    runtime = types.ModuleType("cuda.bindings.runtime")
    runtime.cudaGetDeviceProperties = lambda device: asked.append(device) or (status, prop)
    bindings = types.ModuleType("cuda.bindings")
    bindings.runtime = runtime
    cuda = types.ModuleType("cuda")
    cuda.bindings = bindings
    for name, module in (("cuda", cuda), ("cuda.bindings", bindings), ("cuda.bindings.runtime", runtime)):
        monkeypatch.setitem(sys.modules, name, module)
    return asked


def test_device_properties_are_cuda_python_s_as_rmm_returns_them(monkeypatch):
    prop = object()
    asked = _fake_bindings(monkeypatch, 0, prop)
    assert gpu.getDeviceProperties(1) is prop and asked == [1]
    _fake_bindings(monkeypatch, 101, None)  # cudaErrorInvalidDevice
    with pytest.raises(gpu.CUDARuntimeError) as info:
        gpu.getDeviceProperties(7)
    assert info.value.status == 101
    with pytest.raises(TypeError):
        gpu.getDeviceProperties("0")


def test_device_properties_without_cuda_python_say_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # as if not installed
    with pytest.raises(ModuleNotFoundError, match="install cuda-python"):
        gpu.getDeviceProperties(0)
