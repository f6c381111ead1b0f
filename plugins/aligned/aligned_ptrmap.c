/* aligned_ptrmap.c — pointer → pointer map: 16 shards of open addressing with linear probing.
 *
 * Keys are 256-byte aligned pointers, hashed by multiplying away the low bits; the top hash
 * bits pick the shard, the rest the slot. A shard doubles when half full; removal shifts the
 * following entries of the probe run back (no tombstones), so lookups stay short under churn.
 * See aligned_ptrmap.h. */
#include "config.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "aligned_ptrmap.h"

#define SHARD_BITS 4
#define SHARDS (1u << SHARD_BITS)

typedef struct slot { void *key, *value; } slot;

typedef struct shard {
    pthread_mutex_t lock;
    slot *slots;   /* capacity entries; key NULL = empty */
    size_t capacity, count;
} shard;

struct aligned_ptrmap { shard shards[SHARDS]; };

static uint64_t hash_of(const void *p) { return ((uint64_t)(uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull; }
static shard *shard_of(aligned_ptrmap *m, const void *p) { return &m->shards[hash_of(p) >> (64 - SHARD_BITS)]; }
static size_t home_of(const shard *s, const void *p) { return (size_t)hash_of(p) & (s->capacity - 1); }

aligned_ptrmap *aligned_ptrmap_new(void)
{
    aligned_ptrmap *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    for (unsigned i = 0; i < SHARDS; i++)
        pthread_mutex_init(&m->shards[i].lock, NULL);
    return m;
}

static void put(shard *s, void *key, void *value)
{
    size_t i = home_of(s, key);
    while (s->slots[i].key)
        i = (i + 1) & (s->capacity - 1);
    s->slots[i] = (slot){key, value};
    s->count++;
}

static bool grow(shard *s)
{
    size_t cap = s->capacity ? s->capacity * 2 : 64;
    slot *old = s->slots;
    size_t old_cap = s->capacity;
    s->slots = calloc(cap, sizeof *s->slots);
    if (!s->slots) {
        s->slots = old;
        return false;
    }
    s->capacity = cap;
    s->count = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key)
            put(s, old[i].key, old[i].value);
    free(old);
    return true;
}

crmm_status aligned_ptrmap_insert(aligned_ptrmap *m, void *key, void *value)
{
    shard *s = shard_of(m, key);
    pthread_mutex_lock(&s->lock);
    if ((s->count + 1) * 2 > s->capacity && !grow(s)) {
        pthread_mutex_unlock(&s->lock);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "aligned: cannot grow the pointer map");
    }
    put(s, key, value);
    pthread_mutex_unlock(&s->lock);
    return CRMM_OK;
}

bool aligned_ptrmap_remove(aligned_ptrmap *m, void *key, void **value)
{
    shard *s = shard_of(m, key);
    pthread_mutex_lock(&s->lock);
    if (!s->capacity) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    size_t mask = s->capacity - 1, i = home_of(s, key);
    while (s->slots[i].key && s->slots[i].key != key)
        i = (i + 1) & mask;
    if (!s->slots[i].key) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    *value = s->slots[i].value;
    /* shift later members of the probe run back into the hole */
    for (size_t j = (i + 1) & mask; s->slots[j].key; j = (j + 1) & mask) {
        size_t h = home_of(s, s->slots[j].key);
        bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i] = (slot){NULL, NULL};
    s->count--;
    pthread_mutex_unlock(&s->lock);
    return true;
}

size_t aligned_ptrmap_count(aligned_ptrmap *m)
{
    size_t n = 0;
    for (unsigned i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&m->shards[i].lock);
        n += m->shards[i].count;
        pthread_mutex_unlock(&m->shards[i].lock);
    }
    return n;
}

void aligned_ptrmap_free(aligned_ptrmap *m)
{
    if (!m)
        return;
    for (unsigned i = 0; i < SHARDS; i++) {
        free(m->shards[i].slots);
        pthread_mutex_destroy(&m->shards[i].lock);
    }
    free(m);
}
