/* bench_cli_output.h — what the `crmm bench` suites (check_bench_workload, check_bench_cli,
 * check_bench_overhead) share: a workload by steps, the command run in-process, and readers of
 * its table, CSV and JSON output. Functions marked "in a test" fail the running test. */
#ifndef CRMM_TESTS_BENCH_CLI_OUTPUT_H
#define CRMM_TESTS_BENCH_CLI_OUTPUT_H

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_support.h"
#include "../bench/bench_cli.h"
#include "../bench/bench_config.h"
#include "../bench/bench_overhead.h"
#include "../bench/bench_report.h"
#include "../bench/bench_runner.h"
#include "../bench/bench_workload.h"

/* A config of a host resource h, a template t over it, a resource p of a plugin that does not load
 * and q over p (the default, and device 0's): the lenient loader skips p and q. */
extern const char *const cli_config;

/* A workload of `steps` steps, at most `live` blocks live, sizes up to max_size. */
bench_workload steps_workload(uint64_t steps, uint32_t live, uint64_t max_size);

/* In a test: run `crmm bench ARGS...` (NULL-terminated) in-process. */
crmm_test_output run_cli(const char *first, ...);

/* The line of `text` that starts with the words `a` and `b` (separated by blanks), or NULL. */
const char *find_row(const char *text, const char *a, const char *b);

/* In a test: the number of CSV fields of one line (quotes respected; unbalanced ones fail). */
int csv_fields(const char *line, size_t len);

/* A minimal JSON syntax check: the end of the value at p, or NULL; json_ws skips blanks. */
const char *json_value(const char *p);
const char *json_ws(const char *p);

/* In a test: r is a usage error (exit 2, a "crmm bench: " message, nothing on stdout); frees r. */
void expect_usage_error(const char *what, crmm_test_output r);

#endif
