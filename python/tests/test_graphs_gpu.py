"""CUDA graphs over crmm memory (docs/cuda-graphs.md): PyTorch's torch.cuda.graph with crmm as its
allocator and with a MemPool over crmm, torch.cuda.make_graphed_callables,
torch.compile(mode="reduce-overhead") on a Llama model built from a transformers config (random
weights, no download), and CuPy's stream capture with crmm's allocator. Each runs in a fresh
process (use_crmm() must come before torch's first CUDA allocation) under the config the process
finds by itself ("default": the installed crmm.ini's expandable pool, or crmm's built-in `cuda`
resource where none is installed, as under `make check`), a chunked pool, the expandable pool that
config makes (also with graph_pool = private), or an arena / fixed_size; the graph's output must
equal eager execution over many replays, and a tensor or array allocated after the capture must
never be written by a replay. Where crmm's hooks for PyTorch's graph pools are installed, a capture
served by a pool, arena or fixed_size must be adopted by its owner and its memory come back when
the graph goes."""

import pytest

from conftest import EXPANDABLE_POOL_CONFIG as EXPANDABLE, framework, host_config, run_python

CHUNKED_POOL = EXPANDABLE.replace("expandable = true", "initial_size = 64MiB")

ARENA = """
[crmm]
default = arena
[resource.gpu]
plugin = cuda
[resource.arena]
plugin = arena
upstream = gpu
arena_size = 512MiB
"""

FIXED_SIZE = """
[crmm]
default = blocks
[resource.gpu]
plugin = cuda
[resource.blocks]
plugin = fixed_size
upstream = gpu
block_size = 8MiB
blocks_to_preallocate = 16
"""

# the default config's expandable pool, as conf/crmm.ini makes it (what "default" is where that
# file is installed), and the same pool with each capture on memory of its own
PRIVATE = EXPANDABLE + "graph_pool = private\n"

CONFIGS = {
    "default": None,
    "chunked": CHUNKED_POOL,
    "expandable": EXPANDABLE,
    "arena": ARENA,
    "fixed_size": FIXED_SIZE,
    "private": PRIVATE,
}


# the kind of each config's default resource, which the children check they allocate from
KINDS = {"chunked": "pool", "expandable": "pool", "arena": "arena", "fixed_size": "fixed_size", "private": "pool"}


def config_env(tmp_path, config):
    text = CONFIGS[config]
    return {"CRMM_CONFIG": host_config(tmp_path, text), "CRMM_TEST_KIND": KINDS[config]} if text else {}


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

import crmm.mr
from crmm._lib import lib
served = crmm.mr.get_current_device_resource()
assert served.kind == os.environ.get("CRMM_TEST_KIND", served.kind), served.kind
# where the hooks are built, use_crmm() installs them, and torch's captures are crmm's graph
# owners' wherever the resource ties memory to graphs (not the `cuda` resource of no config)
assert mode != "global" or ct.graph_hooks_installed() or os.environ.get("CRMM_TORCH_HOOKS", "off") == "off"
hooks = mode == "global" and ct.graph_hooks_installed() and served.kind in ("pool", "arena", "fixed_size")
made = served.query("allocations_total")
adopted = lib.crmm_graph_owner_adopted_total()
g = torch.cuda.CUDAGraph()
kwargs = {"pool": pool.id} if pool is not None else {}
with torch.cuda.graph(g, **kwargs):
    static_loss = step()
assert served.query("allocations_total") > made, "the capture allocated nothing through crmm"
assert not hooks or lib.crmm_graph_owner_adopted_total() > adopted, "torch's capture got a user object, not its owner"

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
# (asked only with the hooks: a `cuda` resource keeps no free memory to ask about)
free_while_the_graph_lives = served.query("bytes_free") if hooks else 0
del g  # torch releases the graph's pool: with the hooks crmm hands its memory back at once
import gc
gc.collect()
torch.empty(1, device="cuda")  # arena and fixed_size take a gone graph's blocks back at their next allocation
assert not hooks or served.query("bytes_free") > free_while_the_graph_lives, "the graph's memory did not come back"
torch.cuda.synchronize()
print("ok")
"""

TORCH_GRAPHED_CALLABLES = """
import torch
import crmm.allocators.torch as ct
ct.use_crmm()
torch.manual_seed(0)

def mlp():
    return torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 32)).cuda()

model = mlp()
ref = mlp()
ref.load_state_dict(model.state_dict())
sample = torch.randn(16, 128, device="cuda", requires_grad=True)
graphed = torch.cuda.make_graphed_callables(model, (sample,))
after = torch.full((1 << 20,), 3.0, device="cuda")  # allocated after the capture
for i in range(1000):
    x = torch.randn(16, 128, device="cuda")
    a = x.clone().requires_grad_(True)
    b = x.clone().requires_grad_(True)
    out = graphed(a)
    out.sum().backward()
    expected = ref(b)
    expected.sum().backward()
    if i % 100 == 0 or i == 999:
        torch.cuda.synchronize()
        assert torch.allclose(out, expected, rtol=1e-4, atol=1e-5), i
        assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-5), i
