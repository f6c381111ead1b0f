/* churn_support.h — a thread that allocates and frees at random, for the multi-threaded tests of
 * the resources. It holds up to `slots` blocks, fills each with a byte of its own and checks every
 * byte at the free, so a block handed out twice at once shows; it records what went wrong instead
 * of failing, since Check asserts only on the test's thread. Hooks see each allocation and free. */
#ifndef CRMM_TESTS_CHURN_SUPPORT_H
#define CRMM_TESTS_CHURN_SUPPORT_H

#include <stdint.h>
#include <crmm/resource.h>

enum { CHURN_MAX_SLOTS = 64 };

typedef struct churn {
    crmm_resource *mr;
    crmm_cuda_stream_t own;   /* every block is allocated on own and freed there, */
    crmm_cuda_stream_t other; /* but one free in 8 on other when it is set */
    uint64_t seed;            /* not 0 */
    int steps, slots;         /* slots: at most CHURN_MAX_SLOTS */
    size_t size;              /* a request is 1..size bytes, */
    size_t big_size;          /* 1..big_size one time in big_one_in (0: never), */
    unsigned big_one_in;
    int exact;                /* or exactly `size` bytes */
    void (*allocated)(const struct churn *c, void *x, size_t n); /* after each allocation, when set */
    void (*freeing)(const struct churn *c, void *x, size_t n);   /* before each free, when set */
    /* in place of a free, when set: 1 when it took the block (filled with `tag`) to free elsewhere */
    int (*hand_over)(struct churn *c, void *x, size_t n, unsigned char tag);
    void *user;                                                  /* for the hooks */
    /* what the thread saw */
    uint64_t allocations;
    int overlapped;           /* blocks whose bytes changed while the thread held them */
    char why[256];            /* the first call that failed, "" when none did */
} churn;

/* The steps of a stress run: 100000, or 20000 in a sanitizer build (it runs several times slower). */
int churn_stress_steps(void);

/* The thread's function; arg: a churn. Every block is freed before it returns. */
void *churn_thread(void *arg);

#endif
