/* ptr_map.c — the growing, shrinking and deleting half of the address-keyed hash map
 * (ptr_map.h has the layout and the inline lookup). */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include "ptr_map.h"

/* Capacity of the first array, and the least it shrinks to. */
#define PTR_MAP_MIN_CAPACITY 64

void ptr_map_init(ptr_map *m, size_t entry_size) { *m = (ptr_map){.entry_size = entry_size}; }

void ptr_map_destroy(ptr_map *m)
{
    free(m->slots);
    *m = (ptr_map){.entry_size = m->entry_size};
}

static inline void copy_entry(const ptr_map *m, void *to, const void *from)
{
    if (m->entry_size == sizeof(uintptr_t)) /* a set of addresses: no call to memcpy */
        *(uintptr_t *)to = *(const uintptr_t *)from;
    else
        memcpy(to, from, m->entry_size);
}

/* Move every entry into a new array of `capacity` slots; false (map unchanged) when malloc fails. */
static bool rehash(ptr_map *m, size_t capacity)
{
    unsigned char *slots = calloc(capacity, m->entry_size);
    if (!slots)
        return false;
    unsigned log2 = 0;
    while (((size_t)1 << log2) < capacity)
        log2++;
    ptr_map n = {slots, m->entry_size, capacity - 1, 64 - log2, m->count};
    for (size_t i = 0; m->slots && i <= m->mask; i++) {
        const uintptr_t *e = ptr_map_slot(m, i);
        if (!*e)
            continue;
        size_t j = ptr_map_home(&n, *e);
        while (*(const uintptr_t *)ptr_map_slot(&n, j))
            j = (j + 1) & n.mask;
        copy_entry(m, ptr_map_slot(&n, j), e);
    }
    free(m->slots);
    *m = n;
    return true;
}

void *ptr_map_insert(ptr_map *m, uintptr_t key)
{
    /* grow first, so that one probe finds either the key or the slot for it */
    size_t capacity = m->slots ? m->mask + 1 : 0;
    if ((m->count + 1) * 2 > capacity && !rehash(m, capacity ? capacity * 2 : PTR_MAP_MIN_CAPACITY))
        return NULL;
    size_t i = ptr_map_home(m, key);
    uintptr_t *e;
    while (*(e = ptr_map_slot(m, i))) {
        if (*e == key)
            return e;
        i = (i + 1) & m->mask;
    }
    *e = key;
    if (m->entry_size > sizeof key) /* an empty slot's key is 0, the rest what was there */
        memset(e + 1, 0, m->entry_size - sizeof key);
    m->count++;
    return e;
}

/* Empty slot i: pull each later member of its probe run into the hole unless that member's home
 * lies cyclically in (hole, j] (then a lookup starting at its home would stop at the hole). */
static void erase_at(ptr_map *m, size_t hole)
{
    for (size_t j = (hole + 1) & m->mask;; j = (j + 1) & m->mask) {
        const uintptr_t *e = ptr_map_slot(m, j);
        if (!*e)
            break;
        size_t home = ptr_map_home(m, *e);
        if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
            copy_entry(m, ptr_map_slot(m, hole), e);
            hole = j;
        }
    }
    *(uintptr_t *)ptr_map_slot(m, hole) = 0;
    m->count--;
    size_t capacity = m->mask + 1;
    if (capacity > PTR_MAP_MIN_CAPACITY && m->count * 8 < capacity)
        (void)rehash(m, capacity / 2); /* without memory the larger array simply stays */
}

void ptr_map_erase(ptr_map *m, void *entry)
{
    erase_at(m, (size_t)((unsigned char *)entry - m->slots) / m->entry_size);
}

bool ptr_map_remove(ptr_map *m, uintptr_t key, void *removed)
{
    if (!m->slots)
        return false;
    for (size_t i = ptr_map_home(m, key);; i = (i + 1) & m->mask) {
        const uintptr_t *e = ptr_map_slot(m, i);
        if (!*e)
            return false;
        if (*e == key) {
            if (removed)
                memcpy(removed, e, m->entry_size);
            erase_at(m, i);
            return true;
        }
    }
}

void *ptr_map_next(const ptr_map *m, size_t *cursor)
{
    for (; m->slots && *cursor <= m->mask; (*cursor)++) {
        uintptr_t *e = ptr_map_slot(m, *cursor);
        if (*e) {
            (*cursor)++;
            return e;
        }
    }
    return NULL;
}

bool sharded_ptr_map_init(sharded_ptr_map *s, unsigned bits, size_t entry_size)
{
    size_t n = (size_t)1 << bits;
    s->shards = aligned_alloc(_Alignof(ptr_map_shard), n * sizeof *s->shards);
    if (!s->shards)
        return false;
    s->bits = bits;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_init(&s->shards[i].lock, NULL);
        ptr_map_init(&s->shards[i].map, entry_size);
    }
    return true;
}

void sharded_ptr_map_destroy(sharded_ptr_map *s)
{
    if (!s->shards)
        return;
    for (size_t i = 0; i < (size_t)1 << s->bits; i++) {
        ptr_map_destroy(&s->shards[i].map);
        pthread_mutex_destroy(&s->shards[i].lock);
    }
    free(s->shards);
    s->shards = NULL;
}

size_t sharded_ptr_map_count(sharded_ptr_map *s)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)1 << s->bits; i++) {
        pthread_mutex_lock(&s->shards[i].lock);
        n += s->shards[i].map.count;
        pthread_mutex_unlock(&s->shards[i].lock);
    }
    return n;
}

bool sharded_ptr_map_put(sharded_ptr_map *s, uintptr_t key, uintptr_t value)
{
    ptr_map_shard *sh = sharded_ptr_map_shard(s, key);
    pthread_mutex_lock(&sh->lock);
    ptr_map_pair *e = ptr_map_insert(&sh->map, key);
    if (e)
        e->value = value;
    pthread_mutex_unlock(&sh->lock);
    return e != NULL;
}

bool sharded_ptr_map_take(sharded_ptr_map *s, uintptr_t key, uintptr_t *value)
{
    ptr_map_shard *sh = sharded_ptr_map_shard(s, key);
    ptr_map_pair e;
    pthread_mutex_lock(&sh->lock);
    bool found = ptr_map_remove(&sh->map, key, &e);
    pthread_mutex_unlock(&sh->lock);
    if (found)
        *value = e.value;
    return found;
}

bool sharded_ptr_map_contains(sharded_ptr_map *s, uintptr_t key)
{
    ptr_map_shard *sh = sharded_ptr_map_shard(s, key);
    pthread_mutex_lock(&sh->lock);
    bool found = ptr_map_find(&sh->map, key) != NULL;
    pthread_mutex_unlock(&sh->lock);
    return found;
}

void sharded_ptr_map_lock_all(sharded_ptr_map *s)
{
    for (size_t i = 0; i < (size_t)1 << s->bits; i++)
        pthread_mutex_lock(&s->shards[i].lock);
}

void sharded_ptr_map_unlock_all(sharded_ptr_map *s)
{
    for (size_t i = 0; i < (size_t)1 << s->bits; i++)
        pthread_mutex_unlock(&s->shards[i].lock);
}

static void lock_all(void *s) { sharded_ptr_map_lock_all(s); }
static void unlock_all(void *s) { sharded_ptr_map_unlock_all(s); }

void sharded_ptr_map_add_fork_guard(sharded_ptr_map *s, crmm_fork_guard *g)
{
    *g = (crmm_fork_guard){.prepare = lock_all, .parent = unlock_all, .child = unlock_all, .arg = s};
    crmm_fork_guard_add(g);
}
