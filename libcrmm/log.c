/* log.c — the library logger: a level, a flush level, one destination, one mutex.
 *
 * The level is read without the lock (an atomic int) so that crmm_log_should_log() and a
 * dropped message cost a load and a compare. Writing takes the mutex so that lines from
 * different threads never interleave. $CRMM_LOG_LEVEL and $CRMM_DEBUG_LOG_FILE are read once,
 * on first use (ignored in a privileged process: environment.c). The log file is appended to,
 * opened as every file crmm writes is (output_file.c). */
#include "build_config.h"
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "environment.h"
#include "internal.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int log_level = CRMM_LOG_WARN;
static atomic_int flush_level = CRMM_LOG_WARN;
static atomic_bool level_from_env; /* $CRMM_LOG_LEVEL named a level: a config's log_level yields */
static FILE *log_file;          /* NULL = stderr */
static char log_path[4096];
static const char *ignored_at_init[2]; /* variables a privileged process ignored, not yet said (log_lock) */

static const char *const level_names[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};

/* -1 when `text` names no level. Sets no error: the environment is read inside calls that
 * succeed, and they must not leave a message behind. */
static int level_from_name(const char *text)
{
    for (int i = 0; i <= CRMM_LOG_OFF; i++)
        if (strcasecmp(text, level_names[i]) == 0)
            return i;
    return strcasecmp(text, "warning") == 0 ? CRMM_LOG_WARN : -1;
}

/* One line to f, the caller holding log_lock (or initialising, before anyone else logs). */
static void write_line(FILE *f, crmm_log_level level, const char *msg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    fprintf(f, "[%02d:%02d:%02d.%06ld] [crmm] [%s] %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000, level_names[level], msg);
    if ((int)level >= atomic_load(&flush_level))
        fflush(f);
}

/* `path` opened as every file crmm writes is (crmm_output_file_open), for appending, with a
 * shared lock on a regular file: library logs of several processes may share a file, but not a
 * logging resource's allocation log, whose writer holds it exclusively (and is refused the same
 * way while a library log is there); NULL with the error set when it cannot be. */
static FILE *open_log_file(const char *path)
{
    int fd;
    if (crmm_output_file_open(path, CRMM_OUTPUT_APPEND, &fd) != CRMM_OK)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_SH | LOCK_NB) != 0) {
        int err = errno;
        close(fd);
        if (err == EWOULDBLOCK)
            crmm_set_error(CRMM_ERROR_IO, "refusing to write %s: a logging resource writes its allocation log there "
                           "(the two would overwrite each other's lines); give the library log its own file", path);
        else
            crmm_set_error(CRMM_ERROR_IO, "cannot lock %s: %s", path, strerror(err));
        return NULL;
    }
    FILE *f = fdopen(fd, "a");
    if (!f) {
        int err = errno;
        close(fd);
        crmm_set_error(CRMM_ERROR_IO, "cannot open log file %s: %s", path, strerror(err));
    }
    return f;
}

/* Runs once, inside pthread_once: it must not call crmm_log (which would wait on this once). */
static void log_init_from_env(void)
{
    bool ignored_level, ignored_file;
    const char *lvl = crmm_env_lookup("CRMM_LOG_LEVEL", &ignored_level);
    int parsed;
    if (lvl && *lvl) {
        if ((parsed = level_from_name(lvl)) >= 0) {
            atomic_store(&log_level, (int)parsed);
            atomic_store(&level_from_env, true);
        } else
            fprintf(stderr, "[crmm] [warn] CRMM_LOG_LEVEL=%s is not a level (trace debug info warn error critical off); using warn\n", lvl);
    }
    const char *file = crmm_env_lookup("CRMM_DEBUG_LOG_FILE", &ignored_file);
    if (file && *file) {
        /* the thread's error must stay as it was: this runs inside calls that succeed */
        crmm_kept_error saved;
        crmm_keep_error(&saved, crmm_last_status());
        FILE *f = open_log_file(file);
        if (f) {
            log_file = f;
            snprintf(log_path, sizeof log_path, "%s", file);
        } else {
            fprintf(stderr, "[crmm] [warn] CRMM_DEBUG_LOG_FILE: %s; logging to stderr\n", crmm_last_error());
        }
        crmm_restore_error(&saved);
    }
    /* said when the level first lets info lines through (the level these variables would have
     * set is ignored too, so at this point it is warn) */
    ignored_at_init[0] = ignored_level ? "CRMM_LOG_LEVEL" : NULL;
    ignored_at_init[1] = ignored_file ? "CRMM_DEBUG_LOG_FILE" : NULL;
}

