/* check_replay.c — `crmm replay` (tools/cmd_replay.c, tools/replay_log.c), run in-process: a
 * log written by the logging plugin replays, the cross-thread order is kept (checked by
 * replaying into another logging resource), logs in RMM's own spellings parse, malformed lines
 * are named by number, the log's leaks and failures are reported, and the usage errors. */
#include "build_config.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "../tools/replay.h"
#include "test_support.h"
#include "replay_logs.h"

/* In a test: `crmm replay ARGS...` (NULL-terminated, at most 10) run in-process. */
static crmm_test_output replay(const char *first, ...)
{
    char *argv[12] = {"replay"};
    va_list ap;
    va_start(ap, first);
    for (int i = 1; i < 11 && first; i++, first = va_arg(ap, const char *))
        argv[i] = (char *)first;
    va_end(ap);
    return crmm_test_run_main(crmm_replay_main, argv);
}

static const char *host_config(void)
{
    return crmm_test_write_file("host.ini", "[resource.h]\nplugin = host\n[resource.s]\nplugin = statistics\n"
                                            "upstream = h\n[crmm]\ndefault = s\n");
}

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

CRMM_TEST_IN("replay", a_log_from_the_logging_plugin_replays)
{
    const char *log = crmm_test_tmp_path("written.csv");
    char params[4300];
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
    expect_in(r.out, "25 events on 3 threads (16 allocations, 8 frees, 1 allocate failure)");
    expect_in(r.out, "resource: s (statistics -> host)");
    expect_in(r.out, "allocations: 16 replayed, 0 failed");
    expect_in(r.out, "frees: 8 replayed, 0 failed");
    /* leaked: sizes 1001,1003,1005,1007 and 2001,2003,2005,2007 */
    expect_in(r.out, "log leaks: 8 allocations of 12032 bytes never freed");
    expect_in(r.out, "peak in use: 19.6 KiB (20044 bytes as replayed; 20044 in the log)");
    crmm_test_output_free(&r);
    for (int k = 0; k < 2; k++)
        for (int i = 1; i < 8; i += 2)
            ck_assert_crmm_ok(crmm_resource_deallocate(mr, m[k].p[i], maker_size(&m[k], i), NULL));
    crmm_resource_release(mr);
    crmm_resource_release(host);
}

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

CRMM_TEST_IN("replay", cross_thread_order_is_kept)
{
    const char *log = crmm_test_write_file("pingpong.csv", ping_pong);
    const char *out_log = crmm_test_tmp_path("replayed.csv");
    char cfg_text[4600];
    snprintf(cfg_text, sizeof cfg_text, "[resource.h]\nplugin = host\n[resource.t]\nplugin = tracking\nupstream = h\n"
             "[resource.l]\nplugin = logging\nupstream = t\nfile = %s\n", out_log);
    const char *cfg = crmm_test_write_file("pingpong.ini", cfg_text);
    for (int round = 0; round < 20; round++) {
        crmm_test_output r = replay(log, "--config", cfg, "--resource", "l", "--threads", "2", "--repeats", "1", NULL);
        ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
        expect_in(r.out, "8 events on 2 threads");
        expect_in(r.out, "the 2 logged threads on 2 OS threads");
        expect_in(r.out, "allocations: 4 replayed, 0 failed");
        expect_in(r.out, "frees: 4 replayed, 0 failed"); /* tracking refuses a free out of order */
        expect_in(r.out, "log leaks: none");
        crmm_test_output_free(&r);
        /* the replay's own log: the untimed pass, then the timed one, each with the same actions
         * and sizes in the same order; in the timed one the events of each logged thread on one
         * replay thread, the two on different threads */
        FILE *f = fopen(out_log, "r");
        ck_assert_ptr_nonnull(f);
        char line[256];
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        static const char *const want[8][2] = {{"allocate", "100"}, {"free", "100"}, {"allocate", "200"},
                                               {"free", "200"}, {"allocate", "300"}, {"free", "300"},
                                               {"allocate", "400"}, {"free", "400"}};
        static const int logged_thread[8] = {0, 1, 1, 0, 0, 1, 1, 0};
        for (int pass = 0; pass < 2; pass++) {
            long tid_of[2] = {0, 0};
            for (int i = 0; i < 8; i++) {
                ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
                long tid;
                char action[32], size[32];
                ck_assert_int_eq(sscanf(line, "%ld,%*[^,],%31[^,],%*[^,],%31[^,],", &tid, action, size), 3);
                ck_assert_str_eq(action, want[i][0]);
                ck_assert_str_eq(size, want[i][1]);
                int k = pass == 0 ? 0 : logged_thread[i];
                if (!tid_of[k])
                    tid_of[k] = tid;
                ck_assert_int_eq(tid, tid_of[k]);
            }
            if (pass == 1)
                ck_assert_int_ne(tid_of[0], tid_of[1]);
        }
        ck_assert_ptr_null(fgets(line, sizeof line, f));
        fclose(f);
    }
}

