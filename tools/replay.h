/* replay.h — `crmm replay`: an RMM allocation log (replay_log.c) and its replay against a
 * resource (cmd_replay.c).
 *
 * The log is the CSV the logging plugin writes, or one RMM's logging_resource_adaptor wrote:
 * exactly the six columns Thread,Time,Action,Pointer,Size,Stream. Reading it also pairs every
 * free with the allocation it frees, so the replay itself needs no lookups. */
#ifndef CRMM_TOOLS_REPLAY_H
#define CRMM_TOOLS_REPLAY_H

#include <stdint.h>
#include <stdio.h>
#include <crmm/error.h>

typedef enum replay_action {
    REPLAY_ALLOCATE,
    REPLAY_ALLOCATE_FAILURE,
    REPLAY_FREE
} replay_action;

typedef struct replay_event {
    uint64_t thread;        /* the logged thread id */
    uint64_t pointer;       /* the logged pointer (0 for "(nil)") */
    uint64_t size;
    uint64_t stream;
    unsigned line;          /* line number in the file */
    replay_action action;
    uint32_t thread_index;  /* 0 .. threads-1, in order of first appearance */
    int64_t pair;           /* FREE: index of the ALLOCATE it frees; ALLOCATE: of its FREE; -1: none */
} replay_event;

typedef struct replay_log {
    replay_event *events;
    size_t count;
    uint32_t threads;           /* distinct logged threads */
    /* what the log itself shows */
    uint64_t allocations, frees, failures_logged;
    uint64_t leaked_count, leaked_bytes; /* allocations the log never frees */
    uint64_t unknown_frees;     /* frees of a pointer that was not live */
    uint64_t size_mismatches;   /* frees with another size than the allocation's */
    uint64_t reused_live;       /* allocations of a pointer that was still live (the first leaks) */
    uint64_t peak_bytes;        /* the most bytes live at once, per the log */
} replay_log;

/* Read and pair a log. Errors: CRMM_ERROR_IO (cannot read), CRMM_ERROR_INVALID_ARGUMENT
 * ("FILE:LINE: what is wrong" for a bad header or line), CRMM_ERROR_OUT_OF_MEMORY. */
crmm_status replay_log_read(const char *path, replay_log *log);
void replay_log_free(replay_log *log);

/* `crmm replay ARGS`, writing its report to `out` and errors to `err`; returns the exit
 * status (0 done, 1 error, 2 bad usage). crmm_cmd_replay is this with stdout and stderr. */
int crmm_replay_main(int argc, char **argv, FILE *out, FILE *err);

#endif
