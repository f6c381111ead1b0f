#!/usr/bin/env python3
"""bench/decoder_graph.py — one decoder step of a small Llama-shaped model (batch 1, static KV
cache) captured into a CUDA graph with torch.cuda.graph and replayed, under PyTorch's own
allocator (`native`, or `expandable` with expandable_segments:True) or crmm's (`crmm`:
crmm.allocators.torch.use_crmm() over the default config; `crmm_chunked`: crmm's pool growing by
cudaMalloc chunks instead of mapping pages, as in bench/torch_workloads.py; `crmm_align512` and
`crmm_align2m`, `crmm_align64k`: the default pool under an `aligned` adaptor, every block at 512
bytes, or blocks of 1 MiB and more at 2 MiB or 64 KiB, to see whether where tensors land moves
the replay; `crmm_page32m`, `crmm_page256m`: the default pool mapping physical pages of 32 or
256 MiB; `crmm_split`: requests up to 1 MiB in an expandable pool of their own, as
bench/torch_workloads.py's; `crmm_trim`: the default pool trimmed right before the capture, so
that the capture's larger temporaries land on pages mapped for it rather than in the free blocks
that the model's build and warm-up left; `crmm_private`: the default pool with graph_pool =
private, every capture on memory of its own, as PyTorch's private graph pools). `--model` picks the shapes (small, wide, deep, gpt2vocab, 7bslice;
see MODELS), and `bench/decoder_graph.sh` runs modes and models alternated, in fresh processes.

The model is written here (RMSNorm, rotary embeddings, grouped-query attention over a static
KV cache, SwiGLU), with random weights in bfloat16: nothing is downloaded. The captured step
embeds a token, runs every layer (writing the KV cache at the current position, which the graph
advances itself), and computes the logits; its temporaries are allocated and freed inside the
capture, so the allocator serves the capture and holds that memory for the graph.

To find out whose placement moves the replay: `--place GROUP=KIND` moves a group of weights
into memory of its own (one cuMemAlloc, pages mapped one by one, or one handle) before the
capture, and `--record CSV` writes a crmm mode's allocation log (the addresses of the weights,
the cuBLAS workspace and the temporaries). `--user-object` ties a CUDA user object to the
captured graph in any mode (native's too), as crmm's allocators do at every capture that no
framework owns. The crmm modes tie none of their own where use_crmm() installed crmm's hooks for
PyTorch's graph pools ("graph_hooks" in the output; CRMM_TORCH_HOOKS=off for the user object).

It prints one JSON line: the mode, milliseconds per replay (the median over batches of
--replays replays each, timed with CUDA events), each batch's figure, the capture's wall time,
the captured graph's nodes by type, where the moved weights went ("placed") and where the
head, the embedding and one MLP weight live ("weights_at"), the peak device memory in use above
the level before the first allocation (cudaMemGetInfo's total - free, sampled after each phase
and each batch: torch.cuda.max_memory_reserved knows nothing of a pluggable allocator), and
whether a replay's logits equal an eager step's. Run each mode in a fresh process (use_crmm must come before
torch's first CUDA allocation), alternating:

    python3 bench/decoder_graph.py native
    python3 bench/decoder_graph.py crmm
"""

import argparse
import os
import json
import ctypes
import statistics
import time

# CUgraphNodeType's names, by value (cuda.h)
NODE_TYPES = ["kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event", "event_record",
              "ext_semas_signal", "ext_semas_wait", "mem_alloc", "mem_free", "batch_mem_op", "conditional"]


def node_census(handle):
    """{node type: count} of a captured cudaGraph_t, through the driver API."""
    cu = ctypes.CDLL("libcuda.so.1")
    n = ctypes.c_size_t(0)
    if cu.cuGraphGetNodes(ctypes.c_void_p(handle), None, ctypes.byref(n)) != 0:
        return None
    nodes = (ctypes.c_void_p * n.value)()
    cu.cuGraphGetNodes(ctypes.c_void_p(handle), nodes, ctypes.byref(n))
    census = {}
    for node in nodes:
        t = ctypes.c_int(-1)
        cu.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t))
        name = NODE_TYPES[t.value] if 0 <= t.value < len(NODE_TYPES) else str(t.value)
        census[name] = census.get(name, 0) + 1
    return census


