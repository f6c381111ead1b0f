/* serving_trace.h — the allocations of a transformer inference server, generated: requests of
 * random batch and prompt length, a prefill, then one decode step per token with a KV cache that
 * grows by concatenation (each layer allocates its key and value caches one token longer and
 * frees the old ones, as PyTorch's torch.cat does in Hugging Face's DynamicCache), small per-token
 * temporaries, logits, and the caches freed when the request ends. Run through any resource on one
 * stream, it counts what the scripted driver of fake_vmm.h was asked per phase. */
#ifndef CRMM_TESTS_SERVING_TRACE_H
#define CRMM_TESTS_SERVING_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <crmm/resource.h>

typedef struct serving_config {
    unsigned layers, hidden, heads, vocab; /* the model (bf16 activations, fp32 logits) */
    unsigned requests, warmup;             /* requests served; the first `warmup` are warm-up */
    unsigned max_batch, min_prompt, max_prompt, new_tokens;
    unsigned seed;                         /* batch and prompt length are drawn from it */
} serving_config;

/* What the driver was asked during a stretch of the trace (fake_vmm's counters). */
typedef struct serving_counts { int syncs, maps, unmaps, creates, releases, set_access; } serving_counts;

typedef struct serving_totals {
    serving_counts all;            /* the whole run */
    serving_counts steady;         /* decode steps of the requests after the warm-up */
    serving_counts prefill;        /* prefills (and the caches' release) of the requests after the warm-up */
    unsigned tokens, steady_tokens;
    uint64_t reserved_peak, live_peak; /* bytes: the resource's BYTES_RESERVED, and requested bytes live */
} serving_totals;

/* A GPT-2-medium-shaped model (24 layers, 1024 wide, 16 heads), batches of 1..8, prompts of
 * 16..512 tokens, 32 new tokens each, the first 8 requests as warm-up. */
serving_config serving_config_default(unsigned requests, unsigned seed);

/* Serve cfg's requests through mr on one stream, freeing everything at the end. Errors: the
 * resource's (an allocation failed; what was live is freed). */
crmm_status serving_trace_run(crmm_resource *mr, const serving_config *cfg, serving_totals *out);

#endif