/* The variables the first read ignored, once the level shows info lines. Takes log_lock. */
static void say_ignored_at_init(void)
{
    if (CRMM_LOG_INFO < atomic_load(&log_level))
        return;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < 2; i++)
        if (ignored_at_init[i]) {
            char msg[256];
            write_line(log_file ? log_file : stderr, CRMM_LOG_INFO,
                       crmm_env_ignored_message(ignored_at_init[i], msg, sizeof msg));
            ignored_at_init[i] = NULL;
        }
    pthread_mutex_unlock(&log_lock);
}

static inline void ensure_init(void) { pthread_once(&log_once, log_init_from_env); }

/* Lines still in the log file's buffer are written before the fork: a child would inherit them
 * and write them again at its exit (stderr, unbuffered, holds none). */
void crmm_log_fork_lock(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_file)
        fflush(log_file);
}
void crmm_log_fork_unlock(void) { pthread_mutex_unlock(&log_lock); }

static bool level_valid(crmm_log_level level) { return (int)level >= CRMM_LOG_TRACE && (int)level <= CRMM_LOG_OFF; }

crmm_status crmm_log_set_level(crmm_log_level level)
{
    ensure_init();
    if (!level_valid(level))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "log level %d is out of range (0..6)", (int)level);
    atomic_store(&log_level, (int)level);
    say_ignored_at_init();
    return CRMM_OK;
}

bool crmm_log_level_from_env(void)
{
    ensure_init();
    return atomic_load(&level_from_env);
}

crmm_log_level crmm_log_get_level(void)
{
    ensure_init();
    return (crmm_log_level)atomic_load(&log_level);
}

bool crmm_log_should_log(crmm_log_level level)
{
    ensure_init();
    return level_valid(level) && level != CRMM_LOG_OFF && (int)level >= atomic_load(&log_level);
}

crmm_status crmm_log_flush_on(crmm_log_level level)
{
    ensure_init();
    if (!level_valid(level))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "flush level %d is out of range (0..6)", (int)level);
    atomic_store(&flush_level, (int)level);
    return CRMM_OK;
}

crmm_log_level crmm_log_get_flush_level(void)
{
    ensure_init();
    return (crmm_log_level)atomic_load(&flush_level);
}

void crmm_log_flush(void)
{
    ensure_init();
    pthread_mutex_lock(&log_lock);
    fflush(log_file ? log_file : stderr);
    pthread_mutex_unlock(&log_lock);
}

crmm_status crmm_log_set_file(const char *path)
{
    ensure_init();
    char name[sizeof log_path]; /* path may be crmm_log_get_file()'s own string */
    if (path && strlen(path) >= sizeof name) /* its name could not be kept whole for crmm_log_get_file */
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "log file: a path of %zu bytes is longer than %zu", strlen(path),
                              sizeof name - 1);
    snprintf(name, sizeof name, "%s", path ? path : "");
    FILE *f = NULL;
    if (path && !(f = open_log_file(path)))
        return crmm_error_add_context("log file");
    pthread_mutex_lock(&log_lock);
    if (log_file)
        fclose(log_file);
    log_file = f;
    memcpy(log_path, name, sizeof log_path);
    pthread_mutex_unlock(&log_lock);
    return CRMM_OK;
}

const char *crmm_log_get_file(void)
{
    ensure_init();
    return log_path[0] ? log_path : "stderr";
}

crmm_status crmm_log_level_parse(const char *text, crmm_log_level *out)
{
    if (!text || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "log level: NULL argument");
    int level = level_from_name(text);
    if (level >= 0) {
        *out = (crmm_log_level)level;
        return CRMM_OK;
    }
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                          "'%s' is not a log level (trace debug info warn error critical off)", text);
}

const char *crmm_log_level_name(crmm_log_level level)
{
    return level_valid(level) ? level_names[level] : "?";
}

void crmm_log(crmm_log_level level, const char *fmt, ...)
{
    if (!crmm_log_should_log(level))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    if (fmt)
        vsnprintf(msg, sizeof msg, fmt, ap);
    else
        snprintf(msg, sizeof msg, "(no message given)"); /* as crmm_set_error words a NULL fmt */
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    write_line(log_file ? log_file : stderr, level, msg);
    pthread_mutex_unlock(&log_lock);
}
