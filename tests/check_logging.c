/* check_logging.c — the `logging` plugin over host memory: the CSV against RMM's format, buffering
 * and its writer thread, write errors, the flush at exit and after fork, file names, threads, the
 * API through other adaptors, the logging switch without a GPU, and the conformance suite. */
#include "build_config.h"
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "conformance.h"
#include "test_support.h"

static char *tmp_dir; /* made in main, before Check forks; removed when main returns */

/* A path in the test directory unique to this process and `tag`. */
static const char *path_for(const char *tag) { return crmm_test_path_in(tmp_dir, tag, ".csv"); }

/* logging over a fresh host resource, with `extra` parameters after file=path. */
static crmm_resource *logger(const char *path, const char *extra)
{
    char params[4400];
    snprintf(params, sizeof params, "file=%s %s", path, extra ? extra : "");
    return crmm_test_create_over_host("logging", params);
}

/* True when t is HH:MM:SS.UUUUUU with a valid clock time. */
static int is_time(const char *t, size_t len)
{
    static const char shape[] = "dd:dd:dd.dddddd";
    if (len != sizeof shape - 1)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (shape[i] == 'd' ? !isdigit((unsigned char)t[i]) : t[i] != shape[i])
            return 0;
    return atoi(t) < 24 && atoi(t + 3) < 60 && atoi(t + 6) < 61;
}

/* Check that `line` (no newline) equals "THREAD,<time>,REST": everything but the time's value. */
static void expect_line(const char *line, size_t len, long thread, const char *rest)
{
    char want_thread[32];
    int tl = snprintf(want_thread, sizeof want_thread, "%ld,", thread);
    ck_assert_msg(len > (size_t)tl && strncmp(line, want_thread, (size_t)tl) == 0, "line '%.*s': thread is not %ld",
                  (int)len, line, thread);
    const char *time = line + tl;
    const char *comma = memchr(time, ',', len - (size_t)tl);
    ck_assert_msg(comma != NULL, "line '%.*s' has no time field", (int)len, line);
    ck_assert_msg(is_time(time, (size_t)(comma - time)), "line '%.*s': time is not HH:MM:SS.UUUUUU", (int)len, line);
    size_t rest_len = len - (size_t)(comma + 1 - line);
    ck_assert_msg(rest_len == strlen(rest) && memcmp(comma + 1, rest, rest_len) == 0, "line '%.*s': expected '%s' after the time",
                  (int)len, line, rest);
}

CRMM_TEST_IN("logging", csv_matches_rmm_format)
{
    const char *path = path_for("format");
    crmm_resource *mr = logger(path, NULL);
    void *p0, *p1, *p2, *fail = (void *)1;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 100, NULL, &p0));
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 42, NULL, &p1));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p0, 100, NULL));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p1, 42, NULL));
    ck_assert_crmm(crmm_resource_allocate(mr, (size_t)1 << 50, NULL, &fail), CRMM_ERROR_OUT_OF_MEMORY);
    crmm_cuda_stream_t s = (crmm_cuda_stream_t)(uintptr_t)0x7f00beef0010ULL; /* host ignores streams */
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 256, s, &p2));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p2, 256, CRMM_CUDA_STREAM_PER_THREAD));
    ck_assert_crmm_ok(crmm_logging_flush(mr));
    char want[7][128];
    snprintf(want[0], 128, "allocate,%p,100,0", p0);
    snprintf(want[1], 128, "allocate,%p,42,0", p1);
    snprintf(want[2], 128, "free,%p,100,0", p0);
    snprintf(want[3], 128, "free,%p,42,0", p1);
    snprintf(want[4], 128, "allocate failure,%p,%zu,0", NULL, (size_t)1 << 50); /* %p of NULL: (nil) */
    /* RMM writes the stream with `std::hex << stream.value()`: "0" for the null default stream,
     * a 0x prefix for any other handle (libstdc++ prints a non-null void * with showbase). */
    snprintf(want[5], 128, "allocate,%p,256,0x%lx", p2, (unsigned long)(uintptr_t)s);
    snprintf(want[6], 128, "free,%p,256,0x%lx", p2, (unsigned long)(uintptr_t)CRMM_CUDA_STREAM_PER_THREAD);
    ck_assert_str_eq(want[4], "allocate failure,(nil),1125899906842624,0");
    ck_assert_str_eq(want[5] + strlen(want[5]) - 15, ",0x7f00beef0010");
    ck_assert_str_eq(want[6] + strlen(want[6]) - 4, ",0x2");
    char *text = crmm_test_read_file_or_fail(path);
    ck_assert_int_eq(crmm_test_count(text, "\n"), 8);
    ck_assert_msg(strncmp(text, "Thread,Time,Action,Pointer,Size,Stream\n", 39) == 0, "header: %s", text);
    const char *line = strchr(text, '\n') + 1;
    for (int i = 0; i < 7; i++) {
        const char *end = strchr(line, '\n');
        expect_line(line, (size_t)(end - line), (long)gettid(), want[i]);
        line = end + 1;
    }
    ck_assert_str_eq(crmm_logging_file(mr), path);
    free(text);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("logging", buffered_until_flush)
{
    const char *path = path_for("buffered");
    crmm_resource *mr = logger(path, "auto_flush=false");
    ck_assert_str_eq(crmm_test_file_text(path), CRMM_LOGGING_CSV_HEADER "\n"); /* the header is there at once */
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1000, NULL, &p));
    ck_assert_int_eq(crmm_test_count_lines(path), 1); /* the line waits in the buffer */
    ck_assert_crmm_ok(crmm_logging_flush(mr));
    ck_assert_int_eq(crmm_test_count_lines(path), 2);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert_crmm_ok(crmm_resource_trim(mr)); /* trim flushes too */
    ck_assert_int_eq(crmm_test_count_lines(path), 3);
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1000, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    crmm_resource_release(mr); /* and destroy */
    ck_assert_int_eq(crmm_test_count_lines(path), 5);
}

