/* crmm/log.h — the library's logger, as RMM's Python logging utilities.
 *
 * Levels trace < debug < info < warn < error < critical < off. Messages below the level are
 * dropped; messages at or above the flush level are flushed at once. Output goes to stderr, or
 * to the file named by $CRMM_DEBUG_LOG_FILE (or crmm_log_set_file()). $CRMM_LOG_LEVEL sets the
 * starting level (default warn); a setuid, setgid or setcap process ignores both. All functions
 * are thread-safe; lines never interleave. */
#ifndef CRMM_LOG_H
#define CRMM_LOG_H

#include <crmm/export.h>
#include <stdbool.h>
#include <crmm/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum crmm_log_level {
    CRMM_LOG_TRACE = 0,
    CRMM_LOG_DEBUG = 1,
    CRMM_LOG_INFO = 2,
    CRMM_LOG_WARN = 3,
    CRMM_LOG_ERROR = 4,
    CRMM_LOG_CRITICAL = 5,
    CRMM_LOG_OFF = 6
} crmm_log_level;

/* Set the level below which messages are dropped. CRMM_ERROR_INVALID_ARGUMENT if out of range. */
CRMM_API crmm_status crmm_log_set_level(crmm_log_level level);
/* The current level. */
CRMM_API crmm_log_level crmm_log_get_level(void);
/* True when $CRMM_LOG_LEVEL names a level: it then sets the starting level and wins over a
 * config's log_level (crmm_init leaves the level alone); crmm_log_set_level still changes it.
 * Never fails. */
CRMM_API bool crmm_log_level_from_env(void);
/* True when a message at `level` would be written. */
CRMM_API bool crmm_log_should_log(crmm_log_level level);
/* Flush after every message at or above `level` (default warn). CRMM_ERROR_INVALID_ARGUMENT
 * if out of range. */
CRMM_API crmm_status crmm_log_flush_on(crmm_log_level level);
/* The current flush level. */
CRMM_API crmm_log_level crmm_log_get_flush_level(void);
/* Flush the log now. */
CRMM_API void crmm_log_flush(void);
/* Write the log to `path` (appending; NULL = stderr), opened by crmm_output_file_open.
 * CRMM_ERROR_IO if it cannot be opened, or is a symbolic link to anything but a pipe, /dev/null or
 * a terminal, someone else's file or a file with another hard link; CRMM_ERROR_INVALID_ARGUMENT
 * for an empty path or one of 4 096 bytes or more; the previous destination then stays. */
CRMM_API crmm_status crmm_log_set_file(const char *path);
/* Where the log goes: a path, or "stderr". The string is the logger's own: read it while no other
 * thread calls crmm_log_set_file. */
CRMM_API const char *crmm_log_get_file(void);

/* Parse "trace", "debug", "info", "warn"/"warning", "error", "critical", "off" (any case).
 * CRMM_ERROR_INVALID_ARGUMENT for anything else. */
CRMM_API crmm_status crmm_log_level_parse(const char *text, crmm_log_level *out);
/* "trace" ... "off"; "?" for values out of range. */
CRMM_API const char *crmm_log_level_name(crmm_log_level level);

/* Write one line: "[time] [crmm] [level] message", when `level` is at or above the log level (a
 * level out of range, or OFF, writes nothing). A NULL fmt writes "(no message given)". */
CRMM_API void crmm_log(crmm_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