torch.cuda.synchronize()
assert bool((after == 3.0).all()), "a replay wrote a tensor allocated after the capture"
print("ok")
"""

TORCH_COMPILE_LLAMA = """
import torch
import crmm.allocators.torch as ct
ct.use_crmm()
from transformers import LlamaConfig, LlamaForCausalLM
from torch._dynamo.utils import counters
torch.manual_seed(0)
config = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=704, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
model = LlamaForCausalLM(config).cuda().eval()
compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
with torch.no_grad():
    # two shapes: inductor records a graph for each and replays whichever the input needs
    ids = [torch.randint(0, 1024, (2, 32) if i % 2 else (1, 24), device="cuda") for i in range(4)]
    expected = [model(input_ids=x, use_cache=False).logits.clone() for x in ids]
    for _ in range(3):  # recording, then CUDA graph replays
        for x in ids[:2]:
            compiled(input_ids=x, use_cache=False)
    after = torch.full((1 << 20,), 9.0, device="cuda")  # allocated after the capture
    for i in range(200):
        got = compiled(input_ids=ids[i % 4], use_cache=False).logits.clone()
        if i % 20 == 0 or i == 199:
            torch.cuda.synchronize()
            assert torch.allclose(got, expected[i % 4], rtol=1e-3, atol=1e-3), (i, (got - expected[i % 4]).abs().max().item())
torch.cuda.synchronize()
assert bool((after == 9.0).all()), "a replay wrote a tensor allocated after the capture"
skips = dict(counters["inductor"]).get("cudagraph_skips", 0)
assert skips == 0, "inductor skipped CUDA graphs: " + repr(dict(counters["inductor"]))
print("ok")
"""

CUPY_CAPTURE = """
import os
import cupy
import crmm.mr
from crmm.allocators.cupy import rmm_cupy_allocator
cupy.cuda.set_allocator(rmm_cupy_allocator)
served = crmm.mr.get_current_device_resource()
assert served.kind == os.environ.get("CRMM_TEST_KIND", served.kind), served.kind
n = 1 << 20
x = cupy.arange(n, dtype=cupy.float32)
out = cupy.zeros(n, dtype=cupy.float32)
stream = cupy.cuda.Stream(non_blocking=True)
with stream:
    expected = (x * 2 + 1) * 3          # eager, on the same stream
    stream.synchronize()
    made = served.query("allocations_total")
    stream.begin_capture()
    t = x * 2 + 1                       # temporaries allocated and freed inside the capture
    out[...] = t * 3
    del t
    graph = stream.end_capture()
    assert served.query("allocations_total") > made, "the capture allocated nothing through crmm"
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


@pytest.mark.parametrize("config", ["default", "chunked", "expandable", "arena", "private"])
def test_torch_graph_of_a_training_step_under_crmm(gpu, tmp_path, config):
    framework("torch")
    _run(TORCH_MLP, dict(config_env(tmp_path, config), CRMM_TEST_TORCH_MODE="global"))


def test_torch_graph_under_crmm_without_its_graph_hooks(gpu):
    """CRMM_TORCH_HOOKS=off: each capture's memory is tied to its graph by a CUDA user object."""
    framework("torch")
    _run(TORCH_MLP, {"CRMM_TEST_TORCH_MODE": "global", "CRMM_TORCH_HOOKS": "off"})


def test_torch_graph_in_a_mempool_over_crmm(gpu):
    torch = framework("torch")
    if not hasattr(torch.cuda, "MemPool"):
        pytest.skip("this torch has no torch.cuda.MemPool")
    _run(TORCH_MLP, {"CRMM_TEST_TORCH_MODE": "mempool"})


@pytest.mark.parametrize("config", ["default", "chunked", "private"])
def test_torch_make_graphed_callables_under_crmm(gpu, tmp_path, config):
    framework("torch")
    _run(TORCH_GRAPHED_CALLABLES, config_env(tmp_path, config))


def test_torch_compile_reduce_overhead_on_a_llama_under_crmm(gpu):
    framework("torch")
    framework("transformers")
    _run(TORCH_COMPILE_LLAMA, {})


TORCH_INDUCTOR_LAZY = """
import sys, torch
import crmm.allocators.torch as ct
before = "torch._inductor.config" in sys.modules
ct.use_crmm(inductor_cudagraph_trees=sys.argv[1] == "keep")
assert ("torch._inductor.config" in sys.modules) == before, "use_crmm imported inductor"
import torch._inductor.config as c
assert c.triton.cudagraph_trees is (sys.argv[1] == "keep"), c.triton.cudagraph_trees
x = torch.ones(4, device="cuda")
assert float(x.sum()) == 4.0
print("ok")
"""


@pytest.mark.parametrize("keep", ["off", "keep"])
def test_use_crmm_turns_cudagraph_trees_off_when_inductor_is_imported(gpu, keep):
    """use_crmm() does not import inductor (seconds a program that never compiles should not
    pay); inductor's config, when imported later, has its CUDA graph trees off, unless asked to
    keep them."""
    framework("torch")
    _run(TORCH_INDUCTOR_LAZY.replace("sys.argv[1]", repr(keep)), {})


@pytest.mark.parametrize("config", ["default", "chunked", "expandable", "arena", "fixed_size", "private"])
def test_cupy_stream_capture_under_crmm(gpu, tmp_path, config):
    framework("cupy")
    _run(CUPY_CAPTURE, config_env(tmp_path, config))