CRMM_TEST_IN("logging", auto_flush_writes_each_line)
{
    const char *path = path_for("auto");
    crmm_resource *mr = logger(path, "auto_flush=true");
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 1000, NULL, &p));
    ck_assert_int_eq(crmm_test_count_lines(path), 2);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 1000, NULL));
    ck_assert_int_eq(crmm_test_count_lines(path), 3);
    crmm_resource_release(mr);
}

CRMM_TEST_IN("logging", large_logs_spill_to_the_file)
{
    const char *path = path_for("spill");
    crmm_resource *mr = logger(path, NULL);
    for (int i = 0; i < 10000; i++) { /* ~0.5 MB of lines: several buffer-fulls */
        void *p;
        ck_assert_crmm_ok(crmm_resource_allocate(mr, 64, NULL, &p));
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 64, NULL));
    }
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_gt(st.st_size, 100000); /* written without a flush */
    crmm_resource_release(mr);
    ck_assert_int_eq(crmm_test_count_lines(path), 20001);
}

/* Threads of this process named "crmm-log", the logging plugin's writers (the comm of each entry
 * of /proc/self/task; counting every thread would count a sanitizer's own threads too). */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[320], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = '\0';
            fclose(f);
        }
        n += strcmp(comm, "crmm-log\n") == 0;
    }
    closedir(d);
    return n;
}

/* A buffered logger writes its full buffers on a thread of its own, named crmm-log (the caller
 * goes on with a second buffer); one with auto_flush writes on the caller's thread and starts
 * none. The thread ends with the resource. */
CRMM_TEST_IN("logging", buffered_logging_writes_on_its_own_thread)
{
    int before = thread_count();
    crmm_resource *mr = logger(path_for("writer"), NULL);
    ck_assert_int_eq(thread_count(), before + 1);
    crmm_resource *autom = logger(path_for("writer_auto"), "auto_flush=true");
    ck_assert_int_eq(thread_count(), before + 1);
    crmm_test_release(autom, mr);
    ck_assert_int_eq(thread_count(), before);
}

static crmm_resource *kept_for_exit; /* a global, so leak checkers see it as reachable */

CRMM_TEST_IN("logging", lines_are_flushed_at_exit)
{
    const char *path = path_for("atexit");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        kept_for_exit = logger(path, NULL);
        void *p;
        crmm_resource_allocate(kept_for_exit, 4096, NULL, &p);
        exit(0); /* no release, no flush: the exit handler writes the line */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    const char *text = crmm_test_file_text(path);
    ck_assert_msg(crmm_test_count(text, "\n") == 2 && strstr(text, ",allocate,0x") != NULL, "file: %s", text);
}

static void *freed_at_exit;

