/* check_file_policy.c — how crmm writes files and what a privileged process ignores
 * (docs/files-and-privileges.md): a symbolic link or a hard link where crmm writes is refused and
 * the file behind it keeps its bytes (the logging plugin's file, the debug log, the arena's dump
 * file; `crmm replay --plot` in check_file_policy.sh), the caller's own file is still rewritten
 * or appended to, two logging resources on one file (in one process or two) are refused rather
 * than overwriting each other, a config others can write is refused, and with elevated
 * privileges every CRMM_* variable is ignored.
 *
 * This program defines secure_getenv. libcrmm calls it through the dynamic linker, so the
 * definition here is the one it gets: a test sets `pretend_privileged` and libcrmm sees what a
 * setuid, setgid or setcap process sees (NULL for every variable), without a setuid binary. */
#include "build_config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <crmm/arena.h>
#include <crmm/config.h>
#include <crmm/log.h>
#include <crmm/plugin.h>
#include "test_support.h"

static bool pretend_privileged;

char *secure_getenv(const char *name);
char *secure_getenv(const char *name) { return pretend_privileged ? NULL : getenv(name); }

#define VICTIM_TEXT "bytes that must survive\n"

static char *tmp_dir; /* made in main, before Check forks */

/* A path in the test directory unique to this process and `tag`. */
static const char *path_for(const char *tag) { return crmm_test_path_in(tmp_dir, tag, ""); }

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A victim file holding VICTIM_TEXT, and a symbolic link to it (a hard one when `hard`): the
 * link's path. */
static const char *link_to_victim(const char *tag, const char **victim, int hard)
{
    char vt[64], lt[64];
    snprintf(vt, sizeof vt, "%s.victim", tag);
    snprintf(lt, sizeof lt, "%s.link", tag);
    *victim = path_for(vt);
    const char *path = path_for(lt);
    write_text(*victim, VICTIM_TEXT);
    unlink(path);
    ck_assert_int_eq(hard ? link(*victim, path) : symlink(*victim, path), 0);
    return path;
}

static void assert_victim_intact(const char *victim)
{
    ck_assert_str_eq(crmm_test_file_text(victim), VICTIM_TEXT);
}

/* A symbolic link at the path for `tag` to `target`: the link's path. */
static const char *link_to(const char *tag, const char *target)
{
    const char *path = path_for(tag);
    unlink(path);
    ck_assert_int_eq(symlink(target, path), 0);
    return path;
}

/* Writes "hi" to fd (then closes it) and reads it back from `reader`, the other end. */
static void assert_reaches(int fd, int reader)
{
    ck_assert_int_eq(write(fd, "hi", 2), 2);
    ck_assert_int_eq(close(fd), 0);
    char got[2];
    ck_assert_int_eq(read(reader, got, 2), 2);
    ck_assert(memcmp(got, "hi", 2) == 0);
}

/* Nothing queued on the non-blocking inotify descriptor `in`, which watches `what`. */
static void assert_no_event(int in, const char *what)
{
    union {
        struct inotify_event ev;
        char bytes[sizeof(struct inotify_event) + 4096];
    } buf;
    ssize_t n = read(in, &buf, sizeof buf);
    ck_assert_msg(n < 0 && errno == EAGAIN, "%s was opened or written (inotify mask 0x%x)", what,
                  n > 0 ? (unsigned)buf.ev.mask : 0u);
}

static void assert_refused_link(const char *link)
{
    ck_assert_msg(strstr(crmm_last_error(), link) && strstr(crmm_last_error(), "is a symbolic link"),
                  "the error does not name %s as a link: %s", link, crmm_last_error());
}

static crmm_resource *host_resource(void) { return crmm_test_create("host", NULL, NULL); }

