/* check_bench_overhead.c — `crmm bench --overhead` without a GPU: the dispatch and load
 * measurements, their table, CSV and JSON, and the command line's errors. */
#include "build_config.h"
#include "bench_cli_output.h"

static int gpu_count;

/* ---- --overhead ------------------------------------------------------------------------------- */

static void check_stats(const char *what, const bench_stats *s, double sane_max)
{
    ck_assert_msg(s->min > 0 && s->min <= s->median && s->median <= s->max, "%s: median %g, min %g, max %g", what,
                  s->median, s->min, s->max);
    ck_assert_msg(s->max < sane_max, "%s: %g is not a sane time", what, s->max);
}

CRMM_TEST_IN("overhead", overhead_dispatch_times_are_sane)
{
    bench_dispatch_times t;
    ck_assert_crmm_ok(bench_overhead_time_dispatch(100000, 3, &t));
    ck_assert_uint_eq(t.iterations, 100000);
    ck_assert_uint_eq(t.repeats, 3);
    /* a pair of calls that do nothing: well under 10 us even on a loaded machine under ASan */
    check_stats("direct", &t.direct, 1e4);
    check_stats("abi", &t.abi, 1e4);
    check_stats("adaptor", &t.adaptor, 1e4);
    ck_assert_crmm(bench_overhead_time_dispatch(0, 3, &t), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(bench_overhead_time_dispatch(10, 0, &t), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(bench_overhead_time_dispatch(10, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
}

/* True when a file whose name contains `name` is mapped into this process. */
static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

CRMM_TEST_IN("overhead", overhead_loads_time_fresh_children)
{
    /* p's plugin is missing: the children load the file without p and q */
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    bench_load_times t;
    ck_assert_crmm_ok(bench_overhead_time_loads(path, 3, &t));
    ck_assert_msg(t.outcome == BENCH_OUTCOME_OK, "%s", t.error);
    ck_assert_uint_eq(t.processes, 3);
    check_stats("cold", &t.cold, 1e4);
    check_stats("warm", &t.warm, 1e4);
    /* the loading happened in the children only: this process can still fork fresh ones */
    ck_assert(!mapped("crmm_host.so"));
    ck_assert(!mapped("crmm_template.so"));

    ck_assert_crmm(bench_overhead_time_loads("/nonexistent/crmm.ini", 2, &t), CRMM_ERROR_IO);
    ck_assert_msg(strstr(crmm_last_error(), "/nonexistent/crmm.ini") != NULL, "%s", crmm_last_error());
    path = crmm_test_write_file("bad.ini", "[resource.h]\nplugin = host\nsize = 12\n");
    ck_assert_crmm(bench_overhead_time_loads(path, 2, &t), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "bad.ini:3:") != NULL, "%s", crmm_last_error());
    ck_assert_crmm(bench_overhead_time_loads(path, 0, &t), CRMM_ERROR_INVALID_ARGUMENT);
}

/* The numbers of an overhead table row: median, min, max, added; returns how many parsed
 * (3 when added is '-'). */
static int overhead_numbers(const char *text, const char *measurement, const char *name, double v[4])
{
    const char *row = find_row(text, measurement, name);
    ck_assert_msg(row != NULL, "no row %s %s in:\n%s", measurement, name, text);
    return sscanf(row, "%*s %*s %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3]);
}

static bool dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int entries = 0;
    while ((e = readdir(d)))
        entries += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return entries == 0;
}

CRMM_TEST_IN("overhead", cli_overhead_table)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    /* the log goes under $TMPDIR, here one with a '%' in its name (the plugin expands '%') */
    char *tmp = crmm_test_tmpdir(), logs[4096];
    ck_assert_ptr_nonnull(tmp);
    snprintf(logs, sizeof logs, "%s/100%%p", tmp);
    ck_assert_int_eq(mkdir(logs, 0700), 0);
    setenv("TMPDIR", logs, 1);
    crmm_test_output r = run_cli("--overhead", "--iterations", "100000", "--loads", "3", "--steps", "1000", "--repeats",
                                 "2", "--config", path, NULL);
    unsetenv("TMPDIR");
    ck_assert_msg(r.status == 0, "exit %d: %s\n%s", r.status, r.err, r.out);
    ck_assert_msg(dir_is_empty(logs), "the log was left in %s", logs);
    free(tmp); /* removed with logs when the test's process exits */
    ck_assert_ptr_nonnull(strstr(r.out, "skipped p: "));
    double direct[4], abi[4], adaptor[4], cold[4], warm[4], plain[4], logged[4];
    ck_assert_int_eq(overhead_numbers(r.out, "dispatch", "direct", direct), 3);
    ck_assert_int_eq(overhead_numbers(r.out, "dispatch", "abi", abi), 4);
    ck_assert_int_eq(overhead_numbers(r.out, "dispatch", "adaptor", adaptor), 4);
    ck_assert(direct[0] > 0 && abi[0] > 0 && adaptor[0] > 0);
    ck_assert(isfinite(abi[3]) && fabs(abi[3] - (abi[0] - direct[0])) < 0.02);
    ck_assert(fabs(adaptor[3] - (adaptor[0] - abi[0])) < 0.02);
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "dispatch", "abi"), "added <= 4 ns/pair (2 per call): "));
    ck_assert_ptr_nonnull(strstr(r.out, ", 100000 pairs per run, median of 2 runs after 1 warm-up"));
    ck_assert_int_eq(overhead_numbers(r.out, "config_load", "cold", cold), 3);
    ck_assert_int_eq(overhead_numbers(r.out, "config_load", "warm", warm), 3);
    ck_assert(cold[0] > 0 && warm[0] > 0);
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "config_load", "cold"), "<= 5 ms: "));
    ck_assert_msg(strstr(r.out, "2 resources, 2 plugins (the resources whose plugin does not load left out)"), "%s",
                  r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "median of 3 child processes"));
    ck_assert_ptr_nonnull(strstr(r.out, "set A (1000 steps, <= 1000 live, sizes 1 B .. 4.0 MiB, 1 thread)"));
    ck_assert_int_eq(overhead_numbers(r.out, "logging", "h", plain), 3);
    ck_assert_int_eq(overhead_numbers(r.out, "logging", "logging(h)", logged), 4);
    ck_assert(plain[0] > 0 && logged[0] > 0 && fabs(logged[3] - (logged[0] - plain[0])) < 0.2);
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "logging", "logging(h)"), "added <= 150 ns/op: "));
    /* only pool, arena and host resources unless named */
    ck_assert_ptr_null(find_row(r.out, "logging", "t"));
    ck_assert_ptr_null(strstr(r.out, "no CUDA device"));
    crmm_test_output_free(&r);

    r = run_cli("--overhead", "--iterations=1000", "--loads=1", "--steps=200", "--repeats=1", "--config", path,
                "--resource", "t", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "t"));
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "logging(t)"));
    ck_assert_ptr_null(find_row(r.out, "logging", "h"));
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("overhead", cli_overhead_without_a_gpu_runs_over_host_memory)
{
    const char *path = crmm_test_write_file("gpu.ini", "[resource.g]\nplugin = cuda\n\n[resource.h]\nplugin = host\n");
    crmm_test_output r = run_cli("--overhead", "--iterations", "1000", "--loads", "2", "--steps", "200", "--repeats", "1",
                                 "--config", path, "--resource", "g", "--resource", "h", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(find_row(r.out, "dispatch", "abi"));
    ck_assert_ptr_nonnull(find_row(r.out, "config_load", "cold"));
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "logging(h)"));
    if (gpu_count == 0) {
        ck_assert_msg(strstr(r.out, "GPU resources are skipped; the overhead measurements run over host memory"),
                      "%s", r.out);
        ck_assert_ptr_nonnull(strstr(r.out, "skipped g: GPU resource: needs a CUDA device"));
        ck_assert_ptr_null(find_row(r.out, "logging", "g"));
    } else {
        ck_assert_ptr_nonnull(find_row(r.out, "logging", "logging(g)"));
    }
    crmm_test_output_free(&r);

    /* nothing left for the logging measurement: the other two still run, and say so */
    if (gpu_count == 0) {
        r = run_cli("--overhead", "--iterations", "1000", "--loads", "1", "--repeats", "1", "--config", path,
                    "--resource", "g", NULL);
        ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
        ck_assert_ptr_nonnull(find_row(r.out, "config_load", "cold"));
        ck_assert_ptr_nonnull(strstr(r.err, "logging: no resource to measure it over"));
        crmm_test_output_free(&r);
    }
}

