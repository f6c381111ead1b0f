/* cmd_bench.c — `crmm bench`: the allocation benchmark (bench/bench_cli.c), or with --copy the
 * copy benchmark (tools/bench_copy.c). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "../bench/bench_cli.h"

int crmm_cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--copy") == 0)
            return crmm_bench_copy(argc, argv);
    return bench_cli_main(argc, argv, stdout, stderr);
}