/* logging over host on `path` (with `extra` parameters); CRMM_OK or the error. */
static crmm_status make_logger(const char *path, const char *extra, crmm_resource **out)
{
    char params[4400];
    snprintf(params, sizeof params, "file=%s %s", path, extra ? extra : "");
    crmm_resource *host = host_resource();
    crmm_status st = crmm_resource_create("logging", params, host, out);
    crmm_resource_release(host);
    return st;
}

/* `n` allocate/deallocate pairs through mr: 2n lines in its log. */
static void log_pairs(crmm_resource *mr, int n)
{
    for (int i = 0; i < n; i++) {
        void *p = crmm_test_allocate(mr, 64);
        ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 64, NULL));
    }
}

/* ---- the open itself ----------------------------------------------------------------------- */

CRMM_TEST_IN("open", bad_arguments_are_refused)
{
    int fd = -1;
    ck_assert_crmm(crmm_output_file_open(NULL, 0, &fd), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_output_file_open("", 0, &fd), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_output_file_open(path_for("args"), 0, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_output_file_open(path_for("args"), 0x80, &fd), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(fd, -1);
    ck_assert_int_ne(access(path_for("args"), F_OK), 0); /* nothing created */
}

CRMM_TEST_IN("open", a_new_file_is_created_and_an_own_file_rewritten_or_appended)
{
    const char *path = path_for("own");
    unlink(path);
    int fd;
    ck_assert_crmm_ok(crmm_output_file_open(path, 0, &fd));
    ck_assert_int_eq(write(fd, "first\n", 6), 6);
    ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    ck_assert_int_eq(close(fd), 0);
    ck_assert_crmm_ok(crmm_output_file_open(path, CRMM_OUTPUT_APPEND, &fd));
    ck_assert_int_eq(write(fd, "second\n", 7), 7);
    ck_assert_int_eq(close(fd), 0);
    ck_assert_str_eq(crmm_test_file_text(path), "first\nsecond\n");
    ck_assert_crmm_ok(crmm_output_file_open(path, 0, &fd)); /* rewritten: truncated */
    ck_assert_int_eq(write(fd, "third\n", 6), 6);
    ck_assert_int_eq(close(fd), 0);
    ck_assert_str_eq(crmm_test_file_text(path), "third\n");
    unlink(path);
}

CRMM_TEST_IN("open", a_link_is_refused_whatever_it_points_to)
{
    const char *victim, *link = link_to_victim("open", &victim, 0);
    int fd = -1;
    for (unsigned flags = 0; flags < 4; flags++) {
        ck_assert_crmm(crmm_output_file_open(link, flags, &fd), CRMM_ERROR_IO);
        assert_refused_link(link);
    }
    assert_victim_intact(victim);
    /* a link to nothing: the file it names is not created */
    const char *absent = path_for("absent"), *dangling = path_for("dangling");
    unlink(absent);
    ck_assert_int_eq(symlink(absent, dangling), 0);
    ck_assert_crmm(crmm_output_file_open(dangling, 0, &fd), CRMM_ERROR_IO);
    assert_refused_link(dangling);
    ck_assert_int_ne(access(absent, F_OK), 0);
    ck_assert_int_eq(fd, -1);
}

/* Opening a file can itself do something (a watchdog device arms, a tape rewinds, a watcher sees
 * the open), so the target of a link is not opened unless stat says it may be a harmless stream:
 * a link to a regular file is refused without an open of the file, whatever the flags. */
CRMM_TEST_IN("open", a_link_is_refused_without_opening_its_target)
{
    const char *victim, *link = link_to_victim("unopened", &victim, 0);
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ck_assert_int_ge(in, 0);
    ck_assert_int_ge(inotify_add_watch(in, victim, IN_OPEN | IN_MODIFY), 0);
    int fd = -1;
    for (unsigned flags = 0; flags < 4; flags++) {
        ck_assert_crmm(crmm_output_file_open(link, flags, &fd), CRMM_ERROR_IO);
        assert_refused_link(link);
    }
    ck_assert_int_eq(fd, -1);
    assert_no_event(in, victim);
    ck_assert_int_eq(close(in), 0);
    assert_victim_intact(victim);
    /* a character device that is neither /dev/null nor a terminal */
    const char *to_zero = link_to("to_zero", "/dev/zero");
    ck_assert_crmm(crmm_output_file_open(to_zero, 0, &fd), CRMM_ERROR_IO);
    assert_refused_link(to_zero);
    /* /dev/ptmx answers isatty, but opening it makes a new pseudo-terminal: refused, and still
     * refused when the process holds a pseudo-terminal's master on its stdin (a terminal its
     * stdio has open is one crmm may open again, but not that device) */
    if (access("/dev/ptmx", F_OK) == 0) {
        const char *to_ptmx = link_to("to_ptmx", "/dev/ptmx");
        ck_assert_crmm(crmm_output_file_open(to_ptmx, 0, &fd), CRMM_ERROR_IO);
        assert_refused_link(to_ptmx);
        int saved = dup(0);
        ck_assert_int_ge(saved, 0);
        ck_assert_int_eq(close(0), 0);
        int master = open("/dev/ptmx", O_RDWR | O_NOCTTY);
        if (master == 0) {
            ck_assert_crmm(crmm_output_file_open(to_ptmx, 0, &fd), CRMM_ERROR_IO);
            assert_refused_link(to_ptmx);
            close(master);
        } else if (master > 0) {
            close(master);
        }
        ck_assert_int_eq(dup2(saved, 0), 0);
        close(saved);
    }
}

CRMM_TEST_IN("open", a_hard_linked_file_is_refused)
{
    const char *victim, *other = link_to_victim("hard", &victim, 1);
    int fd;
    ck_assert_crmm(crmm_output_file_open(other, 0, &fd), CRMM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "2 hard links"));
    ck_assert_crmm(crmm_output_file_open(other, CRMM_OUTPUT_APPEND, &fd), CRMM_ERROR_IO);
    assert_victim_intact(victim);
}

CRMM_TEST_IN("open", a_character_device_is_written_as_it_is)
{
    int a, b; /* exclusive, yet two at once: there is nothing to overwrite */
    ck_assert_crmm_ok(crmm_output_file_open("/dev/null", CRMM_OUTPUT_EXCLUSIVE, &a));
    ck_assert_crmm_ok(crmm_output_file_open("/dev/null", CRMM_OUTPUT_EXCLUSIVE, &b));
    ck_assert_int_eq(close(a), 0);
    ck_assert_int_eq(close(b), 0);
    int fd;
    ck_assert_crmm(crmm_output_file_open(tmp_dir, 0, &fd), CRMM_ERROR_IO); /* a directory */
}

/* A link to a stream with nothing to overwrite is followed (/dev/stderr is one: a link to the
 * process's descriptor 2): a link to /dev/null, and one to a pipe's write end through /proc. */
CRMM_TEST_IN("open", a_link_to_a_pipe_or_dev_null_is_followed)
{
    const char *to_null = path_for("to_null"), *to_pipe = path_for("to_pipe");
    unlink(to_null);
    unlink(to_pipe);
    ck_assert_int_eq(symlink("/dev/null", to_null), 0);
    int fd = -1;
    ck_assert_crmm_ok(crmm_output_file_open(to_null, 0, &fd));
    ck_assert_int_eq(write(fd, "x", 1), 1);
    ck_assert_int_eq(close(fd), 0);
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    char target[64];
    snprintf(target, sizeof target, "/proc/self/fd/%d", pipefd[1]);
    ck_assert_int_eq(symlink(target, to_pipe), 0);
    ck_assert_crmm_ok(crmm_output_file_open(to_pipe, CRMM_OUTPUT_APPEND, &fd));
    ck_assert_int_eq(write(fd, "hi", 2), 2);
    ck_assert_int_eq(close(fd), 0);
    char got[2];
    ck_assert_int_eq(read(pipefd[0], got, 2), 2);
    ck_assert(memcmp(got, "hi", 2) == 0);
    close(pipefd[0]);
    close(pipefd[1]);
}

/* A link to a named pipe is followed once the pipe has a reader (without one there is nothing to
 * write to, and it is refused). */
CRMM_TEST_IN("open", a_link_to_a_named_pipe_with_a_reader_is_followed)
{
    const char *fifo = path_for("fifo");
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *link = link_to("to_fifo", fifo);
    int fd = -1;
    ck_assert_crmm(crmm_output_file_open(link, 0, &fd), CRMM_ERROR_IO);
    int reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ck_assert_int_ge(reader, 0);
    ck_assert_crmm_ok(crmm_output_file_open(link, CRMM_OUTPUT_APPEND, &fd));
    assert_reaches(fd, reader);
    ck_assert_int_eq(close(reader), 0);
}

/* Another user's named pipe, with a reader, at a name crmm would write (one made in a shared
 * directory before crmm creates its file there) is refused: its owner would receive the lines,
 * and could stop the writer by never reading. Giving a pipe another owner needs root; without it
 * the test checks that the user's own pipe is written. */
CRMM_TEST_IN("open", another_users_named_pipe_is_refused)
{
    const char *fifo = path_for("others_fifo");
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0666), 0);
    bool other = geteuid() == 0 && chown(fifo, 65534, 65534) == 0;
    int reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ck_assert_int_ge(reader, 0);
    int fd = -1;
    if (other) {
        ck_assert_crmm(crmm_output_file_open(fifo, 0, &fd), CRMM_ERROR_IO);
        ck_assert_error_contains("it is a pipe that belongs to user 65534");
        ck_assert_int_eq(fd, -1);
    } else {
        ck_assert_crmm_ok(crmm_output_file_open(fifo, 0, &fd));
        assert_reaches(fd, reader);
    }
    ck_assert_int_eq(close(reader), 0);
    unlink(fifo);
}