/* Logs that replay (exit 0): the log, the config (NULL: host_config()), the resource replayed
 * (NULL: the config's default), and what the report says. */
static const struct { const char *log, *config, *resource, *says[4]; } replayed[] = {
    /* RMM's fmt output: pointers and streams with 0x, a failure's pointer as 0x0; its newer
     * printf output: hex without 0x. CRLF line ends and a blank last line. */
    {"Thread,Time,Action,Pointer,Size,Stream\r\n"
     "140234,12:34:56.123456,allocate,0x7f0a00000000,1024,0x0\r\n"
     "140234,12:34:56.123457,allocate failure,0x0,1099511627776,0x0\r\n"
     "140235,12:34:56.123458,allocate,7f0a00100000,2048,2\r\n"
     "140234,12:34:56.123459,free,0x7f0a00000000,1024,0x0\r\n"
     "140235,12:34:56.123460,free,7f0a00100000,2048,2\r\n"
     "\r\n",
     NULL, NULL,
     {"5 events on 2 threads (2 allocations, 2 frees, 1 allocate failure)", "allocations: 2 replayed, 0 failed",
      "frees: 2 replayed, 0 failed", "peak in use: 3.0 KiB (3072 bytes as replayed; 3072 in the log)"}},
    /* allocations the resource refuses are counted */
    {HEADER
     "1,10:00:00.000001,allocate,0x1000,2097152,0\n"
     "1,10:00:00.000002,allocate,0x2000,1000,0\n"
     "1,10:00:00.000003,free,0x1000,2097152,0\n"
     "1,10:00:00.000004,free,0x2000,1000,0\n",
     "[resource.h]\nplugin = host\n[resource.l]\nplugin = limiting\nupstream = h\nallocation_limit = 1MiB\n", "l",
     {"allocations: 1 replayed, 1 failed", "first failure: line 2: out of memory", "frees: 1 replayed, 0 failed",
      "peak in use: 1000 B (1000 bytes as replayed; 2098152 in the log)"}},
    /* 2^64 - 1 itself is a number (the allocation then fails, counted) */
    {HEADER "18446744073709551615,10:00:00.000001,allocate,0xffffffffffffffff,18446744073709551615,0\n", NULL, NULL,
     {"allocations: 0 replayed, 1 failed"}},
};

