"""Real PyTorch workloads under three allocators, one workload and one allocator per process.

    python3 bench/torch_workloads.py --workload serving --mode crmm [--record LOG.csv]
    python3 bench/torch_workloads.py --table RESULTS.jsonl

Workloads (models built from code with random weights, inputs random with fixed seeds, the same
sequence in every mode; nothing is downloaded):
  dyn_train  a decoder language model trained with batch and sequence length drawn anew every step
  serving    greedy decoding of requests of random batch and prompt length, a KV cache that grows
             by concatenation, the next tokens read on the host every step (as a server streams
             them); reports ms per decode step ("ms/token")
  serving_mixed  a server's long run: 48 requests of random batch, prompt and answer length, up to
             six decoded at once, each its own KV cache grown by concatenation, admitted as others
             finish, so the live set never repeats (the pattern of bench/synthetic_logs.py's
             kv_growth); reports ms per decoded token over all requests
  vit        a vision transformer trained at fixed shapes (timm's vit_base_patch16_224, else
             torchvision's vit_b_16)
  moe        a mixture-of-experts stack trained with top-2 routing: every expert's share of the
             tokens, and so every allocation's size, changes with every step
Modes: native (PyTorch's caching allocator), expandable (PYTORCH_CUDA_ALLOC_CONF=
expandable_segments:True, set before torch is imported), crmm (crmm.allocators.torch.use_crmm()
with $CRMM_CONFIG, the default config conf/crmm.ini when run by torch_workloads.sh), and, for a
diagnosis not run by default, crmm_idle, crmm_never and crmm_budget (the default config's pool with
page_moves = idle, never or budget, see docs/expandable-pool.md), crmm_newest (the default config's
pool with fit = newest instead of best), and crmm_chunked (crmm's pool growing by cudaMalloc chunks instead of
mapping pages: the same allocator work over memory that is not mapped page by page, which tells
a cost of the allocator from a cost of page-mapped memory in the kernels). crmm_plan is the
default config's pool following --plan PLAN, a plan `crmm plan` learned from a log this script
recorded of the same workload in another process (torch_workloads.sh makes both when MODES has it).

Each run prints one JSON line: peak device memory (total - free, sampled every 2 ms in a thread,
and the same at start for reference), seconds from process start to the end of the first step,
the median step time (serving: ms per token) after the first step, and under crmm what its pool
asked of the device per step (or token) after the first one. --record writes crmm's allocation
log (the logging plugin over the mode's resource) for `crmm replay`.
"""
import argparse
import json
import os
import re
import sys
import time

T_START = time.perf_counter()
MiB = 1 << 20


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=sorted(WORKLOADS))
    ap.add_argument("--mode", choices=["native", "expandable", "crmm", "crmm_idle", "crmm_never", "crmm_budget",
                                       "crmm_newest", "crmm_chunked", "crmm_split", "crmm_split_never", "crmm_plan",
                                       *PAGE_SIZE_CONFIGS])
    ap.add_argument("--plan", metavar="PLAN", help="crmm_plan: the plan (`crmm plan` of a recorded run) the default "
                    "config's pool follows")
    ap.add_argument("--record", metavar="LOG.csv", help="crmm modes: write the allocation log here")
    ap.add_argument("--run", type=int, default=0, help="the run's number, copied to the output")
    ap.add_argument("--steps", type=int, help="dyn_train, moe and vit: training steps (default 10, vit 8); the workload is "
                    "then reported as NAME_Nsteps, since how much a caching allocator holds grows with the steps")
    ap.add_argument("--jobs", type=int, default=1, help="run the workload this many times in the one process, "
                    "each after the last has let go of everything (a process that runs its job again); the device "
                    "peak of each is reported in job_peak_MiB")
    ap.add_argument("--table", metavar="RESULTS.jsonl", help="print the table of the runs in this file")
    a = ap.parse_args()
    if a.jobs < 1:
        ap.error("--jobs must be at least 1")
    if not a.table and not (a.workload and a.mode):
        ap.error("--workload and --mode, or --table")
    if a.steps and a.workload not in STEPPED:
        ap.error("--steps is for %s" % ", ".join(sorted(STEPPED)))
    if (a.mode == "crmm_plan") != bool(a.plan):
        ap.error("--plan goes with --mode crmm_plan, and it needs one")
    if a.record and (not a.mode.startswith("crmm") or a.mode in SPLIT_MODES):
        ap.error("--record needs a crmm mode that a config describes (not %s)" % a.mode)
    return a




