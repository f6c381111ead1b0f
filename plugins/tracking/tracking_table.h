/* tracking_table.h — the tracking plugin's record of outstanding allocations, by pointer.
 *
 * A sharded_ptr_map (support/ptr_map.h) of these records: shards under their own
 * mutexes, so threads that allocate different pointers rarely meet on a lock. Each record holds
 * the size, a serial number (allocation order) and the optional call stack. */
#ifndef CRMM_PLUGINS_TRACKING_TABLE_H
#define CRMM_PLUGINS_TRACKING_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>

#define TRACKING_STACK_MAX 32

typedef struct tracking_record {
    uintptr_t ptr;           /* the map's key, first */
    size_t bytes;
    uint64_t serial;
    void **stack;            /* malloc'd, or NULL */
    int stack_depth;
    bool freeing;            /* a free of it is with the upstream (tracking_table_begin_free) */
} tracking_record;

typedef struct tracking_table tracking_table;

/* Outcome of tracking_table_begin_free. */
typedef enum tracking_removal {
    TRACKING_FREEING,        /* found with that size and marked as being freed */
    TRACKING_UNKNOWN,        /* no such pointer, or its free is already under way */
    TRACKING_WRONG_SIZE      /* found with another size (its size in *recorded); left as it was */
} tracking_removal;

crmm_status tracking_table_new(tracking_table **out);
/* Frees every record left and the table. */
void tracking_table_free(tracking_table *t);

/* Add a record (the table takes `stack`). A record of the same pointer still there is one whose
 * free the upstream took before tracking_table_end_free removed it: the new record replaces it.
 * CRMM_ERROR_OUT_OF_MEMORY when it cannot grow (stack is freed then). */
crmm_status tracking_table_insert(tracking_table *t, uintptr_t ptr, size_t bytes, uint64_t serial, void **stack,
                                  int stack_depth);

/* A free of ptr, in two steps around the upstream's free, so that the record stays until the
 * upstream has the block back and a refused free leaves it as it was. begin: mark ptr's record as
 * being freed if it was recorded with `bytes` and no free of it is under way (its serial in
 * *serial). end: `freed` (the upstream took the block) removes the record, else its mark is
 * cleared; either only while the record is still the one of `serial`. */
tracking_removal tracking_table_begin_free(tracking_table *t, uintptr_t ptr, size_t bytes, size_t *recorded,
                                           uint64_t *serial);
void tracking_table_end_free(tracking_table *t, uintptr_t ptr, uint64_t serial, bool freed);

/* A copy of every record (stacks copied too), sorted by serial; free with
 * tracking_snapshot_free. CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status tracking_table_snapshot(tracking_table *t, tracking_record **records, size_t *count);
void tracking_snapshot_free(tracking_record *records, size_t count);

#endif
