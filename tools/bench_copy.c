/* bench_copy.c — `crmm bench --copy` (placeholder until the copy benchmark lands). */
#include "config.h"
#include <stdio.h>
#include "commands.h"

int crmm_bench_copy(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "crmm bench --copy: not built yet\n");
    return 1;
}
