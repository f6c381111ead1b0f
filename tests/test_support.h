/* test_support.h — what every Check suite of crmm shares: GPU gating, the runner, temporary
 * files, reading files and captured output, and the small asserting wrappers that test files
 * would otherwise each write again.
 *
 * GPU gating: no CUDA call may happen in the parent before Check forks (a CUDA context does not
 * survive fork), so the device count is probed in a throwaway child process.
 *
 * Functions marked "in a test" fail the running test (ck_assert) instead of returning an error:
 * call them only from a test function or a checked fixture. */
#ifndef CRMM_TESTS_TEST_SUPPORT_H
#define CRMM_TESTS_TEST_SUPPORT_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <crmm/crmm.h>
/* the adaptor APIs the suites inspect layers with (installed by their plugins, not in crmm.h) */
#include <crmm/logging.h>
#include <crmm/statistics.h>
#include <crmm/tracking.h>

/* Exit status automake's harness reads as "skipped". */
#define CRMM_TEST_SKIP 77

/* ---- GPUs and the runner -------------------------------------------------------------------- */

/* Number of CUDA devices, probed in a child process (0 when there is none or CUDA fails). */
int crmm_test_gpu_count(void);

/* Wait up to `seconds` (of the monotonic clock) for child `pid` to end; one still running then,
 * or one that cannot be waited for, is killed (and reaped). True when it ended by itself, with
 * *status its wait status. */
bool crmm_test_wait_child(pid_t pid, int seconds, int *status);

/* For a program whose tests need `needed` GPUs: returns 0 when they are there; otherwise prints
 * why and returns 77 (skip), or 1 (fail) when $CRMM_TEST_REQUIRE_GPU asks for at least `needed`. */
int crmm_test_gpu_gate(int needed);

/* fn() run in a child process, so that its CUDA calls leave the parent without a CUDA context
 * (e.g. a device attribute, to choose the test cases before Check forks): its result, which must
 * lie in 0..255, or -1 when the child did not exit normally. */
int crmm_test_probe(int (*fn)(void));

/* True when $CRMM_TEST_REQUIRE_GPU >= needed. */
int crmm_test_gpu_required(int needed);

/* In main: return crmm_test_gpu_gate(needed) from main unless it is 0. */
#define CRMM_TEST_GPU_GATE(needed) do { \
        int gate_ = crmm_test_gpu_gate(needed); \
        if (gate_) \
            return gate_; \
    } while (0)

/* False when the suite runs under a tool that serializes CUDA work (make check-compute-sanitizer
 * sets CRMM_TEST_UNDER_SANITIZER=1): then "still queued at return" cannot be observed, and tests
 * check only what must hold in any schedule (the data after a synchronize). */
int crmm_test_async_observable(void);

/* ---- declaring tests ------------------------------------------------------------------------
 * A test is declared once, where it is written: CRMM_TEST(name) { ... } in place of Check's
 * START_TEST (its END_TEST has been empty since Check 0.13 and is not written) puts it in the
 * program's table of tests (a linker section), and the case that runs it takes it from there,
 * so no test can be written and left unregistered.
 * CRMM_TEST belongs to the program's main case (crmm_test_main); CRMM_TEST_IN(case, name) to the
 * case of that name (crmm_test_tcase). CRMM_LOOP_TEST[_IN](..., name, n) runs the body for
 * _i = 0 .. n - 1 (n: a constant expression, e.g. a table's row count). Tests in a case run in
 * the order they are written. */
typedef struct crmm_test_entry {
    const TTest **test;
    const char *tcase; /* NULL: the main case */
    int loops;
    int line;
} crmm_test_entry;

#define CRMM_LOOP_TEST_IN(tcase_name, name, n) \
    static const TTest *name; \
    static const crmm_test_entry name##_entry \
        __attribute__((used, section("crmm_tests"), aligned(sizeof(void *)))) = {&name, tcase_name, n, __LINE__}; \
    START_TEST(name)
#define CRMM_TEST_IN(tcase_name, name) CRMM_LOOP_TEST_IN(tcase_name, name, 1)
#define CRMM_LOOP_TEST(name, n) CRMM_LOOP_TEST_IN(NULL, name, n)
#define CRMM_TEST(name) CRMM_LOOP_TEST_IN(NULL, name, 1)

/* Run `s` in fork mode and return the exit status for main (0 when all passed). Fails, naming
 * it, when a declared test belongs to no case the program made. */
int crmm_test_run(Suite *s);

/* A new test case `name` of `s`, with a timeout in seconds (0: Check's default), holding the
 * tests declared CRMM_TEST_IN(name, ...). */
TCase *crmm_test_tcase(Suite *s, const char *name, int timeout);

/* main of a program of one case: the suite and case `name` (timeout as crmm_test_tcase) with
 * the tests declared CRMM_TEST, run; returns main's exit status. */
int crmm_test_main(const char *name, int timeout);

/* A case for crmm_test_main_cases: its name and timeout (as crmm_test_tcase). */
typedef struct crmm_test_case {
    const char *name;
    int timeout;
} crmm_test_case;

/* main of a program whose cases need only a timeout: the suite `name` with each case of `cases`
 * (ended by one whose name is NULL), run; returns main's exit status. */
int crmm_test_main_cases(const char *name, const crmm_test_case *cases);
/* return CRMM_TEST_MAIN_CASES("suite", {"case", timeout}, ...); */
#define CRMM_TEST_MAIN_CASES(name, ...) crmm_test_main_cases(name, (const crmm_test_case[]){__VA_ARGS__, {NULL, 0}})

