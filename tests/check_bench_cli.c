/* check_bench_cli.c — `crmm bench` without a GPU: the lenient config loader, the report writer and
 * the command line (run in-process through bench_cli_main, its output captured in temporary
 * files). */
#include "build_config.h"
#include "bench_cli_output.h"

/* ---- the lenient config ---------------------------------------------------------------------- */

CRMM_TEST_IN("config", config_skips_resources_whose_plugin_does_not_load)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    bench_config *bc;
    ck_assert_crmm_ok(bench_config_open(path, &bc));
    ck_assert_str_eq(bench_config_origin(bc), path);
    ck_assert_uint_eq(bench_config_resource_count(bc), 2);
    ck_assert_str_eq(bench_config_resource_name(bc, 0), "h");
    ck_assert_str_eq(bench_config_resource_name(bc, 1), "t");
    ck_assert_str_eq(bench_config_resource_plugin(bc, 1), "template");
    ck_assert(bench_config_resource_is_host(bc, 1));
    ck_assert_int_eq(bench_config_find(bc, "t"), 1);
    ck_assert_int_eq(bench_config_find(bc, "p"), -1);
    ck_assert_uint_eq(bench_config_skipped_count(bc), 2);
    ck_assert_str_eq(bench_config_skipped_name(bc, 0), "p");
    ck_assert_ptr_nonnull(strstr(bench_config_skipped_reason(bc, 0), "nosuchplugin"));
    ck_assert_str_eq(bench_config_skipped_name(bc, 1), "q");
    ck_assert_ptr_nonnull(strstr(bench_config_skipped_reason(bc, 1), "upstream 'p'"));
    /* fresh instances each time */
    crmm_resource *a, *b;
    ck_assert_crmm_ok(bench_config_create(bc, "t", -1, &a));
    ck_assert_crmm_ok(bench_config_create(bc, "t", -1, &b));
    ck_assert_ptr_ne(a, b);
    ck_assert_str_eq(crmm_resource_kind(a), "template");
    ck_assert_int_eq(crmm_resource_refcount(a), 1);
    crmm_resource_release(a);
    crmm_resource_release(b);
    bench_config_close(bc);
}