def tie_user_object(handle):
    """Retain a CUDA user object (one that does nothing) on the captured cudaGraph_t, as crmm's
    allocators tie their record of a capture to its graph, so that a mode without crmm shows
    what a user object alone costs a replay. Its destructor is the C library's free(NULL): a
    driver thread may run it while Python shuts down, where a Python callback could not run.
    Returns whether it was tied."""
    cu = ctypes.CDLL("libcuda.so.1")
    free_fn = ctypes.cast(ctypes.CDLL(None).free, ctypes.c_void_p)
    obj = ctypes.c_void_p()
    if cu.cuUserObjectCreate(ctypes.byref(obj), None, free_fn, 1, 1) != 0:  # NO_DESTRUCTOR_SYNC
        return False
    if cu.cuGraphRetainUserObject(ctypes.c_void_p(handle), obj, 1, 1) != 0:  # MOVE
        cu.cuUserObjectRelease(obj, 1)
        return False
    return True


# Model shapes (--model): layers, hidden, heads, kv_heads, intermediate, vocab. "small" is the
# default; the others differ in width, depth and vocabulary, since which placement a replay
# favours changes from one model to the next.
MODELS = {
    "small": (4, 1024, 16, 4, 2816, 32000),
    "wide": (8, 2048, 16, 4, 5632, 32000),
    "gpt2vocab": (6, 768, 12, 4, 2048, 50257),
    "deep": (12, 1536, 12, 4, 4096, 32000),
    "7bslice": (2, 4096, 32, 8, 11008, 32000),
}
SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", choices=["native", "expandable", "crmm", "crmm_chunked", "crmm_align512",
                                                "crmm_align2m", "crmm_align64k", "crmm_page32m", "crmm_page256m",
                                                "crmm_split", "crmm_trim", "crmm_private"])
    ap.add_argument("--replays", type=int, default=200, help="replays per timed batch")
    ap.add_argument("--batches", type=int, default=15, help="timed batches (the median is reported)")
    ap.add_argument("--model", choices=sorted(MODELS), default="small",
                    help="the model's shapes (the flags below override one each)")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--intermediate", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--max-seq", type=int, default=1024, help="KV cache length")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also profile N replays (torch.profiler) and report the GPU time of each kernel name")
    ap.add_argument("--record", metavar="CSV",
                    help="crmm modes: record the allocation log there (the logging plugin over the mode's resource)")
    ap.add_argument("--place", action="append", default=[], metavar="GROUP=KIND",
                    help="move a group of weights (head, embed, layers, all) into memory of their own before capture: "
                         "cudamalloc (one cuMemAlloc), vmm2m (handles of the allocation granularity) or vmmwhole "
                         "(one handle); repeatable")
    ap.add_argument("--place-offset", type=int, default=0, metavar="BYTES",
                    help="where in that memory the first weight starts")
    ap.add_argument("--place-va-align", type=int, default=0, metavar="BYTES",
                    help="alignment of the reserved address range (vmm kinds; 0: the granularity)")
    ap.add_argument("--shift", default="0,0", metavar="SMALL,LARGE",
                    help="before the model is built, allocate and keep two buffers of SMALL and LARGE bytes, so that "
                         "every later tensor lands elsewhere (how much the replay's speed depends on placement alone)")
    ap.add_argument("--user-object", action="store_true",
                    help="tie a CUDA user object to the captured graph (what crmm's allocators do at every capture) "
                         "before it is instantiated")
    ap.add_argument("--table", metavar="RESULTS.jsonl",
                    help="print the table of the runs in this file (one JSON line each) instead of running")
    a = ap.parse_args()
    if a.table:
        return a
    if not a.mode:
        ap.error("a mode, or --table")
    try:
        a.shift = tuple(int(v) for v in a.shift.split(","))
        if len(a.shift) != 2 or min(a.shift) < 0:
            raise ValueError
    except ValueError:
        ap.error("--shift takes two byte counts, SMALL,LARGE (got %r)" % a.shift)
    if a.record and (not a.mode.startswith("crmm") or a.mode == "crmm_split"):
        ap.error("--record needs a crmm mode that a config describes (not %s)" % a.mode)
    for field, value in zip(SHAPE_FIELDS, MODELS[a.model]):
        if getattr(a, field) is None:
            setattr(a, field, value)
    return a


def foreign_tensor(torch, address, like):
    """A tensor over `like.nbytes` bytes at device `address` (memory torch does not own), shaped as `like`."""
    n = like.numel() * like.element_size()

    class View:
        __cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (address, False), "version": 3}

    return torch.as_tensor(View(), device="cuda").view(like.dtype).view(like.shape)


