/* fixed_size_live.c — a hash set of live block addresses: open addressing with linear probing,
 * kept at most half full, deletion by backward shift (no tombstones), so add and remove are O(1).
 * Blocks are 256-byte aligned, so the address shifted right by 8 is the hash's input. */
#include "config.h"
#include <stdlib.h>
#include "fixed_size_live.h"

static inline size_t slot_of(const fs_live_set *s, uintptr_t p)
{
    uint64_t h = (uint64_t)(p >> 8) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (s->capacity - 1);
}

static bool grow(fs_live_set *s)
{
    size_t cap = s->capacity ? s->capacity * 2 : 256;
    uintptr_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    fs_live_set n = {slots, cap, 0};
    for (size_t i = 0; i < s->capacity; i++)
        if (s->slots[i]) {
            size_t j = slot_of(&n, s->slots[i]);
            while (n.slots[j])
                j = (j + 1) & (cap - 1);
            n.slots[j] = s->slots[i];
            n.count++;
        }
    free(s->slots);
    *s = n;
    return true;
}

bool fs_live_add(fs_live_set *s, uintptr_t p)
{
    if ((s->count + 1) * 2 > s->capacity && !grow(s))
        return false;
    size_t i = slot_of(s, p);
    while (s->slots[i])
        i = (i + 1) & (s->capacity - 1);
    s->slots[i] = p;
    s->count++;
    return true;
}

bool fs_live_remove(fs_live_set *s, uintptr_t p)
{
    if (!s->capacity || !p)
        return false;
    size_t mask = s->capacity - 1, i = slot_of(s, p);
    while (s->slots[i] != p) {
        if (!s->slots[i])
            return false;
        i = (i + 1) & mask;
    }
    /* backward shift: pull later entries of the run into the hole when their home allows it */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; s->slots[j]; j = (j + 1) & mask) {
        size_t home = slot_of(s, s->slots[j]);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->slots[hole] = s->slots[j];
            hole = j;
        }
    }
    s->slots[hole] = 0;
    s->count--;
    return true;
}

void fs_live_free(fs_live_set *s)
{
    free(s->slots);
    *s = (fs_live_set){0};
}
