/* tracking_table.c — sharded open-addressing hash table of outstanding allocations
 * (see tracking_table.h).
 *
 * TRACKING_SHARDS shards picked by a hash of the pointer; each is a power-of-two array probed
 * linearly, kept at most half full, and compacted on removal by shifting later entries of the
 * probe run back (no tombstones), so lookups never slow down after many frees. */
#include "config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "tracking_table.h"

#define TRACKING_SHARDS 64

typedef struct tracking_shard {
    pthread_mutex_t lock;
    tracking_record *slots;
    size_t capacity;           /* power of two (0 before the first insert) */
    size_t used;
} tracking_shard;

struct tracking_table {
    tracking_shard shards[TRACKING_SHARDS];
};

static inline uint64_t hash_ptr(uintptr_t p)
{
    uint64_t x = (uint64_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 29;
    return x;
}

static inline tracking_shard *shard_of(tracking_table *t, uintptr_t p)
{
    return &t->shards[hash_ptr(p) >> 58]; /* top 6 bits: 64 shards */
}

crmm_status tracking_table_new(tracking_table **out)
{
    tracking_table *t = calloc(1, sizeof *t);
    if (!t)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "tracking: malloc failed");
    for (int i = 0; i < TRACKING_SHARDS; i++)
        pthread_mutex_init(&t->shards[i].lock, NULL);
    *out = t;
    return CRMM_OK;
}

void tracking_table_free(tracking_table *t)
{
    if (!t)
        return;
    for (int i = 0; i < TRACKING_SHARDS; i++) {
        tracking_shard *s = &t->shards[i];
        for (size_t k = 0; k < s->capacity; k++)
            free(s->slots[k].stack);
        free(s->slots);
        pthread_mutex_destroy(&s->lock);
    }
    free(t);
}

static void place(tracking_record *slots, size_t capacity, const tracking_record *rec)
{
    size_t mask = capacity - 1;
    for (size_t i = hash_ptr(rec->ptr) & mask;; i = (i + 1) & mask) {
        if (!slots[i].ptr) {
            slots[i] = *rec;
            return;
        }
    }
}

static int grow(tracking_shard *s)
{
    size_t cap = s->capacity ? s->capacity * 2 : 64;
    tracking_record *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t k = 0; k < s->capacity; k++)
        if (s->slots[k].ptr)
            place(slots, cap, &s->slots[k]);
    free(s->slots);
    s->slots = slots;
    s->capacity = cap;
    return 0;
}

crmm_status tracking_table_insert(tracking_table *t, uintptr_t ptr, size_t bytes, uint64_t serial, void **stack,
                                  int stack_depth)
{
    tracking_shard *s = shard_of(t, ptr);
    tracking_record rec = {ptr, bytes, serial, stack, stack_depth};
    pthread_mutex_lock(&s->lock);
    if ((s->used + 1) * 2 > s->capacity && grow(s) != 0) {
        pthread_mutex_unlock(&s->lock);
        free(stack);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "tracking: cannot grow the allocation table");
    }
    place(s->slots, s->capacity, &rec);
    s->used++;
    pthread_mutex_unlock(&s->lock);
    return CRMM_OK;
}

/* Remove slot i and shift the rest of its probe run back so no lookup stops early. */
static void erase_slot(tracking_shard *s, size_t i)
{
    size_t mask = s->capacity - 1;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; s->slots[j].ptr; j = (j + 1) & mask) {
        size_t home = hash_ptr(s->slots[j].ptr) & mask;
        /* move j into the hole unless its home lies cyclically in (hole, j] */
        int home_after_hole = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_after_hole) {
            s->slots[hole] = s->slots[j];
            hole = j;
        }
    }
    memset(&s->slots[hole], 0, sizeof s->slots[hole]);
    s->used--;
}

tracking_removal tracking_table_remove(tracking_table *t, uintptr_t ptr, size_t bytes, size_t *recorded)
{
    tracking_shard *s = shard_of(t, ptr);
    tracking_removal result = TRACKING_UNKNOWN;
    void *stack = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->capacity) {
        size_t mask = s->capacity - 1;
        for (size_t i = hash_ptr(ptr) & mask; s->slots[i].ptr; i = (i + 1) & mask) {
            if (s->slots[i].ptr != ptr)
                continue;
            *recorded = s->slots[i].bytes;
            if (s->slots[i].bytes != bytes) {
                result = TRACKING_WRONG_SIZE;
            } else {
                stack = s->slots[i].stack;
                erase_slot(s, i);
                result = TRACKING_REMOVED;
            }
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    free(stack);
    return result;
}

static int by_serial(const void *a, const void *b)
{
    uint64_t x = ((const tracking_record *)a)->serial, y = ((const tracking_record *)b)->serial;
    return x < y ? -1 : x > y;
}

void tracking_snapshot_free(tracking_record *records, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(records[i].stack);
    free(records);
}

crmm_status tracking_table_snapshot(tracking_table *t, tracking_record **records, size_t *count)
{
    size_t n = 0, cap = 0;
    tracking_record *out = NULL;
    for (int k = 0; k < TRACKING_SHARDS; k++) {
        tracking_shard *s = &t->shards[k];
        pthread_mutex_lock(&s->lock);
        if (n + s->used > cap) {
            size_t want = (n + s->used) * 2;
            tracking_record *grown = realloc(out, want * sizeof *grown);
            if (!grown)
                goto oom;
            out = grown;
            cap = want;
        }
        for (size_t i = 0; i < s->capacity; i++) {
            tracking_record r = s->slots[i];
            if (!r.ptr)
                continue;
            if (r.stack) {
                void **copy = malloc((size_t)r.stack_depth * sizeof *copy);
                if (!copy)
                    goto oom;
                memcpy(copy, r.stack, (size_t)r.stack_depth * sizeof *copy);
                r.stack = copy;
            }
            out[n++] = r;
        }
        pthread_mutex_unlock(&s->lock);
        continue;
    oom:
        pthread_mutex_unlock(&s->lock);
        tracking_snapshot_free(out, n);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "tracking: cannot copy the allocation table");
    }
    if (n > 1)
        qsort(out, n, sizeof *out, by_serial);
    *records = out;
    *count = n;
    return CRMM_OK;
}