# ---- the allocator ------------------------------------------------------------------------------

def pool_config(pool_lines, default="pool", extra=""):
    """A config of a pool over cuda with `pool_lines`, `default` the default resource, `extra` more
    sections."""
    return ("[crmm]\ndefault = %s\nlog_level = warn\n\n[resource.gpu]\nplugin = cuda\n\n"
            "[resource.pool]\nplugin = pool\nupstream = gpu\n%s\n%s" % (default, pool_lines, extra))


def recorded(text, log):
    """Config `text` (made by pool_config) with a logging resource over its default resource made
    the default, so that the allocations of that mode are written to `log`."""
    m = re.search(r"^default = (\S+)$", text, re.M)
    return (text[:m.start(1)] + "rec" + text[m.end(1):] +
            "\n[resource.rec]\nplugin = logging\nupstream = %s\nfile = %s\nauto_flush = true\n" % (m.group(1), log))


# the default config's pool, written out so that a record can wrap it
DEFAULT_POOL_CONFIG = pool_config("expandable = true")
CHUNKED_CONFIG = pool_config("initial_size = 0")
PAGE_MOVES_CONFIG = pool_config("expandable = true\npage_moves = {moves}")
NEWEST_FIT_CONFIG = pool_config("expandable = true\nfit = newest")
# captures on memory of their own, as PyTorch's private graph pools (docs/cuda-graphs.md)
PRIVATE_GRAPH_CONFIG = pool_config("expandable = true\ngraph_pool = private")
# where tensors land: blocks aligned to 512 bytes (PyTorch's rounding), or large ones (>= 1 MiB)
# to 2 MiB, each at the start of a page as in a segment of its own, or to 64 KiB
ALIGNED_CONFIGS = {
    "crmm_align512": pool_config("expandable = true", "al", "\n[resource.al]\nplugin = aligned\nupstream = pool\n"
                                 "alignment = 512\nalignment_threshold = 0\n"),
    "crmm_align2m": pool_config("expandable = true", "al", "\n[resource.al]\nplugin = aligned\nupstream = pool\n"
                                "alignment = 2MiB\nalignment_threshold = 1MiB\n"),
    "crmm_align64k": pool_config("expandable = true", "al", "\n[resource.al]\nplugin = aligned\nupstream = pool\n"
                                 "alignment = 64KiB\nalignment_threshold = 1MiB\n"),
}
# physical pages larger than the device's granularity (the pool's page_size)
PAGE_SIZE_CONFIGS = {"crmm_page%dm" % n: pool_config("expandable = true\npage_size = %dMiB" % n) for n in (32, 256)}


def use_crmm(record, mode="crmm", plan=None):
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "conf", "crmm.ini")
    if not os.environ.get("CRMM_CONFIG") and os.path.exists(default):
        os.environ["CRMM_CONFIG"] = default  # else crmm_init(NULL) may find no config and use plain cuda
    text = None
    if mode == "crmm_chunked":
        text = CHUNKED_CONFIG
    elif mode == "crmm_newest":
        text = NEWEST_FIT_CONFIG
    elif mode == "crmm_private":
        text = PRIVATE_GRAPH_CONFIG
    elif mode in ("crmm_idle", "crmm_never", "crmm_budget"):
        text = PAGE_MOVES_CONFIG.format(moves=mode[len("crmm_"):])
    elif mode in ALIGNED_CONFIGS:
        text = ALIGNED_CONFIGS[mode]
    elif mode in PAGE_SIZE_CONFIGS:
        text = PAGE_SIZE_CONFIGS[mode]
    elif mode == "crmm_plan":
        text = pool_config("expandable = true\nplan = %s" % os.path.abspath(plan))
    if record:
        text = recorded(text or DEFAULT_POOL_CONFIG, os.path.abspath(record))
    if text:
        import tempfile

        fd, path = tempfile.mkstemp(prefix="crmm-%s-" % mode, suffix=".ini")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.environ["CRMM_CONFIG"] = path
    import crmm.allocators.torch as ct

    if mode in SPLIT_MODES:
        split_small_requests(SPLIT_MODES[mode])
    ct.use_crmm()


