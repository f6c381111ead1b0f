/* check_ptr_map.c — the address-keyed hash map (support/ptr_map.h): every key found while the
 * array grows and shrinks, removal that never hides another key (clustered and 1 MiB-aligned keys
 * in random order, against a plain array), iteration that visits each entry once, a failing malloc
 * that leaves the map whole, sharded keys that spread over their slots, and threads sharing a
 * sharded map. This program defines calloc (to fail on demand): not under sanitizers. */
#include "build_config.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "ptr_map.h"
#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REPLACES_CALLOC 0
#else
#define REPLACES_CALLOC 1
#endif

#if REPLACES_CALLOC
extern void *__libc_calloc(size_t n, size_t size);
static bool calloc_fails; /* set around one call in the test that wants it */

void *calloc(size_t n, size_t size)
{
    if (calloc_fails)
        return NULL;
    return __libc_calloc(n, size);
}
#endif

/* An entry larger than a pair: its fields must move with its key. */
typedef struct record {
    uintptr_t key;
    uint64_t a, b;
    void *c;
} record;

static void fill(record *r)
{
    r->a = r->key * 3;
    r->b = ~r->key;
    r->c = (void *)(r->key + 1);
}

static void check_record(const ptr_map *m, uintptr_t key)
{
    const record *r = ptr_map_find(m, key);
    ck_assert_msg(r != NULL, "key %#lx lost", (unsigned long)key);
    ck_assert_uint_eq(r->key, key);
    ck_assert_uint_eq(r->a, key * 3);
    ck_assert_uint_eq(r->b, ~key);
    ck_assert_ptr_eq(r->c, (void *)(key + 1));
}

static size_t capacity(const ptr_map *m) { return m->slots ? m->mask + 1 : 0; }

CRMM_TEST_IN("ptr_map", every_key_is_found_while_the_map_grows)
{
    ptr_map m;
    ptr_map_init(&m, sizeof(record));
    ck_assert_ptr_null(ptr_map_find(&m, 256));
    const uintptr_t n = 20000;
    for (uintptr_t i = 1; i <= n; i++) {
        record *r = ptr_map_insert(&m, i * 256);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->a, 0); /* a new entry is zero but for its key */
        fill(r);
        ck_assert_uint_eq(m.count, i);
        ck_assert_uint_le(m.count * 2, capacity(&m));
        if (i % 997 == 0)
            for (uintptr_t k = 1; k <= i; k++)
                check_record(&m, k * 256);
    }
    for (uintptr_t k = 1; k <= n; k++)
        check_record(&m, k * 256);
    ck_assert_ptr_null(ptr_map_find(&m, (n + 1) * 256));
    ck_assert_ptr_null(ptr_map_find(&m, 128));
    ptr_map_destroy(&m);
}

CRMM_TEST_IN("ptr_map", inserting_a_present_key_returns_its_entry_unchanged)
{
    ptr_map m;
    ptr_map_init(&m, sizeof(ptr_map_pair));
    ptr_map_pair *e = ptr_map_insert(&m, 0x1000);
    e->value = 42;
    ptr_map_pair *again = ptr_map_insert(&m, 0x1000);
    ck_assert_ptr_eq(again, e);
    ck_assert_uint_eq(again->value, 42);
    ck_assert_uint_eq(m.count, 1);
    ptr_map_destroy(&m);
}

CRMM_TEST_IN("ptr_map", remove_copies_the_entry_and_refuses_an_absent_key)
{
    ptr_map m;
    ptr_map_init(&m, sizeof(ptr_map_pair));
    ck_assert(!ptr_map_remove(&m, 0x1000, NULL)); /* empty map */
    ((ptr_map_pair *)ptr_map_insert(&m, 0x1000))->value = 7;
    ck_assert(!ptr_map_remove(&m, 0x2000, NULL));
    ck_assert(!ptr_map_remove(&m, 0, NULL)); /* a NULL pointer is never in the map */
    ck_assert_ptr_null(ptr_map_find(&m, 0));
    ptr_map_pair out = {0, 0};
    ck_assert(ptr_map_remove(&m, 0x1000, &out));
    ck_assert_uint_eq(out.key, 0x1000);
    ck_assert_uint_eq(out.value, 7);
    ck_assert(!ptr_map_remove(&m, 0x1000, NULL)); /* a second removal */
    ck_assert_uint_eq(m.count, 0);
    ptr_map_destroy(&m);
}

/* Random inserts and removals over `universe` keys key_of(0..universe-1), checked against a
 * plain array after each step and in full now and then. */
