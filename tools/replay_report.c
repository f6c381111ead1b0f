/* replay_report.c — what `crmm replay` prints (see replay.h): a text report for people, one JSON
 * object or CSV (a header and one row per resource) for programs. Figures the resource cannot
 * give are "n/a" in text, null in JSON and empty in CSV. */
#include "build_config.h"
#include <crmm/crmm.h>
#include "text_escape.h"
#include "replay.h"

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

static double ratio(const replay_result *r)
{
    return r->peak_in_use ? (double)r->peak_reserved / (double)r->peak_in_use : 0.0;
}

static bool ratio_known(const replay_result *r) { return r->reserved_known && r->peak_in_use; }

static void mode_words(const replay_options *opt, const replay_log *log, char *buf, size_t size)
{
    unsigned workers = opt->threads < log->threads ? opt->threads : log->threads;
    if (!opt->threads)
        snprintf(buf, size, "one thread, the log's order");
    else
        snprintf(buf, size, "the %u logged thread%s on %u OS thread%s, the log's order", log->threads,
                 plural(log->threads), workers ? workers : 1, plural(workers ? workers : 1));
}

static void text_log(FILE *out, const char *path, const replay_log *log)
{
    fprintf(out, "replay: %s: %zu event%s on %u thread%s (%llu allocation%s, %llu free%s, %llu allocate failure%s)\n",
            path, log->count, plural(log->count), log->threads, plural(log->threads),
            (unsigned long long)log->allocations, plural(log->allocations), (unsigned long long)log->frees,
            plural(log->frees), (unsigned long long)log->failures_logged, plural(log->failures_logged));
    if (log->unknown_frees)
        fprintf(out, "log anomaly: %llu free%s of a pointer not live (first at line %u; not replayed)\n",
                (unsigned long long)log->unknown_frees, plural(log->unknown_frees), log->first_unknown_free_line);
    if (log->size_mismatches)
        fprintf(out, "log anomaly: %llu free%s with another size than allocated (first at line %u; replayed with the "
                "allocated size)\n", (unsigned long long)log->size_mismatches, plural(log->size_mismatches),
                log->first_size_mismatch_line);
    if (log->reused_live)
        fprintf(out, "log anomaly: %llu allocation%s of a pointer still live (first at line %u)\n",
                (unsigned long long)log->reused_live, plural(log->reused_live), log->first_reused_live_line);
    if (log->leaked_count)
        fprintf(out, "log leaks: %llu allocation%s of %llu bytes never freed in the log (freed after each pass)\n",
                (unsigned long long)log->leaked_count, plural(log->leaked_count), (unsigned long long)log->leaked_bytes);
    else
        fprintf(out, "log leaks: none\n");
}

static void text_row(FILE *out, const replay_row *row, const replay_log *log)
{
    const replay_result *r = &row->result;
    char sz[32];
    fprintf(out, "\nresource: %s (%s)\n", row->label, row->chain);
    fprintf(out, "stream: %s\n", r->stream_used);
    fprintf(out, "time: %.1f ns per call (median of %u repeat%s; min %.1f, max %.1f), %llu calls per repeat, "
            "%.3f ms wall\n", r->ns_per_call_median, r->repeats, plural(r->repeats), r->ns_per_call_min,
            r->ns_per_call_max, (unsigned long long)r->calls, r->wall_ns_median / 1e6);
    fprintf(out, "allocations: %llu replayed, %llu failed\n", (unsigned long long)r->allocated,
            (unsigned long long)r->failed);
    if (r->failed)
        fprintf(out, "first failure: %s\n", r->first_failure);
    fprintf(out, "frees: %llu replayed, %llu failed\n", (unsigned long long)r->freed, (unsigned long long)r->free_errors);
    fprintf(out, "peak in use: %s (%llu bytes as replayed; %llu in the log)\n",
            crmm_format_size(r->peak_in_use, sz, sizeof sz), (unsigned long long)r->peak_in_use,
            (unsigned long long)log->peak_bytes);
    if (r->reserved_known)
        fprintf(out, "peak reserved: %s (%llu bytes)\n", crmm_format_size(r->peak_reserved, sz, sizeof sz),
                (unsigned long long)r->peak_reserved);
    else
        fprintf(out, "peak reserved: n/a (the resource does not tell)\n");
    if (ratio_known(r))
        fprintf(out, "reserved / peak in use: %.3f\n", ratio(r));
    else
        fprintf(out, "reserved / peak in use: n/a\n");
    if (r->fragmentation_known)
        fprintf(out, "fragmentation: %.1f%% at most (sampled every 256 calls and at the end), %.1f%% at the end\n",
                100.0 * r->max_fragmentation, 100.0 * r->end_fragmentation);
    else
        fprintf(out, "fragmentation: n/a (the resource does not tell)\n");
    if (r->timed_failures)
        fprintf(out, "note: %llu call%s failed in the timed repeats\n", (unsigned long long)r->timed_failures,
                plural(r->timed_failures));
}

static void json_u64(FILE *out, const char *key, uint64_t v, bool more)
{
    fprintf(out, "\"%s\": %llu%s", key, (unsigned long long)v, more ? ", " : "");
}

static void json_u64_or_null(FILE *out, const char *key, bool known, uint64_t v, bool more)
{
    if (known)
        json_u64(out, key, v, more);
    else
        fprintf(out, "\"%s\": null%s", key, more ? ", " : "");
}

static void json_num(FILE *out, const char *key, bool known, double v, bool more)
{
    if (known)
        fprintf(out, "\"%s\": %.6g%s", key, v, more ? ", " : "");
    else
        fprintf(out, "\"%s\": null%s", key, more ? ", " : "");
}

