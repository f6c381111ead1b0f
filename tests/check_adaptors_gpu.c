/* check_adaptors_gpu.c — the adaptor plugins over `cuda` (needs a GPU; exit 77 without one):
 * the conformance suite for logging, statistics, tracking, limiting and a chain of all four,
 * the logging plugin's %d and stream column on a device, the library-wide logging switch
 * (crmm_enable_logging / crmm_disable_logging / crmm_get_log_filenames), and crmm replay
 * against device memory. */
#include "build_config.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "../tools/replay.h"
#include "conformance.h"
#include "test_support.h"

static char *tmp_dir;

CRMM_TEST_IN("adaptors_gpu", logging_on_a_device_names_it_and_logs_streams)
{
    char cfg_text[4600], want[4200];
    snprintf(cfg_text, sizeof cfg_text, "[resource.c]\nplugin = cuda\n[resource.l]\nplugin = logging\nupstream = c\n"
             "file = %s/dev%%d.%%p.csv\n", tmp_dir);
    crmm_config *cfg;
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_config_load_string(cfg_text, "gpu logging", &cfg));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "l", 0, &mr));
    snprintf(want, sizeof want, "%s/dev0.%ld.csv", tmp_dir, (long)getpid());
    ck_assert_str_eq(crmm_logging_file(mr), want);
    ck_assert(crmm_resource_is_device_accessible(mr));
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1 << 20, (crmm_cuda_stream_t)s, &p));
    ck_assert_int_eq(cudaMemsetAsync(p, 0x11, 1 << 20, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1 << 20, (crmm_cuda_stream_t)s));
    crmm_resource_release(mr);
    crmm_config_free(cfg);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    char *text = crmm_test_read_file_or_fail(want);
    char line[128];
    snprintf(line, sizeof line, ",allocate,%p,1048576,0x%lx\n", p, (unsigned long)(uintptr_t)s);
    ck_assert_msg(strstr(text, line) != NULL, "'%s' not in:\n%s", line, text);
    snprintf(line, sizeof line, ",free,%p,1048576,0x%lx\n", p, (unsigned long)(uintptr_t)s);
    ck_assert_msg(strstr(text, line) != NULL, "'%s' not in:\n%s", line, text);
    free(text);
}

CRMM_TEST_IN("adaptors_gpu", stacked_adaptors_on_a_device)
{
    static const char *cfg_text =
        "[resource.c]\nplugin = cuda\n"
        "[resource.lim]\nplugin = limiting\nupstream = c\nallocation_limit = 64MiB\n"
        "[resource.st]\nplugin = statistics\nupstream = lim\n"
        "[resource.tr]\nplugin = tracking\nupstream = st\ncapture_stacks = true\n";
    crmm_config *cfg;
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_config_load_string(cfg_text, "gpu stack", &cfg));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "tr", 0, &mr));
    void *p[4];
    for (int i = 0; i < 4; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(mr, 16 << 20, NULL, &p[i])); /* exactly the 64 MiB */
    void *q = (void *)1;
    ck_assert_crmm(crmm_resource_allocate(mr, 1, NULL, &q), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_crmm(crmm_resource_deallocate(mr, p[0], 1, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* wrong size */
    uint64_t n;
    ck_assert_crmm_ok(crmm_tracking_count(mr, &n));
    ck_assert_uint_eq(n, 4);
    crmm_alloc_counters c;
    ck_assert_crmm_ok(crmm_statistics_push(mr, NULL));
    for (int i = 0; i < 4; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p[i], 16 << 20, NULL));
    ck_assert_crmm_ok(crmm_statistics_pop(mr, &c));
    ck_assert_int_eq(c.bytes, -(int64_t)(64 << 20));
    ck_assert_crmm_ok(crmm_statistics_get(mr, &c));
    ck_assert_int_eq(c.bytes, 0);
    ck_assert_int_eq(c.peak_bytes, 64 << 20);
    ck_assert_crmm_ok(crmm_tracking_count(mr, &n));
    ck_assert_uint_eq(n, 0);
    uint64_t in_use;
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_BYTES_IN_USE, &in_use));
    ck_assert_uint_eq(in_use, 0);
    crmm_resource_release(mr);
    crmm_config_free(cfg);
}

