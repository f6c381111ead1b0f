/* tracking_table.c — the outstanding allocations of a tracking resource, in a sharded pointer
 * map whose entries are the records themselves (see tracking_table.h). */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include "ptr_map.h"
#include "tracking_table.h"

/* 64 shards: threads allocating and freeing different pointers rarely meet on a lock. */
#define TRACKING_SHARD_BITS 6

struct tracking_table {
    sharded_ptr_map map; /* of tracking_record */
    crmm_fork_guard fork_guard; /* every shard's lock around fork() */
};

crmm_status tracking_table_new(tracking_table **out)
{
    tracking_table *t = malloc(sizeof *t);
    if (!t || !sharded_ptr_map_init(&t->map, TRACKING_SHARD_BITS, sizeof(tracking_record))) {
        free(t);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "tracking: malloc failed");
    }
    sharded_ptr_map_add_fork_guard(&t->map, &t->fork_guard);
    *out = t;
    return CRMM_OK;
}

void tracking_table_free(tracking_table *t)
{
    if (!t)
        return;
    crmm_fork_guard_remove(&t->fork_guard);
    for (size_t k = 0; k < (size_t)1 << t->map.bits; k++) {
        size_t cursor = 0;
        for (tracking_record *r; (r = ptr_map_next(&t->map.shards[k].map, &cursor));)
            free(r->stack);
    }
    sharded_ptr_map_destroy(&t->map);
    free(t);
}

crmm_status tracking_table_insert(tracking_table *t, uintptr_t ptr, size_t bytes, uint64_t serial, void **stack,
                                  int stack_depth)
{
    ptr_map_shard *s = sharded_ptr_map_shard(&t->map, ptr);
    pthread_mutex_lock(&s->lock);
    void **replaced = NULL;
    tracking_record *r = ptr_map_insert(&s->map, ptr);
    if (r) {
        replaced = r->stack; /* NULL in a new entry */
        *r = (tracking_record){ptr, bytes, serial, stack, stack_depth, false};
    }
    pthread_mutex_unlock(&s->lock);
    free(replaced);
    if (!r) {
        free(stack);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "tracking: cannot grow the allocation table");
    }
    return CRMM_OK;
}

tracking_removal tracking_table_begin_free(tracking_table *t, uintptr_t ptr, size_t bytes, size_t *recorded,
                                           uint64_t *serial)
{
    ptr_map_shard *s = sharded_ptr_map_shard(&t->map, ptr);
    tracking_removal result = TRACKING_UNKNOWN;
    pthread_mutex_lock(&s->lock);
    tracking_record *r = ptr_map_find(&s->map, ptr);
    if (r && !r->freeing) {
        *recorded = r->bytes;
        if (r->bytes != bytes) {
            result = TRACKING_WRONG_SIZE;
        } else {
            r->freeing = true;
            *serial = r->serial;
            result = TRACKING_FREEING;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return result;
}

void tracking_table_end_free(tracking_table *t, uintptr_t ptr, uint64_t serial, bool freed)
{
    ptr_map_shard *s = sharded_ptr_map_shard(&t->map, ptr);
    void *stack = NULL;
    pthread_mutex_lock(&s->lock);
    tracking_record *r = ptr_map_find(&s->map, ptr);
    if (r && r->serial == serial) {
        if (freed) {
            stack = r->stack;
            ptr_map_erase(&s->map, r);
        } else {
            r->freeing = false;
        }
    }
    pthread_mutex_unlock(&s->lock);
    free(stack);
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
    for (size_t k = 0; k < (size_t)1 << t->map.bits; k++) {
        ptr_map_shard *s = &t->map.shards[k];
        pthread_mutex_lock(&s->lock);
        if (n + s->map.count > cap) {
            size_t want = (n + s->map.count) * 2;
            tracking_record *grown = realloc(out, want * sizeof *grown);
            if (!grown)
                goto oom;
            out = grown;
            cap = want;
        }
        size_t cursor = 0;
        for (const tracking_record *e; (e = ptr_map_next(&s->map, &cursor));) {
            tracking_record r = *e;
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
