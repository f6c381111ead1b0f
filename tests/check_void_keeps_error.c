/* check_void_keeps_error.c — the public calls that return void leave the thread's last error
 * (crmm_last_status, crmm_last_error, crmm_last_error_detail) as it was, even when a step inside
 * them fails and records an error of its own: a caller that got an error from one call, cleaned
 * up, then read crmm_last_error() must see that call's message, not the cleanup's.
 *
 * Each test provokes a failure inside one void call on the CPU and checks, for two starting
 * states (a known error, and no error), that the state is the same afterwards, and that the
 * failure did happen (the failing free was called, or its log line written), so that no test
 * passes for want of a failure:
 *  - crmm_resource_release, crmm_config_free, crmm_finalize: a pool's destroy gives its chunk back
 *    to an upstream whose free fails (a probe, directly or behind a callback resource);
 *  - crmm_device_buffer_destroy, crmm_torch_deallocate: the resource's free fails;
 *    crmm_torch_deallocate also with a device that does not exist;
 *  - crmm_stream_destroy, crmm_stream_pool_destroy: cudaStreamDestroy fails (scripted below).
 * The other void calls have no failure to provoke here: crmm_resource_init,
 * crmm_ipc_handle_free, crmm_fork_guard_add/remove, crmm_graph_capture_enable,
 * crmm_note_cuda_initialized and crmm_cuda_device_restore reach no call that records an error;
 * crmm_log, crmm_log_flush and crmm_resource_report_leaks reach one only in the logger's first
 * use (opening $CRMM_DEBUG_LOG_FILE), which keeps the error itself.
 *
 * The program runs over the scripted CUDA of fakes/fake_stream_cuda.c (two devices) and scripts
 * stream creation and destruction itself, so it is linked with -export-dynamic. */
#include "build_config.h"
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/crmm.h>
#include <crmm/device_buffer.h>
#include <crmm/stream_pool.h>
#include <crmm/torch.h>
#include "callback_config.h"
#include "fakes/fake_stream_cuda.h"
#include "fakes/fake_streams.h"
#include "probe_resource.h"
#include "test_support.h"

/* ---- scripted streams: made as fake streams, destroyed or refused on demand ---------------- */

static int destroy_fails;   /* cudaStreamDestroy answers cudaErrorLaunchFailure */
static int destroys_failed; /* cudaStreamDestroy calls that did */
static cudaStream_t slots[FAKE_STREAMS];

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    for (int i = 0; i < FAKE_STREAMS; i++)
        if (!slots[i]) {
            *s = slots[i] = fake_stream_new(i);
            return cudaSuccess;
        }
    ck_abort_msg("out of fake streams");
    return cudaErrorMemoryAllocation;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    fake_stream_use(s, "cudaStreamDestroy");
    if (destroy_fails) {
        destroys_failed++;
        return fake_cuda.last_error = cudaErrorLaunchFailure;
    }
    ck_assert_msg(fake_stream_is_live(s), "cudaStreamDestroy of a stream not made here: %p", (void *)s);
    fake_stream_destroy(s);
    for (int i = 0; i < FAKE_STREAMS; i++)
        if (slots[i] == s)
            slots[i] = NULL;
    return cudaSuccess;
}

/* ---- the thread's error before and after ---------------------------------------------------- */

typedef struct error_state {
    crmm_status status;
    char message[1024];
    char detail[1024];
} error_state;

static void read_error(error_state *e)
{
    e->status = crmm_last_status();
    snprintf(e->message, sizeof e->message, "%s", crmm_last_error());
    snprintf(e->detail, sizeof e->detail, "%s", crmm_last_error_detail());
}

/* In a test: the thread's error as the void call finds it, read into *e. Start 0: a known error
 * from a failing call (a config whose [crmm] log_level is no level: CRMM_ERROR_CONFIG, a status
 * none of the provoked failures has); start 1: no error. */
static void start_with(int start, error_state *e)
{
    if (start == 0) {
        crmm_config *cfg = NULL;
        ck_assert_crmm(crmm_config_load_string("[crmm]\nlog_level = loud\n", "known.ini", &cfg), CRMM_ERROR_CONFIG);
        ck_assert_ptr_null(cfg);
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "known.ini:2"));
    } else {
        crmm_clear_error();
    }
    read_error(e);
}

/* In a test: the thread's error is still *before. */
static void assert_error_kept(const error_state *before, const char *call)
{
    error_state now;
    read_error(&now);
    ck_assert_msg(now.status == before->status, "%s changed the status from %s to %s (\"%s\")", call,
                  crmm_status_name(before->status), crmm_status_name(now.status), now.message);
    ck_assert_msg(strcmp(now.message, before->message) == 0, "%s changed the message from \"%s\" to \"%s\"", call,
                  before->message, now.message);
    ck_assert_msg(strcmp(now.detail, before->detail) == 0, "%s changed the detail from \"%s\" to \"%s\"", call,
                  before->detail, now.detail);
}