def place_weights(torch, model, spec, offset, va_align, keep):
    """Moves the weights of group `spec` = "GROUP=KIND" into fresh memory of that kind, packed
    at 512-byte steps from `offset`, so that a replay reads them there (the placement under test)."""
    import vmm_kernels as vk  # the same directory: its driver calls

    group, kind = spec.split("=")
    named = dict(model.named_parameters())
    pick = {"head": lambda n: n.startswith("head."), "embed": lambda n: n.startswith("embed."),
            "layers": lambda n: n.startswith("layers."), "all": lambda n: True}[group]
    params = [p for n, p in named.items() if pick(n)]
    starts, end = [], offset
    for p in params:
        end = (end + 511) // 512 * 512
        starts.append(end)
        end += p.numel() * p.element_size()
    cu = ctypes.CDLL("libcuda.so.1")
    device = torch.cuda.current_device()
    gran = vk.granularity(cu, device)
    size = (end + gran - 1) // gran * gran
    if kind == "cudamalloc":
        ptr = ctypes.c_uint64()
        vk._check(cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)), "cuMemAlloc")
        base = ptr.value
    elif kind in ("vmm2m", "vmmwhole"):
        base, _ = vk.vmm_region(cu, device, size, gran if kind == "vmm2m" else size, max(va_align, gran))
    else:
        raise SystemExit(f"--place: unknown kind {kind!r}")
    for p, s in zip(params, starts):
        t = foreign_tensor(torch, base + s, p.data)
        t.copy_(p.data)
        p.data = t
    keep.append(base)
    return {"group": group, "kind": kind, "tensors": len(params), "bytes": end - offset, "base": hex(base),
            "base_mod_2m": base % (2 << 20)}


