/* serving_trace.c — see serving_trace.h. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include "fakes/fake_vmm.h"
#include "serving_trace.h"

#define STREAM ((crmm_cuda_stream_t)(uintptr_t)0x1000)

serving_config serving_config_default(unsigned requests, unsigned seed)
{
    return (serving_config){.layers = 24, .hidden = 1024, .heads = 16, .vocab = 50257, .requests = requests,
                            .warmup = 8, .max_batch = 8, .min_prompt = 16, .max_prompt = 512, .new_tokens = 32,
                            .seed = seed};
}

typedef struct run {
    crmm_resource *mr;
    crmm_status st;
    uint64_t live;
    serving_totals *t;
} run;

typedef struct buf { void *p; size_t n; } buf;

static buf take(run *r, size_t n)
{
    buf b = {NULL, n};
    if (r->st != CRMM_OK)
        return b;
    r->st = crmm_resource_allocate(r->mr, n, STREAM, &b.p);
    if (r->st == CRMM_OK) {
        r->live += n;
        if (r->live > r->t->live_peak)
            r->t->live_peak = r->live;
        uint64_t reserved = 0;
        crmm_resource_query(r->mr, CRMM_QUERY_BYTES_RESERVED, &reserved);
        if (reserved > r->t->reserved_peak)
            r->t->reserved_peak = reserved;
    }
    return b;
}

static void give(run *r, buf *b)
{
    if (!b->p)
        return;
    crmm_resource_deallocate(r->mr, b->p, b->n, STREAM);
    r->live -= b->n;
    b->p = NULL;
}

static void snapshot(serving_counts *c)
{
    *c = (serving_counts){fake_vmm.device_syncs, fake_vmm.maps, fake_vmm.unmaps, fake_vmm.creates, fake_vmm.releases,
                          fake_vmm.set_access};
}

static void add_since(serving_counts *sum, const serving_counts *before)
{
    serving_counts now;
    snapshot(&now);
    sum->syncs += now.syncs - before->syncs;
    sum->maps += now.maps - before->maps;
    sum->unmaps += now.unmaps - before->unmaps;
    sum->creates += now.creates - before->creates;
    sum->releases += now.releases - before->releases;
    sum->set_access += now.set_access - before->set_access;
}

/* One forward pass over `tokens` new tokens of a batch of b whose caches hold `len` tokens after
 * it; k and v: the layers' caches, replaced by ones `len` long. */
static void forward(run *r, const serving_config *c, size_t b, size_t tokens, size_t len, buf *k, buf *v)
{
    size_t h = c->hidden, row = b * tokens * h * 2;
    buf x = take(r, row);
    for (unsigned l = 0; l < c->layers; l++) {
        buf ln = take(r, row), qkv = take(r, 3 * row);
        give(r, &ln);
        buf nk = take(r, b * len * h * 2); /* torch.cat(past, new) */
        give(r, &k[l]);
        k[l] = nk;
        buf nv = take(r, b * len * h * 2);
        give(r, &v[l]);
        v[l] = nv;
        buf scores = take(r, b * c->heads * tokens * len * 2), probs = take(r, b * c->heads * tokens * len * 2);
        give(r, &scores);
        buf ctx = take(r, row);
        give(r, &probs);
        give(r, &qkv);
        buf proj = take(r, row);
        give(r, &ctx);
        buf x1 = take(r, row);
        give(r, &proj);
        give(r, &x);
        buf up = take(r, 4 * row), act = take(r, 4 * row);
        give(r, &up);
        buf down = take(r, row);
        give(r, &act);
        buf x2 = take(r, row);
        give(r, &down);
        give(r, &x1);
        x = x2;
    }
    buf logits = take(r, b * c->vocab * 4), next = take(r, b * 8);
    give(r, &logits);
    give(r, &next);
    give(r, &x);
}

crmm_status serving_trace_run(crmm_resource *mr, const serving_config *c, serving_totals *out)
{
    memset(out, 0, sizeof *out);
    run r = {.mr = mr, .st = CRMM_OK, .t = out};
    buf *k = calloc(c->layers, sizeof *k), *v = calloc(c->layers, sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "serving trace: malloc failed");
    }
    serving_counts start;
    snapshot(&start);
    uint64_t rng = c->seed * 0x9E3779B97F4A7C15ull + 1;
    /* the weights: 12 hidden^2 per layer, embeddings, in bf16 */
    buf w[2] = {take(&r, (size_t)c->layers * 12 * c->hidden * c->hidden * 2), take(&r, (size_t)c->vocab * c->hidden * 2)};
    for (unsigned q = 0; q < c->requests && r.st == CRMM_OK; q++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t b = 1 + (rng >> 33) % c->max_batch;
        size_t prompt = c->min_prompt + (rng >> 17) % (c->max_prompt - c->min_prompt + 1);
        serving_counts before;
        snapshot(&before);
        buf ids = take(&r, b * prompt * 8);
        forward(&r, c, b, prompt, prompt, k, v);
        if (q >= c->warmup)
            add_since(&out->prefill, &before);
        for (unsigned t = 1; t <= c->new_tokens && r.st == CRMM_OK; t++) {
            snapshot(&before);
            buf longer = take(&r, b * (prompt + t) * 8); /* the ids grow by one column */
            give(&r, &ids);
            ids = longer;
            forward(&r, c, b, 1, prompt + t, k, v);
            out->tokens++;
            if (q >= c->warmup) {
                add_since(&out->steady, &before);
                out->steady_tokens++;
            }
        }
        give(&r, &ids);
        for (unsigned l = 0; l < c->layers; l++) {
            give(&r, &k[l]);
            give(&r, &v[l]);
        }
    } /* each request frees its caches, a failed one too: none is left here */
    give(&r, &w[0]);
    give(&r, &w[1]);
    add_since(&out->all, &start);
    free(k), free(v);
    return r.st;
}