static void free_at_exit(void) { crmm_resource_deallocate(kept_for_exit, freed_at_exit, 4096, NULL); }

/* An exit handler registered before the resource was made runs after the plugin's own (a C++
 * global freed by its destructor, say): its free is written too. */
CRMM_TEST_IN("logging", lines_logged_after_the_exit_flush_are_written)
{
    const char *path = path_for("after_exit_flush");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        atexit(free_at_exit);
        kept_for_exit = logger(path, NULL);
        crmm_resource_allocate(kept_for_exit, 4096, NULL, &freed_at_exit);
        exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    const char *text = crmm_test_file_text(path);
    ck_assert_msg(crmm_test_count(text, "\n") == 3 && strstr(text, ",free,0x") != NULL, "file: %s", text);
}

CRMM_TEST_IN("logging", a_forked_child_does_not_write_the_parents_lines)
{
    const char *path = path_for("fork");
    kept_for_exit = logger(path, NULL);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(kept_for_exit, 4096, NULL, &p)); /* buffered */
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        exit(0); /* its exit handler must drop the inherited buffer */
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_crmm_ok(crmm_resource_deallocate(kept_for_exit, p, 4096, NULL));
    crmm_resource_release(kept_for_exit);
    const char *text = crmm_test_file_text(path);
    ck_assert_msg(crmm_test_count(text, "\n") == 3, "file: %s", text);
}

/* A forked child keeps no hold on the parent's log: while the child lives, the parent can log to
 * that file again once its resource is gone (the file's exclusive lock went with the parent's
 * close, not with the child's exit); in the child, a flush of the parent's resource says that it
 * writes nothing there. */
CRMM_TEST_IN("logging", a_forked_child_leaves_the_file_to_the_parent)
{
    const char *path = path_for("fork_lock");
    crmm_resource *mr = logger(path, NULL);
    int ready[2], go[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(go), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        crmm_status st = crmm_logging_flush(mr);
        char c = st == CRMM_ERROR_STATE && strstr(crmm_last_error(), "forked child") ? 'y' : 'n';
        if (crmm_resource_trim(mr) != CRMM_OK) /* a trim has nothing of the child's to flush */
            c = 't';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(2);
        _exit(0);
    }
    char c = 0;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_msg(c == 'y', "the child's flush of the parent's resource did not say it writes nothing, or its trim "
                  "failed (%c)", c);
    crmm_resource_release(mr);
    mr = logger(path, NULL); /* the child still lives */
    crmm_resource_release(mr);
    ck_assert_int_eq(write(go[1], &c, 1), 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}

/* The library log and a logging resource's allocation log are not one file, in either order:
 * the second is refused and the first keeps its file (the two would overwrite each other). */
CRMM_TEST_IN("logging", the_library_log_and_an_allocation_log_do_not_share_a_file)
{
    unsetenv("CRMM_DEBUG_LOG_FILE");
    const char *path = path_for("shared_with_library_log");
    crmm_resource *mr = logger(path, NULL);
    ck_assert_crmm(crmm_log_set_file(path), CRMM_ERROR_IO);
    ck_assert_error_contains("a logging resource writes its allocation log there");
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
    crmm_resource_release(mr);
    const char *library = path_for("library_log");
    ck_assert_crmm_ok(crmm_log_set_file(library));
    crmm_resource *second = NULL;
    char params[4400];
    snprintf(params, sizeof params, "file=%s", library);
    crmm_resource *h = crmm_test_create("host", NULL, NULL);
    ck_assert_crmm(crmm_resource_create("logging", params, h, &second), CRMM_ERROR_IO);
    ck_assert_ptr_null(second);
    ck_assert_crmm_ok(crmm_log_set_file(NULL));
    crmm_resource_release(h);
}

/* A pool over a logging resource calls it (and so takes its file's lock) while holding the pool's
 * lock. A fork must take the two in that order too: with the file's lock first, a fork while
 * another thread grows the pool would wait for the pool's lock while that thread waits for the
 * file's. */
typedef struct grower { crmm_resource *pool; atomic_bool stop; } grower;

static void *grow_and_trim(void *arg)
{
    grower *g = arg;
    while (!atomic_load(&g->stop)) {
        void *p;
        if (crmm_resource_allocate(g->pool, 1 << 20, NULL, &p) != CRMM_OK)
            return (void *)1;
        crmm_resource_deallocate(g->pool, p, 1 << 20, NULL);
        crmm_resource_trim(g->pool); /* the next allocation grows the pool again */
    }
    return NULL;
}

CRMM_TEST_IN("logging", fork_while_a_pool_over_it_grows)
{
    crmm_resource *log = logger(path_for("fork_pool"), NULL);
    grower g = {crmm_test_create("pool", "initial_size=0 thread_cache=off", log), false};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, grow_and_trim, &g), 0);
    fflush(NULL);
    /* enough forks to meet the grower inside its growth many times; few enough that a loaded
     * machine (each fork copies the process's tables) stays far inside the case's timeout */
    for (int i = 0; i < 500; i++) {
        alarm(20); /* a deadlock fails the test instead of hanging it */
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            _exit(0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        alarm(0);
    }
    atomic_store(&g.stop, true);
    void *ret;
    ck_assert_int_eq(pthread_join(t, &ret), 0);
    ck_assert_ptr_null(ret);
    crmm_test_release(g.pool, log);
}

