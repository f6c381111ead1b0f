/* check_exit_gpu.c — the process-exit guard: no crash when device memory outlives main().
 *
 * Each test runs this program again as a child with a scenario name; the scenario leaves
 * resources and allocations alive in some way and returns from main(), and the child must exit
 * with status 0 (a crash in CUDA's teardown, or a CUDA call after it, would show as a signal or
 * another status). The scenarios run outside Check, in a fresh process, as an application would. */
#include "build_config.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

/* Exit statuses of a scenario that finds something wrong itself. */
enum { BAD_SETUP = 20, NOT_EXITING = 21, FREE_FAILED = 22, ALLOC_NOT_REFUSED = 23 };

/* ---- scenarios (in the child) -------------------------------------------------------------- */

static crmm_resource *g_cuda, *g_pinned, *g_managed;
static void *g_dev, *g_host, *g_unified;

/* Live allocations in the current device resource and in resources nobody releases. */
static int scenario_live(void)
{
    crmm_resource *mr = crmm_get_current_device_resource();
    void *p = NULL;
    if (!mr || crmm_resource_allocate(mr, (size_t)1 << 20, NULL, &p) != CRMM_OK)
        return BAD_SETUP;
    if (cudaMemset(p, 1, (size_t)1 << 20) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        return BAD_SETUP;
    if (crmm_resource_create("pinned", NULL, NULL, &g_pinned) != CRMM_OK ||
        crmm_resource_allocate(g_pinned, 4096, NULL, &g_host) != CRMM_OK ||
        crmm_resource_create("managed", NULL, NULL, &g_managed) != CRMM_OK ||
        crmm_resource_allocate(g_managed, 4096, NULL, &g_unified) != CRMM_OK)
        return BAD_SETUP;
    if (crmm_process_exiting())
        return NOT_EXITING; /* must not be set before exit */
    return 0;
}

/* Registered before the first CUDA call, so it runs after the CUDA runtime's own exit handler:
 * every free must be skipped (OK, no CUDA call) and new device memory refused. */
static void release_at_exit(void)
{
    if (!crmm_process_exiting())
        _exit(NOT_EXITING);
    if (crmm_resource_deallocate(g_cuda, g_dev, (size_t)1 << 20, NULL) != CRMM_OK ||
        crmm_resource_deallocate(g_pinned, g_host, 4096, NULL) != CRMM_OK ||
        crmm_resource_deallocate(g_managed, g_unified, 4096, NULL) != CRMM_OK)
        _exit(FREE_FAILED);
    void *p = NULL;
    if (crmm_resource_allocate(g_cuda, 4096, NULL, &p) != CRMM_ERROR_STATE || p)
        _exit(ALLOC_NOT_REFUSED);
    crmm_test_release(g_cuda, g_pinned, g_managed);
    crmm_finalize(); /* the registry's resource still holds an allocation: reported, not freed */
}

static int scenario_atexit_release(void)
{
    atexit(release_at_exit);
    if (crmm_resource_create("cuda", NULL, NULL, &g_cuda) != CRMM_OK ||
        crmm_resource_allocate(g_cuda, (size_t)1 << 20, NULL, &g_dev) != CRMM_OK ||
        crmm_resource_create("pinned", NULL, NULL, &g_pinned) != CRMM_OK ||
        crmm_resource_allocate(g_pinned, 4096, NULL, &g_host) != CRMM_OK ||
        crmm_resource_create("managed", NULL, NULL, &g_managed) != CRMM_OK ||
        crmm_resource_allocate(g_managed, 4096, NULL, &g_unified) != CRMM_OK)
        return BAD_SETUP;
    crmm_resource *cur = crmm_get_current_device_resource();
    void *p = NULL;
    if (!cur || crmm_resource_allocate(cur, 8192, NULL, &p) != CRMM_OK)
        return BAD_SETUP;
    return 0;
}

/* crmm_finalize as an atexit handler, with a config chain holding live allocations. */
static int scenario_finalize_at_exit(const char *config)
{
    atexit(crmm_finalize);
    if (crmm_init(config) != CRMM_OK)
        return BAD_SETUP;
    crmm_resource *mr = crmm_get_current_device_resource();
    void *p = NULL;
    if (!mr || crmm_resource_allocate(mr, 12345, NULL, &p) != CRMM_OK)
        return BAD_SETUP;
    return 0;
}

static int run_scenario(int argc, char **argv)
{
    if (strcmp(argv[2], "live") == 0)
        return scenario_live();
    if (strcmp(argv[2], "atexit_release") == 0)
        return scenario_atexit_release();
    if (strcmp(argv[2], "finalize_at_exit") == 0 && argc > 3)
        return scenario_finalize_at_exit(argv[3]);
    fprintf(stderr, "unknown scenario %s\n", argv[2]);
    return BAD_SETUP;
}

/* ---- the tests (in the Check process: no CUDA call here) ----------------------------------- */

/* Run this program with `scenario` (and `arg`), its stderr into a file; returns the wait status
 * and leaves the child's stderr in err. */
static int run_child(const char *scenario, const char *arg, char *err, size_t errsize)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    const char *log = crmm_test_write_file("stderr.txt", "");
    ck_assert_ptr_nonnull(log);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(log, "w", stderr))
            _exit(126);
        execl(self, self, "--scenario", scenario, arg, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    char *text = crmm_test_read_file_or_fail(log);
    snprintf(err, errsize, "%s", text);
    free(text);
    return status;
}

/* Each scenario, the config it is given (NULL: none), and what its stderr must say. */
static const struct { const char *scenario, *config, *said[2]; } exits[] = {
    {"live", NULL, {NULL}},
    /* crmm_finalize in the handler destroyed the registry's cuda resource with its block */
    {"atexit_release", NULL, {"cuda resource destroyed with 1 live allocation (8.0 KiB)"}},
    {"finalize_at_exit",
     "[crmm]\ndefault = main\n[resource.gpu]\nplugin = cuda\n[resource.main]\nplugin = template\nupstream = gpu\n",
     {"template resource 'main' destroyed with 1 live allocation (12.1 KiB)",
      "cuda resource 'gpu' destroyed with 1 live allocation (12.1 KiB)"}},
};

CRMM_LOOP_TEST(a_scenario_exits_cleanly, (int)(sizeof exits / sizeof exits[0]))
{
    const char *config = exits[_i].config ? crmm_test_write_file("crmm.ini", exits[_i].config) : NULL;
    char err[8192];
    int status = run_child(exits[_i].scenario, config, err, sizeof err);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child %s %d; its stderr:\n%s", exits[_i].scenario,
                  WIFSIGNALED(status) ? "killed by signal" : "exited with",
                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), err);
    for (int k = 0; k < 2 && exits[_i].said[k]; k++)
        ck_assert_msg(strstr(err, exits[_i].said[k]), "%s: stderr:\n%s", exits[_i].scenario, err);
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "--scenario") == 0)
        return run_scenario(argc, argv);
    CRMM_TEST_GPU_GATE(1);
    return crmm_test_main("exit_gpu", CRMM_TEST_GPU_TIMEOUT);
}
