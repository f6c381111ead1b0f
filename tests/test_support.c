/* test_support.c — GPU probing in a child process, the Check runner, temporary files. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

int crmm_test_gpu_count(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess)
            n = 0;
        _exit(n > 100 ? 100 : n);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 0;
    return WEXITSTATUS(status);
}

int crmm_test_gpu_required(int needed)
{
    const char *req = getenv("CRMM_TEST_REQUIRE_GPU");
    return req && *req && atoi(req) >= needed;
}

int crmm_test_gpu_gate(int needed)
{
    int n = crmm_test_gpu_count();
    if (n >= needed)
        return 0;
    if (crmm_test_gpu_required(needed)) {
        fprintf(stderr, "FAIL: %d CUDA device(s) needed, %d found, and CRMM_TEST_REQUIRE_GPU=%s\n", needed, n,
                getenv("CRMM_TEST_REQUIRE_GPU"));
        return 1;
    }
    fprintf(stderr, "SKIP: %d CUDA device(s) needed, %d found (set CRMM_TEST_REQUIRE_GPU=%d to fail instead)\n",
            needed, n, needed);
    return CRMM_TEST_SKIP;
}

int crmm_test_async_observable(void)
{
    const char *v = getenv("CRMM_TEST_UNDER_SANITIZER");
    return !(v && *v && strcmp(v, "0") != 0);
}

int crmm_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

char *crmm_test_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/crmm-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    if (!d)
        return NULL;
    chmod(d, 0755);
    return strdup(d);
}

const char *crmm_test_write_file(const char *name, const char *text)
{
    static char paths[8][4096];
    static int next;
    char *dir = crmm_test_tmpdir();
    if (!dir)
        return NULL;
    char *p = paths[next++ % 8];
    snprintf(p, 4096, "%s/%s", dir, name);
    free(dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    return p;
}