CRMM_TEST_IN("overhead", cli_overhead_failed_measurement_exits_1)
{
    /* host is found through the config's plugin_path, logging (crmm_resource_create, which
     * searches $CRMM_PLUGIN_PATH and the installed directory) nowhere */
    const char *env = getenv("CRMM_PLUGIN_PATH");
    ck_assert_ptr_nonnull(env);
    char *saved = strdup(env), text[8192];
    ck_assert_ptr_nonnull(saved);
    snprintf(text, sizeof text, "[crmm]\nplugin_path = %.*s\n\n[resource.h]\nplugin = host\n",
             (int)strcspn(saved, ":"), saved);
    const char *path = crmm_test_write_file("nolog.ini", text);
    setenv("CRMM_PLUGIN_PATH", "/nonexistent", 1);
    crmm_test_output r = run_cli("--overhead", "--iterations", "1000", "--loads", "1", "--steps", "200", "--repeats", "1",
                                 "--config", path, NULL);
    setenv("CRMM_PLUGIN_PATH", saved, 1);
    free(saved);
    if (r.status == 0 && !strstr(r.out, "no plugin 'logging'")) {
        crmm_test_output_free(&r); /* an installed crmm_logging.so was found: nothing fails here */
        return;
    }
    ck_assert_msg(r.status == 1, "exit %d: %s\n%s", r.status, r.err, r.out);
    ck_assert_ptr_nonnull(find_row(r.out, "logging", "h"));
    const char *row = find_row(r.out, "logging", "logging(h)");
    ck_assert_ptr_nonnull(row);
    ck_assert_msg(strstr(row, "error") && strstr(row, "no plugin 'logging'"), "%s", r.out);
    crmm_test_output_free(&r);
}

