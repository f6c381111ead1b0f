/* logging_line.h — one CSV line of the logging plugin, formatted without printf.
 *
 * A line is "THREAD,HH:MM:SS.UUUUUU,ACTION,POINTER,SIZE,STREAM\n" (see crmm/logging.h). The
 * thread id and the HH:MM:SS part are cached per thread (the time once per second), and lines
 * of one thread less than a microsecond apart share a clock reading (logging_line.c), so a line
 * costs a time-stamp counter read, at most one clock_gettime and a few table lookups. */
#ifndef CRMM_PLUGINS_LOGGING_LINE_H
#define CRMM_PLUGINS_LOGGING_LINE_H

#include <stddef.h>
#include <stdint.h>

/* Longest line: 20 (thread) + 15 (time) + 16 (action) + 18 (pointer) + 20 (size) + 18 (stream)
 * + 5 commas + newline = 113. */
#define LOGGING_LINE_MAX 128

typedef enum logging_action {
    LOGGING_ALLOCATE,
    LOGGING_ALLOCATE_FAILURE,
    LOGGING_FREE
} logging_action;

/* Format one line into buf (LOGGING_LINE_MAX bytes); returns its length, newline included. */
size_t logging_line_format(char *buf, logging_action action, const void *ptr, size_t bytes, uintptr_t stream);

/* Forget the calling thread's cached thread id (for the child after fork). */
void logging_line_forget_thread(void);

#endif