CRMM_LOOP_TEST_IN("replay", logs_replay_and_the_report_says_what_happened, (int)(sizeof replayed / sizeof replayed[0]))
{
    const char *log = crmm_test_write_file("replayed.csv", replayed[_i].log), *resource = replayed[_i].resource;
    const char *cfg = replayed[_i].config ? crmm_test_write_file("replayed.ini", replayed[_i].config) : host_config();
    crmm_test_output r = replay(log, "--config", cfg, resource ? "--resource" : NULL, resource, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    for (int k = 0; k < 4 && replayed[_i].says[k]; k++)
        expect_in(r.out, replayed[_i].says[k]);
    crmm_test_output_free(&r);
}

/* Replaying the log at path fails (exit 1, nothing on stdout) with "PATH:WHERE" and `what`. */
static void expect_refused(const char *log, const char *where, const char *what)
{
    crmm_test_output r = replay(log, "--config", host_config(), NULL);
    ck_assert_int_eq(r.status, 1);
    char want[4400];
    snprintf(want, sizeof want, "%s:%s", log, where);
    expect_in(r.err, want);
    expect_in(r.err, what);
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}

/* Write `n` bytes (NULs allowed) to a new file `name` in a fresh temporary directory; returns its
 * path (as crmm_test_tmp_path). */
static const char *write_bytes(const char *name, const char *bytes, size_t n)
{
    const char *path = crmm_test_tmp_path(name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* Logs the reader refuses: the file's name and bytes (NULs allowed), and where (LINE:) and what
 * the message says. */
typedef struct bad_log { const char *name, *bytes; size_t n; const char *where, *what; } bad_log;
#define BAD_LOG(name, bytes, where, what) {name, bytes, sizeof bytes - 1, where, what}
#define GOOD "1,10:00:00.000001,allocate,0x1000,100,0\n"

static const bad_log bad_logs[] = {
    /* malformed lines */
    BAD_LOG("action.csv", HEADER GOOD GOOD "1,10:00:00.000002,alloc,0x2000,100,0\n", "4:", "the action is not"),
    BAD_LOG("fields5.csv", HEADER GOOD "1,10:00:00.000002,free,0x1000,100\n", "3:", "expected 6 comma-separated fields, found 5"),
    BAD_LOG("fields7.csv", HEADER GOOD "1,10:00:00.000002,free,0x1000,100,0,extra\n", "3:", "found more than 6"),
    BAD_LOG("pointer.csv", HEADER "\n" GOOD "1,10:00:00.000002,free,0xzz,100,0\n", "4:", "the pointer is not"),
    BAD_LOG("size.csv", HEADER GOOD "1,10:00:00.000002,free,0x1000,-5,0\n", "3:", "the size is not"),
    BAD_LOG("thread.csv", HEADER "x1,10:00:00.000002,free,0x1000,5,0\n", "2:", "the thread id is not"),
    BAD_LOG("time.csv", HEADER "1,noon,free,0x1000,5,0\n", "2:", "the time is not"),
    BAD_LOG("header.csv", "Thread,Time,Action,Pointer,Size,Stream,Extra\n", "1:", "the header must be"),
    BAD_LOG("empty.csv", "", "1:", "empty"),
    /* numbers of 2^64 or more */
    BAD_LOG("bigthread.csv", HEADER "18446744073709551616,10:00:00.000001,allocate,0x1000,100,0\n", "2:",
            "the thread id is out of range (2^64 or more)"),
    BAD_LOG("bigsize.csv", HEADER GOOD "1,10:00:00.000002,allocate,0x2000,99999999999999999999999,0\n", "3:",
            "the size is out of range (2^64 or more)"),
    BAD_LOG("bigpointer.csv", HEADER "1,10:00:00.000001,allocate,0x10000000000000000,100,0\n", "2:",
            "the pointer is out of range"),
    BAD_LOG("bigstream.csv", HEADER "1,10:00:00.000001,allocate,0x1000,100,0x123456789abcdef01\n", "2:",
            "the stream is out of range"),
    /* NUL bytes and junk */
    BAD_LOG("nulmid.csv", HEADER "1,10:00:00.000001,allocate,0x1000,1\0" "00,0\n", "2:", "the line holds a NUL byte"),
    BAD_LOG("nuljunk.bin", "\0\x01\x02\x03junk\x7f\n\xff\xfe more junk", "1:", "NUL byte"),
    BAD_LOG("nulafter.csv", HEADER "\0\0\0\0", "2:", "NUL byte"),
    BAD_LOG("binary.png", "\x89PNG\r\n\x1a\n", "1:", "not an RMM allocation log"),
    /* fields that only look right */
    BAD_LOG("hex0x0x.csv", HEADER "1,10:00:00.000001,allocate,0x0x10,100,0\n", "2:", "the pointer is not hexadecimal"),
    BAD_LOG("stream0x0x.csv", HEADER "1,10:00:00.000001,allocate,0x10,100,0x0x1\n", "2:", "the stream is not hexadecimal"),
    BAD_LOG("hexsign.csv", HEADER "1,10:00:00.000001,allocate,0x-10,100,0\n", "2:", "the pointer is not hexadecimal"),
    BAD_LOG("nilalloc.csv", HEADER "1,10:00:00.000001,allocate,(nil),5000,0\n", "2:",
            "an allocation of a non-zero size at a null pointer"),
    /* more live at once than a machine has bytes */
    BAD_LOG("wrap.csv", HEADER "1,10:00:00.000001,allocate,0x1000,9223372036854775808,0\n"
                               "1,10:00:00.000002,allocate,0x2000,9223372036854775808,0\n", "3:",
            "more than 2^64 bytes would be live"),
};

CRMM_LOOP_TEST_IN("replay", bad_logs_are_refused_naming_the_line, (int)(sizeof bad_logs / sizeof bad_logs[0]))
{
    expect_refused(write_bytes(bad_logs[_i].name, bad_logs[_i].bytes, bad_logs[_i].n), bad_logs[_i].where,
                   bad_logs[_i].what);
}

CRMM_TEST_IN("replay", the_logs_own_problems_are_reported)
{
    const char *log = crmm_test_write_file("leaky.csv", HEADER
                                           "1,10:00:00.000001,allocate,0x1000,100,0\n"
                                           "1,10:00:00.000002,allocate,0x2000,200,0\n"
                                           "1,10:00:00.000003,free,0x9000,50,0\n"       /* never allocated */
                                           "1,10:00:00.000004,free,0x1000,64,0\n"       /* another size */
                                           "1,10:00:00.000005,allocate,0x3000,300,0\n"
                                           "1,10:00:00.000006,allocate failure,(nil),1000000,0\n");
    crmm_test_output r = replay(log, "--config", host_config(), NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    expect_in(r.out, "log leaks: 2 allocations of 500 bytes never freed in the log");
    expect_in(r.out, "log anomaly: 1 free of a pointer not live (first at line 4; not replayed)");
    expect_in(r.out, "log anomaly: 1 free with another size than allocated (first at line 5;");
    expect_in(r.out, "frees: 1 replayed");
    expect_in(r.out, "1 allocate failure)");
    crmm_test_output_free(&r);
    /* --strict refuses them, naming the first line of each */
    r = replay(log, "--config", host_config(), "--strict", NULL);
    ck_assert_int_eq(r.status, 1);
    expect_in(r.err, "leaky.csv:4: free of a pointer that is not live (1 in all)");
    expect_in(r.err, "leaky.csv:5: free with another size than allocated");
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}

/* The log's pairing, read directly: thread ids numbered in order of first appearance (id 0 as
 * any other), a pointer allocated again while live counted once and paired with its last
 * allocation, the peak. */
CRMM_TEST_IN("replay", the_reader_pairs_events_and_numbers_threads)
{
    const char *path = crmm_test_write_file("pairs.csv", HEADER
                                            "7,10:00:00.000001,allocate,0x1000,100,0\n"
                                            "0,10:00:00.000002,allocate,0x2000,200,0\n"
                                            "7,10:00:00.000003,allocate,0x1000,300,0\n" /* 0x1000 is live */
                                            "9,10:00:00.000004,free,0x1000,300,0\n"
                                            "0,10:00:00.000005,free,0x2000,200,0\n");
    replay_log log;
    ck_assert_crmm_ok(replay_log_read(path, &log));
    ck_assert_uint_eq(log.count, 5);
    ck_assert_uint_eq(log.threads, 3);
    static const int thread_index[5] = {0, 1, 0, 2, 1};
    static const int pair[5] = {-1, 4, 3, 2, 1}; /* the free of 0x1000 pairs with the later allocation */
    for (int i = 0; i < 5; i++) {
        ck_assert_uint_eq(log.events[i].thread_index, thread_index[i]);
        ck_assert_int_eq(log.events[i].pair, pair[i]);
    }
    ck_assert_uint_eq(log.reused_live, 1);
    ck_assert_uint_eq(log.first_reused_live_line, 4);
    ck_assert_uint_eq(log.unknown_frees, 0);
    ck_assert_uint_eq(log.size_mismatches, 0);
    ck_assert_uint_eq(log.peak_bytes, 600);
    replay_log_free(&log);
}

CRMM_TEST_IN("replay", help_names_the_log_format)
{
    crmm_test_output r = replay("--help", NULL);
    ck_assert_int_eq(r.status, 0);
    expect_in(r.out, "usage: crmm replay LOG.csv");
    expect_in(r.out, "Thread,Time,Action,Pointer,Size,Stream");
    crmm_test_output_free(&r);
}

START_TEST(without_a_gpu_the_host_plugin_is_used)
{
    unsetenv("CRMM_CONFIG");
    const char *log = crmm_test_write_file("nogpu.csv", HEADER "1,10:00:00.000001,allocate,0x1000,100,0\n"
                                                     "1,10:00:00.000002,free,0x1000,100,0\n");
    crmm_test_output r = replay(log, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    expect_in(r.err, "replaying against the host plugin");
    expect_in(r.out, "resource: host (host)");
    expect_in(r.out, "allocations: 1 replayed, 0 failed");
    crmm_test_output_free(&r);
}

/* A config without resources (CRMM_CONFIG names it): devices use the built-in cuda plugin, as
 * crmm check-config says of such a file; without a device, the host plugin. */
START_TEST(a_config_without_resources_replays_on_the_built_in_default)
{
    setenv("CRMM_CONFIG", crmm_test_write_file("empty.ini", "; no resources\n"), 1);
    const char *log = crmm_test_write_file("one.csv", HEADER "1,10:00:00.000001,allocate,0x1000,100,0\n"
                                                     "1,10:00:00.000002,free,0x1000,100,0\n");
    crmm_test_output r = replay(log, NULL);
    unsetenv("CRMM_CONFIG");
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    if (crmm_test_gpu_count() == 0) {
        expect_in(r.err, "replaying against the host plugin");
        expect_in(r.out, "resource: host (host)");
    } else {
        expect_in(r.out, "resource: cuda (");
    }
    expect_in(r.out, "allocations: 1 replayed, 0 failed");
    crmm_test_output_free(&r);
}
END_TEST

CRMM_TEST_IN("replay", a_very_long_line_is_named_not_a_crash)
{
    size_t n = 200000;
    char *longline = malloc(n + sizeof HEADER);
    ck_assert_ptr_nonnull(longline);
    memcpy(longline, HEADER, sizeof HEADER - 1);
    memset(longline + sizeof HEADER - 1, '7', n);
    longline[sizeof HEADER - 1 + n] = '\n';
    expect_refused(write_bytes("long.csv", longline, sizeof HEADER + n), "2:", "the line is longer than 4095 bytes");
    free(longline);
}

/* A file with no end and no newline is refused at once, not read into memory until it runs out. */
CRMM_TEST_IN("replay", an_endless_file_is_refused_at_its_first_line)
{
    expect_refused("/dev/zero", "1:", "the line is longer than 4095 bytes");
}

/* Command lines `crmm replay` refuses: the arguments (LOG: a log of one allocation; CONFIG:
 * host_config()), the exit status (2: a usage error) and what the message says; stdout stays empty. */
static const struct { const char *args[6]; int status; const char *says; } refused[] = {
    {{NULL}, 2, "no log file"},
    {{"x.csv", "--bogus"}, 2, "--bogus"},
    {{"/nonexistent-crmm/x.csv"}, 1, "cannot open /nonexistent-crmm/x.csv"},
    {{"LOG", "--config", "CONFIG", "--resource", "nope"}, 1, "no resource 'nope'"},
    {{"LOG", "--config", "CONFIG", "--plot", "/nonexistent-crmm/p.svg"}, 1, "cannot write /nonexistent-crmm/p.svg"},
    {{"LOG", "--repeats", "0"}, 2, "--repeats wants a whole number from 1 to 100000, not '0'"},
    {{"LOG", "--repeats", "x"}, 2, "not 'x'"},
    {{"LOG", "--repeats", "-3"}, 2, "not '-3'"},
    {{"LOG", "--repeats", "100001"}, 2, "not '100001'"},
    {{"LOG", "--threads", "0"}, 2, "--threads wants a whole number from 1 to 1024"},
    {{"LOG", "--stream", "legacy"}, 2, "--stream wants new, default or per-thread, not 'legacy'"},
    {{"LOG", "--json", "--csv"}, 2, "--json and --csv exclude each other"},
    {{"LOG", "--plot"}, 2, "--plot needs a value"},
    {{"LOG", "--plot", ""}, 2, "--plot needs a file name"},
    {{"LOG", "--torch-snapshot", ""}, 2, "--torch-snapshot needs a file name"},
    {{"LOG", "--resource"}, 2, "--resource needs a value"},
    /* an output that would replace an input or the other output */
    {{"LOG", "--plot", "LOG"}, 2, "that is the log, which it would replace"},
    {{"LOG", "--config", "CONFIG", "--torch-snapshot", "CONFIG"}, 2, "that is the config, which it would replace"},
    {{"LOG", "--plot", "/nonexistent-crmm/o", "--torch-snapshot", "/nonexistent-crmm/o"}, 2, "that is --torch-snapshot's file"},
};

CRMM_LOOP_TEST_IN("replay", bad_command_lines_are_refused, (int)(sizeof refused / sizeof refused[0]))
{
    const char *log = crmm_test_write_file("opts.csv", HEADER GOOD), *config = host_config();
    char *argv[8] = {"replay"};
    for (int i = 0; refused[_i].args[i]; i++) {
        const char *a = refused[_i].args[i];
        argv[i + 1] = (char *)(!strcmp(a, "LOG") ? log : !strcmp(a, "CONFIG") ? config : a);
    }
    crmm_test_output r = crmm_test_run_main(crmm_replay_main, argv);
    ck_assert_msg(r.status == refused[_i].status, "%s: rc %d", refused[_i].says, r.status);
    expect_in(r.err, refused[_i].says);
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
    char *text = crmm_test_read_file(log); /* the log is as it was */
    ck_assert_str_eq(text, HEADER GOOD);
    free(text);
}

/* An output that cannot be written is found before anything is replayed: the logging resource
 * replayed would have created its file. */
CRMM_TEST_IN("replay", an_output_that_cannot_be_written_is_refused_before_the_run)
{
    const char *log = crmm_test_write_file("early.csv", HEADER GOOD);
    const char *written = crmm_test_tmp_path("replayed.csv");
    char cfg_text[4400];
    snprintf(cfg_text, sizeof cfg_text, "[resource.h]\nplugin = host\n[resource.l]\nplugin = logging\nupstream = h\n"
             "file = %s\n", written);
    const char *cfg = crmm_test_write_file("early.ini", cfg_text);
    const char *victim = crmm_test_write_file("victim.svg", "someone's file\n");
    const char *link = crmm_test_tmp_path("link.svg");
    ck_assert_int_eq(symlink(victim, link), 0);
    const char *cases[][2] = {{"--plot", "/nonexistent-crmm/o.svg"}, {"--torch-snapshot", "/nonexistent-crmm/o.pickle"},
                              {"--plot", link}};
    const char *says[] = {"--plot: cannot write /nonexistent-crmm/o.svg: No such file or directory",
                          "--torch-snapshot: cannot write /nonexistent-crmm/o.pickle: No such file or directory",
                          "it is a symbolic link"};
    for (int k = 0; k < 3; k++) {
        crmm_test_output r = replay(log, "--config", cfg, "--resource", "l", cases[k][0], cases[k][1], NULL);
        ck_assert_msg(r.status == 1, "%s: rc %d", says[k], r.status);
        expect_in(r.err, says[k]);
        ck_assert_str_eq(r.out, "");
        ck_assert_msg(access(written, F_OK) != 0, "%s: the replay ran", says[k]);
        crmm_test_output_free(&r);
    }
}

/* Peak in use 1000 bytes; the recorder reserves allocations rounded up to 256: 1280, ratio 1.28. */
static const char *ratio_log =
    FIVE_THREADS_UP_TO_THE_PEAK
    "33,10:00:00.000008,free,0x3000,300,0\n";

/* Arguments: a config of a recorder r and a host h, both replayed. */
#define TWO_RESOURCES \
    "--config", crmm_test_write_file("two.ini", "[resource.r]\nplugin = recorder\n[resource.h]\nplugin = host\n"), \
        "--resource", "r", "--resource", "h"

static bool ends_with_newline(const char *s)
{
    size_t n = strlen(s);
    return n && s[n - 1] == '\n';
}

CRMM_TEST_IN("replay", several_resources_each_a_row_with_reserved_over_peak)
{
    const char *log = crmm_test_write_file("ratio.csv", ratio_log);
    crmm_test_output r = replay(log, TWO_RESOURCES, "--repeats", "3", NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    expect_in(r.out, "resource: r (recorder)");
    expect_in(r.out, "resource: h (host)");
    expect_in(r.out, "median of 3 repeats");
    expect_in(r.out, "peak in use: 1000 B (1000 bytes as replayed; 1000 in the log)");
    expect_in(r.out, "peak reserved: 1.2 KiB (1280 bytes)");
    expect_in(r.out, "reserved / peak in use: 1.280");
    expect_in(r.out, "reserved / peak in use: n/a"); /* host does not tell */
    expect_in(r.out, "7 calls per repeat");
    ck_assert(ends_with_newline(r.out));
    crmm_test_output_free(&r);

    r = replay(log, TWO_RESOURCES, "--json", NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    ck_assert_msg(r.out[0] == '{' && ends_with_newline(r.out), "%s", r.out);
    expect_in(r.out, "\"resource\": \"r\"");
    expect_in(r.out, "\"resource\": \"h\"");
    expect_in(r.out, "\"peak_reserved_bytes\": 1280, \"reserved_over_peak_live\": 1.28,");
    expect_in(r.out, "\"peak_reserved_bytes\": null, \"reserved_over_peak_live\": null,");
    expect_in(r.out, "\"repeats\": 5");
    crmm_test_output_free(&r);

    r = replay(log, TWO_RESOURCES, "--csv", NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    ck_assert(ends_with_newline(r.out));
    int lines = 0, commas[3] = {0, 0, 0};
    for (const char *c = r.out; *c; c++) {
        if (*c == ',' && lines < 3)
            commas[lines]++;
        lines += *c == '\n';
    }
    ck_assert_int_eq(lines, 3); /* a header and one row per resource */
    ck_assert_int_eq(commas[0], 20);
    ck_assert_int_eq(commas[1], 20);
    ck_assert_int_eq(commas[2], 20);
    expect_in(r.out, ",r,recorder,none (host memory),0,5,7,");
    expect_in(r.out, ",1000,1280,1.28,,\n");
    expect_in(r.out, ",h,host,");
    crmm_test_output_free(&r);
}

/* Each row builds its chain anew: a row over an upstream another row grew first reports what
 * its own replay reserved, not that row's peak (and the snapshot builds its own too). */
CRMM_TEST_IN("replay", each_row_starts_on_upstreams_of_its_own)
{
    const char *log = crmm_test_write_file("ratio.csv", ratio_log);
    const char *cfg = crmm_test_write_file("shared.ini", "[resource.r]\nplugin = recorder\n[resource.a]\n"
                                                         "plugin = aligned\nupstream = r\nalignment = 1MiB\n");
    const char *snapshot = crmm_test_tmp_path("shared.pickle");
    crmm_test_output r = replay(log, "--config", cfg, "--torch-snapshot", snapshot, "--resource", "a", "--resource",
                                "r", "--csv", NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    const char *row_r = strstr(r.out, ",r,recorder,");
    ck_assert_msg(row_r != NULL, "%s", r.out);
    expect_in(row_r, ",1000,1280,1.28,"); /* as when r is replayed alone */
    const char *row_a = strstr(r.out, ",a,aligned -> recorder,");
    ck_assert_msg(row_a != NULL && row_a < row_r, "%s", r.out);
    expect_in(row_a, ",1000,4193792,"); /* seven blocks of 100-700 bytes, each with 1 MiB of room to align */
    crmm_test_output_free(&r);
}

CRMM_TEST_IN("replay", the_plot_shows_both_series_per_resource)
{
    const char *log = crmm_test_write_file("plot.csv", ratio_log);
    const char *svg = crmm_test_tmp_path("plot.svg");
    crmm_test_output r = replay(log, TWO_RESOURCES, "--plot", svg, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    crmm_test_output_free(&r);
    char *text = crmm_test_read_file(svg);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strncmp(text, "<?xml", 5) == 0 && ends_with_newline(text), "%s", text);
    expect_in(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
    expect_in(text, "event index in the log");
    expect_in(text, "bytes (B)");
    expect_in(text, "<g id=\"resource-0\">");
    expect_in(text, "<g id=\"resource-1\">");
    ck_assert_int_eq(crmm_test_count(text, "<polyline class=\"in-use\""), 2);
    ck_assert_int_eq(crmm_test_count(text, "<polyline class=\"reserved\""), 1); /* host does not tell */
    expect_in(text, ">r in use</text>");
    expect_in(text, ">r reserved</text>");
    expect_in(text, ">h reserved: n/a</text>");
    ck_assert_int_eq(crmm_test_count(text, "<g"), crmm_test_count(text, "</g>"));
    ck_assert_int_eq(crmm_test_count(text, "<text"), crmm_test_count(text, "</text>"));
    /* one point per call: 7 calls (4 allocations, 3 frees), each a pair of coordinates */
    const char *line = strstr(text, "<polyline class=\"in-use\"");
    const char *points = strstr(line, "points=\"") + 8;
    ck_assert_int_eq(crmm_test_count(points, ",") - crmm_test_count(strchr(points, '"'), ","), 7);
    free(text);
}

/* A log of three events: the event axis is labelled 0, 1 and 2, each once (no half steps). */
CRMM_TEST_IN("replay", a_short_log_is_plotted_on_whole_event_indices)
{
    const char *log = crmm_test_write_file("short.csv", HEADER "1,10:00:00.000001,allocate,0x1000,100,0\n"
                                                        "1,10:00:00.000002,allocate,0x2000,200,0\n"
                                                        "1,10:00:00.000003,free,0x1000,100,0\n");
    const char *svg = crmm_test_tmp_path("short.svg");
    crmm_test_output r = replay(log, "--config", host_config(), "--plot", svg, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    crmm_test_output_free(&r);
    char *text = crmm_test_read_file(svg);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(crmm_test_count(text, "text-anchor=\"middle\">"), 3 + 2); /* the ticks, the title, the axis name */
    for (int k = 0; k <= 2; k++) {
        char label[64];
        snprintf(label, sizeof label, "text-anchor=\"middle\">%d</text>", k);
        ck_assert_int_eq(crmm_test_count(text, label), 1);
    }
    free(text);
}

/* Two outputs not written yet under two spellings of one path (DIR/o and DIR/./o) are one file:
 * refused before anything runs, as the same spelling is. */
CRMM_TEST_IN("replay", two_spellings_of_one_new_output_are_refused)
{
    const char *log = crmm_test_write_file("spell.csv", ratio_log);
    char plot[4096], snapshot[4096];
    snprintf(plot, sizeof plot, "%s", crmm_test_tmp_path("o"));
    char *slash = strrchr(plot, '/');
    ck_assert_ptr_nonnull(slash);
    snprintf(snapshot, sizeof snapshot, "%.*s/./o", (int)(slash - plot), plot);
    crmm_test_output r = replay(log, "--config", host_config(), "--plot", plot, "--torch-snapshot", snapshot, NULL);
    ck_assert_msg(r.status == 2, "rc %d: %s", r.status, r.err);
    expect_in(r.err, "that is --torch-snapshot's file");
    crmm_test_output_free(&r);
    ck_assert_int_ne(access(plot, F_OK), 0); /* nothing was written */
}

/* A plot written over an existing file keeps that file's permissions (it replaces the file
 * through a new one beside it): a private file stays private. */
CRMM_TEST_IN("replay", a_replaced_output_keeps_the_file_s_mode)
{
    const char *log = crmm_test_write_file("mode.csv", ratio_log);
    const char *svg = crmm_test_write_file("mode.svg", "old\n");
    ck_assert_int_eq(chmod(svg, 0600), 0);
    crmm_test_output r = replay(log, TWO_RESOURCES, "--plot", svg, NULL);
    ck_assert_msg(r.status == 0, "rc %d: %s", r.status, r.err);
    crmm_test_output_free(&r);
    struct stat sb;
    ck_assert_int_eq(stat(svg, &sb), 0);
    ck_assert_msg((sb.st_mode & 07777) == 0600, "mode %o", (unsigned)(sb.st_mode & 07777));
    char *text = crmm_test_read_file(svg);
    ck_assert_msg(strncmp(text, "<?xml", 5) == 0, "%s", text); /* replaced */
    free(text);
}

int main(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = crmm_test_tcase(s, "replay", 0);
    tcase_add_test(tc, a_config_without_resources_replays_on_the_built_in_default);
    if (crmm_test_gpu_count() == 0)
        tcase_add_test(tc, without_a_gpu_the_host_plugin_is_used);
    return crmm_test_run(s);
}
