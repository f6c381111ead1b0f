/* logging_sink.c — buffered, thread-safe log files, flushed at exit (see logging_sink.h).
 *
 * Each sink owns a fixed buffer of LOGGING_SINK_BUFFER bytes. Appending is a memcpy under the
 * sink's spin lock (a few nanoseconds held, where a mutex costs two locked instructions a line
 * even uncontended); the write(2) happens only when the buffer is full (or per line with
 * auto_flush), and a thread waiting meanwhile yields the processor. A global list of open sinks,
 * under its own mutex, lets one atexit handler flush them all; lock order is list, then sink. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <crmm/log.h>
#include "../common/spin_lock.h"
#include "logging_line.h"
#include "logging_sink.h"

#define LOGGING_SINK_BUFFER (128u * 1024u)

struct logging_sink {
    int lock;              /* spin_lock */
    int fd;
    pid_t owner;           /* the process that opened it; a forked child writes nothing */
    bool auto_flush;
    int write_errno;       /* first write error (0: none); lines are dropped after one */
    size_t used;
    logging_sink *prev, *next; /* the list of open sinks */
    char *buf;
    char path[];
};

static pthread_mutex_t open_sinks_lock = PTHREAD_MUTEX_INITIALIZER;
static logging_sink *open_sinks;
static pthread_once_t process_hooks_once = PTHREAD_ONCE_INIT;

static int flush_locked(logging_sink *s);

static void flush_all_at_exit(void)
{
    pthread_mutex_lock(&open_sinks_lock);
    for (logging_sink *s = open_sinks; s; s = s->next) {
        spin_lock(&s->lock);
        flush_locked(s);
        spin_unlock(&s->lock);
    }
    pthread_mutex_unlock(&open_sinks_lock);
}

static void install_process_hooks(void)
{
    atexit(flush_all_at_exit);
    pthread_atfork(NULL, NULL, logging_line_forget_thread);
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
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
    if (!s->write_errno && s->used) {
        s->write_errno = write_all(s->fd, s->buf, s->used);
        if (s->write_errno)
            crmm_log(CRMM_LOG_ERROR, "logging: cannot write %s: %s; dropping further lines", s->path,
                     strerror(s->write_errno));
    }
    s->used = 0;
    return s->write_errno;
}

crmm_status logging_sink_open(const char *path, const char *header, bool auto_flush, logging_sink **out)
{
    pthread_once(&process_hooks_once, install_process_hooks);
    size_t plen = strlen(path);
    logging_sink *s = calloc(1, sizeof *s + plen + 1);
    char *buf = malloc(LOGGING_SINK_BUFFER);
    if (!s || !buf) {
        free(s);
        free(buf);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "logging: malloc failed");
    }
    memcpy(s->path, path, plen + 1);
    s->buf = buf;
    s->auto_flush = auto_flush;
    s->owner = getpid();
    s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    int err = s->fd < 0 ? errno : write_all(s->fd, header, strlen(header));
    if (err) {
        crmm_set_error(CRMM_ERROR_IO, "logging: cannot %s log file %s: %s", s->fd < 0 ? "create" : "write", path,
                       strerror(err));
        if (s->fd >= 0)
            close(s->fd);
        free(buf);
        free(s);
        return CRMM_ERROR_IO;
    }
    pthread_mutex_lock(&open_sinks_lock);
    s->next = open_sinks;
    if (open_sinks)
        open_sinks->prev = s;
    open_sinks = s;
    pthread_mutex_unlock(&open_sinks_lock);
    *out = s;
    return CRMM_OK;
}

void logging_sink_append(logging_sink *s, const char *line, size_t len)
{
    spin_lock(&s->lock);
    if (__builtin_expect(s->used + len > LOGGING_SINK_BUFFER, 0))
        flush_locked(s);
    memcpy(s->buf + s->used, line, len);
    s->used += len;
    if (s->auto_flush)
        flush_locked(s);
    spin_unlock(&s->lock);
}

crmm_status logging_sink_flush(logging_sink *s)
{
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
    pthread_mutex_lock(&open_sinks_lock);
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
    close(s->fd);
    free(s->buf);
    free(s);
}

const char *logging_sink_path(const logging_sink *s)
{
    return s->path;
}