# Small requests on pages of their own: a binning resource sends requests up to 1 MiB to one
# expandable pool and larger ones to another (PyTorch keeps its small blocks in segments of their
# own too), with the page_moves policy named.
SPLIT_MODES = {"crmm_split": "wait", "crmm_split_never": "never"}


def split_small_requests(moves):
    import crmm.mr as mr

    cuda = mr.CudaMemoryResource()
    params = {"expandable": True, "page_moves": moves}
    split = mr.BinningMemoryResource(mr.MemoryResource("pool", params, upstream=cuda))
    split.add_bin(1 << 20, mr.MemoryResource("pool", params, upstream=cuda))
    mr.set_current_device_resource(split)


class CrmmCounters:
    """What crmm's pool asked of the device, and the allocations made, read between steps."""

    KEYS = ("crmm.device_syncs", "crmm.pages_mapped", "crmm.pages_unmapped", "crmm.pages_created",
            "crmm.pages_released", "crmm.growths", "crmm.event_waits", "crmm.lock_waits")

    def __init__(self, on):
        self.on = on
        self.start = None

    def read(self):
        import crmm.allocators.torch as ct
        import crmm.mr

        s = ct.memory_stats()
        out = {k: s.get(k, 0) for k in self.KEYS}
        try:
            out["allocations"] = crmm.mr.get_current_device_resource().query("allocations_total")
        except crmm.CrmmError:
            out["allocations"] = 0
        out["reserved_peak"] = s.get("reserved_bytes.all.peak", 0)
        return out

    def mark(self):
        if self.on:
            self.start = self.read()

    def per(self, units):
        if not self.on or self.start is None or not units:
            return None
        end = self.read()
        per = {k.replace("crmm.", ""): (end[k] - self.start[k]) / units for k in self.KEYS + ("allocations",)}
        per["reserved_peak_MiB"] = end["reserved_peak"] / MiB
        return per


# ---- measuring ------------------------------------------------------------------------------------


class PeakSampler:
    """total - free of device 0 every 2 ms in a thread, until stopped."""

    def __init__(self, torch):
        import threading

        self.torch, self.peak, self.stop_flag, self.lock = torch, 0, False, threading.Lock()
        free, total = torch.cuda.mem_get_info()
        self.at_start = total - free
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop_flag:
            free, total = self.torch.cuda.mem_get_info()
            with self.lock:
                self.peak = max(self.peak, total - free)
            time.sleep(0.002)

    def restart(self):
        """The peak so far (now included); the next starts from now."""
        free, total = self.torch.cuda.mem_get_info()
        with self.lock:
            peak, self.peak = max(self.peak, total - free), 0
        return peak

    def stop(self):
        self.stop_flag = True
        self.thread.join()
        free, total = self.torch.cuda.mem_get_info()
        self.peak = max(self.peak, total - free)
        return self.peak


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if n else None


def alloc_free_ns(torch, n=20000):
    """ns per torch.empty + free of 4 KiB on the device (the allocator's cost per call pair as
    PyTorch pays it), after the workload."""
    torch.cuda.synchronize()
    for _ in range(1000):
        del_me = torch.empty(4096, dtype=torch.uint8, device="cuda")
        del del_me
    t0 = time.perf_counter()
    for _ in range(n):
        x = torch.empty(4096, dtype=torch.uint8, device="cuda")
        del x
    return (time.perf_counter() - t0) / n * 1e9


# ---- models -----------------------------------------------------------------------------------------


