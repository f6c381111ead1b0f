/* crmm/logging.h — the `logging` adaptor's log format and control ops (the library-wide switch
 * that wraps every device in one is crmm/logging_switch.h).
 *
 * The logging plugin writes every allocate, failed allocate and free that passes through it as
 * one CSV line, in the format RMM's logging_resource_adaptor writes and RMM's tools (the replay
 * benchmark, its log parser) read:
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   48213,14:02:11.004211,allocate,0x7f3a40000000,1024,0
 *   48213,14:02:11.004305,allocate failure,(nil),1125899906842624,0
 *   48213,14:02:11.004317,free,0x7f3a40000000,1024,0
 *
 * Thread is the OS thread id (gettid), Time the local time HH:MM:SS.microseconds, Pointer as
 * printf's %p, Size the requested bytes, Stream the stream handle as RMM writes it
 * (`std::hex` of the pointer: 0 for the legacy default stream, else 0x-prefixed hex, e.g.
 * 0x2 for the per-thread default stream). Parameters: `file` (%d = device ordinal, or "host" for a host-memory
 * chain; %p = process id; %% = %; default $CRMM_LOG_FILE, expanded the same way; the file is
 * created, or rewritten when it is the user's own; a symbolic link, someone else's file, or a
 * file a logging resource of another process holds is refused: crmm_output_file_open; another
 * logging resource of this process on the same file shares its lines' buffer and writer) and `auto_flush` (write each line at once; default false: lines are buffered, a
 * full buffer is written by a thread the resource starts for it while logging goes on in a
 * second buffer, and the rest on crmm_logging_flush, trim, destroy and process exit).
 *
 * `crmm replay LOG` replays such a log against any resource. */
#ifndef CRMM_LOGGING_H
#define CRMM_LOGGING_H

#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CSV header line (without the newline). */
#define CRMM_LOGGING_CSV_HEADER "Thread,Time,Action,Pointer,Size,Stream"

/* Control ops of the logging plugin (crmm_resource_control); each arg as said. */
#define CRMM_LOGGING_OP_FLUSH 1        /* unused (NULL): write buffered lines to the file */
#define CRMM_LOGGING_OP_GET_FILE 2     /* const char **: the file name, after expansion */

/* Write the buffered lines of the first logging layer in mr's chain to its file. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (NULL), CRMM_ERROR_UNSUPPORTED (no logging layer),
 * CRMM_ERROR_IO (the write failed; the message has the reason), CRMM_ERROR_STATE (in a forked
 * child, where a resource the parent made writes nothing: its file and lock stay the parent's). */
static inline crmm_status crmm_logging_flush(crmm_resource *mr)
{
    if (!mr)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "logging: resource is NULL");
    return crmm_resource_control_kind(mr, "logging", CRMM_LOGGING_OP_FLUSH, NULL);
}

/* The file the first logging layer in mr's chain writes to (valid while that resource lives),
 * or NULL when there is none. */
static inline const char *crmm_logging_file(crmm_resource *mr)
{
    const char *file = NULL;
    crmm_resource *layer = crmm_resource_find_kind(mr, "logging");
    if (!layer || crmm_resource_control(layer, CRMM_LOGGING_OP_GET_FILE, &file) != CRMM_OK)
        return NULL;
    return file;
}

#ifdef __cplusplus
}
#endif
#endif