/* A link to a terminal (a pseudo-terminal's slave here) is followed. */
CRMM_TEST_IN("open", a_link_to_a_terminal_is_followed)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) {
        fprintf(stderr, "no pseudo-terminal here (%s): a link to a terminal is not tried\n", strerror(errno));
        return;
    }
    ck_assert_int_eq(grantpt(master), 0);
    ck_assert_int_eq(unlockpt(master), 0);
    const char *slave = ptsname(master);
    ck_assert_ptr_nonnull(slave);
    const char *link = link_to("to_tty", slave);
    int fd = -1;
    ck_assert_crmm_ok(crmm_output_file_open(link, 0, &fd));
    ck_assert(isatty(fd));
    assert_reaches(fd, master);
    ck_assert_int_eq(close(master), 0);
}

/* ---- the four outputs ------------------------------------------------------------------------ */

/* _i = 0: a symbolic link, 1: a hard-linked file */
CRMM_LOOP_TEST_IN("outputs", logging_refuses_a_link_or_a_hard_linked_file, 2)
{
    const char *victim, *link = link_to_victim(_i ? "logging.hard" : "logging", &victim, _i);
    crmm_resource *mr = NULL;
    ck_assert_crmm(make_logger(link, NULL, &mr), CRMM_ERROR_IO);
    if (_i)
        ck_assert_msg(strstr(crmm_last_error(), "2 hard links"), "%s", crmm_last_error());
    else
        assert_refused_link(link);
    ck_assert_ptr_null(mr);
    assert_victim_intact(victim);
}

