/* output_file.c — how crmm opens a file it writes (logs, dumps, plots): one policy, one place.
 *
 * A file crmm writes may lie in a directory others can write (/tmp), and crmm may run as root.
 * So the last component of the name is never followed when it is a symbolic link (O_NOFOLLOW),
 * and an existing file is written only when it is the caller's own: a regular file owned by the
 * effective user with no other name (one hard link). A new file is made with O_CREAT|O_EXCL, so
 * crmm knows it made it; an existing one is opened without O_CREAT and checked on the open
 * descriptor (fstat), before anything is truncated. A character device or a pipe (/dev/null) is
 * written as it is: there is nothing to truncate. An exclusive writer takes flock(LOCK_EX) on
 * its open file description, which a second open conflicts with, in this process or another.
 *
 * One kind of link is followed: one that leads to a stream with nothing to overwrite, a pipe or a
 * terminal or /dev/null (/dev/stderr is such a link, to the process's own descriptor 2). Opening
 * can itself do something (a watchdog device arms, a tape rewinds, a serial port raises its modem
 * lines, a watcher sees the open), so the target is never opened unless its fstat, through the
 * link, says it is a FIFO, /dev/null's device or a terminal whose open does nothing (below). Only
 * then is it opened, without O_CREAT or O_TRUNC, and kept only when fstat says it is still one
 * of those streams. A link to anything else, a file included, is refused without its target
 * being opened, and the target is left as it was. */
#include "build_config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <crmm/plugin.h>

#define OUTPUT_FILE_MODE 0644
#define OUTPUT_FILE_ATTEMPTS 8 /* a name removed between the two opens is tried again */

/* CRMM_ERROR_IO "refusing to write PATH: WHY"; closes fd when it is open. */
__attribute__((format(printf, 3, 4))) static crmm_status refuse(int fd, const char *path, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (fd >= 0)
        close(fd);
    return crmm_set_error(CRMM_ERROR_IO, "refusing to write %s: %s", path, why);
}

/* Whether st is /dev/null's device. */
static bool is_dev_null(const struct stat *st)
{
    struct stat null;
    return S_ISCHR(st->st_mode) && stat("/dev/null", &null) == 0 && S_ISCHR(null.st_mode) &&
           null.st_rdev == st->st_rdev;
}

/* Whether a character device is a terminal that opening leaves as it was, by Linux's numbering
 * (Documentation/admin-guide/devices.txt): major 4 minors 0 to 63 the virtual consoles (not the
 * serial ports above them: opening one raises its modem lines, which resets boards), major 5
 * minor 0 /dev/tty (not minor 1, /dev/console, which may be a serial port, nor minor 2,
 * /dev/ptmx: opening it makes a new pseudo-terminal), majors 136 to 143 the Unix98
 * pseudo-terminals (/dev/pts/N). */
static bool is_terminal_device(dev_t dev)
{
    unsigned m = major(dev), n = minor(dev);
    return (m == 4 && n < 64) || (m == 5 && n == 0) || (m >= 136 && m <= 143);
}

/* Whether the character device is a terminal the process's stdin, stdout or stderr has open (a
 * console of any numbering, /dev/stderr's usual target), so that the open crmm adds to the one
 * already there changes nothing on the line. Not a pseudo-terminal's master (/dev/ptmx's
 * device): opening that device makes a new pseudo-terminal. */
static bool is_open_on_stdio(dev_t dev)
{
    if (major(dev) == 5 && minor(dev) == 2)
        return false;
    for (int fd = 0; fd <= 2; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == dev && isatty(fd))
            return true;
    }
    return false;
}

/* Whether the target a link leads to, known by stat alone (not opened), may be a harmless
 * stream: a pipe, /dev/null, or a terminal device (one of the numbers above, or the device the
 * process's standard streams already have open). */
static bool may_be_harmless_stream(const struct stat *st)
{
    if (S_ISFIFO(st->st_mode))
        return true;
    if (!S_ISCHR(st->st_mode))
        return false;
    return is_dev_null(st) || is_terminal_device(st->st_rdev) || is_open_on_stdio(st->st_rdev);
}

/* Whether the open descriptor fd (st: its fstat) is a harmless stream: a pipe, /dev/null, or a
 * terminal. */
static bool is_harmless_stream(int fd, const struct stat *st)
{
    if (S_ISFIFO(st->st_mode))
        return true;
    if (!S_ISCHR(st->st_mode))
        return false;
    return is_dev_null(st) || isatty(fd) != 0;
}

/* Whether a and b describe one object (and one device, for a device node). */
static bool same_object(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_rdev == b->st_rdev;
}

/* The target of the link at path when it is a harmless stream (its descriptor), else -1. The
 * target is looked at before it is opened: O_PATH follows the link and pins the object it leads
 * to without opening it (no driver's open runs), its fstat decides, and only then is that same
 * object opened, through /proc/self/fd, so that a link changed meanwhile changes nothing. Where
 * O_PATH or /proc is missing, stat decides and the path is opened; the opened object must then
 * be the one stat saw. */
