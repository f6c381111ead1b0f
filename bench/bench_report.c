/* bench_report.c — the table, CSV and JSON writers of `crmm bench`.
 *
 * The report only remembers its format, its streams and whether a JSON result was written yet
 * (for the commas); every row is written straight through, so a long GPU run shows its results
 * as they come. */
#include "build_config.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/crmm.h>
#include "bench_report.h"
#include "text_escape.h"

struct bench_report {
    bench_format format;
    FILE *out, *err;
    bool first_result;
};

const char *bench_format_name(bench_format format)
{
    switch (format) {
    case BENCH_FORMAT_TABLE: return "table";
    case BENCH_FORMAT_CSV: return "csv";
    case BENCH_FORMAT_JSON: return "json";
    }
    return "?";
}

static const char *outcome_name(bench_outcome o)
{
    switch (o) {
    case BENCH_OUTCOME_OK: return "ok";
    case BENCH_OUTCOME_OOM: return "oom";
    case BENCH_OUTCOME_ERROR: return "error";
    }
    return "error";
}


/* "12.3 M" style rate. */
static char *format_rate(double v, char *buf, size_t size)
{
    static const char *const units[] = {"", " k", " M", " G", " T"};
    int u = 0;
    while (v >= 1000 && u < 4) {
        v /= 1000;
        u++;
    }
    snprintf(buf, size, "%.1f%s", v, units[u]);
    return buf;
}

static bool is_random(const bench_set *set)
{
    return set->workload.mode == BENCH_MODE_RANDOM;
}

static uint64_t set_steps(const bench_set *set)
{
    return is_random(set) ? 2 * set->workload.allocations : set->workload.steps;
}

/* What a missing GPU means for the report. */
static const char *no_gpu_note(const bench_report_meta *meta)
{
    return meta->overhead ? "GPU resources are skipped; the overhead measurements run over host memory"
                          : "GPU resources and the raw CUDA references are skipped";
}

bench_report *bench_report_begin(bench_format format, FILE *out, FILE *err, const bench_report_meta *meta)
{
    bench_report *rep = calloc(1, sizeof *rep);
    if (!rep)
        return NULL;
    rep->format = format;
    rep->out = out;
    rep->err = err;
    rep->first_result = true;
    switch (format) {
    case BENCH_FORMAT_TABLE:
        fprintf(out, "crmm bench %s: config %s; %s\n", crmm_version(), meta->config,
                meta->device ? meta->device : meta->no_gpu_reason ? "no CUDA device" : "host memory only");
        if (meta->no_gpu_reason)
            fprintf(out, "no CUDA device (%s): %s\n", meta->no_gpu_reason, no_gpu_note(meta));
        for (size_t i = 0; i < meta->nskipped; i++)
            fprintf(out, "skipped %s: %s\n", meta->skipped_names[i], meta->skipped_reasons[i]);
        break;
    case BENCH_FORMAT_CSV:
        if (meta->no_gpu_reason)
            fprintf(err, "crmm bench: no CUDA device (%s): %s\n", meta->no_gpu_reason, no_gpu_note(meta));
        for (size_t i = 0; i < meta->nskipped; i++)
            fprintf(err, "crmm bench: skipped %s: %s\n", meta->skipped_names[i], meta->skipped_reasons[i]);
        if (meta->overhead)
            fputs("measurement,name,detail,unit,samples,status,median,min,max,baseline,added,target,target_met,"
                  "error\n", out);
        else
            fputs("set,mode,steps,max_live,allocations,max_size,threads,repeats,resource,plugin,status,"
                  "ns_per_op_median,ns_per_op_min,ns_per_op_max,ops_per_second,total_ops,peak_live_bytes,"
                  "peak_reserved_bytes,reserved_over_live,error\n", out);
        break;
    case BENCH_FORMAT_JSON:
        fputs("{\n  \"tool\": \"crmm bench\",\n  \"version\": ", out);
        text_write_json_string(out, crmm_version());
        fputs(",\n  \"config\": ", out);
        text_write_json_string(out, meta->config);
        fputs(",\n  \"device\": ", out);
        text_write_json_string(out, meta->device);
        fputs(",\n  \"no_gpu_reason\": ", out);
        text_write_json_string(out, meta->no_gpu_reason);
        fputs(meta->overhead ? ",\n  \"mode\": \"overhead\",\n  \"skipped\": ["
                             : ",\n  \"ns_per_op\": \"wall time / operations per thread\",\n  \"skipped\": [", out);
        for (size_t i = 0; i < meta->nskipped; i++) {
            fputs(i ? ",\n    {\"resource\": " : "\n    {\"resource\": ", out);
            text_write_json_string(out, meta->skipped_names[i]);
            fputs(", \"reason\": ", out);
            text_write_json_string(out, meta->skipped_reasons[i]);
            fputs("}", out);
        }
        fputs(meta->nskipped ? "\n  ],\n  \"results\": [" : "],\n  \"results\": [", out);
        break;
    }
    fflush(out);
    return rep;
}