/* `crmm bench --overhead` over cli_config, short, printing `format`: it succeeds. */
static crmm_test_output short_overhead_run(const char *format)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--overhead", "--iterations", "1000", "--loads", "2", "--steps", "300", "--repeats", "1",
                                 "--config", path, format, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    return r;
}

CRMM_TEST_IN("overhead", cli_overhead_csv_is_well_formed)
{
    crmm_test_output r = short_overhead_run("--csv");
    ck_assert_ptr_nonnull(strstr(r.err, "skipped p: "));
    static const char *const starts[] = {"measurement,name,detail,unit,samples,status,median,min,max,baseline,added,"
                                         "target,target_met,error",
                                         "dispatch,direct,", "dispatch,abi,", "dispatch,adaptor,", "config_load,cold,",
                                         "config_load,warm,", "logging,h,", "logging,logging(h),"};
    int lines = 0;
    for (const char *line = r.out; *line; lines++) {
        const char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        ck_assert_int_lt(lines, 8);
        ck_assert_msg(strncmp(line, starts[lines], strlen(starts[lines])) == 0, "line %d: %.*s", lines,
                      (int)(eol - line), line);
        ck_assert_int_eq(csv_fields(line, (size_t)(eol - line)), 14);
        if (lines > 0)
            ck_assert_ptr_nonnull(strstr(line, ",ok,"));
        line = eol + 1;
    }
    ck_assert_int_eq(lines, 8);
    ck_assert_ptr_nonnull(strstr(r.out, ",direct,"));             /* abi's baseline */
    ck_assert_ptr_nonnull(strstr(r.out, ",added <= 150 ns/op,")); /* logging(h)'s target */
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("overhead", cli_overhead_json_is_well_formed)
{
    crmm_test_output r = short_overhead_run("--json");
    const char *end = json_value(r.out);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\"mode\": \"overhead\""));
    ck_assert_ptr_nonnull(strstr(r.out, "{\"resource\": \"p\", \"reason\": "));
    ck_assert_int_eq(crmm_test_count(r.out, "{\"measurement\": "), 7);
    ck_assert_int_eq(crmm_test_count(r.out, "\"status\": \"ok\""), 7);
    ck_assert_int_eq(crmm_test_count(r.out, "\"target\": \""), 3); /* abi, cold, logging(h) */
    ck_assert_int_eq(crmm_test_count(r.out, "\"target_met\": null"), 4);
    ck_assert_ptr_nonnull(strstr(r.out, "{\"measurement\": \"config_load\", \"name\": \"cold\", "));
    ck_assert_ptr_nonnull(strstr(r.out, "\"unit\": \"ms\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"name\": \"logging(h)\""));
    crmm_test_output_free(&r);
}

