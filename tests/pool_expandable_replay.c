/* pool_expandable_replay.c — replays an allocation log through an expandable pool over the
 * scripted driver of fake_vmm.h and says, per pass, what the pool asked of the device: growths,
 * device synchronizations, pages mapped and unmapped, and the most it held against the most that
 * was live. A development tool (built with the tests, not run by them) for the policy in
 * plugins/pool/pool_expand.c, which crmm replay can only time on a GPU.
 *
 *   tests/pool_expandable_replay [--repeats N] [--page BYTES] [--params "k=v ..."] [--trace PASS] [--busy CALLS] LOG.csv
 *
 * The passes are those of `crmm replay`: the log's calls in order on one stream, every allocation
 * the log leaves live freed after each pass, all on one pool instance; pass 0 is the untimed one,
 * 1..N the repeats. --trace PASS prints every allocation of that pass that synchronized or
 * unmapped pages. The device has the allocation granularity --page (default 2 MiB, an H200's)
 * and 141 GiB of memory. --busy CALLS models a GPU that runs behind the host: cudaStreamQuery says
 * the stream is busy until CALLS of the log's calls after the last free (for page_moves = idle). */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include "../tools/replay.h"
#include "fakes/fake_vmm.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

typedef struct pass_counts {
    int syncs, growths, maps, unmaps, creates;
    uint64_t peak_reserved, peak_live;
} pass_counts;

static uint64_t reserved_of(crmm_resource *mr)
{
    uint64_t v = 0;
    crmm_resource_query(mr, CRMM_QUERY_BYTES_RESERVED, &v);
    return v;
}

/* One pass over the log; returns false when an allocation failed. */
static size_t busy_calls; /* --busy */

static bool play_pass(const replay_log *log, crmm_resource *mr, void **ptrs, cudaStream_t stream, bool trace,
                      pass_counts *pc)
{
    size_t last_free = 0;
    fake_vmm_state before = fake_vmm;
    uint64_t live = 0;
    memset(pc, 0, sizeof *pc);
    pc->peak_reserved = reserved_of(mr);
    for (size_t i = 0; i < log->count; i++) {
        const replay_event *ev = &log->events[i];
        if (ev->action == REPLAY_ALLOCATE && ev->size) {
            fake_vmm.streams_busy = busy_calls && i - last_free < busy_calls;
            int syncs = fake_vmm.device_syncs, unmaps = fake_vmm.unmaps, maps = fake_vmm.maps;
            uint64_t reserved = reserved_of(mr);
            if (crmm_resource_allocate(mr, ev->size, (crmm_cuda_stream_t)stream, &ptrs[i]) != CRMM_OK) {
                fprintf(stderr, "line %u: %s\n", ev->line, crmm_last_error());
                return false;
            }
            live += ev->size;
            if (live > pc->peak_live)
                pc->peak_live = live;
            uint64_t now = reserved_of(mr);
            if (now > pc->peak_reserved)
                pc->peak_reserved = now;
            if (trace && (fake_vmm.device_syncs != syncs || fake_vmm.unmaps != unmaps))
                printf("  line %u: %llu B, live %.1f MiB, reserved %.1f -> %.1f MiB: %d sync, %d unmapped, %d mapped\n",
                       ev->line, (unsigned long long)ev->size, (double)(live - ev->size) / MiB, (double)reserved / MiB,
                       (double)now / MiB, fake_vmm.device_syncs - syncs, fake_vmm.unmaps - unmaps, fake_vmm.maps - maps);
        } else if (ev->action == REPLAY_FREE && ev->pair >= 0 && ptrs[ev->pair]) {
            const replay_event *a = &log->events[ev->pair];
            crmm_resource_deallocate(mr, ptrs[ev->pair], a->size, (crmm_cuda_stream_t)stream);
            ptrs[ev->pair] = NULL;
            live -= a->size;
            last_free = i;
        }
    }
    for (size_t i = 0; i < log->count; i++)
        if (ptrs[i]) {
            crmm_resource_deallocate(mr, ptrs[i], log->events[i].size, (crmm_cuda_stream_t)stream);
            ptrs[i] = NULL;
        }
    pc->syncs = fake_vmm.device_syncs - before.device_syncs;
    pc->growths = fake_vmm.set_access - before.set_access; /* one cuMemSetAccess per growth */
    pc->maps = fake_vmm.maps - before.maps;
    pc->unmaps = fake_vmm.unmaps - before.unmaps;
    pc->creates = fake_vmm.creates - before.creates;
    return true;
}

static int usage(void)
{
    fprintf(stderr, "usage: pool_expandable_replay [--repeats N] [--page BYTES] [--params \"k=v ...\"] [--trace PASS] "
                    "[--busy CALLS] LOG.csv\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned repeats = 3;
    size_t page = 2 * MiB;
    const char *params = "", *path = NULL;
    int trace = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
            repeats = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--page") == 0 && i + 1 < argc)
            page = (size_t)strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--params") == 0 && i + 1 < argc)
            params = argv[++i];
        else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc)
            trace = atoi(argv[++i]);
        else if (strcmp(argv[i], "--busy") == 0 && i + 1 < argc)
            busy_calls = (size_t)strtoull(argv[++i], NULL, 0);
        else if (argv[i][0] != '-' && !path)
            path = argv[i];
        else
            return usage();
    }
    if (!path || !page || (page & (page - 1)))
        return usage();
    replay_log log;
    if (replay_log_read(path, &log) != CRMM_OK) {
        fprintf(stderr, "%s\n", crmm_last_error());
        return 1;
    }
    fake_vmm_reset(page, 141 * GiB);
    crmm_resource *mr = NULL;
    void **ptrs = calloc(log.count ? log.count : 1, sizeof *ptrs);
    if (!ptrs || fake_vmm_expandable_pool(params, &mr) != CRMM_OK) {
        fprintf(stderr, "%s\n", ptrs ? crmm_last_error() : "malloc failed");
        return 1;
    }
    cudaStream_t stream = (cudaStream_t)(uintptr_t)0x1000;
    printf("%s: %zu events, page %zu KiB\n", path, log.count, page >> 10);
    printf("pass  syncs  growths  maps  unmaps  creates  peak_reserved_MiB  peak_live_MiB  ratio\n");
    int status = 0;
    for (unsigned pass = 0; pass <= repeats; pass++) {
        pass_counts pc;
        if (!play_pass(&log, mr, ptrs, stream, (int)pass == trace, &pc)) {
            status = 1;
            break;
        }
        printf("%4u  %5d  %7d  %4d  %6d  %7d  %17.1f  %13.1f  %.4f\n", pass, pc.syncs, pc.growths, pc.maps, pc.unmaps,
               pc.creates, (double)pc.peak_reserved / MiB, (double)pc.peak_live / MiB,
               pc.peak_live ? (double)pc.peak_reserved / (double)pc.peak_live : 0.0);
    }
    crmm_resource_release(mr);
    free(ptrs);
    replay_log_free(&log);
    return status;
}