CRMM_TEST_IN("outputs", logging_rewrites_its_own_file)
{
    const char *path = path_for("logging.own.csv");
    write_text(path, "an old log that is longer than the new one will be\nand has a second line\n");
    crmm_resource *mr;
    ck_assert_crmm_ok(make_logger(path, NULL, &mr));
    log_pairs(mr, 1);
    crmm_resource_release(mr);
    char *text = crmm_test_read_file_or_fail(path);
    ck_assert_msg(strncmp(text, "Thread,Time,Action,Pointer,Size,Stream\n", 39) == 0, "not rewritten:\n%s", text);
    ck_assert_int_eq(crmm_test_count(text, "\n"), 3);
    ck_assert_ptr_null(strstr(text, "old log"));
    free(text);
    unlink(path);
}

CRMM_TEST_IN("outputs", debug_log_refuses_a_link)
{
    const char *victim, *link = link_to_victim("debug", &victim, 0);
    ck_assert_crmm(crmm_log_set_file(link), CRMM_ERROR_IO);
    assert_refused_link(link);
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
    crmm_log(CRMM_LOG_ERROR, "a line that goes to stderr");
    assert_victim_intact(victim);
    /* the caller's own file is appended to */
    const char *own = path_for("debug.own");
    write_text(own, "earlier lines\n");
    ck_assert_crmm_ok(crmm_log_set_file(own));
    crmm_log(CRMM_LOG_ERROR, "a line for the own file");
    crmm_log_flush();
    ck_assert_crmm_ok(crmm_log_set_file(NULL));
    const char *text = crmm_test_file_text(own);
    ck_assert_msg(strncmp(text, "earlier lines\n", 14) == 0 && strstr(text, "a line for the own file"), "%s", text);
}