CRMM_TEST_IN("logging", file_name_expansion)
{
    char pattern[4200], want[4200];
    snprintf(pattern, sizeof pattern, "%s/expand.dev%%d.%%p.100%%%%.csv", tmp_dir);
    snprintf(want, sizeof want, "%s/expand.devhost.%ld.100%%.csv", tmp_dir, (long)getpid());
    crmm_resource *mr = logger(pattern, NULL); /* a host chain has no device: %d is "host" */
    ck_assert_str_eq(crmm_logging_file(mr), want);
    ck_assert_int_eq(access(want, F_OK), 0);
    crmm_resource_release(mr);
    unlink(want);
    /* the same expansion through a config section */
    char cfg_text[4600];
    snprintf(cfg_text, sizeof cfg_text, "[resource.h]\nplugin = host\n[resource.l]\nplugin = logging\nupstream = h\n"
             "file = %s/cfg.%%p.csv\n", tmp_dir);
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string(cfg_text, "expansion", &cfg));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "l", -1, &mr));
    snprintf(want, sizeof want, "%s/cfg.%ld.csv", tmp_dir, (long)getpid());
    ck_assert_str_eq(crmm_logging_file(mr), want);
    crmm_resource_release(mr);
    crmm_config_free(cfg);
    unlink(want);
}

CRMM_TEST_IN("logging", bad_file_names_are_refused)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = NULL;
    char params[4400];
    snprintf(params, sizeof params, "file=%s/bad.%%x.csv", tmp_dir);
    ck_assert_crmm(crmm_resource_create("logging", params, host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "%x"));
    ck_assert_crmm(crmm_resource_create("logging", "file=/nonexistent-crmm-dir/x.csv", host, &mr), CRMM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "/nonexistent-crmm-dir/x.csv"));
    snprintf(params, sizeof params, "file=%s", tmp_dir); /* a directory */
    ck_assert_crmm(crmm_resource_create("logging", params, host, &mr), CRMM_ERROR_IO);
    ck_assert_ptr_null(mr);
    crmm_resource_release(host);
}

/* In a child process, where the limit cannot hit Check's own files: log `pairs` allocate/free
 * pairs into a file that stops growing at 4 KiB (later writes fail with EFBIG), then check that
 * a flush reports the failure, that allocation goes on while the log keeps saying it failed, and
 * that nothing was written past the limit. Fails the test with the step the child failed at. */
