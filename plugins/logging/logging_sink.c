/* logging_sink.c — buffered, thread-safe log files, flushed at exit (see logging_sink.h).
 *
 * Each sink owns two buffers of LOGGING_SINK_RECORDS records (logging_line.h: a call's fields,
 * not yet text). Appending copies a record into the active one under the sink's spin lock (a few
 * nanoseconds held, where a mutex costs two locked instructions a line even uncontended). When it
 * is full, a buffered sink hands it to its writer thread and goes on with the other one; the
 * writer formats the records into lines and writes them, so neither the formatting nor the
 * write(2) is on the caller's path; the caller waits only when the writer is still busy with the
 * previous buffer. Whoever writes formats (a flush, close and exit format on their thread). With auto_flush, or when the thread
 * cannot be started, the appending thread writes, as do flushes (after the writer finished, so
 * the file keeps the order of the lines). A global list of open sinks, under its own mutex, lets
 * one atexit handler flush them all. Lock order: the list, then a sink's spin lock, then its
 * writer mutex; the writer thread never holds two of them. Before fork the list's mutex is taken
 * by this file's own handler, which runs before crmm's (it is registered after them), and each
 * sink's spin lock by a crmm fork guard, in crmm's order of resources: an adaptor over a logging
 * resource (a pool growing from it) calls into it holding its own lock, so the sink's lock must
 * come after that one. */
#define _GNU_SOURCE 1 /* pthread_setname_np */
#include "build_config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <crmm/fork_guard.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "../common/spin_lock.h"
#include "logging_line.h"
#include "logging_sink.h"

#define LOGGING_SINK_RECORDS 4096u  /* records per buffer */
#define LOGGING_SINK_TEXT (32u * 1024u) /* bytes of text formatted per write(2) */

struct logging_sink {
    int lock;              /* spin_lock: guards buf, used, spare (also read atomically), write_errno */
    int fd;
    pid_t owner;           /* the process that opened it; a forked child writes nothing */
    bool auto_flush;
    int write_errno;       /* first write error (0: none); lines are dropped after one */
    size_t used;           /* records in buf */
    logging_record *buf;   /* the buffer records are appended to */
    logging_record *spare; /* the other buffer while the writer is not writing it; NULL while it is */
    char *text;            /* LOGGING_SINK_TEXT bytes: records formatted for one write(2) */
    bool has_writer;       /* a writer thread runs (set at open) */
    pthread_t writer;
    pthread_mutex_t writer_lock; /* guards pending, pending_len and stop */
    pthread_cond_t work;   /* to the writer: pending or stop was set */
    pthread_cond_t done;   /* from the writer: spare is back */
    logging_record *pending; /* a full buffer for the writer, or NULL */
    size_t pending_len;
    bool stop;
    size_t users;          /* logging resources of this process writing through it (list's mutex) */
    dev_t dev;             /* the file, for a second resource of this process that names it */
    ino_t ino;
    bool regular;          /* a regular file: shared by the resources that name it */
    logging_sink *prev, *next; /* the list of open sinks */
    crmm_fork_guard fork_guard; /* takes lock around fork */
    char path[];
};

static pthread_mutex_t open_sinks_lock = PTHREAD_MUTEX_INITIALIZER;
static logging_sink *open_sinks;
/* Held across a whole open and a whole close (before the list's): a second open of a file waits
 * until the first's sink is listed (and shares it), or until its last close let the file go. */
static pthread_mutex_t opening_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t process_hooks_once = PTHREAD_ONCE_INIT;

static int flush_locked(logging_sink *s);

/* Write what is buffered; a line logged later (by an exit handler that runs after this one, a
 * C++ global's destructor) is written at once, as with auto_flush, since no flush follows. */
static void flush_all_at_exit(void)
{
    pthread_mutex_lock(&open_sinks_lock);
    for (logging_sink *s = open_sinks; s; s = s->next) {
        spin_lock(&s->lock);
        flush_locked(s);
        s->auto_flush = true;
        spin_unlock(&s->lock);
    }
    pthread_mutex_unlock(&open_sinks_lock);
}

/* Around fork: the forking thread holds the list's mutex (each sink's spin lock is its fork
 * guard's), so that the child never inherits one held by a thread that does not exist there. */