/* Needs a process whose logger has not read its environment yet: every Check test is one. */
CRMM_TEST_IN("outputs", debug_log_from_the_environment_refuses_a_link)
{
    const char *victim, *link = link_to_victim("debugenv", &victim, 0);
    setenv("CRMM_DEBUG_LOG_FILE", link, 1);
    crmm_log(CRMM_LOG_ERROR, "a line that goes to stderr");
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
    assert_victim_intact(victim);
    unsetenv("CRMM_DEBUG_LOG_FILE");
}

CRMM_TEST_IN("outputs", arena_dump_refuses_a_link)
{
    const char *victim, *link = link_to_victim("dump", &victim, 0);
    char params[4400];
    snprintf(params, sizeof params, "arena_size=4MiB dump_log_on_failure=true dump_file=%s", link);
    crmm_resource *host = host_resource();
    crmm_resource *mr = crmm_test_create("arena", params, host);
    void *p;
    ck_assert_crmm(crmm_resource_allocate(mr, 8u << 20, NULL, &p), CRMM_ERROR_OUT_OF_MEMORY); /* dump on failure */
    assert_victim_intact(victim);
    ck_assert_crmm(crmm_resource_control(mr, CRMM_ARENA_DUMP, (void *)link), CRMM_ERROR_IO); /* on request */
    assert_refused_link(link);
    assert_victim_intact(victim);
    /* the caller's own file is appended to */
    const char *own = path_for("dump.own");
    write_text(own, "earlier dump\n");
    ck_assert_crmm_ok(crmm_resource_control(mr, CRMM_ARENA_DUMP, (void *)own));
    const char *text = crmm_test_file_text(own);
    ck_assert_msg(strncmp(text, "earlier dump\n", 13) == 0 && strstr(text, "state on request"), "%s", text);
    crmm_test_release(mr, host);
}

/* ---- one file, one writer -------------------------------------------------------------------- */

/* A second logging resource of this process on the same file writes through the first's sink:
 * the file keeps the first's lines and one header, both resources' lines are there whole, and the
 * second goes on writing once the first is gone. Once both are gone a third makes the file anew. */
