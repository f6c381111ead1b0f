/* pool_vmm.h — one reserved range of device virtual addresses whose pages are backed by physical
 * memory only while the pool needs them (the CUDA virtual memory API).
 *
 * The range is reserved once (cuMemAddressReserve) and cut into pages of the device's allocation
 * granularity (2 MiB on current GPUs), or of a larger power of two the pool asks for (its
 * page_size parameter). Each mapped page has its own physical allocation
 * (cuMemCreate): the driver can only unmap a whole allocation, so one page per allocation is what
 * lets the pool give back any single page that no block uses, wherever it lies. Mapping a run of
 * pages costs one cuMemCreate and one cuMemMap per page and one cuMemSetAccess for the run.
 *
 * Physical pages that are unmapped in the middle of an operation (the pool gives back a free page
 * in one place and needs one in another) wait on a spare list and are mapped again directly, so
 * moving memory inside the range costs no cuMemRelease/cuMemCreate pair;
 * pool_vmm_drop_spares releases what is left at the end of the operation.
 *
 * The driver is reached through cudaGetDriverEntryPointByVersion, not by linking libcuda: the
 * plugin loads on machines without a driver (where the pool falls back to growing from its
 * upstream), and a test program can hand the pool a scripted driver by defining that one
 * runtime function. Nothing here locks: the pool calls it under its own lock. */
#ifndef CRMM_PLUGINS_POOL_VMM_H
#define CRMM_PLUGINS_POOL_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>

typedef struct pool_vmm {
    uintptr_t base;                /* first address of the reserved range */
    size_t page;                   /* bytes per page: the device's allocation granularity */
    size_t pages;                  /* pages in the range */
    unsigned long long *handles;   /* per page: its physical allocation while mapped */
    unsigned char *mapped;         /* per page: POOL_PAGE_MAPPED while mapped, POOL_PAGE_LENT while
                                    * mapped but lent (its allocation also mapped elsewhere),
                                    * POOL_PAGE_STRAY (below), else POOL_PAGE_UNMAPPED */
    size_t mapped_pages;           /* pages mapped, lent and stray ones included */
    size_t strays;                 /* of those, POOL_PAGE_STRAY (the pool's trim unmaps those of
                                    * its own range) */
    size_t lent_pages;             /* of those, lent (pool_vmm_lend) */
    unsigned long long *spare;     /* physical pages unmapped during the current operation, and
                                    * between operations those the driver refused to release */
    size_t spare_count;
    int device;
    int handle_types;              /* CUmemAllocationHandleType pages are made exportable as (pool_ipc.c); 0: none */
    /* driver calls made so far, for the pool's queries (crmm/pool.h) */
    uint64_t pages_created, pages_released, pages_mapped, pages_unmapped;
    uint64_t unmaps_refused;       /* cuMemUnmap calls the driver refused (the page stayed mapped) */
} pool_vmm;

/* Whether the virtual memory API can be used on `device`; on false, *why says why in a phrase
 * for a log line ("the CUDA driver has no cuMemCreate", "device 0 does not support ..."). */
bool pool_vmm_available(int device, const char **why);

/* Reserve a range of at least `bytes` (rounded up to whole pages) on `device` (current for the
 * call), in pages of page_size bytes (a power of two; the device's granularity when that is
 * larger, as for 0). Errors: CRMM_ERROR_CUDA with the driver's message (also when the API is not available),
 * CRMM_ERROR_OUT_OF_MEMORY for the page table. */
crmm_status pool_vmm_reserve(pool_vmm *v, int device, size_t bytes, size_t page_size);

/* Back pages [first, first + count) (all unmapped) with physical memory, taking spare pages
 * first; usable for reads and writes from the pool's device once it returns. On failure nothing
 * is mapped (but a page whose undoing cuMemUnmap refused: it stays mapped and counted as such in
 * v->mapped, and the next map of it uses it): CRMM_ERROR_OUT_OF_MEMORY when the device has no
 * memory left, CRMM_ERROR_CUDA else. */
crmm_status pool_vmm_map(pool_vmm *v, size_t first, size_t count);

/* Unmap pages [first, first + count) (all mapped; no work may still use them) and keep their
 * physical memory on the spare list. Returns how many pages from `first` on were unmapped: all
 * of them, or fewer when the driver refused one (logged at warn level; the rest stay mapped). */
size_t pool_vmm_unmap(pool_vmm *v, size_t first, size_t count);

/* Lend pages [first, first + count) (all mapped, none lent): their physical memory goes to the
 * spare list, to be mapped again at once where the pool grows, while these addresses stay mapped
 * to it, so work still queued on them runs as if nothing had moved. No driver call. A lent page
 * is unmapped by pool_vmm_unmap_lent once no work can use it at the old address. */
void pool_vmm_lend(pool_vmm *v, size_t first, size_t count);

/* pool_vmm_lend to another range `to` of the same device and page size (a pool's plan range lending
 * to the pool's own): the memory goes to to's spare list, for to's next map. */
void pool_vmm_lend_to(pool_vmm *v, size_t first, size_t count, pool_vmm *to);

/* Unmap lent pages [first, first + count) (no work may still use them at these addresses); their
 * memory stays with its other mapping. Returns how many pages from `first` on were unmapped, as
 * pool_vmm_unmap does. */
size_t pool_vmm_unmap_lent(pool_vmm *v, size_t first, size_t count);

/* Undo pool_vmm_lend for lent pages [first, first + count) whose memory waits on the spare list
 * (the growth it was lent to mapped nothing): it leaves the spare list and the pages are mapped
 * ones again. False, and nothing changed, when one of them is not lent or its memory is not spare. */
bool pool_vmm_unlend(pool_vmm *v, size_t first, size_t count);

/* pool_vmm_unlend for pages lent to another range `to` (pool_vmm_lend_to): their memory leaves
 * to's spare list. */
bool pool_vmm_unlend_from(pool_vmm *v, size_t first, size_t count, pool_vmm *to);

/* Release every spare page (their memory goes back to the device), but those whose memory v or
 * `other` (NULL: none; the pool's other range) still maps at a lent page, where the driver refused
 * the unmap: releasing it would leave the device holding memory no range counts. Returns how many
 * stay on the spare list, those and the ones whose release the driver refused (still the pool's
 * memory: the next map takes them first, a later drop or pool_vmm_release tries again), so that
 * nothing is lost or counted as given back. */
size_t pool_vmm_drop_spares(pool_vmm *v, const pool_vmm *other);

/* Unmap and release everything and free the range (no work may still use it). No driver call
 * once the process is exiting: the memory is left to the process's end then. */
void pool_vmm_release(pool_vmm *v);

enum {
    POOL_PAGE_UNMAPPED,
    POOL_PAGE_MAPPED,
    POOL_PAGE_LENT,
    POOL_PAGE_STRAY, /* mapped, without access rights: a failed pool_vmm_map could not unmap it again
                      * (counted in mapped_pages; the next pool_vmm_map over it uses it) */
};

static inline size_t pool_vmm_page_of(const pool_vmm *v, uintptr_t addr) { return (addr - v->base) / v->page; }
static inline uintptr_t pool_vmm_page_addr(const pool_vmm *v, size_t page) { return v->base + page * v->page; }

#endif
