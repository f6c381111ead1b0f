/* crmm/logging_switch.h — the library-wide logging switch (RMM's rmm.enable_logging): wrap the
 * current resource of every device in a `logging` adaptor and take it off again. The adaptor's
 * log format and its control ops are in crmm/logging.h, which the logging plugin installs. */
#ifndef CRMM_LOGGING_SWITCH_H
#define CRMM_LOGGING_SWITCH_H

#include <crmm/export.h>
#include <crmm/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Wrap the current resource of every device in a logging adaptor writing to
 * "<stem>.dev<N><ext>" (RMM's rule: "log.csv" gives "log.dev0.csv", "log" gives "log.dev0";
 * the name is taken literally, '%' is not expanded). NULL `file` uses $CRMM_LOG_FILE.
 * All devices or none: on failure every device keeps its resource. Errors:
 * CRMM_ERROR_STATE (already enabled, or another thread replaced a device's resource while the
 * adaptors were being built: no device logs, try again), CRMM_ERROR_CUDA (no device; the
 * message says why), CRMM_ERROR_INVALID_ARGUMENT (no file and no $CRMM_LOG_FILE), CRMM_ERROR_OUT_OF_MEMORY,
 * CRMM_ERROR_IO (a file cannot be created, or is refused as crmm_output_file_open and a logging
 * resource refuse one), CRMM_ERROR_PLUGIN (the logging plugin cannot be loaded), and the errors
 * of creating a device's default resource. */
CRMM_API crmm_status crmm_enable_logging(const char *file);

/* Undo crmm_enable_logging: each device whose current resource is still the adaptor it
 * installed gets the wrapped resource back (a device whose resource was replaced meanwhile
 * keeps the replacement); the adaptors flush and close their files when the last reference
 * goes. CRMM_OK and nothing done when logging is not enabled. */
CRMM_API crmm_status crmm_disable_logging(void);

/* The log file of each device while the switch is on: names[d] for d < capacity (NULL for a
 * device it did not wrap); *count receives the number of devices it wrapped (0 when off).
 * The names stay valid until crmm_disable_logging. CRMM_ERROR_INVALID_ARGUMENT when count is
 * NULL, or names is NULL with capacity > 0. */
CRMM_API crmm_status crmm_get_log_filenames(const char **names, int capacity, int *count);

#ifdef __cplusplus
}
#endif
#endif
