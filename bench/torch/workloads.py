"""Real PyTorch workloads whose allocations crmm is measured on (no downloads: every model is
built from its config with random weights, every input is random with a fixed seed).

Each workload is a function run(steps) that returns a dict of what it measured; the caller picks
the allocator before the first CUDA call.
"""
import time

import torch

WORKLOADS = {}


def workload(fn):
    WORKLOADS[fn.__name__] = fn
    return fn


def _train(model, batch_fn, steps, lr=1e-4, optimizer="adamw"):
    opt = (torch.optim.AdamW(model.parameters(), lr=lr) if optimizer == "adamw"
           else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9))
    times, loss = [], None
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = batch_fn(model)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return {"step_times": times, "loss": float(loss)}


@workload
def gpt2_train(steps=15, batch=16, seq=512):
    """GPT-2 small (124M) language-model training, bf16 autocast, AdamW."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda()
    model.train()
    g = torch.Generator(device="cuda").manual_seed(1)
    data = [torch.randint(0, 50257, (batch, seq), device="cuda", generator=g) for _ in range(4)]
    step = iter(range(10 ** 9))
    return _train(model, lambda m: m(input_ids=data[next(step) % 4], labels=data[0]).loss, steps)


@workload
def bert_train(steps=12, batch=32, seq=256):
    """BERT-base masked-language-model training (a transformer encoder), bf16 autocast, AdamW."""
    from transformers import BertConfig, BertForMaskedLM
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).cuda()
    model.train()
    g = torch.Generator(device="cuda").manual_seed(2)
    ids = torch.randint(0, 30522, (batch, seq), device="cuda", generator=g)
    labels = torch.where(torch.rand(batch, seq, device="cuda", generator=g) < 0.15, ids, torch.full_like(ids, -100))
    return _train(model, lambda m: m(input_ids=ids, labels=labels).loss, steps)


@workload
def resnet_train(steps=12, batch=64):
    """ResNet-50 image classification training, channels-last, bf16 autocast, SGD."""
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).cuda().to(memory_format=torch.channels_last)
    model.train()
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(batch, 3, 224, 224, device="cuda", generator=g).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda", generator=g)
    loss_fn = torch.nn.CrossEntropyLoss()
    return _train(model, lambda m: loss_fn(m(x), y), steps, lr=0.01, optimizer="sgd")


@workload
def gpt2_generate(steps=3, batch=8, new_tokens=64):
    """GPT-2 medium autoregressive generation with a growing KV cache, greedy, bf16; prompts of
    three lengths so that the cache sizes vary from one call to the next."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_embd=1024, n_layer=24, n_head=16)).cuda().to(torch.bfloat16).eval()
    g = torch.Generator(device="cuda").manual_seed(4)
    times, tokens = [], 0
    with torch.no_grad():
        for i in range(steps):
            prompt = torch.randint(0, 50257, (batch, 96 + 48 * (i % 3)), device="cuda", generator=g)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False, use_cache=True, pad_token_id=0)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            tokens += (out.shape[1] - prompt.shape[1]) * batch
    return {"step_times": times, "tokens": tokens, "tokens_per_s": tokens / sum(times),
            "checksum": int(out[:, -new_tokens:].sum())}
