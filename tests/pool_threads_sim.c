/* pool_threads_sim.c — runs `crmm bench`'s sets (A-D, or one given) on an expandable pool over
 * the scripted driver of fake_vmm.h, each thread on a stream of its own, and says what the pool
 * asked of the device per run: device synchronizations, pages mapped and unmapped, and the most it
 * held against the live peak. A development tool (built with the tests, not run by them) for the
 * pool's per-thread caches under an expandable pool, whose cost on a GPU is driver calls; the
 * times it prints are this machine's, spin locks on fewer cores than threads included.
 *
 *   tests/pool_threads_sim [--set A|B|C|D] [--threads N] [--repeats N] [--params "k=v ..."] */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cuda_runtime_api.h>
#include <crmm/crmm.h>
#include "../bench/bench_runner.h"
#include "../bench/bench_workload.h"
#include "fakes/fake_vmm.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)


static int usage(void)
{
    fprintf(stderr, "usage: pool_threads_sim [--set A|B|C|D] [--threads N] [--repeats N] [--params \"k=v ...\"]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *set = "C", *params = "";
    unsigned threads = 0, repeats = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--set") == 0 && i + 1 < argc)
            set = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
            repeats = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--params") == 0 && i + 1 < argc)
            params = argv[++i];
        else
            return usage();
    }
    size_t k = 0;
    while (k < BENCH_NAMED_SETS && strcasecmp(bench_named_sets[k].name, set) != 0)
        k++;
    if (k == BENCH_NAMED_SETS || !repeats)
        return usage();
    if (!threads)
        threads = bench_named_sets[k].threads;
    bench_workload w = {.mode = BENCH_MODE_STEPS, .steps = bench_named_sets[k].steps, .max_live = bench_named_sets[k].max_live,
                        .max_size = bench_named_sets[k].max_size};
    bench_sequence *seqs = calloc(threads, sizeof *seqs);
    if (!seqs)
        return 1;
    for (unsigned t = 0; t < threads; t++)
        if (bench_sequence_make(&w, t, &seqs[t]) != CRMM_OK) {
            fprintf(stderr, "%s\n", crmm_last_error());
            return 1;
        }
    fake_vmm_reset(2 * MiB, 141 * GiB);
    crmm_resource *mr = NULL;
    if (fake_vmm_expandable_pool(params, &mr) != CRMM_OK) {
        fprintf(stderr, "%s\n", crmm_last_error());
        return 1;
    }
    printf("set %s, %u threads, params \"%s\"\n", bench_named_sets[k].name, threads, params);
    printf("run  ns/op  syncs  maps  unmaps  peak_reserved_MiB  peak_live_MiB  ratio\n");
    int status = 0;
    for (unsigned run = 0; run < repeats; run++) {
        fake_vmm_state before = fake_vmm;
        bench_run_options opt = {.repeats = 1, .device = 0};
        bench_result r;
        if (bench_run(mr, seqs, threads, &opt, &r) != CRMM_OK || r.outcome != BENCH_OUTCOME_OK) {
            fprintf(stderr, "run %u: %s\n", run, r.error[0] ? r.error : crmm_last_error());
            status = 1;
            break;
        }
        printf("%3u  %5.0f  %5d  %4d  %6d  %17.1f  %13.1f  %.3f\n", run, r.ns_per_op_median,
               fake_vmm.device_syncs - before.device_syncs, fake_vmm.maps - before.maps, fake_vmm.unmaps - before.unmaps,
               (double)r.peak_reserved_bytes / MiB, (double)r.peak_live_bytes / MiB,
               (double)r.peak_reserved_bytes / (double)r.peak_live_bytes);
    }
    crmm_resource_release(mr);
    for (unsigned t = 0; t < threads; t++)
        bench_sequence_free(&seqs[t]);
    free(seqs);
    return status;
}