CRMM_TEST_IN("config", config_other_errors_stay_errors)
{
    /* an unknown key is a real mistake: the strict loader's message, even with a missing plugin */
    const char *path = crmm_test_write_file("bad.ini", "[resource.h]\nplugin = host\nbogus_key = 1\n"
                                                       "[resource.p]\nplugin = nosuchplugin\n");
    bench_config *bc = NULL;
    ck_assert_crmm(bench_config_open(path, &bc), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(bc);
    ck_assert_msg(strstr(crmm_last_error(), "bad.ini:") != NULL, "message: %s", crmm_last_error());
    ck_assert_crmm(bench_config_open("/nonexistent/crmm.ini", &bc), CRMM_ERROR_IO);
    /* a config that loads strictly has nothing skipped */
    path = crmm_test_write_file("ok.ini", "[resource.h]\nplugin = host\n");
    ck_assert_crmm_ok(bench_config_open(path, &bc));
    ck_assert_uint_eq(bench_config_skipped_count(bc), 0);
    bench_config_close(bc);
}

/* ---- the command line ------------------------------------------------------------------------- */

static int gpu_count;

CRMM_TEST_IN("cli", cli_table_rows_and_skips)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "B", "--steps", "1000", "--repeats", "1", "--config", path, NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "skipped p: ") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "skipped q: its upstream 'p' was skipped") != NULL, "%s", r.out);
    ck_assert_msg(find_row(r.out, "B", "h") != NULL, "no row for h:\n%s", r.out);
    ck_assert_msg(find_row(r.out, "B", "t") != NULL, "no row for t:\n%s", r.out);
    ck_assert_ptr_null(find_row(r.out, "B", "p"));
    ck_assert_ptr_null(find_row(r.out, "A", "h"));
    ck_assert_ptr_nonnull(strstr(r.out, "set B: 1000 steps, <= 100 live, sizes 1 B .. 1.0 KiB, 1 thread"));
    ck_assert_ptr_nonnull(strstr(find_row(r.out, "B", "t"), "template"));
    if (gpu_count == 0) {
        ck_assert_msg(strstr(r.out, "no CUDA device (") != NULL, "%s", r.out);
        ck_assert_ptr_nonnull(strstr(r.out, "GPU resources and the raw CUDA references are skipped"));
        ck_assert_ptr_nonnull(strstr(r.out, "skipped cudaMalloc: raw CUDA reference"));
        ck_assert_ptr_nonnull(strstr(r.out, "skipped cudaMallocAsync: raw CUDA reference"));
        ck_assert_ptr_nonnull(strstr(r.out, "skipped cudaMallocFromPoolAsync: raw CUDA reference"));
    } else {
        ck_assert_msg(find_row(r.out, "B", "cudaMalloc") != NULL, "%s", r.out);
        ck_assert_msg(find_row(r.out, "B", "cudaMallocAsync") != NULL, "%s", r.out);
        ck_assert_msg(find_row(r.out, "B", "cudaMallocFromPoolAsync") != NULL, "%s", r.out);
    }
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("cli", cli_resource_can_name_references)
{
    /* naming a reference keeps only the references named; the config's resources still by name */
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "B", "--steps", "500", "--repeats", "1", "--config", path, "--resource", "h",
                                 "--resource", "cudaMallocFromPoolAsync", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(find_row(r.out, "B", "h") != NULL, "%s", r.out);
    ck_assert_ptr_null(find_row(r.out, "B", "t"));
    ck_assert_ptr_null(strstr(r.out, "cudaMallocAsync"));
    ck_assert_ptr_null(strstr(r.out, "cudaMalloc:"));
    ck_assert_ptr_null(find_row(r.out, "B", "cudaMalloc"));
    if (gpu_count == 0)
        ck_assert_msg(strstr(r.out, "skipped cudaMallocFromPoolAsync: raw CUDA reference") != NULL, "%s", r.out);
    else
        ck_assert_msg(find_row(r.out, "B", "cudaMallocFromPoolAsync") != NULL, "%s", r.out);
    crmm_test_output_free(&r);

    /* a config resource of a reference's name is what that name means; the reference stays out */
    const char *shadow = crmm_test_write_file("shadow.ini", "[resource.cudaMalloc]\nplugin = host\n[resource.h]\nplugin = host\n");
    r = run_cli("--set", "B", "--steps", "500", "--repeats", "1", "--config", shadow, "--resource", "cudaMalloc",
                "--resource", "cudaMallocAsync", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    const char *row = find_row(r.out, "B", "cudaMalloc");
    ck_assert_msg(row && strstr(row, " host ") != NULL, "%s", r.out);
    ck_assert_msg(find_row(row + 1, "B", "cudaMalloc") == NULL, "two cudaMalloc rows:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "skipped cudaMalloc:") == NULL, "%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "cudaMallocAsync"));
    ck_assert_ptr_null(find_row(r.out, "B", "h"));
    crmm_test_output_free(&r);
    for (int named = 0; named < 2; named++) { /* the same with no --resource, or that name alone */
        r = run_cli("--set", "B", "--steps", "500", "--repeats", "1", "--config", shadow, named ? "--resource" : NULL,
                    "cudaMalloc", NULL);
        ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
        row = find_row(r.out, "B", "cudaMalloc");
        ck_assert_msg(row && strstr(row, " host ") != NULL, "%s", r.out);
        ck_assert_msg(find_row(row + 1, "B", "cudaMalloc") == NULL, "two cudaMalloc rows:\n%s", r.out);
        ck_assert_msg(strstr(r.out, "skipped cudaMalloc:") == NULL, "%s", r.out);
        crmm_test_output_free(&r);
    }

    /* a reference named where no reference runs is a usage error, not an empty run */
    r = run_cli("--overhead", "--config", path, "--resource", "cudaMallocAsync", NULL);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--resource cudaMallocAsync: a raw CUDA reference, which --overhead does not measure"), "%s", r.err);
    crmm_test_output_free(&r);
    r = run_cli("--no-references", "--config", path, "--resource", "cudaMalloc", NULL);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--no-references leaves out"), "%s", r.err);
    crmm_test_output_free(&r);

    /* without a reference named, --resource leaves the references as they were */
    r = run_cli("--set", "B", "--steps", "500", "--repeats", "1", "--config", path, "--resource", "h", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "cudaMallocAsync"));
    ck_assert_ptr_nonnull(strstr(r.out, "cudaMallocFromPoolAsync"));
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("cli", cli_multi_thread_and_random_mode)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set=D", "--steps=400", "--repeats=2", "--config", path, "--resource", "t",
                                 "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(find_row(r.out, "D", "t"));
    ck_assert_ptr_null(find_row(r.out, "D", "h"));
    ck_assert_ptr_nonnull(strstr(r.out, "8 threads"));
    ck_assert_ptr_nonnull(strstr(r.out, "wall time / ops per thread"));
    ck_assert_ptr_null(strstr(r.out, "cudaMalloc"));
    ck_assert_ptr_null(strstr(r.out, "no CUDA device"));
    crmm_test_output_free(&r);

    r = run_cli("--mode", "random", "--allocations", "300", "--max-size", "64KiB,1MiB", "--repeats", "1",
                "--config", path, "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(find_row(r.out, "rand/64KiB", "h") != NULL, "%s", r.out);
    ck_assert_ptr_nonnull(find_row(r.out, "rand/1MiB", "t"));
    ck_assert_ptr_nonnull(strstr(r.out, "RMM random_allocations, 300 allocations in 600 steps (73% allocate)"));
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("cli", cli_csv_is_well_formed)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "B", "--steps", "1000", "--repeats", "1", "--config", path, "--csv",
                                 "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "skipped p: ")); /* notes go to stderr */
    int lines = 0, header_fields = 0;
    for (const char *line = r.out; *line;) {
        const char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        int n = csv_fields(line, (size_t)(eol - line));
        if (lines == 0) {
            ck_assert(strncmp(line, "set,mode,steps,", 15) == 0);
            header_fields = n;
        } else {
            ck_assert_int_eq(n, header_fields);
            ck_assert(strncmp(line, "B,steps,1000,100,,1024,1,1,", 27) == 0);
            ck_assert_ptr_nonnull(strstr(line, ",ok,"));
        }
        lines++;
        line = eol + 1;
    }
    ck_assert_int_eq(header_fields, 20);
    ck_assert_int_eq(lines, 3); /* header, h, t */
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("cli", cli_json_is_well_formed)
{
    const char *path = crmm_test_write_file("bench.ini", cli_config);
    crmm_test_output r = run_cli("--set", "A,B", "--steps", "300", "--repeats", "1", "--config", path, "--json", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    const char *end = json_value(r.out);
    ck_assert_msg(end != NULL, "not JSON:\n%s", r.out);
    ck_assert_str_eq(json_ws(end), "");
    ck_assert_int_eq(r.out[0], '{');
    ck_assert_ptr_nonnull(strstr(r.out, "\"tool\": \"crmm bench\""));
    ck_assert_ptr_nonnull(strstr(r.out, "\"skipped\": ["));
    ck_assert_ptr_nonnull(strstr(r.out, "\"results\": ["));
    ck_assert_ptr_nonnull(strstr(r.out, "{\"resource\": \"p\", \"reason\": "));
    int rows = gpu_count ? 10 : 4; /* 2 sets x (h, t [, cudaMalloc, cudaMallocAsync, cudaMallocFromPoolAsync]) */
    ck_assert_int_eq(crmm_test_count(r.out, "{\"set\": "), rows);
    ck_assert_int_eq(crmm_test_count(r.out, "\"status\": \"ok\""), rows);
    ck_assert_int_eq(crmm_test_count(r.out, "\"resource\": \"t\", \"plugin\": \"template\""), 2);
    ck_assert_int_eq(crmm_test_count(r.out, "\"set\": \"A\", \"mode\": \"steps\", \"steps\": 300, \"max_live\": 1000"),
                     rows / 2);
    if (!gpu_count)
        ck_assert_ptr_null(strstr(r.out, "\"no_gpu_reason\": null"));
    crmm_test_output_free(&r);

    /* nothing skipped, no GPU asked for: still valid */
    path = crmm_test_write_file("one.ini", "[resource.h]\nplugin = host\n");
    r = run_cli("--set", "B", "--steps", "100", "--repeats", "1", "--config", path, "--json", "--no-references", NULL);
    ck_assert_int_eq(r.status, 0);
    end = json_value(r.out);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\"skipped\": []"));
    ck_assert_ptr_nonnull(strstr(r.out, "\"device\": null"));
    crmm_test_output_free(&r);
}

