/* bench_copy.h — `crmm bench --copy`: bandwidth of crmm's host<->device copies beside raw
 * cudaMemcpy (bench_copy.c). bench_cli.c runs it when its arguments hold --copy. */
#ifndef CRMM_BENCH_COPY_H
#define CRMM_BENCH_COPY_H

#include <stdio.h>

/* Run the copy benchmark with the arguments of `crmm bench --copy ...` (argv[0] = "bench";
 * --copy itself is skipped). Prints its table on stdout. Returns the exit status: 0 (also when
 * there is no GPU: it skips), 1 when a copy failed, 2 for bad arguments. */
int bench_copy_main(int argc, char **argv);

/* Print `crmm bench --copy --help`. */
void bench_copy_usage(FILE *f);

#endif
