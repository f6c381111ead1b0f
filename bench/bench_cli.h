/* bench_cli.h — `crmm bench`: arguments, the run over sets × resources, output; with --copy it
 * hands over to the copy benchmark (bench_copy.h).
 *
 * tools/cmd_bench.c hands the command line here with stdout/stderr; the tests call it with
 * temporary files to check what the command prints. */
#ifndef CRMM_BENCH_CLI_H
#define CRMM_BENCH_CLI_H

#include <stdio.h>

/* Run `crmm bench` with argv[0] = "bench" and the arguments after it; results go to `out`,
 * messages (and the progress line, when `err` is a terminal) to `err`. Returns the exit status:
 * 0 when every measurement ran (a resource that ran out of memory is a result, "OOM"), 1 when a
 * measurement failed otherwise or the config could not be loaded, 2 for bad arguments. */
int bench_cli_main(int argc, char **argv, FILE *out, FILE *err);

/* Print `crmm bench --help`. */
void bench_cli_usage(FILE *f);

#endif