void bench_report_set(bench_report *rep, const bench_set *set)
{
    if (!rep || rep->format != BENCH_FORMAT_TABLE)
        return;
    FILE *f = rep->out;
    const bench_workload *w = &set->workload;
    char max[32], live[32];
    crmm_format_size(w->max_size, max, sizeof max);
    crmm_format_size(set->peak_live_bytes, live, sizeof live);
    fprintf(f, "\nset %s: ", set->label);
    if (is_random(set)) {
        char usage[32];
        fprintf(f, "RMM random_allocations, %llu allocations in %llu steps (%u%% allocate), sizes 1 B .. %s, "
                   "live bytes < %s",
                (unsigned long long)w->allocations, (unsigned long long)set_steps(set), BENCH_RANDOM_ALLOC_PERCENT,
                max, crmm_format_size(w->max_usage, usage, sizeof usage));
    } else {
        fprintf(f, "%llu steps, <= %u live, sizes 1 B .. %s", (unsigned long long)w->steps, w->max_live, max);
    }
    if (set->threads > 1)
        fprintf(f, ", %u threads (each its own sequence and stream); peak live %s (sum over threads)\n", set->threads, live);
    else
        fprintf(f, ", 1 thread; peak live %s\n", live);
    fprintf(f, "  %llu ops per run; ns/op = %s, median of %u run%s after 1 warm-up\n",
            (unsigned long long)set->total_ops,
            set->threads > 1 ? "wall time / ops per thread" : "wall time / ops", set->repeats,
            set->repeats == 1 ? "" : "s");
    fprintf(f, "  reserved/live = peak bytes the resource reserved / peak live bytes of the workload (a pool's\n"
               "  initial size counts as reserved: a large ratio on a small set is its initial size)\n");
    fprintf(f, "%-12s %-20s %-12s %12s %12s %12s %10s %14s\n", "set", "resource", "plugin", "ns/op", "min",
            "max", "ops/s", "reserved/live");
    fflush(f);
}

static void row_table(bench_report *rep, const bench_set *set, const char *name, const char *plugin,
                      const bench_result *r)
{
    FILE *f = rep->out;
    fprintf(f, "%-12s %-20s %-12s ", set->label, name, plugin);
    if (r->outcome != BENCH_OUTCOME_OK) {
        fprintf(f, "%12s %12s %12s %10s %14s\n", r->outcome == BENCH_OUTCOME_OOM ? "OOM" : "error", "-", "-", "-", "-");
        fprintf(f, "%-12s   %s\n", "", r->error);
        return;
    }
    char rate[32], ratio[32] = "-";
    if (r->has_peak_reserved && set->peak_live_bytes)
        snprintf(ratio, sizeof ratio, "%.2f", (double)r->peak_reserved_bytes / (double)set->peak_live_bytes);
    fprintf(f, "%12.1f %12.1f %12.1f %10s %14s\n", r->ns_per_op_median, r->ns_per_op_min, r->ns_per_op_max,
            format_rate(r->ops_per_second, rate, sizeof rate), ratio);
}

static void row_csv(bench_report *rep, const bench_set *set, const char *name, const char *plugin,
                    const bench_result *r)
{
    FILE *f = rep->out;
    const bench_workload *w = &set->workload;
    text_write_csv_field(f, set->label);
    fprintf(f, ",%s,%llu,", is_random(set) ? "random" : "steps", (unsigned long long)set_steps(set));
    if (!is_random(set))
        fprintf(f, "%u", w->max_live);
    fputc(',', f);
    if (is_random(set))
        fprintf(f, "%llu", (unsigned long long)w->allocations);
    fprintf(f, ",%llu,%u,%u,", (unsigned long long)w->max_size, set->threads, set->repeats);
    text_write_csv_field(f, name);
    fputc(',', f);
    text_write_csv_field(f, plugin);
    fprintf(f, ",%s,", outcome_name(r->outcome));
    if (r->outcome == BENCH_OUTCOME_OK)
        fprintf(f, "%.1f,%.1f,%.1f,%.0f", r->ns_per_op_median, r->ns_per_op_min, r->ns_per_op_max, r->ops_per_second);
    else
        fputs(",,,", f);
    fprintf(f, ",%llu,%llu,", (unsigned long long)set->total_ops, (unsigned long long)set->peak_live_bytes);
    if (r->outcome == BENCH_OUTCOME_OK && r->has_peak_reserved) {
        fprintf(f, "%llu,", (unsigned long long)r->peak_reserved_bytes);
        if (set->peak_live_bytes)
            fprintf(f, "%.4f", (double)r->peak_reserved_bytes / (double)set->peak_live_bytes);
    } else {
        fputc(',', f);
    }
    fputc(',', f);
    text_write_csv_field(f, r->outcome == BENCH_OUTCOME_OK ? NULL : r->error);
    fputc('\n', f);
}