CRMM_TEST_IN("one_writer", a_second_logging_resource_on_one_file_shares_it)
{
    const char *path = path_for("shared.csv");
    crmm_resource *first, *second = NULL, *third = NULL;
    ck_assert_crmm_ok(make_logger(path, NULL, &first));
    log_pairs(first, 1000);
    ck_assert_crmm_ok(make_logger(path, NULL, &second));
    ck_assert_crmm_ok(make_logger(path, "auto_flush=true", &third)); /* and its lines are written at once */
    log_pairs(second, 1000);
    log_pairs(first, 1000);
    crmm_resource_release(first);
    log_pairs(third, 500);
    ck_assert_int_eq(crmm_test_count_lines(path), 1 + 7000); /* auto_flush: written by now */
    crmm_resource_release(second);
    crmm_resource_release(third);
    char *text = crmm_test_read_file_or_fail(path);
    ck_assert_int_eq(crmm_test_count(text, "\n"), 1 + 7000); /* one header, every line of the three */
    ck_assert_int_eq(crmm_test_count(text, "Thread,Time"), 1);
    ck_assert_int_eq(crmm_test_count(text, ",allocate,"), 3500);
    free(text);
    ck_assert_crmm_ok(make_logger(path, NULL, &second)); /* a new writer: the file made anew */
    crmm_resource_release(second);
    ck_assert_int_eq(crmm_test_count_lines(path), 1);
    unlink(path);
}

CRMM_TEST_IN("one_writer", another_process_on_the_same_file_is_refused)
{
    const char *path = path_for("shared2.csv");
    crmm_resource *first;
    ck_assert_crmm_ok(make_logger(path, "auto_flush=true", &first));
    log_pairs(first, 100);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        crmm_resource *mr = NULL;
        crmm_status st = make_logger(path, NULL, &mr);
        bool said = strstr(crmm_last_error(), path) && strstr(crmm_last_error(), "%p");
        _exit(st == CRMM_ERROR_IO && !mr && said ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's logging resource was not refused");
    log_pairs(first, 100);
    crmm_resource_release(first);
    ck_assert_int_eq(crmm_test_count_lines(path), 1 + 400);
    unlink(path);
}

/* ---- the config and the environment ---------------------------------------------------------- */

CRMM_TEST_IN("privileges", a_config_others_can_write_is_refused)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/private.%ld", tmp_dir, (long)getpid());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(chmod(dir, 0700), 0);
    char path[4300];
    snprintf(path, sizeof path, "%s/crmm.ini", dir);
    write_text(path, "[resource.h]\nplugin = host\n");
    ck_assert_int_eq(chmod(path, 0646), 0);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(cfg);
    char owner[64];
    snprintf(owner, sizeof owner, "owner %u", (unsigned)geteuid());
    const char *e = crmm_last_error();
    ck_assert_msg(strstr(e, path) && strstr(e, "writable by others") && strstr(e, owner) && strstr(e, "mode 0646"),
                  "unclear: %s", e);
    ck_assert_crmm(crmm_init(path), CRMM_ERROR_CONFIG);
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_crmm_ok(crmm_config_load_file(path, &cfg));
    crmm_config_free(cfg);
    /* an ACL that lets another user write it (read from the file opened) */
    unsigned user = crmm_test_other_uid();
    if (crmm_test_set_acl(path, 0x02, user, 6)) {
        char says[64];
        snprintf(says, sizeof says, "its ACL lets user %u write it", user);
        ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG);
        ck_assert_msg(strstr(crmm_last_error(), says), "%s", crmm_last_error());
        ck_assert(crmm_test_set_acl(path, 0x02, user, 4));
        ck_assert_crmm_ok(crmm_config_load_file(path, &cfg));
        crmm_config_free(cfg);
    }
    unlink(path);
    rmdir(dir);
}