def decoder_model(torch, vocab, dim, layers, heads):
    """A pre-norm decoder (GPT-like) whose attention takes and returns a KV cache: each call
    concatenates the new keys and values to the cache, as Hugging Face's DynamicCache does."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x, cache=None):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(dim, dim=2)
            q, k, v = (z.view(b, t, heads, dim // heads).transpose(1, 2) for z in (q, k, v))
            if cache is not None:
                if cache[0] is not None:
                    k = torch.cat([cache[0], k], dim=2)
                    v = torch.cat([cache[1], v], dim=2)
                cache[0], cache[1] = k, v
            y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, dim))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(4096, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)

        def forward(self, ids, caches=None, start=0):
            pos = torch.arange(start, start + ids.shape[1], device=ids.device)
            x = self.emb(ids) + self.pos(pos)
            for i, blk in enumerate(self.blocks):
                x = blk(x, caches[i] if caches is not None else None)
            return self.head(self.ln(x))

    return Decoder()


def train_steps(torch, model, batches, opt):
    """Train on each batch in turn (bf16 autocast); the step times in seconds, and the time at
    the end of the first step."""
    times, first_end = [], None
    for batch_fn in batches:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = batch_fn(model)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if first_end is None:
            first_end = t1
            yield "first", first_end
    yield "done", times


# ---- the workloads ----------------------------------------------------------------------------------


def run_training(torch, model, batches, counters, lr=1e-4):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    out = {}
    for what, value in train_steps(torch, model, batches, opt):
        if what == "first":
            out["first_step_s"] = value - T_START
            counters.mark()
        else:
            out["step_ms"] = [t * 1e3 for t in value]
    out["per_step"] = counters.per(len(out["step_ms"]) - 1)
    out["metric"] = median(out["step_ms"][1:])
    out["metric_name"] = "step_ms"
    return out


def dyn_train(torch, counters, steps=10):
    torch.manual_seed(0)
    vocab = 32000
    model = decoder_model(torch, vocab, 1024, 12, 16).cuda()
    g = torch.Generator().manual_seed(1)
    shapes = [(int(torch.randint(4, 17, (1,), generator=g)), int(torch.randint(128, 1025, (1,), generator=g)))
              for _ in range(steps)]

    def batch(b, s):
        def fn(m):
            ids = torch.randint(0, vocab, (b, s + 1), device="cuda")
            logits = m(ids[:, :-1])
            return torch.nn.functional.cross_entropy(logits.float().view(-1, vocab), ids[:, 1:].reshape(-1))
        return fn

    return run_training(torch, model, [batch(b, s) for b, s in shapes], counters)


def vit(torch, counters, steps=8):
    torch.manual_seed(0)
    try:
        import timm

        model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=1000)
        source = "timm vit_base_patch16_224"
    except ImportError:
        import torchvision

        model = torchvision.models.vit_b_16(weights=None)
        source = "torchvision vit_b_16"
    model = model.cuda().train()
    x = torch.randn(64, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (64,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()
    out = run_training(torch, model, [lambda m: loss_fn(m(x), y)] * steps, counters)
    out["model"] = source
    return out


def moe(torch, counters, steps=10):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    dim, experts, layers = 1024, 8, 6

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(dim)
            self.router = nn.Linear(dim, experts)
            self.experts = nn.ModuleList(nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
                                         for _ in range(experts))

        def forward(self, x):
            h = self.ln(x)
            w, idx = self.router(h).softmax(-1).topk(2, dim=-1)
            out = torch.zeros_like(x)
            for e in range(experts):
                rows, slot = (idx == e).nonzero(as_tuple=True)  # a data-dependent count of tokens
                if rows.numel():
                    y = self.experts[e](h[rows]) * w[rows, slot].unsqueeze(1)
                    out.index_add_(0, rows, y.to(out.dtype))
            return x + out

    model = nn.Sequential(*[MoE() for _ in range(layers)]).cuda()
    g = torch.Generator().manual_seed(2)
    counts = [int(torch.randint(2048, 16385, (1,), generator=g)) for _ in range(steps)]

    def batch(n):
        def fn(m):
            x = torch.randn(n, dim, device="cuda")
            return m(x).float().pow(2).mean()
        return fn

    return run_training(torch, model, [batch(n) for n in counts], counters)


def serving(torch, counters):
    torch.manual_seed(0)
    vocab, new_tokens = 50257, 40
    model = decoder_model(torch, vocab, 1024, 24, 16).cuda().to(torch.bfloat16).eval()
    g = torch.Generator().manual_seed(3)
    requests = [(int(torch.randint(1, 17, (1,), generator=g)), int(torch.randint(64, 1025, (1,), generator=g)))
                for _ in range(5)]
    out, per_token_ms, prefill_ms, tokens, checksum = {}, [], [], 0, 0
    with torch.no_grad():
        for i, (b, prompt_len) in enumerate(requests):
            prompt = torch.randint(0, vocab, (b, prompt_len), device="cuda")
            caches = [[None, None] for _ in model.blocks]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            nxt = model(prompt, caches).argmax(-1)[:, -1:]
            nxt.tolist()  # the first token goes to the client
            t1 = time.perf_counter()
            prefill_ms.append((t1 - t0) * 1e3)
            for t in range(new_tokens - 1):
                nxt = model(nxt, caches, start=prompt_len + t).argmax(-1)
                checksum += sum(x[0] for x in nxt.tolist())  # streamed to the client: a host read per step
            t2 = time.perf_counter()
            per_token_ms.append((t2 - t1) / (new_tokens - 1) * 1e3)
            tokens += new_tokens - 1
            if i == 0:
                out["first_step_s"] = t1 - T_START
                counters.mark()
                tokens = 0
            del caches
    out["ms_per_token"] = per_token_ms
    out["prefill_ms"] = prefill_ms
    return served(out, requests, checksum, counters.per(tokens), per_token_ms)


def served(out, requests, checksum, per_step, per_token_ms):
    """A serving workload's result: its requests, the checksum of the tokens it streamed, crmm's
    counters per token, and the median ms per token after the first step."""
    out.update(requests=requests, checksum=checksum, per_step=per_step, metric=median(per_token_ms[1:]),
               metric_name="ms_per_token")
    return out


def serving_mixed(torch, counters):
    torch.manual_seed(0)
    vocab = 50257
    model = decoder_model(torch, vocab, 1024, 12, 16).cuda().to(torch.bfloat16).eval()
    g = torch.Generator().manual_seed(5)

    def draw(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    pending = [(draw(1, 8), draw(32, 768), draw(16, 96)) for _ in range(48)]
    requests = list(pending)
    active, out, tokens, checksum, step_ms = [], {}, 0, 0, []
    with torch.no_grad():
        first = True
        while pending or active:
            while pending and len(active) < 6:  # admit: prefill a new request
                b, prompt_len, answer = pending.pop(0)
                caches = [[None, None] for _ in model.blocks]
                nxt = model(torch.randint(0, vocab, (b, prompt_len), device="cuda"), caches).argmax(-1)[:, -1:]
                active.append({"caches": caches, "next": nxt, "pos": prompt_len, "left": answer})
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for r in active:  # one decode step of every active request
                r["next"] = model(r["next"], r["caches"], start=r["pos"]).argmax(-1)
                checksum += sum(x[0] for x in r["next"].tolist())
                r["pos"] += 1
                r["left"] -= 1
                tokens += 1
            step_ms.append((time.perf_counter() - t0) * 1e3 / len(active))
            active = [r for r in active if r["left"] > 0]  # finished requests drop their caches
            if first:
                out["first_step_s"] = time.perf_counter() - T_START
                counters.mark()
                tokens, first = 0, False
    return served(out, requests, checksum, counters.per(tokens), step_ms)


WORKLOADS = {"dyn_train": dyn_train, "serving": serving, "serving_mixed": serving_mixed, "vit": vit, "moe": moe}
STEPPED = ("dyn_train", "moe", "vit")  # the training workloads, which take --steps


def run(a):
    crmm_mode = a.mode.startswith("crmm")
    if crmm_mode:
        use_crmm(a.record, a.mode, a.plan)
    import torch

    torch.cuda.init()
    torch.backends.cuda.matmul.allow_tf32 = True
    sampler = PeakSampler(torch)
    steps = {"steps": a.steps} if a.steps else {}
    job_peaks = []
    for job in range(a.jobs):
        out = WORKLOADS[a.workload](torch, CrmmCounters(crmm_mode), **steps)
        torch.cuda.synchronize()
        if job + 1 < a.jobs:  # the job's peak; the sampler starts over for the next
            job_peaks.append(sampler.restart() / MiB)
    peak = sampler.stop()
    job_peaks.append(peak / MiB)
    peak = max(job_peaks) * MiB
    name = "%s_%dsteps" % (a.workload, a.steps) if a.steps else a.workload
    out.update(workload=name, mode=a.mode, run=a.run, peak_MiB=peak / MiB, at_start_MiB=sampler.at_start / MiB,
               torch=torch.__version__)
    if a.jobs > 1:
        out.update(jobs=a.jobs, job_peak_MiB=job_peaks)
    if crmm_mode:
        import crmm.allocators.torch as ct

        s = ct.memory_stats()
        out["thread_caches"] = s.get("crmm.thread_caches")
        if a.plan:  # how much of the run followed the plan
            out["plan_hits"], out["plan_misses"] = s.get("crmm.plan_hits"), s.get("crmm.plan_misses")
    else:
        s = torch.cuda.memory_stats()
    # what the allocator held at most, and what the process's peak holds beyond it and the start
    out["reserved_peak_MiB"] = s.get("reserved_bytes.all.peak", 0) / MiB
    out["allocated_peak_MiB"] = s.get("allocated_bytes.all.peak", 0) / MiB
    out["outside_MiB"] = out["peak_MiB"] - out["at_start_MiB"] - out["reserved_peak_MiB"]
    # a recording holds the workload alone: its log's end is then a step, which `crmm plan` loops on
    out["alloc_free_ns"] = None if a.record else alloc_free_ns(torch)
    print(json.dumps(out), flush=True)


# ---- the table ----------------------------------------------------------------------------------------


def table(path):
    runs, workloads = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                runs.setdefault((r["workload"], r["mode"]), []).append(r)
                if r["workload"] not in workloads:
                    workloads.append(r["workload"])
    modes = ["native", "expandable", "crmm", "crmm_plan", "crmm_idle", "crmm_never", "crmm_budget", "crmm_chunked"]
    modes += sorted({m for _, m in runs} - set(modes))  # the other diagnosis modes run, after those
    print("| workload | mode | runs | peak MiB median (min-max) | vs native | vs expandable | metric median (min-max) "
          "| first step s | reserved / allocated peak MiB | outside MiB | alloc+free ns | crmm per step/token |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w in workloads:
        med = {m: median([r["peak_MiB"] for r in runs.get((w, m), [])]) for m in modes}
        for m in modes:
            rs = runs.get((w, m))
            if not rs:
                continue
            peaks = [r["peak_MiB"] for r in rs]
            metric = [r["metric"] for r in rs if r.get("metric") is not None]
            first = median([r["first_step_s"] for r in rs])
            ns = median([r["alloc_free_ns"] for r in rs])
            ratio = lambda base: "%.3f" % (med[m] / med[base]) if med.get(base) else "-"
            per = rs[-1].get("per_step")
            per_text = ("syncs %.2f, unmaps %.2f, releases %.2f, creates %.2f, allocs %.0f" %
                        (per["device_syncs"], per["pages_unmapped"], per["pages_released"], per["pages_created"],
                         per["allocations"])) if per else ""
            name = rs[0].get("metric_name", "")
            reserved = median([r.get("reserved_peak_MiB", 0) for r in rs])
            allocated = median([r.get("allocated_peak_MiB", 0) for r in rs])
            outside = median([r.get("outside_MiB", 0) for r in rs])
            if rs[-1].get("thread_caches"):
                per_text += ", thread caches on"
            print("| %s | %s | %d | %.0f (%.0f-%.0f) | %s | %s | %s %.2f (%.2f-%.2f) | %.1f | %.0f / %.0f | %.0f | %.0f | %s |"
                  % (w, m, len(rs), median(peaks), min(peaks), max(peaks), ratio("native"), ratio("expandable"), name,
                     median(metric) if metric else 0, min(metric) if metric else 0, max(metric) if metric else 0,
                     first, reserved, allocated, outside, ns, per_text))


if __name__ == "__main__":
    ARGS = parse_args()
    if ARGS.mode == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    elif ARGS.mode:
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if ARGS.table:
        table(ARGS.table)
    else:
        try:
            run(ARGS)
        except Exception as e:  # one line the table skips, and the reason on stderr
            print("torch_workloads: %s/%s failed: %r" % (ARGS.workload, ARGS.mode, e), file=sys.stderr)
            raise