static void churn(uintptr_t (*key_of)(size_t), size_t universe, size_t steps)
{
    bool *present = calloc(universe, sizeof *present);
    ck_assert_ptr_nonnull(present);
    ptr_map m;
    ptr_map_init(&m, sizeof(record));
    uint64_t rng = 88172645463325252ull;
    size_t live = 0;
    for (size_t step = 0; step < steps; step++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        size_t i = (size_t)(rng % universe);
        uintptr_t key = key_of(i);
        /* insert more than remove for the first half, the opposite after: the map grows, then
         * shrinks */
        bool want_in = (rng >> 40) % 4 != 0 ? step < steps / 2 : step >= steps / 2;
        if (want_in && !present[i]) {
            fill(ptr_map_insert(&m, key));
            present[i] = true;
            live++;
        } else if (!want_in && present[i]) {
            record out;
            ck_assert(ptr_map_remove(&m, key, &out));
            ck_assert_uint_eq(out.a, key * 3);
            present[i] = false;
            live--;
        }
        ck_assert_uint_eq(m.count, live);
        if (present[i])
            check_record(&m, key);
        else
            ck_assert_ptr_null(ptr_map_find(&m, key));
        if (step % 4099 == 0)
            for (size_t k = 0; k < universe; k++) {
                if (present[k])
                    check_record(&m, key_of(k));
                else
                    ck_assert_ptr_null(ptr_map_find(&m, key_of(k)));
            }
    }
    /* empty it: the array shrinks back */
    for (size_t k = 0; k < universe; k++)
        if (present[k])
            ck_assert(ptr_map_remove(&m, key_of(k), NULL));
    ck_assert_uint_eq(m.count, 0);
    ck_assert_uint_le(capacity(&m), 64);
    ptr_map_destroy(&m);
    free(present);
}

static uintptr_t clustered(size_t i) { return 0x7f0000000000u + (uintptr_t)(i + 1) * 256; }
static uintptr_t mebibyte_aligned(size_t i) { return (uintptr_t)(i + 1) << 20; }

CRMM_TEST_IN("ptr_map", removal_never_hides_a_key_of_clustered_addresses)
{
    churn(clustered, 8192, 200000);
}

CRMM_TEST_IN("ptr_map", removal_never_hides_a_key_of_1mib_aligned_addresses)
{
    churn(mebibyte_aligned, 8192, 200000);
}

CRMM_TEST_IN("ptr_map", the_array_grows_and_shrinks_with_the_count)
{
    ptr_map m;
    ptr_map_init(&m, sizeof(ptr_map_pair));
    for (uintptr_t i = 1; i <= 10000; i++)
        ck_assert_ptr_nonnull(ptr_map_insert(&m, i * 256));
    ck_assert_uint_ge(capacity(&m), 20000);
    for (uintptr_t i = 1; i <= 9990; i++)
        ck_assert(ptr_map_remove(&m, i * 256, NULL));
    ck_assert_uint_le(capacity(&m), 128); /* ten entries left */
    for (uintptr_t i = 9991; i <= 10000; i++)
        ck_assert_ptr_nonnull(ptr_map_find(&m, i * 256));
    ptr_map_destroy(&m);
}

CRMM_TEST_IN("ptr_map", iteration_visits_each_entry_once)
{
    ptr_map m;
    ptr_map_init(&m, sizeof(ptr_map_pair));
    size_t cursor = 0;
    ck_assert_ptr_null(ptr_map_next(&m, &cursor)); /* empty map */
    enum { N = 3000 };
    static unsigned seen[N + 1];
    for (uintptr_t i = 1; i <= N; i++)
        ((ptr_map_pair *)ptr_map_insert(&m, i * 4096))->value = i;
    for (uintptr_t i = 1; i <= N; i += 3) /* removals shift entries: still each once */
        ck_assert(ptr_map_remove(&m, i * 4096, NULL));
    size_t visited = 0;
    cursor = 0;
    for (ptr_map_pair *e; (e = ptr_map_next(&m, &cursor));) {
        ck_assert_uint_eq(e->key, e->value * 4096);
        seen[e->value]++;
        visited++;
    }
    ck_assert_uint_eq(visited, m.count);
    for (uintptr_t i = 1; i <= N; i++)
        ck_assert_uint_eq(seen[i], (i - 1) % 3 == 0 ? 0 : 1);
    ck_assert_ptr_null(ptr_map_next(&m, &cursor)); /* stays at the end */
    ptr_map_destroy(&m);
}