def profile_kernels(torch, graph, n):
    """{kernel name: GPU microseconds per replay} over n replays, largest first."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            graph.replay()
        torch.cuda.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            totals[e.name] = totals.get(e.name, 0.0) + e.time_range.elapsed_us() / n
    return {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def build(torch, a):
    nn = torch.nn
    F = torch.nn.functional
    head_dim = a.hidden // a.heads
    group = a.heads // a.kv_heads

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight

    def rope(x, cos, sin):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = RMSNorm(a.hidden), RMSNorm(a.hidden)
            self.wq = nn.Linear(a.hidden, a.heads * head_dim, bias=False)
            self.wk = nn.Linear(a.hidden, a.kv_heads * head_dim, bias=False)
            self.wv = nn.Linear(a.hidden, a.kv_heads * head_dim, bias=False)
            self.wo = nn.Linear(a.heads * head_dim, a.hidden, bias=False)
            self.w1 = nn.Linear(a.hidden, a.intermediate, bias=False)
            self.w3 = nn.Linear(a.hidden, a.intermediate, bias=False)
            self.w2 = nn.Linear(a.intermediate, a.hidden, bias=False)

        def forward(self, x, pos, cos, sin, k_cache, v_cache):
            h = self.norm1(x)
            q = rope(self.wq(h).view(1, 1, a.heads, head_dim).transpose(1, 2), cos, sin)
            k = rope(self.wk(h).view(1, 1, a.kv_heads, head_dim).transpose(1, 2), cos, sin)
            v = self.wv(h).view(1, 1, a.kv_heads, head_dim).transpose(1, 2)
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            mask = (torch.arange(a.max_seq, device=x.device) <= pos).view(1, 1, 1, a.max_seq)
            kk = k_cache.repeat_interleave(group, dim=1)
            vv = v_cache.repeat_interleave(group, dim=1)
            o = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
            x = x + self.wo(o.transpose(1, 2).reshape(1, 1, a.hidden))
            h = self.norm2(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(a.vocab, a.hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(a.layers))
            self.norm = RMSNorm(a.hidden)
            self.head = nn.Linear(a.hidden, a.vocab, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            freqs = torch.outer(torch.arange(a.max_seq).float(), inv)
            self.register_buffer("cos", freqs.cos())
            self.register_buffer("sin", freqs.sin())

        def forward(self, token, pos, caches):
            x = self.embed(token)
            cos = self.cos.index_select(0, pos).to(x.dtype)
            sin = self.sin.index_select(0, pos).to(x.dtype)
            for layer, (k_cache, v_cache) in zip(self.layers, caches):
                x = layer(x, pos, cos, sin, k_cache, v_cache)
            return self.head(self.norm(x)).float()

    torch.manual_seed(0)
    model = Decoder().to(device="cuda", dtype=torch.bfloat16).eval()
    caches = [
        tuple(torch.zeros(1, a.kv_heads, a.max_seq, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for _ in range(a.layers)
    ]
    return model, caches


def table(path):
    """A markdown table of the runs in `path`: per model and mode, ms per replay and peak MiB
    (median and range over runs) and the medians' ratios to native's of the same shapes."""
    runs = {}
    for line in open(path):
        if line.strip():
            d = json.loads(line)
            shapes = tuple(sorted(d["config"].items()))
            runs.setdefault((d.get("model", "?"), shapes), {}).setdefault(d["mode"], []).append(d)
    out = ["| model | mode | runs | ms per replay, median (min-max) | vs native | peak MiB | vs native | "
           "replay = eager |", "|---|---|---|---|---|---|---|---|"]
    for (model, _), modes in runs.items():
        base = modes.get("native")
        base_ms = statistics.median(r["ms_per_replay"] for r in base) if base else None
        base_peak = statistics.median(r["peak_mib"] for r in base) if base else None
        for mode, rs in modes.items():
            ms = [r["ms_per_replay"] for r in rs]
            peak = statistics.median(r["peak_mib"] for r in rs)
            ratio = "%.4f" % (statistics.median(ms) / base_ms) if base_ms else "-"
            peak_ratio = "%.3f" % (peak / base_peak) if base_peak else "-"
            out.append("| %s | %s | %d | %.5f (%.5f-%.5f) | %s | %.0f | %s | %s |" % (
                model, mode, len(rs), statistics.median(ms), min(ms), max(ms), ratio, peak, peak_ratio,
                all(r["replay_equals_eager"] for r in rs)))
    return "\n".join(out)


def main():
    a = parse_args()
    if a.table:
        print(table(a.table))
        return 0
    if a.mode.startswith("crmm"):
        from torch_workloads import use_crmm  # the same setup as the workload harness's

        use_crmm(a.record, "crmm" if a.mode == "crmm_trim" else a.mode)
        import crmm.allocators.torch as ct

        graph_hooks = ct.graph_hooks_installed()  # else each captured graph gets a user object
    else:
        graph_hooks = None
    if a.mode == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch

    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    base = total - free
    peak = base

    def sample():
        nonlocal peak
        f, t = torch.cuda.mem_get_info()
        peak = max(peak, t - f)

    with torch.no_grad():
        keep = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in a.shift if n]  # held to the end
        model, caches = build(torch, a)
        placed = []
        for spec in a.place:
            placed.append(place_weights(torch, model, spec, a.place_offset, a.place_va_align, keep))
        torch.cuda.synchronize()
        token = torch.zeros(1, 1, dtype=torch.long, device="cuda")
        pos = torch.zeros(1, dtype=torch.long, device="cuda")
        sample()

        def step():
            logits = model(token, pos, caches)
            pos.copy_((pos + 1) % a.max_seq)  # the graph advances the position itself
            return logits

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        sample()

        if a.mode == "crmm_trim":
            import crmm

            crmm.mr.get_current_device_resource().trim()
        try:  # keep the captured graph to count its nodes (torch >= 2.5)
            graph, kept = torch.cuda.CUDAGraph(keep_graph=True), True
        except TypeError:
            graph, kept = torch.cuda.CUDAGraph(), False
        t0 = time.perf_counter()
        with torch.cuda.graph(graph):
            logits = step()
        torch.cuda.synchronize()
        capture_ms = (time.perf_counter() - t0) * 1e3
        census = node_census(graph.raw_cuda_graph()) if kept else None
        tied = tie_user_object(graph.raw_cuda_graph()) if kept and a.user_object else False
        if kept:
            graph.instantiate()
        sample()

        for _ in range(20):  # warm-up replays
            graph.replay()
        torch.cuda.synchronize()
        per_batch = []
        torch.cuda.nvtx.range_push("timed replays")  # what a profiler is pointed at (ncu --nvtx-include)
        for _ in range(a.batches):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(a.replays):
                graph.replay()
            end.record()
            end.synchronize()
            per_batch.append(start.elapsed_time(end) / a.replays)
            sample()
        torch.cuda.nvtx.range_pop()

        kernels = profile_kernels(torch, graph, a.profile) if a.profile else None

        # a replay's logits against an eager step at the same position over the same cache
        pos.fill_(7)
        expected = model(token, pos, caches).clone()
        graph.replay()
        torch.cuda.synchronize()
        same = bool(torch.allclose(logits, expected, rtol=2e-2, atol=2e-2))
        del graph
        torch.cuda.synchronize()

    print(
        json.dumps(
            {
                "mode": a.mode,
                "placed": placed,
                "shift": list(a.shift),
                "weights_at": {n: hex(w.data_ptr()) for n, w in model.named_parameters()
                               if n in ("head.weight", "embed.weight", "layers.0.w1.weight")},
                "ms_per_replay": round(statistics.median(per_batch), 5),
                "batches_ms": [round(x, 5) for x in per_batch],
                "capture_ms": round(capture_ms, 2),
                "nodes": census,
                "user_object": tied,
                "graph_hooks": graph_hooks,
                "kernels_us": kernels,
                "peak_mib": round((peak - base) / 2**20, 1),
                "replay_equals_eager": same,
                "model": a.model,
                "config": {k: getattr(a, k) for k in SHAPE_FIELDS + ("max_seq",)},
            }
        )
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
