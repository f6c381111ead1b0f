/* crmm/error.h — status codes and the thread-local error message.
 *
 * Every fallible crmm call returns a crmm_status. On failure it also leaves a message for the
 * calling thread that a person can act on, e.g.
 *   "out of memory: pool 'main': failed to allocate 1.0 PiB (maximum pool size 8.0 GiB)".
 * The message stays until the thread's next failing call (or crmm_clear_error()), except that a
 * few calls clear it when they succeed: those that make a resource (crmm_resource_create,
 * crmm_config_create_resource, the crmm_get_*_device_resource call that makes a device's first),
 * those that set a device's resource (crmm_set_*_device_resource, crmm_disable_logging), and the
 * config loads (crmm_config_load_file, _string, _skipping and crmm_init), which check each
 * resource's parameters; read it right after the call that failed. Every call that
 * returns void, and the crmm_*_try_* calls, leave it as it was, whatever fails inside them: the
 * cleanup after a failure (a destroy, release or free) does not replace the failure's message. */
#ifndef CRMM_ERROR_H
#define CRMM_ERROR_H

#include <crmm/export.h>
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum crmm_status {
    CRMM_OK = 0,                  /* success */
    CRMM_ERROR_OUT_OF_MEMORY = 1, /* the resource (or its upstream) has no memory for the request */
    CRMM_ERROR_BAD_ALLOC = 2,     /* an allocation failed for a reason other than lack of memory */
    CRMM_ERROR_INVALID_ARGUMENT = 3, /* NULL handle, size out of range, bad flag, ... */
    CRMM_ERROR_CUDA = 4,          /* a CUDA runtime call failed; the message names it */
    CRMM_ERROR_CONFIG = 5,        /* a config file or parameter string is wrong: "FILE:LINE: ..." */
    CRMM_ERROR_PLUGIN = 6,        /* a plugin could not be found, loaded or validated */
    CRMM_ERROR_NOT_FOUND = 7,     /* a named thing (resource, parameter, file) does not exist */
    CRMM_ERROR_UNSUPPORTED = 8,   /* the resource or device does not support the operation */
    CRMM_ERROR_IO = 9,            /* reading or writing a file failed */
    CRMM_ERROR_STATE = 10         /* the call is not valid now (e.g. during process shutdown) */
} crmm_status;

/* Name of a status, e.g. "CRMM_ERROR_OUT_OF_MEMORY"; "CRMM_ERROR_UNKNOWN" for other values. */
CRMM_API const char *crmm_status_name(crmm_status status);

/* The calling thread's last error message ("" when there is none). Valid until the thread's
 * next crmm call that fails. */
CRMM_API const char *crmm_last_error(void);

/* The same message without its category prefix ("config error: ", ...): for a caller that
 * puts its own context in front (a config file's "FILE:LINE: "). Valid as crmm_last_error(). */
CRMM_API const char *crmm_last_error_detail(void);

/* The status that went with crmm_last_error() (CRMM_OK when there is none). */
CRMM_API crmm_status crmm_last_status(void);

/* Forget the calling thread's last error. */
CRMM_API void crmm_clear_error(void);

/* Record an error for the calling thread and return `status` — for plugins and the core:
 *   return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "pool: %s must be > 0", key);
 * The message is prefixed with the status's category ("out of memory: ", "invalid argument: ",
 * ...) unless it already starts with that category (so crmm_set_error(st, "%s", msg) of a message
 * of the same status is not prefixed twice). The arguments may quote crmm_last_error().
 * Messages longer than 1023 bytes are cut, between UTF-8 characters (a character that does not
 * fit whole is left out). A NULL fmt records the message "(no message given)" under the category. */
CRMM_API crmm_status crmm_set_error(crmm_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
CRMM_API crmm_status crmm_set_error_v(crmm_status status, const char *fmt, va_list ap);

/* Put `prefix: ` in front of the calling thread's message (keeping its category first) and
 * return its status: adds context as an error travels up ("FILE:LINE", a resource name).
 * Call it only after a failure: with no error recorded it returns CRMM_OK. A result longer than
 * 1023 bytes is cut as crmm_set_error cuts it, between UTF-8 characters. A NULL fmt adds nothing
 * (the message stays as it was) and returns the status. */
CRMM_API crmm_status crmm_error_add_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Human-readable size into buf, e.g. "1.0 PiB", "256 B" (cut to fit bufsize); returns buf, or NULL
 * with nothing written when buf is NULL or bufsize is 0. */
CRMM_API char *crmm_format_size(unsigned long long bytes, char *buf, unsigned long bufsize);

#ifdef __cplusplus
}
#endif
#endif