/* ---- memory whose frees fail on demand ------------------------------------------------------- */

static int frees_fail;  /* every free reports a failure (the block is freed all the same: no leak) */
static int failed_frees; /* frees that did */

static crmm_status get_host(void **ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    (void)stream;
    *ptr = aligned_alloc(CRMM_ALLOCATION_ALIGNMENT, (bytes + CRMM_ALLOCATION_ALIGNMENT - 1) &
                                                        ~(size_t)(CRMM_ALLOCATION_ALIGNMENT - 1));
    return *ptr ? CRMM_OK : crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "test: no host memory");
}

static crmm_status put_host(void *ptr, crmm_cuda_stream_t stream)
{
    (void)stream;
    free(ptr);
    if (!frees_fail)
        return CRMM_OK;
    failed_frees++;
    return crmm_set_error(CRMM_ERROR_CUDA, "test: this free reports a failure");
}

static const probe_memory failing_memory = {get_host, put_host, fake_current_device};

/* A probe of host memory (device -1) or of device `device`'s memory, over failing_memory. */
static probe_resource *host_probe(void) { return probe_resource_new(&failing_memory, CRMM_RESOURCE_HOST_ACCESSIBLE, -1); }
static probe_resource *device_probe(int device)
{
    return probe_resource_new(&failing_memory, CRMM_RESOURCE_DEVICE_ACCESSIBLE, device);
}

/* In a test: a pool holding one 1 MiB chunk of `upstream` (a reference taken). */
static crmm_resource *pool_over(crmm_resource *upstream)
{
    crmm_resource *pool = crmm_test_create("pool", "initial_size=1MiB maximum_size=8MiB", upstream);
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(pool, 256, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(pool, p, 256, NULL));
    return pool;
}

/* ---- crmm_resource_release ----------------------------------------------------------------- */

CRMM_LOOP_TEST(release_keeps_the_error_when_a_destroy_fails_to_free, 2)
{
    probe_resource *probe = host_probe();
    crmm_resource *pool = pool_over(&probe->base);
    crmm_resource_release(&probe->base); /* the pool holds the last reference */
    frees_fail = 1;
    crmm_test_log_capture_begin();
    error_state before;
    start_with(_i, &before);
    crmm_resource_release(pool); /* destroys the pool, which frees its chunk, then the probe */
    assert_error_kept(&before, "crmm_resource_release");
    char *log = crmm_test_log_capture_end();
    ck_assert_int_eq(failed_frees, 1);
    /* the failure is not lost: the pool says which chunk it could not give back, and why */
    ck_assert_msg(strstr(log, "returning its chunk") && strstr(log, "this free reports a failure"), "log: %s", log);
    free(log);
}

/* ---- crmm_config_free and crmm_finalize ---------------------------------------------------- */

/* The callbacks of a callback resource that passes every call on to the probe its argument names
 * (a free that fails there is the callback's to swallow: it has no way to say so). */
static void *forward_allocate(size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    void *p = NULL;
    return crmm_resource_allocate(arg, bytes, stream, &p) == CRMM_OK ? p : NULL;
}

static void forward_deallocate(void *ptr, size_t bytes, crmm_cuda_stream_t stream, void *arg)
{
    (void)crmm_resource_deallocate(arg, ptr, bytes, stream);
}

CRMM_LOOP_TEST(config_free_keeps_the_error_when_a_resource_it_built_fails_to_free, 2)
{
    probe_resource *probe = host_probe();
    char more[256], text[1024];
    snprintf(more, sizeof more,
             "allocate_arg = %#" PRIxPTR "\ndeallocate_arg = %#" PRIxPTR "\n"
             "device_accessible = false\nhost_accessible = true\n"
             "[resource.p]\nplugin = pool\nupstream = c\ninitial_size = 1MiB\nmaximum_size = 8MiB\n",
             (uintptr_t)probe, (uintptr_t)probe);
    crmm_config *cfg = NULL;
    ck_assert_crmm_ok(crmm_config_load_string(callback_config(text, sizeof text, forward_allocate, forward_deallocate, more),
                                              "forward.ini", &cfg));
    crmm_resource *pool = NULL;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "p", -1, &pool));
    crmm_resource_release(pool); /* the config's instance is the last reference */
    ck_assert_int_eq(probe->live, 1); /* the pool's chunk */
    frees_fail = 1;
    error_state before;
    start_with(_i, &before);
    crmm_config_free(cfg);
    assert_error_kept(&before, "crmm_config_free");
    ck_assert_int_eq(failed_frees, 1);
    crmm_resource_release(&probe->base);
}