CRMM_TEST_IN("adaptors_gpu", the_logging_switch)
{
    int devices = 0;
    ck_assert_int_eq(cudaGetDeviceCount(&devices), cudaSuccess);
    crmm_resource *before = crmm_get_per_device_resource(0);
    ck_assert_ptr_nonnull(before);
    char file[4200];
    snprintf(file, sizeof file, "%s/switch.%ld.csv", tmp_dir, (long)getpid());
    ck_assert_crmm_ok(crmm_enable_logging(file));
    ck_assert_crmm(crmm_enable_logging(file), CRMM_ERROR_STATE);
    const char *names[64];
    int count = -1;
    ck_assert_crmm_ok(crmm_get_log_filenames(names, 64, &count));
    ck_assert_int_eq(count, devices);
    char want[64][4300];
    for (int d = 0; d < devices && d < 64; d++) {
        snprintf(want[d], sizeof want[d], "%s/switch.%ld.dev%d.csv", tmp_dir, (long)getpid(), d);
        ck_assert_str_eq(names[d], want[d]);
        ck_assert_int_eq(access(want[d], F_OK), 0);
    }
    crmm_resource *cur = crmm_get_current_device_resource();
    ck_assert_str_eq(crmm_resource_kind(cur), "logging");
    ck_assert_ptr_eq(crmm_resource_upstream(cur), before);
    ck_assert_str_eq(crmm_logging_file(cur), want[0]);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(cur, 4096, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(cur, p, 4096, NULL));
    ck_assert_crmm_ok(crmm_disable_logging());
    ck_assert_ptr_eq(crmm_get_per_device_resource(0), before);
    ck_assert_crmm_ok(crmm_get_log_filenames(names, 64, &count));
    ck_assert_int_eq(count, 0);
    ck_assert_ptr_null(names[0]);
    char *text = crmm_test_read_file_or_fail(want[0]); /* closed (and flushed) by disable */
    ck_assert_int_eq(crmm_test_count(text, "\n"), 3);
    ck_assert_ptr_nonnull(strstr(text, ",allocate,"));
    ck_assert_ptr_nonnull(strstr(text, ",free,"));
    free(text);
    /* enabled again after a disable */
    ck_assert_crmm_ok(crmm_enable_logging(file));
    ck_assert_crmm_ok(crmm_disable_logging());
    crmm_finalize();
}

CRMM_TEST_IN("adaptors_gpu", switch_file_names_follow_rmm)
{
    char file[4200], want[4300];
    snprintf(file, sizeof file, "%s/plain%%name", tmp_dir); /* no extension; '%' taken literally */
    ck_assert_crmm_ok(crmm_enable_logging(file));
    const char *names[1];
    int count;
    ck_assert_crmm_ok(crmm_get_log_filenames(names, 1, &count));
    snprintf(want, sizeof want, "%s/plain%%name.dev0", tmp_dir);
    ck_assert_str_eq(names[0], want);
    ck_assert_int_eq(access(want, F_OK), 0);
    ck_assert_crmm_ok(crmm_disable_logging());
    /* the file comes from $CRMM_LOG_FILE when none is given */
    snprintf(file, sizeof file, "%s/env.log.csv", tmp_dir);
    setenv("CRMM_LOG_FILE", file, 1);
    ck_assert_crmm_ok(crmm_enable_logging(NULL));
    ck_assert_crmm_ok(crmm_get_log_filenames(names, 1, &count));
    snprintf(want, sizeof want, "%s/env.log.dev0.csv", tmp_dir);
    ck_assert_str_eq(names[0], want);
    ck_assert_crmm_ok(crmm_disable_logging());
    unsetenv("CRMM_LOG_FILE");
    /* an unwritable file: nothing changes */
    crmm_resource *before = crmm_get_per_device_resource(0);
    ck_assert_crmm(crmm_enable_logging("/nonexistent-crmm-dir/log.csv"), CRMM_ERROR_IO);
    ck_assert_ptr_eq(crmm_get_per_device_resource(0), before);
    ck_assert_crmm_ok(crmm_get_log_filenames(names, 1, &count));
    ck_assert_int_eq(count, 0);
    crmm_finalize();
}