static void lock_list_before_fork(void)
{
    pthread_mutex_lock(&opening_lock);
    pthread_mutex_lock(&open_sinks_lock);
}

static void unlock_list_after_fork(void)
{
    pthread_mutex_unlock(&open_sinks_lock);
    pthread_mutex_unlock(&opening_lock);
}

/* In a forked child every sink is the parent's: its descriptor is closed there, so that the
 * file's exclusive lock goes with the parent's last close, not with the child's exit (a parent
 * could not log to that file again while a child lived); the child's lines are not written. */
static void unlock_list_in_child(void)
{
    for (logging_sink *s = open_sinks; s; s = s->next)
        if (s->fd >= 0) {
            close(s->fd);
            s->fd = -1;
        }
    unlock_list_after_fork();
    logging_line_forget_thread();
}

static void install_process_hooks(void)
{
    atexit(flush_all_at_exit);
    pthread_atfork(lock_list_before_fork, unlock_list_after_fork, unlock_list_in_child);
}

/* 0, or the errno of the write that failed with *written bytes of p written before it. */
static int write_all(int fd, const char *p, size_t n, size_t *written)
{
    *written = 0;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        p += w;
        n -= (size_t)w;
        *written += (size_t)w;
    }
    return 0;
}

/* A write of whole lines `text` failed after `written` bytes (a full disk, RLIMIT_FSIZE): cut
 * the file back to the end of the last whole line, so that it ends as a log every reader takes
 * (a line cut short makes crmm replay refuse the log). Nothing to cut on a pipe or terminal. */
static void cut_partial_line(int fd, const char *text, size_t written)
{
    size_t keep = written;
    while (keep && text[keep - 1] != '\n')
        keep--;
    off_t end = keep < written ? lseek(fd, 0, SEEK_CUR) : -1;
    if (end < (off_t)(written - keep))
        return;
    off_t to = end - (off_t)(written - keep);
    if (ftruncate(fd, to) == 0)
        lseek(fd, to, SEEK_SET);
}

/* Format records r[0..n) into s->text and write the lines; 0 or the errno of the first failed
 * write. One writer at a time: the writer thread between taking a buffer and giving it back, or
 * a flush under the spin lock after the writer finished (wait_for_writer_locked). */
static int write_records(logging_sink *s, const logging_record *r, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        len += logging_record_format(s->text + len, &r[i]);
        if (len > LOGGING_SINK_TEXT - LOGGING_LINE_MAX || i + 1 == n) {
            size_t written;
            int err = write_all(s->fd, s->text, len, &written);
            if (err) {
                cut_partial_line(s->fd, s->text, written);
                return err;
            }
            len = 0;
        }
    }
    return 0;
}

static void log_write_error(const logging_sink *s, int err)
{
    crmm_log(CRMM_LOG_ERROR, "logging: cannot write %s: %s; dropping further lines", s->path, strerror(err));
}

/* Wait until the writer has no buffer of this sink (it gave spare back). Spin lock held; it is
 * let go while waiting. Only in the process that opened the sink (a child has no writer). */
static void wait_for_writer_locked(logging_sink *s)
{
    while (s->has_writer && !__atomic_load_n(&s->spare, __ATOMIC_ACQUIRE)) {
        spin_unlock(&s->lock);
        pthread_mutex_lock(&s->writer_lock);
        while (!__atomic_load_n(&s->spare, __ATOMIC_ACQUIRE))
            pthread_cond_wait(&s->done, &s->writer_lock);
        pthread_mutex_unlock(&s->writer_lock);
        spin_lock(&s->lock);
    }
}

/* Write the buffer; 0 or the errno of the first failed write (which is logged once, and after
 * which lines are dropped). Sets no thread error: an allocate that spills the buffer must keep
 * its own status and message. */
static int flush_locked(logging_sink *s)
{
    if (getpid() != s->owner) { /* inherited by fork: the parent writes these lines */
        s->used = 0;
        return 0;
    }
    wait_for_writer_locked(s);
    if (!s->write_errno && s->used) {
        s->write_errno = write_records(s, s->buf, s->used);
        if (s->write_errno)
            log_write_error(s, s->write_errno);
    }
    s->used = 0;
    return s->write_errno;
}

