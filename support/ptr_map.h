/* ptr_map.h — a hash map keyed by address, for the plugins that find a block's record by the
 * pointer they handed out (aligned, host, tracking, fixed_size).
 *
 * Open addressing with linear probing in a power-of-two array of entries. Each entry is the
 * caller's own struct whose first member is the key (`uintptr_t key`, 0 = empty slot), so a
 * record (size, serial, stack, ...) sits in the slot itself and costs no allocation of its own.
 * The slot of a key is the top bits of key * 2^64/phi (Fibonacci hashing: every key bit counts,
 * so keys aligned to 256 bytes or to 1 MiB spread alike). The array doubles when it would be
 * more than half full and halves when a removal leaves it under an eighth full; removal shifts
 * the later entries of the probe run back (no tombstones), so lookups stay short under any
 * churn. Insert, remove and find are O(1) on average.
 *
 * The map does no locking: its user holds whatever lock guards it. sharded_ptr_map splits the
 * keys over 2^bits maps, each under its own mutex, for tables that threads share. */
#ifndef CRMM_SUPPORT_PTR_MAP_H
#define CRMM_SUPPORT_PTR_MAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/fork_guard.h>

typedef struct ptr_map {
    unsigned char *slots; /* capacity entries of entry_size bytes; NULL while capacity is 0 */
    size_t entry_size;    /* the caller's entry struct, key first */
    size_t mask;          /* capacity - 1 (0 while empty) */
    unsigned shift;       /* 64 - log2(capacity) */
    size_t count;
} ptr_map;

/* The entry of a map of pointer-sized values (aligned pointer -> upstream pointer, block ->
 * size). */
typedef struct ptr_map_pair {
    uintptr_t key;
    uintptr_t value;
} ptr_map_pair;

/* An empty map of entries of entry_size bytes (at least sizeof(uintptr_t), the key first). It
 * allocates nothing until the first insert. */
void ptr_map_init(ptr_map *m, size_t entry_size);
/* Free the array (the entries' contents are the caller's to release first). */
void ptr_map_destroy(ptr_map *m);

static inline size_t ptr_map_home(const ptr_map *m, uintptr_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> m->shift);
}

static inline void *ptr_map_slot(const ptr_map *m, size_t i) { return m->slots + i * m->entry_size; }

/* The entry of `key`, or NULL when it is not in the map (key 0 never is). The pointer is valid
 * until the next insert or remove. */
static inline void *ptr_map_find(const ptr_map *m, uintptr_t key)
{
    if (!m->slots)
        return NULL;
    for (size_t i = ptr_map_home(m, key);; i = (i + 1) & m->mask) {
        uintptr_t *k = ptr_map_slot(m, i);
        if (!*k)
            return NULL;
        if (*k == key)
            return k;
    }
}

/* The entry for `key` (non-zero): a new one, zero but for its key, or the one already there
 * (unchanged). NULL when the array must grow and malloc fails: the map is as it was. The
 * pointer is valid until the next insert or remove (an insert may move every entry). */
void *ptr_map_insert(ptr_map *m, uintptr_t key);
/* Remove the entry `entry` (from ptr_map_find or ptr_map_insert). */
void ptr_map_erase(ptr_map *m, void *entry);
/* Remove `key`'s entry, copying it to `removed` first when that is not NULL. False when the key
 * is not in the map. */
bool ptr_map_remove(ptr_map *m, uintptr_t key, void *removed);

/* The entries one by one, in no order: start with *cursor = 0; NULL after the last. Any insert
 * or remove ends the walk. */
void *ptr_map_next(const ptr_map *m, size_t *cursor);

/* One shard: a map and the mutex that guards it, on its own cache lines. */
typedef struct ptr_map_shard {
    _Alignas(64) pthread_mutex_t lock;
    ptr_map map;
} ptr_map_shard;

typedef struct sharded_ptr_map {
    ptr_map_shard *shards; /* 2^bits */
    unsigned bits;
} sharded_ptr_map;

/* 2^bits empty shards (bits <= 8) of entries of entry_size bytes. False when malloc fails. */
bool sharded_ptr_map_init(sharded_ptr_map *s, unsigned bits, size_t entry_size);
/* Free every shard's array and the shards (entries' contents are the caller's). */
void sharded_ptr_map_destroy(sharded_ptr_map *s);
/* The shard that holds `key`, not locked. It is picked by other bits of the key than the slot
 * inside the shard, so each shard's keys still spread over all its slots. */
static inline ptr_map_shard *sharded_ptr_map_shard(const sharded_ptr_map *s, uintptr_t key)
{
    uint64_t x = (uint64_t)key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    return &s->shards[x & ((1u << s->bits) - 1)];
}
/* Entries in all shards (each locked in turn). */
size_t sharded_ptr_map_count(sharded_ptr_map *s);

/* For shards of ptr_map_pair entries, each under its shard's lock: remember key -> value (a
 * present key takes the new value); false when malloc fails (the map is as it was). */
bool sharded_ptr_map_put(sharded_ptr_map *s, uintptr_t key, uintptr_t value);
/* Forget key, its value into *value; false when it is not there. */
bool sharded_ptr_map_take(sharded_ptr_map *s, uintptr_t key, uintptr_t *value);
/* Whether key is there (any shard entry size). */
bool sharded_ptr_map_contains(sharded_ptr_map *s, uintptr_t key);

/* Take every shard's lock, in shard order (a shard's lock is never held while another is
 * taken), and release them all. */
void sharded_ptr_map_lock_all(sharded_ptr_map *s);
void sharded_ptr_map_unlock_all(sharded_ptr_map *s);
/* Fill g to take every shard's lock before a fork and release them after it (parent and child),
 * and add it to crmm's list (crmm/fork_guard.h); remove it before sharded_ptr_map_destroy. */
void sharded_ptr_map_add_fork_guard(sharded_ptr_map *s, crmm_fork_guard *g);

#endif
