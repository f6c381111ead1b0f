/* check_replay.c — `crmm replay` (tools/cmd_replay.c, tools/replay_log.c), run in-process: a
 * log written by the logging plugin replays, the cross-thread order is kept (checked by
 * replaying into another logging resource), logs in RMM's own spellings parse, malformed lines
 * are named by number, the log's leaks and failures are reported, and the usage errors. */
#include "config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tools/replay.h"
#include "test_support.h"

static char *tmp_dir;

static crmm_test_output replay(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5)
{
    char *argv[7] = {"replay", (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5, NULL};
    return crmm_test_run_main(crmm_replay_main, argv);
}

static const char *host_config(void)
{
    return crmm_test_write_file("host.ini", "[resource.h]\nplugin = host\n[resource.s]\nplugin = statistics\n"
                                            "upstream = h\n[crmm]\ndefault = s\n");
}

#define HEADER "Thread,Time,Action,Pointer,Size,Stream\n"

static void expect_in(const char *text, const char *want)
{
    ck_assert_msg(strstr(text, want) != NULL, "'%s' not in:\n%s", want, text);
}

typedef struct maker { crmm_resource *mr; int id; void *p[8]; } maker;

static size_t maker_size(const maker *m, int i) { return 1000 * (size_t)(m->id + 1) + (size_t)i; }

static void *make_events(void *arg)
{
    maker *m = arg;
    for (int i = 0; i < 8; i++)
        if (crmm_resource_allocate(m->mr, maker_size(m, i), NULL, &m->p[i]) != CRMM_OK)
            return (void *)1;
    for (int i = 0; i < 8; i += 2) /* half of them leak (in the log) */
        if (crmm_resource_deallocate(m->mr, m->p[i], maker_size(m, i), NULL) != CRMM_OK)
            return (void *)1;
    return NULL;
}

START_TEST(a_log_from_the_logging_plugin_replays)
{
    char log[4200], params[4300];
    snprintf(log, sizeof log, "%s/written.%ld.csv", tmp_dir, (long)getpid());
    snprintf(params, sizeof params, "file=%s", log);
    crmm_resource *host, *mr;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    ck_assert_crmm_ok(crmm_resource_create("logging", params, host, &mr));
    pthread_t t[2];
    maker m[2] = {{mr, 0, {0}}, {mr, 1, {0}}};
    for (int k = 0; k < 2; k++) { /* one after the other: a known peak */
        void *ret;
        ck_assert_int_eq(pthread_create(&t[k], NULL, make_events, &m[k]), 0);
        ck_assert_int_eq(pthread_join(t[k], &ret), 0);
        ck_assert_ptr_null(ret);
    }
    void *fail;
    ck_assert_crmm(crmm_resource_allocate(mr, (size_t)1 << 50, NULL, &fail), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_crmm_ok(crmm_logging_flush(mr));
    crmm_test_output r = replay(log, "--config", host_config(), "--threads-as-logged", NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    /* two makers and the main thread (the failure) */
    expect_in(r.out, "25 events on 3 threads (16 allocations, 8 frees, 1 allocate failures)");
    expect_in(r.out, "resource: s (statistics -> host)");
    expect_in(r.out, "allocations: 16 replayed, 0 failed");
    expect_in(r.out, "frees: 8 replayed, 0 failed");
    /* leaked: sizes 1001,1003,1005,1007 and 2001,2003,2005,2007 */
    expect_in(r.out, "log leaks: 8 allocations of 12032 bytes never freed");
    expect_in(r.out, "peak in use: 19.6 KiB (20044 bytes as replayed; 20044 in the log)");
    expect_in(r.out, "peak in use (resource): 19.6 KiB (20044 bytes)");
    crmm_test_output_free(&r);
    for (int k = 0; k < 2; k++)
        for (int i = 1; i < 8; i += 2)
            ck_assert_crmm_ok(crmm_resource_deallocate(mr, m[k].p[i], maker_size(&m[k], i), NULL));
    crmm_resource_release(mr);
    crmm_resource_release(host);
}
END_TEST

/* thread 1 allocates A; thread 2 frees A and allocates B; thread 1 frees B and allocates A
 * again (the same logged address): only the log's global order makes this valid. */
static const char *ping_pong =
    HEADER
    "11,10:00:00.000001,allocate,0x1000,100,0\n"
    "22,10:00:00.000002,free,0x1000,100,0\n"
    "22,10:00:00.000003,allocate,0x2000,200,0\n"
    "11,10:00:00.000004,free,0x2000,200,0\n"
    "11,10:00:00.000005,allocate,0x1000,300,0\n"
    "22,10:00:00.000006,free,0x1000,300,0\n"
    "22,10:00:00.000007,allocate,0x3000,400,0\n"
    "11,10:00:00.000008,free,0x3000,400,0\n";

START_TEST(cross_thread_order_is_kept)
{
    const char *log = crmm_test_write_file("pingpong.csv", ping_pong);
    char out_log[4200], cfg_text[4600];
    snprintf(out_log, sizeof out_log, "%s/replayed.%ld.csv", tmp_dir, (long)getpid());
    snprintf(cfg_text, sizeof cfg_text, "[resource.h]\nplugin = host\n[resource.t]\nplugin = tracking\nupstream = h\n"
             "[resource.l]\nplugin = logging\nupstream = t\nfile = %s\n", out_log);
    const char *cfg = crmm_test_write_file("pingpong.ini", cfg_text);
    for (int round = 0; round < 20; round++) {
        crmm_test_output r = replay(log, "--config", cfg, "--resource", "l");
        ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
        expect_in(r.out, "8 events on 2 threads");
        expect_in(r.out, "allocations: 4 replayed, 0 failed");
        expect_in(r.out, "frees: 4 replayed, 0 failed"); /* tracking refuses a free out of order */
        expect_in(r.out, "log leaks: none");
        crmm_test_output_free(&r);
        /* the replay's own log has the same actions and sizes in the same order, and the
         * events of each logged thread on one replay thread */
        FILE *f = fopen(out_log, "r");
        ck_assert_ptr_nonnull(f);
        char line[256];
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        static const char *const want[8][2] = {{"allocate", "100"}, {"free", "100"}, {"allocate", "200"},
                                               {"free", "200"}, {"allocate", "300"}, {"free", "300"},
                                               {"allocate", "400"}, {"free", "400"}};
        static const int logged_thread[8] = {0, 1, 1, 0, 0, 1, 1, 0};
        long tid_of[2] = {0, 0};
        for (int i = 0; i < 8; i++) {
            ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
            long tid;
            char action[32], size[32];
            ck_assert_int_eq(sscanf(line, "%ld,%*[^,],%31[^,],%*[^,],%31[^,],", &tid, action, size), 3);
            ck_assert_str_eq(action, want[i][0]);
            ck_assert_str_eq(size, want[i][1]);
            int k = logged_thread[i];
            if (!tid_of[k])
                tid_of[k] = tid;
            ck_assert_int_eq(tid, tid_of[k]);
        }
        ck_assert_int_ne(tid_of[0], tid_of[1]);
        fclose(f);
    }
}
END_TEST

START_TEST(rmm_spellings_parse)
{
    /* RMM's fmt output: pointers and streams with 0x, a failure's pointer as 0x0; its newer
     * printf output: hex without 0x. CRLF line ends and a blank last line. */
    const char *log = crmm_test_write_file("rmm.csv",
                                           "Thread,Time,Action,Pointer,Size,Stream\r\n"
                                           "140234,12:34:56.123456,allocate,0x7f0a00000000,1024,0x0\r\n"
                                           "140234,12:34:56.123457,allocate failure,0x0,1099511627776,0x0\r\n"
                                           "140235,12:34:56.123458,allocate,7f0a00100000,2048,2\r\n"
                                           "140234,12:34:56.123459,free,0x7f0a00000000,1024,0x0\r\n"
                                           "140235,12:34:56.123460,free,7f0a00100000,2048,2\r\n"
                                           "\r\n");
    crmm_test_output r = replay(log, "--config", host_config(), NULL, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    expect_in(r.out, "5 events on 2 threads (2 allocations, 2 frees, 1 allocate failures)");
    expect_in(r.out, "allocations: 2 replayed, 0 failed");
    expect_in(r.out, "frees: 2 replayed, 0 failed");
    expect_in(r.out, "peak in use: 3.0 KiB (3072 bytes as replayed; 3072 in the log)");
    crmm_test_output_free(&r);
}
END_TEST

static void expect_bad(const char *name, const char *text, const char *where, const char *what)
{
    const char *log = crmm_test_write_file(name, text);
    crmm_test_output r = replay(log, "--config", host_config(), NULL, NULL);
    ck_assert_int_eq(r.status, 1);
    char want[4400];
    snprintf(want, sizeof want, "%s:%s", log, where);
    expect_in(r.err, want);
    expect_in(r.err, what);
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}

START_TEST(malformed_lines_are_named)
{
    const char *good = "1,10:00:00.000001,allocate,0x1000,100,0\n";
    char text[1024];
    snprintf(text, sizeof text, HEADER "%s%s1,10:00:00.000002,alloc,0x2000,100,0\n", good, good);
    expect_bad("action.csv", text, "4:", "the action is not");
    snprintf(text, sizeof text, HEADER "%s1,10:00:00.000002,free,0x1000,100\n", good);
    expect_bad("fields5.csv", text, "3:", "expected 6 comma-separated fields, found 5");
    snprintf(text, sizeof text, HEADER "%s1,10:00:00.000002,free,0x1000,100,0,extra\n", good);
    expect_bad("fields7.csv", text, "3:", "found more than 6");
    snprintf(text, sizeof text, HEADER "\n%s1,10:00:00.000002,free,0xzz,100,0\n", good);
    expect_bad("pointer.csv", text, "4:", "the pointer is not");
    snprintf(text, sizeof text, HEADER "%s1,10:00:00.000002,free,0x1000,-5,0\n", good);
    expect_bad("size.csv", text, "3:", "the size is not");
    snprintf(text, sizeof text, HEADER "x1,10:00:00.000002,free,0x1000,5,0\n");
    expect_bad("thread.csv", text, "2:", "the thread id is not");
    snprintf(text, sizeof text, HEADER "1,noon,free,0x1000,5,0\n");
    expect_bad("time.csv", text, "2:", "the time is not");
    expect_bad("header.csv", "Thread,Time,Action,Pointer,Size,Stream,Extra\n", "1:", "the header must be");
    expect_bad("empty.csv", "", "1:", "empty");
}
END_TEST

START_TEST(the_logs_own_problems_are_reported)
{
    const char *log = crmm_test_write_file("leaky.csv", HEADER
                                           "1,10:00:00.000001,allocate,0x1000,100,0\n"
                                           "1,10:00:00.000002,allocate,0x2000,200,0\n"
                                           "1,10:00:00.000003,free,0x9000,50,0\n"       /* never allocated */
                                           "1,10:00:00.000004,free,0x1000,64,0\n"       /* another size */
                                           "1,10:00:00.000005,allocate,0x3000,300,0\n"
                                           "1,10:00:00.000006,allocate failure,(nil),1000000,0\n");
    crmm_test_output r = replay(log, "--config", host_config(), NULL, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    expect_in(r.out, "log leaks: 2 allocations of 500 bytes never freed in the log");
    expect_in(r.out, "log anomalies: 1 frees of pointers not live, 1 frees with another size");
    expect_in(r.out, "frees: 1 replayed");
    expect_in(r.out, "1 allocate failures");
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(failed_allocations_are_counted)
{
    const char *cfg = crmm_test_write_file("small.ini", "[resource.h]\nplugin = host\n[resource.l]\nplugin = limiting\n"
                                              "upstream = h\nallocation_limit = 1MiB\n");
    const char *log = crmm_test_write_file("big.csv", HEADER
                                           "1,10:00:00.000001,allocate,0x1000,2097152,0\n"
                                           "1,10:00:00.000002,allocate,0x2000,1000,0\n"
                                           "1,10:00:00.000003,free,0x1000,2097152,0\n"
                                           "1,10:00:00.000004,free,0x2000,1000,0\n");
    crmm_test_output r = replay(log, "--config", cfg, "--resource", "l");
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    expect_in(r.out, "allocations: 1 replayed, 1 failed");
    expect_in(r.out, "first failure: line 2: out of memory");
    expect_in(r.out, "frees: 1 replayed, 0 failed");
    expect_in(r.out, "peak in use (resource): 1.0 KiB (1024 bytes)"); /* limiting counts 1000 as 1024 */
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(usage_errors)
{
    crmm_test_output r = replay("--help", NULL, NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 0);
    expect_in(r.out, "usage: crmm replay LOG.csv");
    expect_in(r.out, "Thread,Time,Action,Pointer,Size,Stream");
    crmm_test_output_free(&r);
    r = replay(NULL, NULL, NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 2);
    expect_in(r.err, "no log file");
    crmm_test_output_free(&r);
    r = replay("x.csv", "--bogus", NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 2);
    expect_in(r.err, "--bogus");
    crmm_test_output_free(&r);
    r = replay("/nonexistent-crmm/x.csv", NULL, NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 1);
    expect_in(r.err, "cannot open /nonexistent-crmm/x.csv");
    crmm_test_output_free(&r);
    const char *log = crmm_test_write_file("ok.csv", HEADER "1,10:00:00.000001,allocate,0x1000,100,0\n");
    r = replay(log, "--config", host_config(), "--resource", "nope");
    ck_assert_int_eq(r.status, 1);
    expect_in(r.err, "no resource 'nope'");
    crmm_test_output_free(&r);
}
END_TEST

START_TEST(without_a_gpu_the_host_plugin_is_used)
{
    unsetenv("CRMM_CONFIG");
    const char *log = crmm_test_write_file("nogpu.csv", HEADER "1,10:00:00.000001,allocate,0x1000,100,0\n"
                                                     "1,10:00:00.000002,free,0x1000,100,0\n");
    crmm_test_output r = replay(log, NULL, NULL, NULL, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    expect_in(r.out, "replaying against the host plugin");
    expect_in(r.out, "resource: host (host)");
    expect_in(r.out, "allocations: 1 replayed, 0 failed");
    crmm_test_output_free(&r);
}
END_TEST

int main(void)
{
    tmp_dir = crmm_test_tmpdir();
    if (!tmp_dir)
        return 1;
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("replay");
    tcase_add_test(tc, a_log_from_the_logging_plugin_replays);
    tcase_add_test(tc, cross_thread_order_is_kept);
    tcase_add_test(tc, rmm_spellings_parse);
    tcase_add_test(tc, malformed_lines_are_named);
    tcase_add_test(tc, the_logs_own_problems_are_reported);
    tcase_add_test(tc, failed_allocations_are_counted);
    tcase_add_test(tc, usage_errors);
    if (crmm_test_gpu_count() == 0)
        tcase_add_test(tc, without_a_gpu_the_host_plugin_is_used);
    suite_add_tcase(s, tc);
    int rc = crmm_test_run(s);
    free(tmp_dir);
    return rc;
}