/* The active buffer is full: give it to the writer and take the spare one. Spin lock held. */
static void hand_off_locked(logging_sink *s)
{
    if (getpid() != s->owner || s->write_errno) { /* a forked child's lines, or lines after an error: dropped */
        s->used = 0;
        return;
    }
    wait_for_writer_locked(s);
    logging_record *full = s->buf;
    size_t n = s->used;
    s->buf = s->spare;
    __atomic_store_n(&s->spare, NULL, __ATOMIC_RELAXED);
    s->used = 0;
    pthread_mutex_lock(&s->writer_lock);
    s->pending = full;
    s->pending_len = n;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->writer_lock);
}

static void *writer_main(void *arg)
{
    logging_sink *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->writer_lock);
        while (!s->pending && !s->stop)
            pthread_cond_wait(&s->work, &s->writer_lock);
        logging_record *p = s->pending;
        size_t n = s->pending_len;
        s->pending = NULL;
        pthread_mutex_unlock(&s->writer_lock);
        if (!p)
            return NULL; /* stopped, nothing left */
        int err = write_records(s, p, n);
        spin_lock(&s->lock);
        bool first = err && !s->write_errno;
        if (first)
            s->write_errno = err;
        __atomic_store_n(&s->spare, p, __ATOMIC_RELEASE);
        spin_unlock(&s->lock);
        if (first)
            log_write_error(s, err);
        pthread_mutex_lock(&s->writer_lock);
        pthread_cond_broadcast(&s->done);
        pthread_mutex_unlock(&s->writer_lock);
    }
}

/* Start the writer thread with every signal blocked (signals are for the application's threads);
 * false when it cannot be started (the sink then writes on the appending thread). */
static bool start_writer(logging_sink *s)
{
    if (!(s->spare = malloc(LOGGING_SINK_RECORDS * sizeof *s->spare)))
        return false;
    pthread_mutex_init(&s->writer_lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&s->writer, NULL, writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
#if defined(__linux__)
    if (!err)
        pthread_setname_np(s->writer, "crmm-log"); /* so that top, gdb and perf show whose it is */
#endif
    if (err) {
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->work);
        pthread_mutex_destroy(&s->writer_lock);
        free(s->spare);
        s->spare = NULL;
        return false;
    }
    return true;
}

/* Stop and join the writer (after its last buffer). Only in the process that started it. */
static void stop_writer(logging_sink *s)
{
    pthread_mutex_lock(&s->writer_lock);
    s->stop = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->writer_lock);
    pthread_join(s->writer, NULL);
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->writer_lock);
}

/* Under the list's mutex: the open sink of this process that writes the regular file at `path`,
 * or NULL. A link (symbolic, or a second hard link) is never one: opening it is refused as for
 * any writer (crmm_output_file_open). */
static logging_sink *sink_of_file(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)
        return NULL;
    for (logging_sink *s = open_sinks; s; s = s->next)
        if (s->regular && s->owner == getpid() && s->dev == st.st_dev && s->ino == st.st_ino)
            return s;
    return NULL;
}

static crmm_status open_new(const char *path, const char *header, bool auto_flush, logging_sink **out);

/* The open sink of this process on path's file, shared by the caller, or NULL when none: a
 * second resource on the file writes through it, its lines among the first's in the order they
 * are appended (the file keeps its lines; the header is not written again); when it asks for
 * auto_flush, the sink has it from then on. */
static logging_sink *share_open(const char *path, bool auto_flush)
{
    pthread_mutex_lock(&open_sinks_lock);
    logging_sink *s = sink_of_file(path);
    if (s) {
        s->users++;
        if (auto_flush) {
            spin_lock(&s->lock);
            flush_locked(s);
            s->auto_flush = true;
            spin_unlock(&s->lock);
        }
    }
    pthread_mutex_unlock(&open_sinks_lock);
    return s;
}

crmm_status logging_sink_open(const char *path, const char *header, bool auto_flush, logging_sink **out)
{
    /* before any of this file's locks: glibc's fork holds its own lock against pthread_atfork
     * while the handlers (this file's take opening_lock) run */
    pthread_once(&process_hooks_once, install_process_hooks);
    pthread_mutex_lock(&opening_lock);
    logging_sink *same = share_open(path, auto_flush);
    crmm_status st = same ? CRMM_OK : open_new(path, header, auto_flush, out);
    pthread_mutex_unlock(&opening_lock);
    if (same)
        *out = same;
    return st;
}