/* ---- the report ---------------------------------------------------------------------------- */

/* Write a report with one OK and one OOM row in `format`; returns what it wrote to out. */
static char *report_text(bench_format format, char **err_text)
{
    FILE *out = tmpfile(), *err = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    const char *names[] = {"p"}, *reasons[] = {"plugin error: no plugin 'x', \"quoted\""};
    bench_report_meta meta = {.config = "my.ini", .device = "device 0: Test GPU", .nskipped = 1,
                              .skipped_names = names, .skipped_reasons = reasons};
    bench_report *rep = bench_report_begin(format, out, err, &meta);
    ck_assert_ptr_nonnull(rep);
    bench_set set = {.label = "A", .workload = steps_workload(100, 10, 4096), .threads = 1, .repeats = 3,
                     .peak_live_bytes = 1000, .total_ops = 200};
    bench_report_set(rep, &set);
    bench_result ok = {.outcome = BENCH_OUTCOME_OK, .threads = 1, .runs = 3, .ns_per_op_median = 50,
                       .ns_per_op_min = 40, .ns_per_op_max = 60, .ops_per_second = 2e7, .total_ops = 200,
                       .peak_live_bytes = 1000, .has_peak_reserved = true, .peak_reserved_bytes = 1500};
    bench_result oom = {.outcome = BENCH_OUTCOME_OOM, .threads = 1, .total_ops = 200, .peak_live_bytes = 1000};
    snprintf(oom.error, sizeof oom.error, "out of memory: pool 'main': failed to allocate 4.0 MiB, \"really\"");
    bench_report_row(rep, &set, "main", "pool", &ok);
    bench_report_row(rep, &set, "small", "pool", &oom);
    bench_report_end(rep);
    *err_text = crmm_test_read_stream(err);
    return crmm_test_read_stream(out);
}

