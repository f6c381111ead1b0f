"""CuPy, Numba and PyTorch computing in crmm memory. Numba and PyTorch run in a fresh process
(their allocator is chosen before first use) under a config whose default resource is a
statistics layer over `cuda`, which shows that the memory really came from crmm."""

import os
import sys

import pytest

import crmm.mr as mr
from conftest import framework, host_config, run_python

STATS_CONFIG = """
[crmm]
default = stats
[resource.gpu]
plugin = cuda
[resource.stats]
plugin = statistics
upstream = gpu
"""


def test_cupy_arrays_in_crmm_memory(gpu):
    cupy = framework("cupy")
    from crmm.allocators.cupy import rmm_cupy_allocator

    old = mr.get_current_device_resource()
    stats = mr.StatisticsResourceAdaptor(mr.CudaMemoryResource())
    mr.set_current_device_resource(stats)
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        a = cupy.arange(1_000_000, dtype=cupy.float64)
        b = (a * 2 + 1).sum()
        assert float(b) == 2 * (999_999 * 1_000_000 / 2) + 1_000_000
        assert stats.query("allocations_total") >= 2
        assert stats.query("bytes_in_use") >= a.nbytes
        with cupy.cuda.Stream(non_blocking=True):
            c = cupy.ones(1000, dtype=cupy.int32) * 3
            assert int(c.sum()) == 3000
        del a, c
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
        mr.set_current_device_resource(old)


def test_numba_kernel_on_crmm_memory(gpu, tmp_path):
    framework("numba")
    r = run_python(
        """
        import numpy as np
        if not hasattr(np, "row_stack"):
            # numba-cuda's kernel compiler still names np.row_stack, which newer NumPy removed:
            # without this alias no Numba kernel compiles at all on such a machine, crmm or not
            np.row_stack = np.vstack
        from numba import cuda
        import crmm.mr

        @cuda.jit
        def add_one(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] += 1

        host = np.arange(10000, dtype=np.float32)
        d = cuda.to_device(host)
        add_one[(host.size + 255) // 256, 256](d)
        out = d.copy_to_host()
        assert (out == host + 1).all()
        stats = crmm.mr.get_current_device_resource()
        assert stats.kind == "statistics"
        assert stats.query("bytes_in_use") >= host.nbytes, stats.query("bytes_in_use")
        from crmm.allocators.numba import CrmmMemoryPointer
        assert isinstance(d.gpu_data, CrmmMemoryPointer), type(d.gpu_data)
        live = stats.query("allocations")
        del d  # the array's memory goes back to crmm with it
        import gc
        gc.collect()
        assert stats.query("allocations") == live - 1, (live, stats.query("allocations"))
        p = cuda.current_context().memalloc(1 << 20)
        assert stats.query("allocations") == live
        p.free()  # Numba's explicit free returns it at once
        assert stats.query("allocations") == live - 1
        print("numba ok", stats.query("allocations_total"))
        """,
        env={"CRMM_CONFIG": host_config(tmp_path, STATS_CONFIG), "NUMBA_CUDA_MEMORY_MANAGER": "crmm.allocators.numba"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "numba ok" in r.stdout


TRAIN = """
import sys
import torch
if sys.argv[1] == "crmm":
    import crmm.allocators.torch
    crmm.allocators.torch.use_crmm()
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(512, 64, device="cuda")
y = x[:, :1] * 0.5 - x[:, 1:2]
for _ in range(50):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
if sys.argv[1] == "crmm":
    import crmm.mr
    stats = crmm.mr.get_current_device_resource()
    assert stats.kind == "statistics" and stats.query("allocations_total") > 0
print(repr(loss.item()))
"""


def _train(mode, env):
    import subprocess

    full = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", **env)
    r = subprocess.run([sys.executable, "-c", TRAIN, mode], env=full, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return float(r.stdout.strip().splitlines()[-1])


def test_torch_training_under_crmm_matches_native(gpu, tmp_path):
    framework("torch")
    env = {"CRMM_CONFIG": host_config(tmp_path, STATS_CONFIG)}
    native = _train("native", env)
    under_crmm = _train("crmm", env)
    assert native < 1.0
    assert under_crmm == pytest.approx(native, rel=1e-5, abs=1e-7)


def test_streams_of_cupy_and_torch_are_wrapped(gpu):
    import crmm as rmm
    from crmm.pylibrmm.stream import Stream

    cupy = framework("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    s = Stream(cs)
    assert s.handle == cs.ptr and not s.is_default()
    db = rmm.DeviceBuffer.to_device(b"cupy", stream=s)
    s.synchronize()
    assert bytes(db) == b"cupy"

    torch = framework("torch")
    ts = torch.cuda.Stream()
    s = Stream(ts)
    assert s.handle == ts.cuda_stream and not s.is_default()
    db = rmm.DeviceBuffer.to_device(b"torch", stream=s)
    s.synchronize()
    assert bytes(db) == b"torch"