static void json_report(FILE *out, const char *path, const replay_log *log, const replay_options *opt,
                        const replay_row *rows, size_t nrows)
{
    fputs("{\"log\": {\"path\": ", out);
    text_write_json_string(out, path);
    fputs(", ", out);
    json_u64(out, "events", log->count, true);
    json_u64(out, "threads", log->threads, true);
    json_u64(out, "allocations", log->allocations, true);
    json_u64(out, "frees", log->frees, true);
    json_u64(out, "allocate_failures", log->failures_logged, true);
    json_u64(out, "peak_live_bytes", log->peak_bytes, true);
    json_u64(out, "leaked_allocations", log->leaked_count, true);
    json_u64(out, "leaked_bytes", log->leaked_bytes, true);
    json_u64(out, "frees_not_live", log->unknown_frees, true);
    json_u64(out, "frees_other_size", log->size_mismatches, true);
    json_u64(out, "allocations_of_live_pointer", log->reused_live, false);
    fputs("},\n \"threads\": ", out);
    fprintf(out, "%u, \"repeats\": %u,\n \"resources\": [", opt->threads, opt->repeats ? opt->repeats : 1);
    for (size_t i = 0; i < nrows; i++) {
        const replay_result *r = &rows[i].result;
        fputs(i ? ",\n  {\"resource\": " : "\n  {\"resource\": ", out);
        text_write_json_string(out, rows[i].label);
        fputs(", \"chain\": ", out);
        text_write_json_string(out, rows[i].chain);
        fputs(", \"stream\": ", out);
        text_write_json_string(out, r->stream_used);
        fputs(", ", out);
        json_u64(out, "calls_per_repeat", r->calls, true);
        json_num(out, "ns_per_call_median", true, r->ns_per_call_median, true);
        json_num(out, "ns_per_call_min", true, r->ns_per_call_min, true);
        json_num(out, "ns_per_call_max", true, r->ns_per_call_max, true);
        json_num(out, "wall_ms_median", true, r->wall_ns_median / 1e6, true);
        json_u64(out, "allocations_replayed", r->allocated, true);
        json_u64(out, "allocations_failed", r->failed, true);
        json_u64(out, "frees_replayed", r->freed, true);
        json_u64(out, "frees_failed", r->free_errors, true);
        json_u64(out, "timed_failures", r->timed_failures, true);
        json_u64(out, "peak_live_bytes", r->peak_in_use, true);
        json_u64_or_null(out, "peak_reserved_bytes", r->reserved_known, r->peak_reserved, true);
        json_num(out, "reserved_over_peak_live", ratio_known(r), ratio(r), true);
        json_num(out, "fragmentation_max", r->fragmentation_known, r->max_fragmentation, true);
        json_num(out, "fragmentation_end", r->fragmentation_known, r->end_fragmentation, true);
        fputs("\"first_failure\": ", out);
        text_write_json_string(out, r->failed ? r->first_failure : NULL);
        fputc('}', out);
    }
    fputs("\n ]}\n", out);
}

static void csv_num(FILE *out, bool known, double v)
{
    if (known)
        fprintf(out, ",%.6g", v);
    else
        fputc(',', out);
}

static void csv_report(FILE *out, const char *path, const replay_log *log, const replay_options *opt,
                       const replay_row *rows, size_t nrows)
{
    fputs("log,events,resource,chain,stream,threads,repeats,calls_per_repeat,ns_per_call_median,ns_per_call_min,"
          "ns_per_call_max,wall_ms_median,allocations_replayed,allocations_failed,frees_replayed,frees_failed,"
          "peak_live_bytes,peak_reserved_bytes,reserved_over_peak_live,fragmentation_max,fragmentation_end\n", out);
    for (size_t i = 0; i < nrows; i++) {
        const replay_result *r = &rows[i].result;
        text_write_csv_field(out, path);
        fprintf(out, ",%zu,", log->count);
        text_write_csv_field(out, rows[i].label);
        fputc(',', out);
        text_write_csv_field(out, rows[i].chain);
        fputc(',', out);
        text_write_csv_field(out, r->stream_used);
        fprintf(out, ",%u,%u,%llu,%.6g,%.6g,%.6g,%.6g,%llu,%llu,%llu,%llu,%llu", opt->threads, r->repeats,
                (unsigned long long)r->calls, r->ns_per_call_median, r->ns_per_call_min, r->ns_per_call_max,
                r->wall_ns_median / 1e6, (unsigned long long)r->allocated, (unsigned long long)r->failed,
                (unsigned long long)r->freed, (unsigned long long)r->free_errors, (unsigned long long)r->peak_in_use);
        if (r->reserved_known)
            fprintf(out, ",%llu", (unsigned long long)r->peak_reserved);
        else
            fputc(',', out);
        csv_num(out, ratio_known(r), ratio(r));
        csv_num(out, r->fragmentation_known, r->max_fragmentation);
        csv_num(out, r->fragmentation_known, r->end_fragmentation);
        fputc('\n', out);
    }
}

void replay_report(FILE *out, replay_format format, const char *path, const replay_log *log,
                   const replay_options *opt, const replay_row *rows, size_t nrows)
{
    if (format == REPLAY_JSON) {
        json_report(out, path, log, opt, rows, nrows);
        return;
    }
    if (format == REPLAY_CSV) {
        csv_report(out, path, log, opt, rows, nrows);
        return;
    }
    char mode[128];
    mode_words(opt, log, mode, sizeof mode);
    text_log(out, path, log);
    fprintf(out, "mode: %s; memory from one untimed pass, time from %u timed repeat%s\n", mode,
            opt->repeats ? opt->repeats : 1, plural(opt->repeats ? opt->repeats : 1));
    for (size_t i = 0; i < nrows; i++)
        text_row(out, &rows[i], log);
}
