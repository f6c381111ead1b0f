/* churn_support.c — the random allocating thread of churn_support.h. */
#include "build_config.h"
#include <stdio.h>
#include <string.h>
#include <crmm/crmm.h>
#include "churn_support.h"
#include "test_support.h"

static int intact(const unsigned char *b, size_t n, unsigned char tag)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != tag)
            return 0;
    return 1;
}

void *churn_thread(void *arg)
{
    churn *c = arg;
    unsigned char *live[CHURN_MAX_SLOTS] = {0}, tag[CHURN_MAX_SLOTS] = {0};
    size_t size[CHURN_MAX_SLOTS] = {0};
    for (int step = 0; step < c->steps && !c->why[0]; step++) {
        uint64_t r = crmm_test_rand(&c->seed);
        int k = (int)(r % (uint64_t)c->slots);
        if (live[k]) {
            c->overlapped += !intact(live[k], size[k], tag[k]);
            if (c->hand_over && c->hand_over(c, live[k], size[k], tag[k])) {
                live[k] = NULL;
                continue;
            }
            crmm_cuda_stream_t on = c->other && (r >> 32) % 8 == 0 ? c->other : c->own;
            if (c->freeing)
                c->freeing(c, live[k], size[k]);
            if (crmm_resource_deallocate(c->mr, live[k], size[k], on) != CRMM_OK)
                snprintf(c->why, sizeof c->why, "deallocate %zu bytes: %s", size[k], crmm_last_error());
            live[k] = NULL;
            continue;
        }
        int big = c->big_one_in && (r >> 8) % c->big_one_in == 0;
        size[k] = c->exact ? c->size : 1 + crmm_test_rand(&c->seed) % (big ? c->big_size : c->size);
        void *x = NULL;
        if (crmm_resource_allocate(c->mr, size[k], c->own, &x) != CRMM_OK || !x || (uintptr_t)x % 256) {
            snprintf(c->why, sizeof c->why, "allocate %zu bytes: %p, %s", size[k], x, crmm_last_error());
            break;
        }
        if (c->allocated)
            c->allocated(c, x, size[k]);
        live[k] = x;
        tag[k] = (unsigned char)(1 + (r >> 24) % 255);
        memset(x, tag[k], size[k]);
        c->allocations++;
    }
    for (int k = 0; k < c->slots; k++)
        if (live[k] && crmm_resource_deallocate(c->mr, live[k], size[k], c->own) != CRMM_OK && !c->why[0])
            snprintf(c->why, sizeof c->why, "deallocate at the end: %s", crmm_last_error());
    return NULL;
}

int churn_stress_steps(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 20000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    return 20000;
#endif
#endif
    return 100000;
}
