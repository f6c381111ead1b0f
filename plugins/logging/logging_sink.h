/* logging_sink.h — the file a logging resource writes: a buffer, a lock, a descriptor.
 *
 * Lines are appended, as records of their fields (logging_line.h), to an in-memory buffer under
 * the sink's lock (so lines never interleave and the file's order is the order in which they
 * were appended), and formatted and written with write(2):
 * a full buffer by the sink's writer thread (a buffered sink has one) while appending goes on in
 * a second buffer; the rest on flush, on close, and at process exit (every open sink is on a
 * list that an atexit handler flushes), after the writer is done. A child process after fork
 * drops what it inherited instead of writing it twice. */
#ifndef CRMM_PLUGINS_LOGGING_SINK_H
#define CRMM_PLUGINS_LOGGING_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <crmm/error.h>
#include "logging_line.h"

typedef struct logging_sink logging_sink;

/* The sink of `path`: when a sink of this process writes that regular file already, that one,
 * shared (closed when its last user closes it; auto_flush from the first user that asks for it;
 * the header is not written again); else a new one: `path` created, or rewritten when it is the
 * caller's own (crmm_output_file_open), with an exclusive lock held on it while the sink is open,
 * and `header` (a full line) written to it at once. With auto_flush every appended line is
 * written at once; without, a writer thread is started (when that fails the appending thread
 * writes full buffers itself). CRMM_ERROR_IO when the file cannot be created or written, is a
 * link or someone else's file, or another process holds its lock (a writer, or crmm replay
 * reading it); CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status logging_sink_open(const char *path, const char *header, bool auto_flush, logging_sink **out);

/* Append the line of record r (copied; formatted when written). A write error is logged once at
 * error level and later lines are dropped (a line it cut short is cut from the file, which ends
 * with the last whole line); crmm_logging_flush then reports it. */
void logging_sink_append(logging_sink *s, const logging_record *r);

/* Write the buffered lines. CRMM_ERROR_IO (with the reason) when a write failed; CRMM_ERROR_STATE
 * where this process does not write s (logging_sink_writes_here). */
crmm_status logging_sink_flush(logging_sink *s);
/* Whether this process writes s (false in a child forked after s was opened: its lines are
 * dropped there, and logging_sink_flush says so). */
bool logging_sink_writes_here(const logging_sink *s);

/* Let go of a sink: when this was its last user, flush, stop the writer thread, close and free.
 * NULL: no-op. */
void logging_sink_close(logging_sink *s);

/* The file name. */
const char *logging_sink_path(const logging_sink *s);

#endif
