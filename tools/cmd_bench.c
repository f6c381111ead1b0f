/* cmd_bench.c — `crmm bench`: the benchmark in bench/ (bench_cli.c, which runs the copy
 * benchmark for --copy). */
#include "build_config.h"
#include <stdio.h>
#include "commands.h"
#include "bench_cli.h"

int crmm_cmd_bench(int argc, char **argv) { return bench_cli_main(argc, argv, stdout, stderr); }
