"""CUDA graphs over crmm memory (docs/cuda-graphs.md): PyTorch's torch.cuda.graph with crmm as
its allocator and with a MemPool over crmm, and CuPy's stream capture with crmm's allocator. Each
runs in a fresh process under the default config (an expandable pool) or a chunked pool; the
graph's output must equal eager execution over many replays, and a tensor or array allocated
after the capture must never be written by a replay."""

import pytest

from conftest import framework, host_config, run_python

CHUNKED_POOL = """
[crmm]
default = pool
[resource.gpu]
plugin = cuda
[resource.pool]
plugin = pool
upstream = gpu
initial_size = 64MiB
"""

TORCH_MLP = """
import os
import torch
import crmm.allocators.torch as ct
mode = os.environ["CRMM_TEST_TORCH_MODE"]
pool = None
if mode == "mempool":
    pool = ct.crmm_mem_pool()
else:
    ct.use_crmm()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
static_x = torch.randn(32, 256, device="cuda")
static_y = torch.randn(32, 64, device="cuda")

def step():
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.mse_loss(model(static_x), static_y)
    loss.backward()
    opt.step()
    return loss

side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        step()
torch.cuda.current_stream().wait_stream(side)

g = torch.cuda.CUDAGraph()
kwargs = {"pool": pool.id} if pool is not None else {}
with torch.cuda.graph(g, **kwargs):
    static_loss = step()

# eager reference from the same state: a copy of the model stepped eagerly
ref = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).cuda()
ref.load_state_dict(model.state_dict())
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01)
after = torch.full((1 << 20,), 7.0, device="cuda")  # allocated after the capture
for i in range(1000):
    static_x.copy_(torch.randn(32, 256, device="cuda"))
    g.replay()
    ref_opt.zero_grad(set_to_none=False)
    ref_loss = torch.nn.functional.mse_loss(ref(static_x), static_y)
    ref_loss.backward()
    ref_opt.step()
    if i % 100 == 0 or i == 999:
        torch.cuda.synchronize()
        assert torch.allclose(static_loss, ref_loss, rtol=1e-3, atol=1e-6), (i, static_loss.item(), ref_loss.item())
torch.cuda.synchronize()
assert bool((after == 7.0).all()), "a replay wrote a tensor allocated after the capture"
del g
torch.cuda.synchronize()
print("ok")
"""

CUPY_CAPTURE = """
import cupy
import crmm.mr
from crmm.allocators.cupy import rmm_cupy_allocator
cupy.cuda.set_allocator(rmm_cupy_allocator)
n = 1 << 20
x = cupy.arange(n, dtype=cupy.float32)
out = cupy.zeros(n, dtype=cupy.float32)
stream = cupy.cuda.Stream(non_blocking=True)
with stream:
    expected = (x * 2 + 1) * 3          # eager, on the same stream
    stream.synchronize()
    stream.begin_capture()
    t = x * 2 + 1                       # temporaries allocated and freed inside the capture
    out[...] = t * 3
    del t
    graph = stream.end_capture()
    after = cupy.full(n, 5.0, dtype=cupy.float32)   # allocated after the capture
    stream.synchronize()
    for i in range(1000):
        out.fill(0)
        graph.launch(stream)
        if i % 100 == 0 or i == 999:
            stream.synchronize()
            assert bool((out == expected).all()), i
    stream.synchronize()
    assert bool((after == 5.0).all()), "a replay wrote an array allocated after the capture"
del graph
print("ok")
"""


def _run(code, env):
    r = run_python(code, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


@pytest.mark.parametrize("config", ["default", "chunked"])
def test_torch_graph_of_a_training_step_under_crmm(gpu, tmp_path, config):
    framework("torch")
    env = {"CRMM_CONFIG": host_config(tmp_path, CHUNKED_POOL)} if config == "chunked" else {}
    _run(TORCH_MLP, dict(env, CRMM_TEST_TORCH_MODE="global"))


def test_torch_graph_in_a_mempool_over_crmm(gpu):
    torch = framework("torch")
    if not hasattr(torch.cuda, "MemPool"):
        pytest.skip("this torch has no torch.cuda.MemPool")
    _run(TORCH_MLP, {"CRMM_TEST_TORCH_MODE": "mempool"})


@pytest.mark.parametrize("config", ["default", "chunked"])
def test_cupy_stream_capture_under_crmm(gpu, tmp_path, config):
    framework("cupy")
    env = {"CRMM_CONFIG": host_config(tmp_path, CHUNKED_POOL)} if config == "chunked" else {}
    _run(CUPY_CAPTURE, env)