static void check_full_file(const char *tag, int pairs)
{
    const char *path = path_for(tag);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {4096, 4096};
        crmm_resource *host = NULL, *mr = NULL;
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0 || crmm_resource_create("host", NULL, NULL, &host) != CRMM_OK)
            _exit(10);
        char params[4300];
        snprintf(params, sizeof params, "file=%s", path);
        if (crmm_resource_create("logging", params, host, &mr) != CRMM_OK)
            _exit(11);
        int step = 0;
        for (int i = 0; i < pairs && !step; i++) {
            void *p;
            if (crmm_resource_allocate(mr, 64, NULL, &p) != CRMM_OK || crmm_resource_deallocate(mr, p, 64, NULL) != CRMM_OK)
                step = 12;
        }
        if (!step && crmm_logging_flush(mr) != CRMM_ERROR_IO)
            step = 13;
        if (!step && (!strstr(crmm_last_error(), "cannot write") || !strstr(crmm_last_error(), path)))
            step = 14;
        void *p; /* allocation goes on; the log keeps saying it failed */
        if (!step && (crmm_resource_allocate(mr, 64, NULL, &p) != CRMM_OK || crmm_resource_deallocate(mr, p, 64, NULL) != CRMM_OK))
            step = 15;
        if (!step && crmm_logging_flush(mr) != CRMM_ERROR_IO)
            step = 16;
        crmm_test_release(mr, host);
        struct stat st;
        if (!step && (stat(path, &st) != 0 || st.st_size > 4096))
            step = 17;
        exit(step);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed at step %d", WEXITSTATUS(status));
    /* the file ends with a whole line of six fields (one the limit cut short is left out), so the
     * log that the write error ended still reads */
    char *text = crmm_test_read_file_or_fail(path);
    size_t len = strlen(text);
    ck_assert_msg(len > 0 && text[len - 1] == '\n', "the file ends in a partial line: '%s'",
                  strrchr(text, '\n') ? strrchr(text, '\n') + 1 : text);
    ck_assert_int_eq(crmm_test_count(text, ","), 5 * crmm_test_count(text, "\n"));
    free(text);
}

CRMM_TEST_IN("logging", write_errors_are_reported)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = NULL;
    ck_assert_crmm(crmm_resource_create("logging", "file=/dev/full", host, &mr), CRMM_ERROR_IO); /* the header */
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "/dev/full"));
    crmm_resource_release(host);
    check_full_file("full", 200); /* ~10 KB of lines, buffered: the flush writes them */
}

/* A write error met by the writer thread (full buffers) is reported by the next flush too. */
CRMM_TEST_IN("logging", write_errors_of_full_buffers_are_reported)
{
    check_full_file("full_buffers", 5000); /* ~0.5 MB of lines: several full buffers */
}