CRMM_TEST_IN("privileges", a_privileged_process_ignores_the_environment)
{
    const char *plugins = getenv("CRMM_PLUGIN_PATH"); /* the build tree's, from the test harness */
    ck_assert_ptr_nonnull(plugins);
    char *plugin_dirs = strdup(plugins);
    const char *config = path_for("env.ini");
    write_text(config, "[resource.h]\nplugin = host\n");
    setenv("CRMM_CONFIG", config, 1);
    setenv("CRMM_LOG_FILE", path_for("env.csv"), 1);
    char buf[4096], sp[16384];
    /* not privileged: the variables count (so that what follows is not vacuous) */
    ck_assert_str_eq(crmm_config_default_file(buf, sizeof buf), config);
    ck_assert_ptr_nonnull(strstr(crmm_plugin_search_path(NULL, sp, sizeof sp), plugin_dirs));
    ck_assert_str_eq(crmm_getenv("CRMM_LOG_FILE"), path_for("env.csv"));

    const char *debug = path_for("env.debug");
    ck_assert_crmm_ok(crmm_log_set_file(debug));
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
    pretend_privileged = true;
    ck_assert_ptr_null(crmm_getenv("CRMM_LOG_FILE"));
    const char *dflt = crmm_config_default_file(buf, sizeof buf);
    ck_assert_msg(!dflt || strcmp(dflt, config) != 0, "$CRMM_CONFIG was used");
    ck_assert_ptr_null(strstr(crmm_plugin_search_path(NULL, sp, sizeof sp), plugin_dirs));
    /* the logging plugin gets no file from $CRMM_LOG_FILE (found through the config's path): the
     * config is refused when it is checked, as its build would be */
    char text[20000];
    snprintf(text, sizeof text, "[crmm]\nplugin_path = %s\n[resource.h]\nplugin = host\n[resource.l]\nplugin = logging\nupstream = h\n",
             plugin_dirs);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_string(text, "privileged", &cfg), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(cfg);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no log file"));
    ck_assert_int_ne(access(path_for("env.csv"), F_OK), 0);
    pretend_privileged = false;
    ck_assert_crmm_ok(crmm_log_set_file(NULL));
    const char *log = crmm_test_file_text(debug);
    ck_assert_msg(strstr(log, "ignoring $CRMM_CONFIG: this process runs with elevated privileges") &&
                  strstr(log, "ignoring $CRMM_PLUGIN_PATH") && strstr(log, "ignoring $CRMM_LOG_FILE"),
                  "the debug log does not say what was ignored:\n%s", log);
    free(plugin_dirs);
    unsetenv("CRMM_CONFIG");
    unsetenv("CRMM_LOG_FILE");
}

/* Needs a process whose logger has not read its environment yet: every Check test is one. */
CRMM_TEST_IN("privileges", a_privileged_process_ignores_the_log_level_and_debug_file)
{
    const char *debug = path_for("priv.debug");
    unlink(debug);
    setenv("CRMM_LOG_LEVEL", "trace", 1);
    setenv("CRMM_DEBUG_LOG_FILE", debug, 1);
    pretend_privileged = true;
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_WARN);
    ck_assert(!crmm_log_level_from_env());
    ck_assert_str_eq(crmm_log_get_file(), "stderr");
    ck_assert_int_ne(access(debug, F_OK), 0);
    /* said once the level shows info lines */
    const char *own = path_for("priv.own");
    ck_assert_crmm_ok(crmm_log_set_file(own));
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
    ck_assert_crmm_ok(crmm_log_set_file(NULL));
    const char *log = crmm_test_file_text(own);
    ck_assert_msg(strstr(log, "ignoring $CRMM_LOG_LEVEL: this process runs with elevated privileges") &&
                  strstr(log, "ignoring $CRMM_DEBUG_LOG_FILE"), "the log does not say what was ignored:\n%s", log);
    pretend_privileged = false;
    unsetenv("CRMM_LOG_LEVEL");
    unsetenv("CRMM_DEBUG_LOG_FILE");
}

int main(void)
{
    tmp_dir = crmm_test_tmpdir();
    if (!tmp_dir)
        return 1;
    Suite *s = suite_create("file_policy");
    crmm_test_tcase(s, "open", 0);
    crmm_test_tcase(s, "outputs", 0);
    crmm_test_tcase(s, "one_writer", 0);
    crmm_test_tcase(s, "privileges", 0);
    int rc = crmm_test_run(s);
    free(tmp_dir);
    return rc;
}