/* Overhead rows as each format writes them: one met, one missed, one failed. */
static char *overhead_report_text(bench_format format)
{
    FILE *out = tmpfile(), *err = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    bench_report_meta meta = {.config = "my.ini", .no_gpu_reason = "no driver", .overhead = true};
    bench_report *rep = bench_report_begin(format, out, err, &meta);
    ck_assert_ptr_nonnull(rep);
    bench_report_overhead_section(rep, "dispatch: test", "ns/pair");
    bench_overhead_row met = {.measurement = "dispatch", .name = "abi", .detail = "a, \"b\"", .unit = "ns/pair",
                              .samples = 3, .median = 5.5, .min = 5.25, .max = 6, .baseline = "direct", .added = 3.125,
                              .target = "added <= 4 ns/pair", .target_met = 1};
    bench_overhead_row missed = {.measurement = "config_load", .name = "cold", .detail = "x", .unit = "ms",
                                 .samples = 2, .median = 7.5, .min = 7, .max = 8, .target = "<= 5 ms", .target_met = 0};
    bench_overhead_row failed = {.measurement = "logging", .name = "logging(h)", .detail = "y", .unit = "ns/op",
                                 .outcome = BENCH_OUTCOME_ERROR, .error = "no plugin 'logging'",
                                 .target = "added <= 150 ns/op", .target_met = -1};
    bench_report_overhead_row(rep, &met);
    bench_report_overhead_row(rep, &missed);
    bench_report_overhead_row(rep, &failed);
    bench_report_end(rep);
    char *e = crmm_test_read_stream(err);
    if (format == BENCH_FORMAT_CSV)
        ck_assert_msg(strstr(e, "overhead measurements run over host memory") != NULL, "%s", e);
    else
        ck_assert_str_eq(e, "");
    free(e);
    return crmm_test_read_stream(out);
}

CRMM_TEST_IN("overhead", report_formats_overhead_rows)
{
    char *text = overhead_report_text(BENCH_FORMAT_TABLE);
    ck_assert_ptr_nonnull(strstr(text, "no CUDA device (no driver): GPU resources are skipped; the overhead"));
    ck_assert_ptr_nonnull(strstr(text, "\ndispatch: test\nmeasurement  name "));
    ck_assert_msg(strstr(text, "dispatch     abi                            5.50         5.25         6.00        "
                               "+3.12  direct       added <= 4 ns/pair: met\n"), "%s", text);
    ck_assert_msg(strstr(text, "config_load  cold                          7.500        7.000        8.000            "
                               "-  -            <= 5 ms: MISSED\n"), "%s", text);
    const char *row = find_row(text, "logging", "logging(h)");
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(strstr(row, "error"));
    ck_assert_ptr_nonnull(strstr(row, "no plugin 'logging'")); /* on the next line */
    free(text);

    text = overhead_report_text(BENCH_FORMAT_CSV);
    ck_assert_msg(strstr(text, "\ndispatch,abi,\"a, \"\"b\"\"\",ns/pair,3,ok,5.50,5.25,6.00,direct,3.12,"
                               "added <= 4 ns/pair,true,\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nconfig_load,cold,x,ms,2,ok,7.500,7.000,8.000,,,<= 5 ms,false,\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nlogging,logging(h),y,ns/op,0,error,,,,,,added <= 150 ns/op,,no plugin 'logging'\n"),
                  "%s", text);
    free(text);

    text = overhead_report_text(BENCH_FORMAT_JSON);
    const char *end = json_value(text);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\"detail\": \"a, \\\"b\\\"\""));
    ck_assert_ptr_nonnull(strstr(text, "\"median\": 5.50, \"min\": 5.25, \"max\": 6.00, \"baseline\": \"direct\", "
                                       "\"added\": 3.12, \"target\": \"added <= 4 ns/pair\", \"target_met\": true}"));
    ck_assert_ptr_nonnull(strstr(text, "\"added\": null, \"target\": \"<= 5 ms\", \"target_met\": false}"));
    ck_assert_ptr_nonnull(strstr(text, "\"status\": \"error\", \"error\": \"no plugin 'logging'\", \"median\": null"));
    free(text);
}

