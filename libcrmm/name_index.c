/* name_index.c — an open-addressing hash table from borrowed name strings to positions (FNV-1a,
 * linear probing, kept at most half full). Used by the config stages to look resources up by
 * name, which a scan would make quadratic in the number of resources. */
#include "name_index.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct name_index_slot {
    const char *name;         /* NULL: empty */
    size_t position;
};

static size_t hash_name(const char *name)
{
    uint64_t h = 14695981039346656037u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211u;
    return (size_t)h;
}

long name_index_find(const name_index *x, const char *name)
{
    if (!name || !x->capacity)
        return -1;
    for (size_t at = hash_name(name) & (x->capacity - 1);; at = (at + 1) & (x->capacity - 1)) {
        const struct name_index_slot *s = &x->slots[at];
        if (!s->name)
            return -1;
        if (strcmp(s->name, name) == 0)
            return (long)s->position;
    }
}

static void put(struct name_index_slot *slots, size_t capacity, const char *name, size_t position)
{
    size_t at = hash_name(name) & (capacity - 1);
    while (slots[at].name)
        at = (at + 1) & (capacity - 1);
    slots[at] = (struct name_index_slot){name, position};
}

bool name_index_add(name_index *x, const char *name, size_t position)
{
    if ((x->count + 1) * 2 > x->capacity) {
        size_t capacity = x->capacity ? x->capacity * 2 : 64;
        struct name_index_slot *slots = calloc(capacity, sizeof *slots);
        if (!slots)
            return false;
        for (size_t i = 0; i < x->capacity; i++)
            if (x->slots[i].name)
                put(slots, capacity, x->slots[i].name, x->slots[i].position);
        free(x->slots);
        x->slots = slots;
        x->capacity = capacity;
    }
    put(x->slots, x->capacity, name, position);
    x->count++;
    return true;
}

void name_index_free(name_index *x)
{
    free(x->slots);
    memset(x, 0, sizeof *x);
}
