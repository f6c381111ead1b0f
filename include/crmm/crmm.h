/* crmm/crmm.h — the umbrella header: everything a program that links -lcrmm uses.
 *
 *   #include <crmm/crmm.h>
 *   crmm_init(NULL);                                      // config from $CRMM_CONFIG or defaults
 *   crmm_resource *mr = crmm_get_current_device_resource();
 *   void *p;
 *   crmm_resource_allocate(mr, 1 << 20, NULL, &p);
 *   crmm_resource_deallocate(mr, p, 1 << 20, NULL);
 *   crmm_finalize();
 */
#ifndef CRMM_CRMM_H
#define CRMM_CRMM_H

#include <crmm/export.h>
#include <crmm/error.h>
#include <crmm/log.h>
#include <crmm/resource.h>
#include <crmm/plugin.h>
#include <crmm/config.h>
#include <crmm/cuda_support.h>
#include <crmm/alloc_counters.h>
#include <crmm/stream.h>
#include <crmm/stream_pool.h>
#include <crmm/device_buffer.h>
#include <crmm/logging_switch.h>
#include <crmm/fork_guard.h>
#include <crmm/graph_owner.h>

/* The version of libcrmm ("0.1.0"). */
#ifdef __cplusplus
extern "C" {
#endif
CRMM_API const char *crmm_version(void);
#ifdef __cplusplus
}
#endif

#endif