static void json_number_or_null(FILE *f, bool present, const char *fmt, double v)
{
    if (present)
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

static void row_json(bench_report *rep, const bench_set *set, const char *name, const char *plugin,
                     const bench_result *r)
{
    FILE *f = rep->out;
    const bench_workload *w = &set->workload;
    bool ok = r->outcome == BENCH_OUTCOME_OK;
    fputs(rep->first_result ? "\n    {\"set\": " : ",\n    {\"set\": ", f);
    rep->first_result = false;
    text_write_json_string(f, set->label);
    fprintf(f, ", \"mode\": \"%s\", \"steps\": %llu, \"max_live\": ", is_random(set) ? "random" : "steps",
            (unsigned long long)set_steps(set));
    json_number_or_null(f, !is_random(set), "%.0f", (double)w->max_live);
    fputs(", \"allocations\": ", f);
    json_number_or_null(f, is_random(set), "%.0f", (double)w->allocations);
    fprintf(f, ", \"max_size\": %llu, \"threads\": %u, \"repeats\": %u, \"resource\": ",
            (unsigned long long)w->max_size, set->threads, set->repeats);
    text_write_json_string(f, name);
    fputs(", \"plugin\": ", f);
    text_write_json_string(f, plugin);
    fprintf(f, ", \"status\": \"%s\", \"error\": ", outcome_name(r->outcome));
    text_write_json_string(f, ok ? NULL : r->error);
    fputs(", \"ns_per_op_median\": ", f);
    json_number_or_null(f, ok, "%.1f", r->ns_per_op_median);
    fputs(", \"ns_per_op_min\": ", f);
    json_number_or_null(f, ok, "%.1f", r->ns_per_op_min);
    fputs(", \"ns_per_op_max\": ", f);
    json_number_or_null(f, ok, "%.1f", r->ns_per_op_max);
    fputs(", \"ops_per_second\": ", f);
    json_number_or_null(f, ok, "%.0f", r->ops_per_second);
    fprintf(f, ", \"total_ops\": %llu, \"peak_live_bytes\": %llu, \"peak_reserved_bytes\": ",
            (unsigned long long)set->total_ops, (unsigned long long)set->peak_live_bytes);
    bool reserved = ok && r->has_peak_reserved;
    if (reserved)
        fprintf(f, "%llu", (unsigned long long)r->peak_reserved_bytes);
    else
        fputs("null", f);
    fputs(", \"reserved_over_live\": ", f);
    json_number_or_null(f, reserved && set->peak_live_bytes, "%.4f",
                        set->peak_live_bytes ? (double)r->peak_reserved_bytes / (double)set->peak_live_bytes : 0);
    fputs("}", f);
}

void bench_report_row(bench_report *rep, const bench_set *set, const char *name, const char *plugin,
                      const bench_result *result)
{
    if (!rep)
        return;
    switch (rep->format) {
    case BENCH_FORMAT_TABLE: row_table(rep, set, name, plugin, result); break;
    case BENCH_FORMAT_CSV: row_csv(rep, set, name, plugin, result); break;
    case BENCH_FORMAT_JSON: row_json(rep, set, name, plugin, result); break;
    }
    fflush(rep->out);
}

/* ---- overhead reports ------------------------------------------------------------------------ */

/* Digits after the point for a unit: milliseconds to the microsecond, ns/pair to 10 ps. */
static int unit_precision(const char *unit)
{
    return strcmp(unit, "ms") == 0 ? 3 : strcmp(unit, "ns/pair") == 0 ? 2 : 1;
}

void bench_report_overhead_section(bench_report *rep, const char *description, const char *unit)
{
    if (!rep || rep->format != BENCH_FORMAT_TABLE)
        return;
    FILE *f = rep->out;
    size_t n = strlen(description);
    fprintf(f, "\n%s%s", description, n && description[n - 1] == '\n' ? "" : "\n");
    fprintf(f, "%-12s %-22s %12s %12s %12s %12s  %-12s %s\n", "measurement", "name", unit, "min", "max", "added",
            "over", "target");
    fflush(f);
}

static void overhead_table(bench_report *rep, const bench_overhead_row *r)
{
    FILE *f = rep->out;
    fprintf(f, "%-12s %-22s ", r->measurement, r->name);
    if (r->outcome != BENCH_OUTCOME_OK) {
        fprintf(f, "%12s %12s %12s %12s  %-12s %s\n", r->outcome == BENCH_OUTCOME_OOM ? "OOM" : "error", "-", "-",
                "-", "-", r->target ? r->target : "-");
        fprintf(f, "%-12s   %s\n", "", r->error ? r->error : "");
        return;
    }
    int p = unit_precision(r->unit);
    char added[32] = "-";
    if (r->baseline)
        snprintf(added, sizeof added, "%+.*f", p, r->added);
    fprintf(f, "%12.*f %12.*f %12.*f %12s  %-12s ", p, r->median, p, r->min, p, r->max, added,
            r->baseline ? r->baseline : "-");
    if (r->target)
        fprintf(f, "%s: %s\n", r->target, r->target_met == 1 ? "met" : r->target_met == 0 ? "MISSED" : "-");
    else
        fputs("-\n", f);
}

static void overhead_csv(bench_report *rep, const bench_overhead_row *r)
{
    FILE *f = rep->out;
    bool ok = r->outcome == BENCH_OUTCOME_OK;
    int p = unit_precision(r->unit);
    text_write_csv_field(f, r->measurement);
    fputc(',', f);
    text_write_csv_field(f, r->name);
    fputc(',', f);
    text_write_csv_field(f, r->detail);
    fputc(',', f);
    text_write_csv_field(f, r->unit);
    fprintf(f, ",%u,%s,", r->samples, outcome_name(r->outcome));
    if (ok)
        fprintf(f, "%.*f,%.*f,%.*f,", p, r->median, p, r->min, p, r->max);
    else
        fputs(",,,", f);
    text_write_csv_field(f, r->baseline);
    fputc(',', f);
    if (ok && r->baseline)
        fprintf(f, "%.*f", p, r->added);
    fputc(',', f);
    text_write_csv_field(f, r->target);
    fprintf(f, ",%s,", r->target_met == 1 ? "true" : r->target_met == 0 ? "false" : "");
    text_write_csv_field(f, ok ? NULL : r->error);
    fputc('\n', f);
}

static void overhead_json(bench_report *rep, const bench_overhead_row *r)
{
    FILE *f = rep->out;
    bool ok = r->outcome == BENCH_OUTCOME_OK;
    int p = unit_precision(r->unit);
    char fmt[8];
    snprintf(fmt, sizeof fmt, "%%.%df", p);
    fputs(rep->first_result ? "\n    {\"measurement\": " : ",\n    {\"measurement\": ", f);
    rep->first_result = false;
    text_write_json_string(f, r->measurement);
    fputs(", \"name\": ", f);
    text_write_json_string(f, r->name);
    fputs(", \"detail\": ", f);
    text_write_json_string(f, r->detail);
    fputs(", \"unit\": ", f);
    text_write_json_string(f, r->unit);
    fprintf(f, ", \"samples\": %u, \"status\": \"%s\", \"error\": ", r->samples, outcome_name(r->outcome));
    text_write_json_string(f, ok ? NULL : r->error);
    fputs(", \"median\": ", f);
    json_number_or_null(f, ok, fmt, r->median);
    fputs(", \"min\": ", f);
    json_number_or_null(f, ok, fmt, r->min);
    fputs(", \"max\": ", f);
    json_number_or_null(f, ok, fmt, r->max);
    fputs(", \"baseline\": ", f);
    text_write_json_string(f, r->baseline);
    fputs(", \"added\": ", f);
    json_number_or_null(f, ok && r->baseline, fmt, r->added);
    fputs(", \"target\": ", f);
    text_write_json_string(f, r->target);
    fprintf(f, ", \"target_met\": %s}", r->target_met == 1 ? "true" : r->target_met == 0 ? "false" : "null");
}

void bench_report_overhead_row(bench_report *rep, const bench_overhead_row *row)
{
    if (!rep || !row)
        return;
    switch (rep->format) {
    case BENCH_FORMAT_TABLE: overhead_table(rep, row); break;
    case BENCH_FORMAT_CSV: overhead_csv(rep, row); break;
    case BENCH_FORMAT_JSON: overhead_json(rep, row); break;
    }
    fflush(rep->out);
}

void bench_report_end(bench_report *rep)
{
    if (!rep)
        return;
    if (rep->format == BENCH_FORMAT_JSON)
        fputs(rep->first_result ? "]\n}\n" : "\n  ]\n}\n", rep->out);
    fflush(rep->out);
    free(rep);
}
