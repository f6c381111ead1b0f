/* cmd_plan.c — `crmm plan LOG.csv [--output FILE]`: learns a placement plan from an allocation
 * log (plan_place.c) and writes it (plan.h has the format), for a pool's `plan` parameter. */
#include "build_config.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <crmm/crmm.h>
#include "commands.h"
#include "plan.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: crmm plan LOG.csv [--output FILE]\n\n"
               "Learns where each allocation of a recorded run should go, and writes that plan (to\n"
               "standard output, or to FILE). Record the run with the logging plugin in front of the\n"
               "pool; give the plan to an expandable pool as `plan = FILE`: a later run that makes the\n"
               "same requests in the same order is then served at the planned places, and holds about\n"
               "the plan's extent (what the report on standard error shows) instead of what best fit\n"
               "leaves. Requests that differ from the plan are served as without one.\n\n"
               "The plan places the largest allocations first, each at the lowest offset where it\n"
               "overlaps nothing that lives at the same time, or each in the log's order in the\n"
               "smallest gap, whichever spans least. Its loop is the longest run at the log's\n"
               "end that repeats the run before it (a training step): after the last planned\n"
               "allocation the pool starts that run again, so a run longer than the recorded one is\n"
               "served from the plan too. Where the log's end repeats but its placement could not be\n"
               "served again, the last run is placed so that it can (the report says what that adds).\n"
               "The log must be the logging plugin's or RMM's\n"
               "CSV (the columns Thread,Time,Action,Pointer,Size,Stream).\n");
}

/* One line on stderr: what the plan spans against the log's live peak, and its loop. */
static void report(FILE *err, const plan *pl)
{
    char extent[32], peak[32];
    crmm_format_size(pl->extent, extent, sizeof extent);
    crmm_format_size(pl->peak_live, peak, sizeof peak);
    fprintf(err, "crmm plan: %llu allocations; extent %s, %.4f x the live peak (%s), by %s; ",
            (unsigned long long)pl->count, extent, pl->peak_live ? (double)pl->extent / (double)pl->peak_live : 0.0,
            peak, pl->rule);
    if (pl->loop == PLAN_NO_LOOP) {
        fprintf(err, "no loop (no run at the log's end repeats the one before it, or none could be served again)\n");
        return;
    }
    fprintf(err, "loop from allocation %llu (%llu a pass)", (unsigned long long)pl->loop,
            (unsigned long long)(pl->count - pl->loop));
    if (pl->loop_busy)
        fprintf(err, ", %llu of them served elsewhere (their place busy)", (unsigned long long)pl->loop_busy);
    if (pl->extent_no_loop) {
        char without[32];
        fprintf(err, "; without a loop it would span %s", crmm_format_size(pl->extent_no_loop, without, sizeof without));
    }
    fputc('\n', err);
}

/* Write pl to path as crmm writes every file (replay_output_open), or to out when path is NULL. */
static crmm_status write_plan(FILE *out, const plan *pl, const char *path)
{
    if (!path)
        return plan_write(out, pl, "standard output");
    char tmp[4200];
    FILE *f;
    if (replay_output_fopen(path, "w", tmp, sizeof tmp, &f) != CRMM_OK)
        return crmm_error_add_context("--output");
    crmm_status st = plan_write(f, pl, path);
    crmm_status closed = replay_output_close(f, tmp, path, "--output: ");
    return st != CRMM_OK ? st : closed;
}

int crmm_plan_main(int argc, char **argv, FILE *out, FILE *err)
{
    const char *log_path = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(out);
            return 0;
        }
        if (strcmp(argv[i], "--output") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(err, "crmm plan: unknown option or missing value: %s\n", argv[i]);
            usage(err);
            return 2;
        } else if (!log_path) {
            log_path = argv[i];
        } else {
            fprintf(err, "crmm plan: one log at a time (got %s and %s)\n", log_path, argv[i]);
            return 2;
        }
    }
    if (!log_path) {
        usage(err);
        return 2;
    }
    if (out_path && (!out_path[0] || replay_same_file(out_path, log_path))) {
        fprintf(err, "crmm plan: --output %s: %s\n", out_path,
                out_path[0] ? "that is the log, which it would replace" : "needs a file name");
        return 2;
    }
    replay_log log;
    plan pl;
    crmm_status st = replay_log_read(log_path, &log);
    if (st != CRMM_OK) {
        fprintf(err, "crmm plan: %s\n", crmm_last_error());
        return 1;
    }
    st = plan_make(&log, &pl);
    replay_log_free(&log);
    if (st == CRMM_OK) {
        report(err, &pl);
        st = write_plan(out, &pl, out_path);
        plan_free(&pl);
    }
    if (st != CRMM_OK) {
        fprintf(err, "crmm plan: %s: %s\n", log_path, crmm_last_error());
        return 1;
    }
    return 0;
}

int crmm_cmd_plan(int argc, char **argv)
{
    return crmm_plan_main(argc, argv, stdout, stderr);
}