static crmm_status open_new(const char *path, const char *header, bool auto_flush, logging_sink **out)
{
    size_t plen = strlen(path);
    logging_sink *s = calloc(1, sizeof *s + plen + 1);
    logging_record *buf = malloc(LOGGING_SINK_RECORDS * sizeof *buf);
    char *text = malloc(LOGGING_SINK_TEXT);
    if (!s || !buf || !text) {
        free(s);
        free(buf);
        free(text);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "logging: malloc failed");
    }
    memcpy(s->path, path, plen + 1);
    s->buf = buf;
    s->text = text;
    s->auto_flush = auto_flush;
    s->owner = getpid();
    /* exclusive: a resource of another process on this file is refused rather than the two
     * overwriting each other's lines (one of this process shares the sink: sink_of_file) */
    crmm_status st = crmm_output_file_open(path, CRMM_OUTPUT_EXCLUSIVE, &s->fd);
    size_t written;
    int err = st != CRMM_OK ? 0 : write_all(s->fd, header, strlen(header), &written);
    if (st != CRMM_OK || err) {
        if (st != CRMM_OK)
            crmm_error_add_context("logging");
        else {
            crmm_set_error(CRMM_ERROR_IO, "logging: cannot write log file %s: %s", path, strerror(err));
            close(s->fd);
        }
        free(buf);
        free(text);
        free(s);
        return crmm_last_status();
    }
    struct stat st_file;
    if (fstat(s->fd, &st_file) == 0 && S_ISREG(st_file.st_mode)) {
        s->regular = true;
        s->dev = st_file.st_dev;
        s->ino = st_file.st_ino;
    }
    s->users = 1;
    s->has_writer = !auto_flush && start_writer(s);
    spin_lock_add_fork_guard(&s->lock, &s->fork_guard);
    pthread_mutex_lock(&open_sinks_lock);
    s->next = open_sinks;
    if (open_sinks)
        open_sinks->prev = s;
    open_sinks = s;
    pthread_mutex_unlock(&open_sinks_lock);
    *out = s;
    return CRMM_OK;
}

void logging_sink_append(logging_sink *s, const logging_record *r)
{
    spin_lock(&s->lock);
    if (__builtin_expect(s->used == LOGGING_SINK_RECORDS, 0)) {
        if (s->has_writer)
            hand_off_locked(s);
        else
            flush_locked(s);
    }
    s->buf[s->used++] = *r;
    if (s->auto_flush)
        flush_locked(s);
    spin_unlock(&s->lock);
}

bool logging_sink_writes_here(const logging_sink *s) { return getpid() == s->owner; }

crmm_status logging_sink_flush(logging_sink *s)
{
    if (!logging_sink_writes_here(s))
        return crmm_set_error(CRMM_ERROR_STATE, "logging: %s: this resource was made by the parent process and writes "
                              "nothing in a forked child (its lines are dropped there): make a logging resource in "
                              "the child", s->path);
    spin_lock(&s->lock);
    int err = flush_locked(s);
    spin_unlock(&s->lock);
    if (err)
        return crmm_set_error(CRMM_ERROR_IO, "logging: cannot write %s: %s", s->path, strerror(err));
    return CRMM_OK;
}

void logging_sink_close(logging_sink *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&opening_lock); /* an open of this file waits until it is let go */
    pthread_mutex_lock(&open_sinks_lock);
    if (--s->users > 0) { /* another resource of this process still writes through it */
        pthread_mutex_unlock(&open_sinks_lock);
        pthread_mutex_unlock(&opening_lock);
        return;
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        open_sinks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&open_sinks_lock);
    spin_lock(&s->lock);
    flush_locked(s);
    spin_unlock(&s->lock);
    /* a forked child has no writer thread (and its buffer may be with the parent's): it leaves
     * both alone */
    if (s->has_writer && getpid() == s->owner) {
        stop_writer(s);
        free(s->spare);
    }
    crmm_fork_guard_remove(&s->fork_guard);
    if (s->fd >= 0)
        close(s->fd);
    pthread_mutex_unlock(&opening_lock);
    free(s->buf);
    free(s->text);
    free(s);
}

const char *logging_sink_path(const logging_sink *s)
{
    return s->path;
}
