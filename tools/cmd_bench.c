/* cmd_bench.c — `crmm bench` (placeholder until the benchmark lands). */
#include "config.h"
#include <stdio.h>
#include "commands.h"

int crmm_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "crmm bench: not built yet\n");
    return 1;
}