CRMM_TEST_IN("adaptors_gpu", replay_against_device_memory)
{
    const char *log = crmm_test_write_file("gpu-replay.csv", "Thread,Time,Action,Pointer,Size,Stream\n"
                                           "1,10:00:00.000001,allocate,0x7f0000000000,1048576,0\n"
                                           "2,10:00:00.000002,allocate,0x7f0000100000,2097152,0\n"
                                           "1,10:00:00.000003,free,0x7f0000100000,2097152,0\n"
                                           "2,10:00:00.000004,allocate,0x7f0000200000,4096,0\n");
    const char *cfg = crmm_test_write_file("gpu-replay.ini",
                                           "[resource.c]\nplugin = cuda\n[resource.s]\nplugin = statistics\nupstream = c\n");
    char *argv[] = {"replay", (char *)log, "--config", (char *)cfg, "--resource", "s", NULL};
    crmm_test_output r = crmm_test_run_main(crmm_replay_main, argv);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "allocations: 3 replayed, 0 failed") && strstr(r.out, "frees: 1 replayed") &&
                  strstr(r.out, "resource: s (statistics -> cuda)") &&
                  strstr(r.out, "log leaks: 2 allocations of 1052672 bytes") &&
                  strstr(r.out, "stream: a new non-blocking stream\n"), "output:\n%s", r.out);
    crmm_test_output_free(&r);
    /* several device resources, on two threads with a stream each */
    cfg = crmm_test_write_file("gpu-replay2.ini", "[resource.c]\nplugin = cuda\n[resource.a]\nplugin = async\n"
                                                  "[resource.p]\nplugin = pool\nupstream = c\ninitial_size = 0\n");
    char *argv2[] = {"replay", (char *)log, "--config", (char *)cfg, "--resource", "p", "--resource", "a",
                     "--threads", "2", "--repeats", "3", "--json", NULL};
    r = crmm_test_run_main(crmm_replay_main, argv2);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "\"resource\": \"p\", \"chain\": \"pool -> cuda\", \"stream\": \"a new non-blocking "
                            "stream per thread\"") && strstr(r.out, "\"resource\": \"a\"") &&
                  strstr(r.out, "\"allocations_failed\": 0") && !strstr(r.out, "\"allocations_failed\": 1"),
                  "output:\n%s", r.out);
    crmm_test_output_free(&r);
    /* the raw references of crmm bench, by name, where the config has no such resource */
    char *argv3[] = {"replay", (char *)log, "--config", (char *)cfg, "--resource", "cudaMallocAsync", "--resource",
                     "cudaMalloc", "--csv", NULL};
    r = crmm_test_run_main(crmm_replay_main, argv3);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    const char *first = strstr(r.out, ",3,0,1,0,"); /* allocations replayed, failed, frees replayed, failed */
    ck_assert_msg(strstr(r.out, ",cudaMallocAsync,") && strstr(r.out, ",cudaMalloc,") && first &&
                      strstr(first + 1, ",3,0,1,0,"),
                  "output:\n%s", r.out);
    crmm_test_output_free(&r);
}

static char logging_config[4600]; /* main writes it: its file is in tmp_dir */
static const crmm_test_chain chains[] = {
    {"logging_over_cuda", logging_config, "l", 1, 0},
    {"statistics_over_cuda", "[resource.c]\nplugin = cuda\n[resource.s]\nplugin = statistics\nupstream = c\n", "s", 1, 0},
    {"tracking_over_cuda", "[resource.c]\nplugin = cuda\n[resource.t]\nplugin = tracking\nupstream = c\n", "t", 1, 0},
    {"limiting_over_cuda",
     "[resource.c]\nplugin = cuda\n[resource.l]\nplugin = limiting\nupstream = c\nallocation_limit = 8GiB\n", "l", 1, 0},
    {"all_four_over_cuda",
     "[resource.c]\nplugin = cuda\n"
     "[resource.lim]\nplugin = limiting\nupstream = c\nallocation_limit = 8GiB\n"
     "[resource.st]\nplugin = statistics\nupstream = lim\n"
     "[resource.tr]\nplugin = tracking\nupstream = st\n", "tr", 1, 0},
};

int main(void)
{
    CRMM_TEST_GPU_GATE(1);
    tmp_dir = crmm_test_tmpdir();
    if (!tmp_dir)
        return 1;
    snprintf(logging_config, sizeof logging_config, "[resource.c]\nplugin = cuda\n[resource.l]\nplugin = logging\n"
             "upstream = c\nfile = %s/conformance.dev%%d.%%p.csv\n", tmp_dir);
    Suite *s = suite_create("adaptors_gpu");
    crmm_test_tcase(s, "adaptors_gpu", CRMM_TEST_GPU_TIMEOUT);
    crmm_conformance_add(s, chains, (int)(sizeof chains / sizeof chains[0]));
    int rc = crmm_test_run(s);
    free(tmp_dir);
    return rc;
}