CRMM_TEST_IN("cli", report_formats_ok_and_oom_rows)
{
    char *err, *text = report_text(BENCH_FORMAT_TABLE, &err);
    ck_assert_ptr_nonnull(strstr(text, "config my.ini; device 0: Test GPU"));
    ck_assert_ptr_nonnull(strstr(text, "skipped p: plugin error"));
    const char *row = find_row(text, "A", "main");
    ck_assert_ptr_nonnull(row);
    ck_assert_msg(strncmp(strstr(row, "pool"), "pool                 50.0         40.0         60.0     20.0 M           1.50", 67) == 0,
                  "row: %.120s", row);
    row = find_row(text, "A", "small");
    ck_assert_ptr_nonnull(row);
    ck_assert_ptr_nonnull(strstr(row, "OOM"));
    ck_assert_ptr_nonnull(strstr(row, "failed to allocate 4.0 MiB")); /* the reason, on the next line */
    ck_assert_str_eq(err, "");
    free(text);
    free(err);

    text = report_text(BENCH_FORMAT_CSV, &err);
    ck_assert_ptr_nonnull(strstr(err, "crmm bench: skipped p: "));
    ck_assert_ptr_nonnull(strstr(text, "\nA,steps,100,10,,4096,1,3,main,pool,ok,50.0,40.0,60.0,20000000,200,1000,1500,1.5000,\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nA,steps,100,10,,4096,1,3,small,pool,oom,,,,,200,1000,,,"
                                       "\"out of memory: pool 'main': failed to allocate 4.0 MiB, \"\"really\"\"\"\n"));
    free(text);
    free(err);

    text = report_text(BENCH_FORMAT_JSON, &err);
    const char *end = json_value(text);
    ck_assert_msg(end && !*json_ws(end), "not JSON:\n%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\"reason\": \"plugin error: no plugin 'x', \\\"quoted\\\"\""));
    ck_assert_ptr_nonnull(strstr(text, "\"status\": \"oom\", \"error\": \"out of memory: "));
    ck_assert_ptr_nonnull(strstr(text, "\"peak_reserved_bytes\": 1500, \"reserved_over_live\": 1.5000}"));
    ck_assert_ptr_nonnull(strstr(text, "\"ns_per_op_median\": null"));
    free(text);
    free(err);
}