static int open_link_to_stream(const char *path, int base)
{
    int pinned = open(path, O_PATH | O_CLOEXEC);
    struct stat target;
    if ((pinned >= 0 ? fstat(pinned, &target) : stat(path, &target)) != 0 || !may_be_harmless_stream(&target)) {
        if (pinned >= 0)
            close(pinned);
        return -1;
    }
    int flags = (base & ~O_NOFOLLOW) | O_NONBLOCK, fd = -1;
    if (pinned >= 0) {
        char self[32];
        snprintf(self, sizeof self, "/proc/self/fd/%d", pinned);
        fd = open(self, flags);
        bool no_proc = fd < 0 && errno == ENOENT;
        close(pinned);
        if (!no_proc && fd < 0)
            return -1;
    }
    if (fd < 0)
        fd = open(path, flags);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !same_object(&target, &st) || !is_harmless_stream(fd, &st)) {
        close(fd);
        return -1;
    }
    return fd;
}

static crmm_status cannot_open(const char *path, int err)
{
    struct stat ls;
    if (err == ELOOP && lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode))
        return refuse(-1, path,
                      "it is a symbolic link, and crmm does not follow a link where it writes a file (one placed "
                      "by someone else could make it overwrite any file it may write); name the file itself");
    if (err == ENXIO)
        return crmm_set_error(CRMM_ERROR_IO, "cannot write %s: it is a pipe with no reader, or a socket", path);
    return crmm_set_error(CRMM_ERROR_IO, "cannot write %s: %s", path, strerror(err));
}

/* The checks on the open descriptor, the lock, the truncation; closes fd on error. */
static crmm_status finish(const char *path, int fd, unsigned flags, bool created, int *out)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return crmm_set_error(CRMM_ERROR_IO, "cannot write %s: fstat: %s", path, strerror(err));
    }
    if (S_ISREG(st.st_mode)) {
        if (!created && st.st_uid != geteuid())
            return refuse(fd, path,
                          "it belongs to user %llu, not to you (user %llu); crmm writes only a file of its own, "
                          "never someone else's",
                          (unsigned long long)st.st_uid, (unsigned long long)geteuid());
        if (!created && st.st_nlink != 1)
            return refuse(fd, path,
                          "it has %llu hard links, so writing it would change the file under its other names too",
                          (unsigned long long)st.st_nlink);
        if ((flags & CRMM_OUTPUT_EXCLUSIVE) && flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            if (err == EWOULDBLOCK)
                return refuse(fd, path,
                              "another crmm writer holds it (in this process or another), and the two would "
                              "overwrite each other's lines, or crmm replay is reading it as its log; give each "
                              "its own file: a file name pattern can hold %%d (the device) and %%p (the process id)");
            close(fd);
            return crmm_set_error(CRMM_ERROR_IO, "cannot lock %s: %s", path, strerror(err));
        }
        if (!created && !(flags & CRMM_OUTPUT_APPEND) && ftruncate(fd, 0) != 0) {
            int err = errno;
            close(fd);
            return crmm_set_error(CRMM_ERROR_IO, "cannot truncate %s: %s", path, strerror(err));
        }
    } else if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        return refuse(fd, path, "it is not a regular file, a character device or a pipe");
    } else if (S_ISFIFO(st.st_mode) && st.st_uid != geteuid() && st.st_uid != 0) {
        /* another user's named pipe (made at a name crmm would create, in a shared directory)
         * would receive what crmm writes, and could stop it by never reading. Devices are not
         * judged by owner: in a user namespace /dev/null shows as nobody's */
        return refuse(fd, path, "it is a pipe that belongs to user %llu, not to you (user %llu) or root",
                      (unsigned long long)st.st_uid, (unsigned long long)geteuid());
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return crmm_set_error(CRMM_ERROR_IO, "cannot write %s: fcntl: %s", path, strerror(err));
    }
    *out = fd;
    return CRMM_OK;
}

crmm_status crmm_output_file_open(const char *path, unsigned flags, int *fd)
{
    if (!path || !*path || !fd)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "output file: %s", fd ? "no file name" : "fd is NULL");
    if (flags & ~(unsigned)(CRMM_OUTPUT_APPEND | CRMM_OUTPUT_EXCLUSIVE))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "output file %s: unknown flags 0x%x", path, flags);
    int base = O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | ((flags & CRMM_OUTPUT_APPEND) ? O_APPEND : 0);
    for (int attempt = 0; attempt < OUTPUT_FILE_ATTEMPTS; attempt++) {
        int f = open(path, base | O_CREAT | O_EXCL, OUTPUT_FILE_MODE);
        if (f >= 0)
            return finish(path, f, flags, true, fd);
        int err = errno;
        if (err == ELOOP && (f = open_link_to_stream(path, base)) >= 0)
            return finish(path, f, flags, false, fd);
        if (err != EEXIST)
            return cannot_open(path, err);
        /* O_NONBLOCK: opening a pipe must not wait for a reader (it is cleared in finish) */
        f = open(path, base | O_NONBLOCK);
        if (f >= 0)
            return finish(path, f, flags, false, fd);
        err = errno;
        if (err == ELOOP && (f = open_link_to_stream(path, base)) >= 0)
            return finish(path, f, flags, false, fd);
        if (err != ENOENT)
            return cannot_open(path, err);
    }
    return crmm_set_error(CRMM_ERROR_IO, "cannot create %s: it keeps appearing and disappearing", path);
}
