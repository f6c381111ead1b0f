/* test_support.h — what every Check suite of crmm shares.
 *
 * GPU gating: no CUDA call may happen in the parent before Check forks (a CUDA context does not
 * survive fork), so the device count is probed in a throwaway child process. */
#ifndef CRMM_TESTS_TEST_SUPPORT_H
#define CRMM_TESTS_TEST_SUPPORT_H

#include <check.h>
#include <stddef.h>
#include <crmm/crmm.h>

/* Exit status automake's harness reads as "skipped". */
#define CRMM_TEST_SKIP 77

/* Number of CUDA devices, probed in a child process (0 when there is none or CUDA fails). */
int crmm_test_gpu_count(void);

/* For a program whose tests need `needed` GPUs: returns 0 when they are there; otherwise prints
 * why and returns 77 (skip), or 1 (fail) when $CRMM_TEST_REQUIRE_GPU asks for at least `needed`. */
int crmm_test_gpu_gate(int needed);

/* True when $CRMM_TEST_REQUIRE_GPU >= needed. */
int crmm_test_gpu_required(int needed);

/* False when the suite runs under a tool that serializes CUDA work (make check-compute-sanitizer
 * sets CRMM_TEST_UNDER_SANITIZER=1): then "still queued at return" cannot be observed, and tests
 * check only what must hold in any schedule (the data after a synchronize). */
int crmm_test_async_observable(void);

/* Run `s` in fork mode and return the exit status for main (0 when all passed). */
int crmm_test_run(Suite *s);

/* Timeout for test cases that create a CUDA context (Check's default of 4 s is too short). */
#define CRMM_TEST_GPU_TIMEOUT 120

/* Write `text` to a new file in a fresh temporary directory; returns the path (static buffer per
 * call index 0..7). */
const char *crmm_test_write_file(const char *name, const char *text);

/* A fresh mode-0755 temporary directory; returns its path (malloc'd). */
char *crmm_test_tmpdir(void);

/* Assert a crmm call's status, printing crmm_last_error() on mismatch. */
#define ck_assert_crmm(expr, expected) do { \
        crmm_status st_ = (expr); \
        ck_assert_msg(st_ == (expected), "%s returned %s (expected %s): %s", #expr, \
                      crmm_status_name(st_), crmm_status_name(expected), crmm_last_error()); \
    } while (0)
#define ck_assert_crmm_ok(expr) ck_assert_crmm(expr, CRMM_OK)

#endif