/* Arguments `crmm bench` refuses as usage errors (at most 6, NULL-ended), and what its message
 * says; "@" stands for the path of a config of cli_config. */
#define CONFIG "--config", "@"
static const struct { const char *args[7], *says[2]; } usage_errors[] = {
    {{"--set", "Z", CONFIG}, {"--set: unknown set 'Z'"}},
    {{"--set", ",", CONFIG}, {"--set: no set named"}},
    {{"--steps", "0", CONFIG}, {"--steps: '0' is not a number of steps"}},
    {{"--steps", "-5", CONFIG}, {"--steps: '-5' is not a number of steps"}},
    {{"--steps", "1x", CONFIG}, {"--steps: '1x' is not a number of steps"}},
    {{"--steps", " -18446744073709551614", CONFIG}, {"is not a number of steps"}}, /* strtoull: 2 */
    {{"--repeats", " 3", CONFIG}, {"--repeats: ' 3' is not a number of runs"}},
    {{"--threads", "0", CONFIG}, {"--threads: '0' is not a number of threads"}},
    {{"--threads", "100000", CONFIG}, {"--threads: '100000' is not a number of threads"}},
    {{"--repeats", "0", CONFIG}, {"--repeats: '0' is not a number of runs"}},
    {{"--live", "0", CONFIG}, {"--live: '0' is not a number of blocks"}},
    {{"--max-size", "0", CONFIG}, {"--max-size: '0' is not a size"}},
    {{"--max-size", "5%", CONFIG}, {"--max-size: '5%' is not a size"}},
    {{"--max-size", ",", CONFIG}, {"--max-size: no size given"}},
    {{"--max-size", "1KiB,2KiB", CONFIG}, {"--max-size takes one size with --mode sets"}}, /* a list in sets */
    {{"--mode", "x", CONFIG}, {"--mode: 'x' is not a mode"}},
    {{"--mode", "random", "--set", "A", CONFIG}, {"--set applies to --mode sets"}},
    {{"--allocations", "10", CONFIG}, {"--allocations applies to --mode random"}},
    {{"--frobnicate", CONFIG}, {"unknown option '--frobnicate'"}},
    {{"A", CONFIG}, {"unknown option 'A'"}}, /* positional */
    {{CONFIG, "--steps"}, {"--steps needs a value"}},
    {{"--csv", "--json", CONFIG}, {"--csv and --json exclude each other"}},
    {{"--csv=1", CONFIG}, {"--csv takes no value"}},
    {{"--resource", "nope", CONFIG}, {"no [resource.nope]", "h t p q"}},
};

CRMM_LOOP_TEST_IN("cli", cli_bad_arguments_exit_2, (int)(sizeof usage_errors / sizeof usage_errors[0]))
{
    const char *path = crmm_test_write_file("bench.ini", cli_config), *const *args = usage_errors[_i].args;
    char *argv[8] = {"bench"};
    for (int i = 0; args[i]; i++)
        argv[i + 1] = (char *)(strcmp(args[i], "@") ? args[i] : path);
    crmm_test_output r = crmm_test_run_main(bench_cli_main, argv);
    for (int k = 0; k < 2 && usage_errors[_i].says[k]; k++)
        ck_assert_msg(strstr(r.err, usage_errors[_i].says[k]) != NULL, "'%s' not in: %s", usage_errors[_i].says[k], r.err);
    expect_usage_error(usage_errors[_i].says[0], r);
}

