/* test_support.c — GPU probing in a child process, the Check runner, temporary directories that
 * clean up after themselves, reading files and captured output, asserting wrappers.
 *
 * Temporary directories: each one made is recorded with the id of the process that made it, in
 * a list an exit handler walks; the handler removes (depth first) only the directories of the
 * process that is exiting. Check runs each test in a forked child that inherits the list, so a
 * directory made in main before the runner forks outlives every test and goes when main
 * returns, and one made in a test goes when that test's child exits. */
#include "build_config.h"
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

/* Files a test writes (configs among them) get mode 0644 whatever umask the test was started
 * with: crmm refuses a config that others, or a group not the owner's own, may write, and that
 * must be what a test decides, not the shell it ran from. */
__attribute__((constructor)) static void test_umask(void) { umask(022); }

/* ---- GPUs and the runner -------------------------------------------------------------------- */

bool crmm_test_wait_child(pid_t pid, int seconds, int *status)
{
    const struct timespec ms = {0, 1000 * 1000};
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += seconds;
    *status = 0;
    for (;;) {
        pid_t done = waitpid(pid, status, WNOHANG);
        if (done == pid)
            return true;
        if (done < 0 && errno != EINTR)
            break; /* it cannot be waited for: counted as not ended */
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
            break;
        nanosleep(&ms, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    return false;
}

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

int crmm_test_probe(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(fn() & 0xff);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
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

/* The tests declared with CRMM_TEST*: the linker gathers them between these two symbols (weak:
 * a program that declares none has no such section). */
extern const crmm_test_entry __start_crmm_tests[] __attribute__((weak));
extern const crmm_test_entry __stop_crmm_tests[] __attribute__((weak));
static unsigned char *test_taken; /* per entry: added to a case */

/* Adds to tc the tests declared for case `name` (NULL: for the main case). */
static void add_declared_tests(TCase *tc, const char *name)
{
    size_t n = (size_t)(__stop_crmm_tests - __start_crmm_tests);
    if (!test_taken && n && !(test_taken = calloc(n, 1)))
        abort();
    /* in the order written: by line, then by place in the section (for tests of two files) */
    for (;;) {
        const crmm_test_entry *next = NULL;
        for (size_t k = 0; k < n; k++) {
            const crmm_test_entry *e = &__start_crmm_tests[k];
            int mine = e->tcase && name ? strcmp(e->tcase, name) == 0 : e->tcase == name;
            if (mine && !test_taken[k] && (!next || e->line < next->line))
                next = e;
        }
        if (!next)
            return;
        tcase_add_loop_test(tc, *next->test, 0, next->loops);
        test_taken[next - __start_crmm_tests] = 1;
    }
}

int crmm_test_run(Suite *s)
{
    for (const crmm_test_entry *e = __start_crmm_tests; e < __stop_crmm_tests; e++)
        if (!test_taken || !test_taken[e - __start_crmm_tests]) {
            fprintf(stderr, "FAIL: test %s (line %d) is declared for case %s, which this program does not make\n",
                    (*e->test)->name, e->line, e->tcase ? e->tcase : "main (crmm_test_main)");
            return 1;
        }
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

TCase *crmm_test_tcase(Suite *s, const char *name, int timeout)
{
    TCase *tc = tcase_create(name);
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    add_declared_tests(tc, name);
    suite_add_tcase(s, tc);
    return tc;
}

int crmm_test_main(const char *name, int timeout)
{
    Suite *s = suite_create(name);
    TCase *tc = crmm_test_tcase(s, name, timeout);
    add_declared_tests(tc, NULL);
    return crmm_test_run(s);
}

int crmm_test_main_cases(const char *name, const crmm_test_case *cases)
{
    Suite *s = suite_create(name);
    for (; cases->name; cases++)
        crmm_test_tcase(s, cases->name, cases->timeout);
    return crmm_test_run(s);
}

int crmm_test_cuda_device(void)
{
    int dev = -1;
    ck_assert_cuda(cudaGetDevice(&dev));
    return dev;
}

/* ---- temporary directories ------------------------------------------------------------------ */

typedef struct tmpdir_entry {
    struct tmpdir_entry *next;
    pid_t owner;
    char path[];
} tmpdir_entry;

static tmpdir_entry *tmpdirs;

/* Give the owner every right on a directory, so that what it holds can be removed. */
static int open_up(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (type == FTW_D || type == FTW_DNR)
        chmod(path, 0700);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

static void remove_tmpdirs(void)
{
    pid_t self = getpid();
    for (tmpdir_entry *e = tmpdirs, *next; e; e = next) {
        next = e->next;
        if (e->owner == self) {
            nftw(e->path, open_up, 16, FTW_PHYS);
            nftw(e->path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
        free(e);
    }
    tmpdirs = NULL;
}

char *crmm_test_tmpdir(void)
{
    static int registered;
    const char *base = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/crmm-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    if (!d)
        return NULL;
    chmod(d, 0755);
    tmpdir_entry *e = malloc(sizeof *e + strlen(d) + 1);
    if (!e || (!registered && atexit(remove_tmpdirs) != 0)) {
        free(e);
        rmdir(d);
        return NULL;
    }
    registered = 1;
    e->owner = getpid();
    strcpy(e->path, d);
    e->next = tmpdirs;
    tmpdirs = e;
    return strdup(d);
}

const char *crmm_test_tmp_path(const char *name)
{
    static char paths[8][4096];
    static int next;
    char *dir = crmm_test_tmpdir();
    ck_assert_msg(dir != NULL, "cannot make a temporary directory");
    char *p = paths[next++ % 8];
    snprintf(p, 4096, "%s/%s", dir, name);
    free(dir);
    return p;
}

const char *crmm_test_path_in(const char *dir, const char *tag, const char *suffix)
{
    static char paths[8][4200];
    static int next;
    char *p = paths[next++ % 8];
    int n = snprintf(p, sizeof paths[0], "%s/%s.%ld%s", dir, tag, (long)getpid(), suffix);
    ck_assert_msg(n >= 0 && (size_t)n < sizeof paths[0], "the path of %s in %s is too long", tag, dir);
    return p;
}

const char *crmm_test_write_file(const char *name, const char *text)
{
    const char *p = crmm_test_tmp_path(name);
    FILE *f = fopen(p, "w");
    ck_assert_msg(f != NULL, "cannot write %s", p);
    fputs(text, f);
    ck_assert_msg(fclose(f) == 0, "cannot write %s", p);
    return p;
}

unsigned crmm_test_other_uid(void) { return geteuid() == 65534 ? 65533 : 65534; }

bool crmm_test_set_acl(const char *path, unsigned tag, unsigned id, unsigned perm)
{
    /* the xattr form: a version, then entries of tag, permission bits and id, little-endian, in
     * the order of their tags (the kernel refuses any other) */
    unsigned entries[5][3] = {{0x01, 7, ~0u}, {0x04, 5, ~0u}, {tag, perm, id}, {0x10, 7, ~0u}, {0x20, 5, ~0u}};
    if (tag == 0x02) {
        unsigned user[3] = {tag, perm, id};
        memcpy(entries[2], entries[1], sizeof user);
        memcpy(entries[1], user, sizeof user);
    }
    unsigned char acl[4 + 5 * 8] = {2, 0, 0, 0};
    for (int i = 0; i < 5; i++) {
        unsigned char *e = acl + 4 + 8 * i;
        e[0] = (unsigned char)entries[i][0], e[1] = 0, e[2] = (unsigned char)entries[i][1], e[3] = 0;
        for (int b = 0; b < 4; b++)
            e[4 + b] = (unsigned char)(entries[i][2] >> (8 * b));
    }
    if (setxattr(path, "system.posix_acl_access", acl, sizeof acl, 0) == 0)
        return true;
    ck_assert_msg(errno == ENOTSUP || errno == EOPNOTSUPP, "setxattr %s: %s", path, strerror(errno));
    return false;
}

/* ---- reading what was written --------------------------------------------------------------- */

/* All of f from where it stands, NUL-terminated; NULL on a read error or without memory. */
static char *read_rest(FILE *f)
{
    size_t cap = 4096, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                free(buf);
            buf = bigger;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

char *crmm_test_read_file(const char *path)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f)
        return NULL;
    char *text = read_rest(f);
    fclose(f);
    return text;
}

char *crmm_test_read_file_or_fail(const char *path)
{
    char *text = crmm_test_read_file(path);
    ck_assert_msg(text != NULL, "cannot read %s", path ? path : "(NULL)");
    return text;
}

char *crmm_test_read_stream(FILE *f)
{
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fflush(f), 0);
    rewind(f);
    char *text = read_rest(f);
    fclose(f);
    ck_assert_msg(text != NULL, "cannot read back a captured stream");
    return text;
}

int crmm_test_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

const char *crmm_test_file_text(const char *path)
{
    static char *text;
    free(text);
    text = crmm_test_read_file_or_fail(path);
    return text;
}

int crmm_test_count_lines(const char *path)
{
    char *text = crmm_test_read_file_or_fail(path);
    int n = crmm_test_count(text, "\n");
    free(text);
    return n;
}

crmm_test_output crmm_test_run_main(int (*main_fn)(int argc, char **argv, FILE *out, FILE *err), char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    FILE *out = tmpfile(), *err = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    crmm_test_output o;
    o.status = main_fn(argc, argv, out, err);
    o.out = crmm_test_read_stream(out);
    o.err = crmm_test_read_stream(err);
    return o;
}

void crmm_test_output_free(crmm_test_output *o)
{
    free(o->out);
    free(o->err);
    o->out = o->err = NULL;
}

static char log_capture_path[4200];

void crmm_test_log_capture_begin(void)
{
    char *dir = crmm_test_tmpdir();
    ck_assert_msg(dir != NULL, "cannot make a temporary directory");
    snprintf(log_capture_path, sizeof log_capture_path, "%s/crmm.log", dir);
    free(dir);
    ck_assert_crmm_ok(crmm_log_set_file(log_capture_path));
}

char *crmm_test_log_capture_end(void)
{
    ck_assert_msg(log_capture_path[0], "crmm_test_log_capture_end without a begin");
    ck_assert_crmm_ok(crmm_log_set_file(NULL)); /* flushes and closes the file */
    char *text = crmm_test_read_file_or_fail(log_capture_path);
    log_capture_path[0] = '\0';
    return text;
}

/* ---- resources ------------------------------------------------------------------------------ */

crmm_resource *crmm_test_create(const char *plugin, const char *params, crmm_resource *upstream)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create(plugin, params, upstream, &mr));
    return mr;
}

crmm_resource *crmm_test_create_over_host(const char *plugin, const char *params)
{
    crmm_resource *host = crmm_test_create("host", NULL, NULL);
    crmm_resource *mr = crmm_test_create(plugin, params, host);
    crmm_resource_release(host);
    return mr;
}

void *crmm_test_allocate(crmm_resource *mr, size_t bytes)
{
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, bytes, NULL, &p));
    ck_assert_ptr_nonnull(p);
    return p;
}

uint64_t crmm_test_query(crmm_resource *mr, crmm_query what)
{
    uint64_t v = 0;
    ck_assert_crmm_ok(crmm_resource_query(mr, what, &v));
    return v;
}

void crmm_test_release_n(crmm_resource *const *mrs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        crmm_resource_release(mrs[i]);
}

uint64_t crmm_test_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}