CRMM_TEST_IN("logging", file_comes_from_the_environment)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL), *mr = NULL;
    unsetenv("CRMM_LOG_FILE");
    ck_assert_crmm(crmm_resource_create("logging", NULL, host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_msg(strstr(crmm_last_error(), "CRMM_LOG_FILE") && strstr(crmm_last_error(), "'file'"), "message: %s",
                  crmm_last_error());
    char env[4200], want[4200];
    snprintf(env, sizeof env, "%s/env.%%p.csv", tmp_dir);
    snprintf(want, sizeof want, "%s/env.%ld.csv", tmp_dir, (long)getpid());
    setenv("CRMM_LOG_FILE", env, 1);
    ck_assert_crmm_ok(crmm_resource_create("logging", NULL, host, &mr));
    ck_assert_str_eq(crmm_logging_file(mr), want);
    crmm_resource_release(mr);
    unsetenv("CRMM_LOG_FILE");
    crmm_resource_release(host);
}

CRMM_TEST_IN("logging", api_through_other_adaptors)
{
    const char *path = path_for("api");
    crmm_resource *log = logger(path, NULL);
    crmm_resource *top = crmm_test_create("tracking", NULL, log);
    ck_assert_str_eq(crmm_logging_file(top), path);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(top, 10, NULL, &p));
    ck_assert_crmm_ok(crmm_logging_flush(top));
    ck_assert_int_eq(crmm_test_count_lines(path), 2);
    ck_assert_crmm_ok(crmm_resource_deallocate(top, p, 10, NULL));
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    ck_assert_crmm(crmm_logging_flush(host), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_null(crmm_logging_file(host));
    ck_assert_ptr_null(crmm_logging_file(NULL));
    ck_assert_crmm(crmm_logging_flush(NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control(log, CRMM_LOGGING_OP_GET_FILE, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    uint64_t in_use; /* queries pass through to the upstream */
    ck_assert_crmm_ok(crmm_resource_query(log, CRMM_QUERY_BYTES_IN_USE, &in_use));
    ck_assert_uint_eq(in_use, 0);
    crmm_test_release(host, top, log);
}

typedef struct writer { crmm_resource *mr; long tid; } writer;

static void *write_lines(void *arg)
{
    writer *w = arg;
    w->tid = (long)gettid();
    for (int i = 0; i < 2000; i++) {
        void *p;
        if (crmm_resource_allocate(w->mr, 100 + (size_t)i, NULL, &p) != CRMM_OK ||
            crmm_resource_deallocate(w->mr, p, 100 + (size_t)i, NULL) != CRMM_OK)
            return (void *)1;
    }
    return NULL;
}

CRMM_TEST_IN("logging", threads_never_interleave_lines)
{
    const char *path = path_for("threads");
    crmm_resource *mr = logger(path, NULL);
    pthread_t t[4];
    writer w[4];
    for (int k = 0; k < 4; k++) {
        w[k] = (writer){mr, 0};
        ck_assert_int_eq(pthread_create(&t[k], NULL, write_lines, &w[k]), 0);
    }
    for (int k = 0; k < 4; k++) {
        void *ret;
        ck_assert_int_eq(pthread_join(t[k], &ret), 0);
        ck_assert_ptr_null(ret);
    }
    crmm_resource_release(mr);
    char *text = crmm_test_read_file_or_fail(path);
    ck_assert_int_eq(crmm_test_count(text, "\n"), 1 + 4 * 2 * 2000);
    int per_thread[4] = {0};
    int next_size[4] = {100, 100, 100, 100}; /* each thread's lines keep its own order */
    char *save = NULL;
    strtok_r(text, "\n", &save); /* header */
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long tid;
        char time[32], action[32], ptr[32];
        unsigned long size, stream;
        int n = sscanf(line, "%ld,%31[^,],%31[^,],%31[^,],%lu,%lx", &tid, time, action, ptr, &size, &stream);
        ck_assert_msg(n == 6, "malformed line '%s'", line);
        ck_assert_msg(is_time(time, strlen(time)), "bad time in '%s'", line);
        int k = 0;
        while (k < 4 && w[k].tid != tid)
            k++;
        ck_assert_msg(k < 4, "line '%s' from an unknown thread", line);
        per_thread[k]++;
        ck_assert_uint_eq(size, (unsigned long)next_size[k]);
        if (strcmp(action, "free") == 0)
            next_size[k]++;
        else
            ck_assert_str_eq(action, "allocate");
    }
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(per_thread[k], 4000);
    free(text);
}

CRMM_TEST_IN("logging", switch_needs_a_file_name)
{
    unsetenv("CRMM_LOG_FILE");
    ck_assert_crmm(crmm_enable_logging(NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "CRMM_LOG_FILE"));
    int count = -1;
    ck_assert_crmm_ok(crmm_get_log_filenames(NULL, 0, &count));
    ck_assert_int_eq(count, 0);
    ck_assert_crmm(crmm_get_log_filenames(NULL, 1, &count), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_get_log_filenames(NULL, 0, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "an older error");
    ck_assert_crmm_ok(crmm_disable_logging()); /* off: nothing to do */
    ck_assert_int_eq(crmm_last_status(), CRMM_OK); /* success clears the thread's error (error.h) */
}

START_TEST(switch_without_a_device_is_a_cuda_error)
{
    ck_assert_crmm(crmm_enable_logging("/tmp/never-written.csv"), CRMM_ERROR_CUDA);
    ck_assert_msg(strlen(crmm_last_error()) > 20, "message: %s", crmm_last_error());
    const char *names[2] = {"x", "y"};
    int count = -1;
    ck_assert_crmm_ok(crmm_get_log_filenames(names, 2, &count));
    ck_assert_int_eq(count, 0);
    ck_assert_ptr_null(names[0]);
    ck_assert_int_eq(access("/tmp/never-written.dev0.csv", F_OK), -1);
    ck_assert_crmm_ok(crmm_disable_logging());
}

static char chain_config[4600]; /* main writes it: its file is in tmp_dir */
static const crmm_test_chain chains[] = {{"logging_over_host", chain_config, "l", 0, 0}};

int main(void)
{
    tmp_dir = crmm_test_tmpdir();
    if (!tmp_dir)
        return 1;
    snprintf(chain_config, sizeof chain_config, "[resource.h]\nplugin = host\n[resource.l]\nplugin = logging\n"
             "upstream = h\nfile = %s/conformance.%%p.csv\n", tmp_dir);
    Suite *s = suite_create("logging");
    TCase *tc = crmm_test_tcase(s, "logging", 0);
    if (crmm_test_gpu_count() == 0) /* with a GPU, check_adaptors_gpu tests the switch */
        tcase_add_test(tc, switch_without_a_device_is_a_cuda_error);
    crmm_conformance_add(s, chains, 1);
    int rc = crmm_test_run(s);
    free(tmp_dir);
    return rc;
}