#if REPLACES_CALLOC
CRMM_TEST_IN("ptr_map", a_failing_malloc_leaves_the_map_intact)
{
    ptr_map m;
    ptr_map_init(&m, sizeof(record));
    calloc_fails = true;
    ck_assert_ptr_null(ptr_map_insert(&m, 256)); /* the first array */
    calloc_fails = false;
    ck_assert_uint_eq(m.count, 0);
    ck_assert_ptr_null(ptr_map_find(&m, 256));
    /* fill to the point where the next insert must grow the array */
    uintptr_t n = 1;
    fill(ptr_map_insert(&m, n * 256));
    while ((m.count + 1) * 2 <= capacity(&m))
        fill(ptr_map_insert(&m, ++n * 256));
    size_t before = capacity(&m);
    calloc_fails = true;
    ck_assert_ptr_null(ptr_map_insert(&m, (n + 1) * 256));
    calloc_fails = false;
    ck_assert_uint_eq(capacity(&m), before);
    ck_assert_uint_eq(m.count, n);
    ck_assert_ptr_null(ptr_map_find(&m, (n + 1) * 256));
    for (uintptr_t k = 1; k <= n; k++)
        check_record(&m, k * 256);
    /* with memory again the same insert works */
    fill(ptr_map_insert(&m, (n + 1) * 256));
    check_record(&m, (n + 1) * 256);
    /* a removal that would shrink the array still removes when malloc fails */
    for (uintptr_t k = n + 2; k <= 2000; k++)
        fill(ptr_map_insert(&m, k * 256));
    calloc_fails = true;
    for (uintptr_t k = 1; k <= 1990; k++)
        ck_assert(ptr_map_remove(&m, k * 256, NULL));
    calloc_fails = false;
    ck_assert_uint_eq(m.count, 10);
    for (uintptr_t k = 1991; k <= 2000; k++)
        check_record(&m, k * 256);
    for (uintptr_t k = 1; k <= 1990; k++)
        ck_assert_ptr_null(ptr_map_find(&m, k * 256));
    ptr_map_destroy(&m);
}
#endif

/* Keys 256 bytes apart, and 1 MiB apart (the aligned plugin's large alignments). */
static const uintptr_t strides[] = {256, (uintptr_t)1 << 20};

CRMM_LOOP_TEST_IN("ptr_map", each_shard_spreads_its_keys_over_its_slots, 2)
{
    const uintptr_t stride = strides[_i];
    sharded_ptr_map s;
    ck_assert(sharded_ptr_map_init(&s, 4, sizeof(ptr_map_pair)));
    enum { N = 16384 };
    for (uintptr_t i = 1; i <= N; i++) {
        ptr_map_shard *sh = sharded_ptr_map_shard(&s, i * stride);
        ck_assert_ptr_eq(sh, sharded_ptr_map_shard(&s, i * stride)); /* the same shard every time */
        ((ptr_map_pair *)ptr_map_insert(&sh->map, i * stride))->value = i;
    }
    ck_assert_uint_eq(sharded_ptr_map_count(&s), N);
    for (unsigned k = 0; k < 16; k++) {
        const ptr_map *m = &s.shards[k].map;
        /* every shard has a fair share of the keys */
        ck_assert_uint_ge(m->count, N / 16 / 2);
        /* and they start from many home slots: were the shard chosen by the bits that choose
         * the slot, they would all share 1/16 of them */
        size_t homes = 0, cursor = 0;
        unsigned char *used = calloc(m->mask + 1, 1);
        ck_assert_ptr_nonnull(used);
        for (const ptr_map_pair *e; (e = ptr_map_next(m, &cursor));) {
            size_t h = ptr_map_home(m, e->key);
            homes += !used[h];
            used[h] = 1;
        }
        free(used);
        ck_assert_uint_ge(homes, (m->mask + 1) / 8);
    }
    for (uintptr_t i = 1; i <= N; i++) {
        ptr_map_pair *e = ptr_map_find(&sharded_ptr_map_shard(&s, i * stride)->map, i * stride);
        ck_assert_ptr_nonnull(e);
        ck_assert_uint_eq(e->value, i);
    }
    sharded_ptr_map_destroy(&s);
    sharded_ptr_map_destroy(&s); /* a second destroy does nothing */
}

/* Threads putting and taking their own keys in one sharded map, each shard under its lock. */
typedef struct sharer {
    sharded_ptr_map *map;
    uintptr_t first;  /* this thread's keys: first + k * 256 */
    int wrong;        /* values that came back wrong */
} sharer;

static void *share(void *arg)
{
    sharer *t = arg;
    enum { KEYS = 512, ROUNDS = 200 };
    for (int round = 0; round < ROUNDS; round++) {
        for (uintptr_t k = 0; k < KEYS; k++)
            if (!sharded_ptr_map_put(t->map, t->first + k * 256, k + (uintptr_t)round))
                t->wrong++;
        for (uintptr_t k = 0; k < KEYS; k++) {
            uintptr_t v = 0;
            if (!sharded_ptr_map_take(t->map, t->first + k * 256, &v) || v != k + (uintptr_t)round)
                t->wrong++;
        }
    }
    return NULL;
}

CRMM_TEST_IN("ptr_map", threads_share_a_sharded_map)
{
    sharded_ptr_map s;
    ck_assert(sharded_ptr_map_init(&s, 4, sizeof(ptr_map_pair)));
    pthread_t th[4];
    sharer t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (sharer){&s, (uintptr_t)(i + 1) << 32, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, share, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_int_eq(t[i].wrong, 0);
    }
    ck_assert_uint_eq(sharded_ptr_map_count(&s), 0);
    uintptr_t v;
    ck_assert(!sharded_ptr_map_take(&s, (uintptr_t)1 << 32, &v)); /* taken already */
    sharded_ptr_map_destroy(&s);
}

int main(void)
{
    return crmm_test_main("ptr_map", 0);
}