CRMM_TEST_IN("overhead", cli_overhead_bad_arguments_exit_2)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    expect_usage_error("--overhead --set", run_cli("--overhead", "--set", "A", "--config", path, NULL));
    expect_usage_error("--overhead --mode", run_cli("--overhead", "--mode", "sets", "--config", path, NULL));
    expect_usage_error("--overhead --threads", run_cli("--overhead", "--threads", "2", "--config", path, NULL));
    expect_usage_error("--overhead --live", run_cli("--overhead", "--live", "5", "--config", path, NULL));
    expect_usage_error("--overhead --max-size", run_cli("--overhead", "--max-size", "1KiB", "--config", path, NULL));
    expect_usage_error("--overhead --allocations", run_cli("--overhead", "--allocations", "5", "--config", path, NULL));
    expect_usage_error("--overhead --no-references", run_cli("--overhead", "--no-references", "--config", path, NULL));
    expect_usage_error("--iterations alone", run_cli("--iterations", "10", "--config", path, NULL));
    expect_usage_error("--loads alone", run_cli("--loads", "10", "--config", path, NULL));
    expect_usage_error("--iterations 0", run_cli("--overhead", "--iterations", "0", "--config", path, NULL));
    expect_usage_error("--iterations x", run_cli("--overhead", "--iterations", "1e6", "--config", path, NULL));
    expect_usage_error("--loads 0", run_cli("--overhead", "--loads", "0", "--config", path, NULL));
    expect_usage_error("--loads 1001", run_cli("--overhead", "--loads", "1001", "--config", path, NULL));
    expect_usage_error("--overhead=1", run_cli("--overhead=1", "--config", path, NULL));
    expect_usage_error("--overhead --csv --json", run_cli("--overhead", "--csv", "--json", "--config", path, NULL));
    expect_usage_error("--overhead --resource nope",
                       run_cli("--overhead", "--loads", "1", "--iterations", "10", "--resource", "nope", "--config",
                               path, NULL));
    crmm_test_output r = run_cli("--overhead", "--set", "A", "--config", path, NULL);
    ck_assert_ptr_nonnull(strstr(r.err, "--set does not apply to --overhead"));
    crmm_test_output_free(&r);
    r = run_cli("--loads", "3", "--config", path, NULL);
    ck_assert_ptr_nonnull(strstr(r.err, "--loads applies to --overhead"));
    crmm_test_output_free(&r);
    /* a config that cannot be loaded is exit 1, as without --overhead */
    r = run_cli("--overhead", "--config", "/nonexistent/crmm.ini", NULL);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/crmm.ini"));
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("overhead", cli_overhead_help)
{
    crmm_test_output r = run_cli("--help", NULL);
    ck_assert_int_eq(r.status, 0);
    static const char *const words[] = {"--overhead", "--iterations", "--loads", "dispatch", "config_load", "logging",
                                        "crmm_resource_allocate", "pass-through adaptor", "auto_flush=false",
                                        "<= 5 ms", "150 ns/op", "2 ns per call"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        ck_assert_msg(strstr(r.out, words[i]) != NULL, "--help does not mention %s", words[i]);
    crmm_test_output_free(&r);
}

int main(void)
{
    gpu_count = crmm_test_gpu_count(); /* probed in a child: no CUDA call here */
    Suite *s = suite_create("bench_overhead");
    TCase *tc = crmm_test_tcase(s, "overhead", 0);
    tcase_set_timeout(tc, CRMM_TEST_GPU_TIMEOUT); /* logging over a GPU resource when there is one */
    return crmm_test_run(s);
}
