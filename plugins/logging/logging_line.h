/* logging_line.h — one CSV line of the logging plugin, formatted without printf.
 *
 * A line is "THREAD,HH:MM:SS.UUUUUU,ACTION,POINTER,SIZE,STREAM\n" (see crmm/logging.h). The
 * caller records a call's fields (logging_record_take: the thread id cached per thread, and calls
 * of one thread less than a microsecond apart share a clock reading, so it costs a time-stamp
 * counter read and at most one clock_gettime); the line is formatted from the record later
 * (logging_record_format, with the HH:MM:SS part cached per formatting thread and second). */
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

/* One logged call as the caller's path records it: the fields of its line, unformatted. A line
 * is formatted from it later, off that path (logging_sink.c). */
typedef struct logging_record {
    uint64_t ptr, bytes, stream;
    int64_t sec;                  /* the call's time (CLOCK_REALTIME) */
    uint32_t usec;
    uint32_t thread;              /* the calling thread's id (gettid) */
    uint32_t action;              /* a logging_action */
} logging_record;

/* Fill *r for a call of the calling thread, now: a time-stamp counter read and, at most, one
 * clock_gettime (see logging_line.c). */
void logging_record_take(logging_record *r, logging_action action, const void *ptr, size_t bytes, uintptr_t stream);
/* Format r's line into buf (LOGGING_LINE_MAX bytes); returns its length, newline included. */
size_t logging_record_format(char *buf, const logging_record *r);
/* Both: one line for a call of the calling thread, now. */
size_t logging_line_format(char *buf, logging_action action, const void *ptr, size_t bytes, uintptr_t stream);
/* Forget the calling thread's cached thread id and clock reading (for the child after fork). */
void logging_line_forget_thread(void);

#endif
