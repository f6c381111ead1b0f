/* conformance.h — one suite that every resource chain must pass (docs/contracts.md, Tests; RMM's typed tests).
 *
 * A chain is a config text and the resource in it to test. The suite checks the ABI contract:
 * size 0, 4 B .. 1 GiB, a 1 PiB request failing with CRMM_ERROR_OUT_OF_MEMORY (the resource still
 * usable after it), 256-byte alignment, distinct non-overlapping blocks, random alloc/free mixes
 * with contents checked, 4 threads at once, frees on another thread and (GPU) another stream. */
#ifndef CRMM_TESTS_CONFORMANCE_H
#define CRMM_TESTS_CONFORMANCE_H

#include <check.h>
#include <stddef.h>

typedef struct crmm_test_chain {
    const char *label;    /* names the test case, e.g. "pool_over_host" ([a-z0-9_]) */
    const char *config;   /* INI text */
    const char *resource; /* the resource of the config to test */
    int gpu;              /* 1: the chain needs a GPU (device memory, real streams) */
    size_t max_size;      /* largest size of the size sweep; 0 = 1 GiB */
} crmm_test_chain;

/* Add one test case per chain to `s`. The chains are copied; a program may call this more than once (64 chains in all). */
void crmm_conformance_add(Suite *s, const crmm_test_chain *chains, int n);

#endif