/* Timeout for test cases that create a CUDA context (Check's default of 4 s is too short). */
#define CRMM_TEST_GPU_TIMEOUT 120

/* Assert that a CUDA runtime call succeeds, naming the call and CUDA's error. */
#define ck_assert_cuda(call) do { \
        cudaError_t e_ = (call); \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

/* In a test: the current CUDA device. */
int crmm_test_cuda_device(void);

/* ---- temporary files ------------------------------------------------------------------------ */

/* A fresh mode-0755 temporary directory under $TMPDIR (else /tmp); returns its path (malloc'd),
 * or NULL. It is removed with all it holds when the process that made it exits normally (the
 * Check child for a directory made in a test, the program for one made in main before the
 * runner forks); a child forked from that process never removes it. */
char *crmm_test_tmpdir(void);

/* "DIR/TAG.PID" followed by `suffix`: a path in `dir` that no other process of the test uses (a
 * static buffer per call, 8 in turn); asserts that it fits. */
const char *crmm_test_path_in(const char *dir, const char *tag, const char *suffix);

/* In a test: the path of `name` in a fresh temporary directory (a static buffer per call, 8 in
 * turn, shared with crmm_test_write_file). */
const char *crmm_test_tmp_path(const char *name);

/* In a test: write `text` to a new file `name` in a fresh temporary directory; returns the path
 * (as crmm_test_tmp_path). */
const char *crmm_test_write_file(const char *name, const char *text);

/* Give `path` a POSIX access ACL (the xattr system.posix_acl_access) of five entries: owner
 * rwx, one named user (tag 0x02) or group (tag 0x08) with `id` and `perm` (rwx bits), the owning
 * group r-x, the mask rwx, others r-x. False where the file system takes no ACL. */
bool crmm_test_set_acl(const char *path, unsigned tag, unsigned id, unsigned perm);
/* A user id that is not the test's own (effective) one: for ACL entries of "another user". */
unsigned crmm_test_other_uid(void);

/* ---- reading what was written --------------------------------------------------------------- */

/* The whole file as a malloc'd, NUL-terminated string; NULL when it cannot be read. */
char *crmm_test_read_file(const char *path);

/* In a test: crmm_test_read_file, failing the test (naming the file) when it cannot be read. */
char *crmm_test_read_file_or_fail(const char *path);

/* In a test: the whole file, which must be readable, in a buffer kept until the next call. */
const char *crmm_test_file_text(const char *path);

/* In a test: all of `f` from its start (malloc'd, NUL-terminated), then fclose(f). Fails the test
 * when f is NULL or cannot be read. */
char *crmm_test_read_stream(FILE *f);

/* How many times `needle` (not empty) occurs in `text`, e.g. lines: crmm_test_count(text, "\n"). */
int crmm_test_count(const char *text, const char *needle);

/* In a test: how many lines the file `path` holds (it must be readable). */
int crmm_test_count_lines(const char *path);

/* What a command's main wrote: its exit status and its two streams (malloc'd). */
typedef struct crmm_test_output {
    int status;
    char *out, *err;
} crmm_test_output;

/* In a test: run an in-process command main (crmm_replay_main, bench_cli_main, ...) with the
 * NULL-terminated argv, its out and err captured. Free with crmm_test_output_free. */
crmm_test_output crmm_test_run_main(int (*main_fn)(int argc, char **argv, FILE *out, FILE *err), char **argv);
void crmm_test_output_free(crmm_test_output *o);

/* In a test: send crmm's log (crmm_log_set_file) to a fresh file until crmm_test_log_capture_end,
 * which puts it back on stderr and returns what was logged meanwhile (malloc'd). */
void crmm_test_log_capture_begin(void);
char *crmm_test_log_capture_end(void);

/* ---- resources ------------------------------------------------------------------------------ */

/* In a test: crmm_resource_create, which must succeed; the new resource. */
crmm_resource *crmm_test_create(const char *plugin, const char *params, crmm_resource *upstream);

/* Release the resources in the order given (the top of a stack first). */
#define crmm_test_release(...) \
    crmm_test_release_n((crmm_resource *[]){__VA_ARGS__}, sizeof((crmm_resource *[]){__VA_ARGS__}) / sizeof(crmm_resource *))
void crmm_test_release_n(crmm_resource *const *mrs, size_t n);

/* In a test: `plugin` (with `params`) over a fresh host resource, which goes with it. */
crmm_resource *crmm_test_create_over_host(const char *plugin, const char *params);

/* In a test: allocate `bytes` (> 0) on the default stream, which must succeed with a pointer. */
void *crmm_test_allocate(crmm_resource *mr, size_t bytes);

/* In a test: crmm_resource_query, which must succeed; the value. */
uint64_t crmm_test_query(crmm_resource *mr, crmm_query what);

/* The next number of a xorshift64 sequence (state not 0): reproducible pseudo-random sizes. */
uint64_t crmm_test_rand(uint64_t *state);

/* Assert a crmm call's status, printing crmm_last_error() on mismatch. */
#define ck_assert_crmm(expr, expected) do { \
        crmm_status st_ = (expr); \
        ck_assert_msg(st_ == (expected), "%s returned %s (expected %s): %s", #expr, \
                      crmm_status_name(st_), crmm_status_name(expected), crmm_last_error()); \
    } while (0)
#define ck_assert_crmm_ok(expr) ck_assert_crmm(expr, CRMM_OK)

/* Assert that crmm's last error message contains `sub`. */
#define ck_assert_error_contains(sub) \
    ck_assert_msg(strstr(crmm_last_error(), (sub)) != NULL, "error '%s' lacks '%s'", crmm_last_error(), (sub))

#endif