CRMM_TEST_IN("cli", cli_help_documents_everything)
{
    crmm_test_output r = run_cli("--help", NULL);
    ck_assert_int_eq(r.status, 0);
    static const char *const words[] = {"--config", "--resource", "--no-references", "--set", "--steps", "--live",
                                        "--max-size", "--threads", "--repeats", "--mode", "--allocations", "--csv",
                                        "--json", "--copy", "cudaMallocAsync", "xorshift64", "73%", "ns/op",
                                        "ops/s", "reserved/live", "OOM", "Exit status"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        ck_assert_msg(strstr(r.out, words[i]) != NULL, "--help does not mention %s", words[i]);
    crmm_test_output_free(&r);
}

/* Command lines that are no usage error, their exit status and what they say: on stdout when they
 * succeed, else on stderr with nothing on stdout; "@" stands for a config with a bad key on line 3.
 * --copy is an option like the others: with --help it shows the copy benchmark's usage, and as the
 * value of another option it is that value, not a switch to the copy benchmark. */
static const struct { const char *args[4]; int status; const char *says; } command_lines[] = {
    {{"--config", "/nonexistent/crmm.ini", "--set", "B"}, 1, "/nonexistent/crmm.ini"},
    {{"--config", "@", "--set", "B"}, 1, "bad.ini:3:"},
    {{"--copy", "--help"}, 0, "usage: crmm bench --copy"},
    {{"--config", "--copy", "--no-references"}, 1, "--copy"},
    {{"--copy", "--bogus"}, 2, "unknown option '--bogus'"},
    /* the copy benchmark's options after '=' too (it skips without a GPU; it writes to the
     * process's stdout, not the one captured here: its status is what is checked) */
    {{"--copy", "--repeats=3", "--max-size=2MiB"}, 0, ""},
};

CRMM_LOOP_TEST_IN("cli", cli_exit_status_and_message, (int)(sizeof command_lines / sizeof command_lines[0]))
{
    const char *bad = crmm_test_write_file("bad.ini", "[resource.h]\nplugin = host\nsize = 12\n");
    char *argv[6] = {"bench"};
    for (int i = 0; i < 4 && command_lines[_i].args[i]; i++)
        argv[i + 1] = (char *)(strcmp(command_lines[_i].args[i], "@") ? command_lines[_i].args[i] : bad);
    crmm_test_output r = crmm_test_run_main(bench_cli_main, argv);
    ck_assert_int_eq(r.status, command_lines[_i].status);
    const char *said = r.status ? r.err : r.out;
    ck_assert_msg(strstr(said, command_lines[_i].says) != NULL, "'%s' not in: %s", command_lines[_i].says, said);
    if (r.status)
        ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("cli", cli_default_config_is_crmm_init_s)
{
    const char *path = crmm_test_write_file("env.ini", "[resource.envhost]\nplugin = host\n");
    setenv("CRMM_CONFIG", path, 1);
    crmm_test_output r = run_cli("--set", "B", "--steps", "100", "--repeats", "1", "--no-references", NULL);
    unsetenv("CRMM_CONFIG");
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, path));
    ck_assert_ptr_nonnull(find_row(r.out, "B", "envhost"));
    /* the table explains its reserved/live column, not only --help */
    ck_assert_ptr_nonnull(strstr(r.out, "reserved/live = peak bytes the resource reserved / peak live bytes"));
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("cli", cli_shipped_config_loads)
{
    /* conf/crmm.ini works at every stage: resources whose plugin is not built are skipped */
    char path[4096];
    snprintf(path, sizeof path, "%s/../conf/crmm.ini", getenv("CRMM_TEST_SRCDIR") ? getenv("CRMM_TEST_SRCDIR") : "tests");
    crmm_test_output r = run_cli("--config", path, "--resource", "host", "--set", "B", "--steps", "200", "--repeats", "1",
                                 "--no-references", NULL);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(find_row(r.out, "B", "host") != NULL, "%s", r.out);
    crmm_test_output_free(&r);
}

int main(void)
{
    gpu_count = crmm_test_gpu_count(); /* probed in a child: no CUDA call here */
    Suite *s = suite_create("bench_cli");
    TCase *tc = crmm_test_tcase(s, "config", 0);
    tc = crmm_test_tcase(s, "cli", 0);
    tcase_set_timeout(tc, CRMM_TEST_GPU_TIMEOUT); /* the references run when there is a GPU */
    return crmm_test_run(s);
}
