/* torch_allocator.c — the functions PyTorch's CUDAPluggableAllocator loads (crmm/torch.h): every
 * tensor allocation goes to the current resource of its device.
 *
 * PyTorch calls these with no way to receive an error, so failures are reported here and NULL is
 * returned. crmm is initialised on the first allocation unless the program (or the Python
 * package) did it already: a config it loaded must not be replaced by $CRMM_CONFIG behind its
 * back. */
#include "build_config.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <crmm/config.h>
#include <crmm/cuda_support.h>
#include <crmm/error.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include <crmm/resource.h>
#include <crmm/torch.h>
#include "internal.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static crmm_status init_status;
/* The devices crmm_torch_allocate has served: set once each, read by crmm_torch_empty_cache and
 * crmm_torch_device_served (relaxed: a flag, not a handover of memory). */
static bool served[CRMM_MAX_DEVICES];

static void report_init_failure(void)
{
    char buf[4096];
    const char *file = crmm_config_default_file(buf, sizeof buf);
    const char *env = crmm_getenv("CRMM_CONFIG"); /* empty: unset, as crmm_config_default_file reads it */
    const char *from = env && *env ? "$CRMM_CONFIG" : file ? "the installed config" : "no config file";
    fprintf(stderr,
            "crmm: the PyTorch allocator cannot start: %s\n"
            "crmm: the config is %s (%s); fix it (`crmm check-config FILE` shows what is wrong) or set "
            "CRMM_CONFIG to a valid config file. Every allocation through crmm fails (returns NULL) "
            "until the process is restarted.\n",
            crmm_last_error(), file ? file : "the built-in default", from);
    fflush(stderr);
}

static void init_library(void)
{
    /* PyTorch captures streams (torch.cuda.graph, torch.compile): the pool must ask whether they are */
    crmm_graph_capture_enable(true);
    if (crmm_current_config()) {
        init_status = CRMM_OK;
        return;
    }
    init_status = crmm_init(NULL);
    if (init_status != CRMM_OK)
        report_init_failure();
}

void *crmm_torch_allocate(ssize_t size, int device, crmm_cuda_stream_t stream)
{
    if (size == 0)
        return NULL;
    if (size < 0) {
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_allocate: negative size %zd", size);
        return NULL;
    }
    if (crmm_process_exiting()) { /* before a first use would load the config and its plugins */
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_allocate: %zd bytes asked for while the process is exiting", size);
        return NULL;
    }
    pthread_once(&init_once, init_library);
    if (init_status != CRMM_OK)
        return NULL;
    crmm_resource *mr = crmm_get_per_device_resource_ref(device);
    if (!mr) {
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_allocate: device %d: %s", device, crmm_last_error());
        return NULL;
    }
    void *ptr = NULL;
    crmm_device_guard guard;
    crmm_status st = crmm_cuda_device_enter(device, &guard);
    if (st == CRMM_OK) {
        st = crmm_resource_allocate(mr, (size_t)size, stream, &ptr);
        crmm_cuda_device_restore(&guard);
    }
    if (st != CRMM_OK)
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_allocate: %zd bytes on device %d: %s", size, device, crmm_last_error());
    else if (!__atomic_load_n(&served[device], __ATOMIC_RELAXED)) /* a device with a resource is < CRMM_MAX_DEVICES */
        __atomic_store_n(&served[device], true, __ATOMIC_RELAXED);
    crmm_resource_release(mr);
    return ptr;
}

/* The work of crmm_torch_deallocate for a pointer, logging what fails. */
static void torch_free(void *ptr, ssize_t size, int device, crmm_cuda_stream_t stream)
{
    if (size < 0) {
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_deallocate: %p: negative size %zd", ptr, size);
        return;
    }
    crmm_resource *mr = crmm_get_per_device_resource_ref(device);
    if (!mr) {
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_deallocate: %p on device %d: %s", ptr, device, crmm_last_error());
        return;
    }
    crmm_device_guard guard;
    crmm_status st = crmm_cuda_device_enter(device, &guard);
    if (st == CRMM_OK) {
        crmm_torch_wait_recorded(ptr, stream); /* tensor.record_stream's streams first */
        st = crmm_resource_deallocate(mr, ptr, (size_t)size, stream);
        crmm_cuda_device_restore(&guard);
    }
    if (st != CRMM_OK)
        crmm_log(CRMM_LOG_ERROR, "crmm_torch_deallocate: %p (%zd bytes) on device %d: %s", ptr, size, device,
                 crmm_last_error());
    crmm_resource_release(mr);
}

void crmm_torch_deallocate(void *ptr, ssize_t size, int device, crmm_cuda_stream_t stream)
{
    if (!ptr || crmm_process_exiting())
        return;
    /* failures are logged; the thread's error stays as it was */
    crmm_error_hold_begin();
    torch_free(ptr, size, device, stream);
    crmm_error_hold_end();
}

bool crmm_torch_device_served(int device)
{
    return device >= 0 && device < CRMM_MAX_DEVICES && __atomic_load_n(&served[device], __ATOMIC_RELAXED);
}

crmm_status crmm_torch_empty_cache(void)
{
    crmm_status first = CRMM_OK;
    char message[1024] = ""; /* the size of crmm's error messages */
    for (int device = 0; device < CRMM_MAX_DEVICES; device++) {
        if (!crmm_torch_device_served(device))
            continue;
        crmm_status st;
        crmm_resource *mr = crmm_get_per_device_resource_ref(device);
        if (!mr) {
            st = crmm_error_add_context("crmm_torch_empty_cache: device %d", device);
        } else {
            crmm_device_guard guard;
            if ((st = crmm_cuda_device_enter(device, &guard)) == CRMM_OK) {
                st = crmm_resource_trim(mr);
                crmm_cuda_device_restore(&guard);
            }
            if (st != CRMM_OK)
                st = crmm_error_add_context("crmm_torch_empty_cache: device %d", device);
            crmm_resource_release(mr);
        }
        if (st != CRMM_OK && first == CRMM_OK) { /* the first error is reported; every device is trimmed */
            first = st;
            snprintf(message, sizeof message, "%s", crmm_last_error());
        }
    }
    return first == CRMM_OK ? CRMM_OK : crmm_set_error(first, "%s", message);
}