CRMM_LOOP_TEST(finalize_keeps_the_error_when_a_devices_resource_fails_to_free, 2)
{
    probe_resource *probe = host_probe();
    crmm_resource *pool = pool_over(&probe->base);
    crmm_resource_release(&probe->base);
    crmm_resource_release(crmm_set_per_device_resource(0, pool)); /* no resource was there: NULL */
    crmm_resource_release(pool); /* the registry holds the last reference */
    frees_fail = 1;
    error_state before;
    start_with(_i, &before);
    crmm_finalize();
    assert_error_kept(&before, "crmm_finalize");
    ck_assert_int_eq(failed_frees, 1);
}

/* ---- crmm_device_buffer_destroy -------------------------------------------------------------- */

CRMM_LOOP_TEST(device_buffer_destroy_keeps_the_error_when_the_free_fails, 2)
{
    probe_resource *probe = device_probe(0);
    crmm_device_buffer *b = NULL;
    ck_assert_crmm_ok(crmm_device_buffer_create(64, NULL, &probe->base, &b));
    frees_fail = 1;
    crmm_test_log_capture_begin();
    error_state before;
    start_with(_i, &before);
    crmm_device_buffer_destroy(b);
    assert_error_kept(&before, "crmm_device_buffer_destroy");
    char *log = crmm_test_log_capture_end();
    ck_assert_int_eq(failed_frees, 1);
    ck_assert_msg(strstr(log, "device_buffer_destroy") && strstr(log, "this free reports a failure"), "log: %s", log);
    free(log);
    crmm_resource_release(&probe->base);
}

/* ---- crmm_torch_deallocate ------------------------------------------------------------------- */

CRMM_LOOP_TEST(torch_deallocate_keeps_the_error_when_the_free_fails, 2)
{
    probe_resource *probe = device_probe(0);
    crmm_resource_release(crmm_set_per_device_resource(0, &probe->base));
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(&probe->base, 512, NULL, &p));
    frees_fail = 1;
    crmm_test_log_capture_begin();
    error_state before;
    start_with(_i, &before);
    crmm_torch_deallocate(p, 512, 0, NULL);
    assert_error_kept(&before, "crmm_torch_deallocate");
    char *log = crmm_test_log_capture_end();
    ck_assert_int_eq(failed_frees, 1);
    ck_assert_msg(strstr(log, "crmm_torch_deallocate") && strstr(log, "this free reports a failure"), "log: %s", log);
    free(log);
    crmm_resource_release(&probe->base);
}

CRMM_LOOP_TEST(torch_deallocate_keeps_the_error_for_a_device_that_does_not_exist, 2)
{
    char block[64];
    crmm_test_log_capture_begin();
    error_state before;
    start_with(_i, &before);
    crmm_torch_deallocate(block, sizeof block, -1, NULL); /* the look-up fails: nothing is freed */
    assert_error_kept(&before, "crmm_torch_deallocate");
    char *log = crmm_test_log_capture_end();
    ck_assert_msg(strstr(log, "crmm_torch_deallocate") && strstr(log, "device -1"), "log: %s", log);
    free(log);
}

/* ---- crmm_stream_destroy and crmm_stream_pool_destroy ---------------------------------------- */

CRMM_LOOP_TEST(stream_destroy_keeps_the_error_when_cudaStreamDestroy_fails, 2)
{
    crmm_stream *s = NULL;
    ck_assert_crmm_ok(crmm_stream_create(CRMM_STREAM_NON_BLOCKING, &s));
    destroy_fails = 1;
    crmm_test_log_capture_begin();
    error_state before;
    start_with(_i, &before);
    crmm_stream_destroy(s);
    assert_error_kept(&before, "crmm_stream_destroy");
    char *log = crmm_test_log_capture_end();
    ck_assert_int_eq(destroys_failed, 1);
    ck_assert_msg(strstr(log, "cudaStreamDestroy"), "log: %s", log);
    free(log);
}

CRMM_LOOP_TEST(stream_pool_destroy_keeps_the_error_when_cudaStreamDestroy_fails, 2)
{
    crmm_stream_pool *pool = NULL;
    ck_assert_crmm_ok(crmm_stream_pool_create(3, CRMM_STREAM_SYNC_DEFAULT, &pool));
    destroy_fails = 1;
    crmm_test_log_capture_begin();
    error_state before;
    start_with(_i, &before);
    crmm_stream_pool_destroy(pool);
    assert_error_kept(&before, "crmm_stream_pool_destroy");
    char *log = crmm_test_log_capture_end();
    ck_assert_int_eq(destroys_failed, 3);
    ck_assert_msg(strstr(log, "cudaStreamDestroy"), "log: %s", log);
    free(log);
}

int main(void)
{
    unsetenv("CRMM_CONFIG");
    return crmm_test_main("void_keeps_error", 0);
}
