/* check_fork_exit.c — what crmm promises across fork() and at exit, over host memory, as stress
 * tests with a bounded count of processes.
 *
 * fork: threads allocate and free through a stack of resources while the test forks child
 * after child; each child allocates and frees through the same stack, then _exits. A lock that a
 * thread held at the fork would stay held in the child for ever: the child would hang. The
 * parent waits for each child up to a deadline far beyond what the child needs, and a child
 * that does not finish is killed and counted as a hang.
 *
 * exit: a child process starts threads that allocate and free through a stack without end and
 * then calls exit() while they run. Nothing that exit runs (library destructors, atexit
 * handlers) may free what those threads still use: the child must exit with status 0, not die
 * of heap corruption (abort, SIGSEGV) or hang. */
#include "build_config.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "test_support.h"

#define WORKERS 4
#define FORKS 60            /* children per fork test */
#define EXITS 150           /* children per exit test */
#define LIVE_PER_WORKER 8   /* blocks a worker holds at once */
#define WAIT_SECONDS 3      /* a child still running after this long counts as hung */

/* The stacks under test, bottom first; each layer over the one before it. */
typedef struct stack_spec {
    const char *plugin[3];
    const char *params[3];
} stack_spec;

static const stack_spec stacks[] = {
    {{"host"}, {""}},
    {{"host", "pool"}, {"", "initial_size=1MiB thread_cache=off"}},
    {{"host", "pool"}, {"", "initial_size=1MiB thread_cache=on"}},
    {{"host", "fixed_size"}, {"", "block_size=4KiB blocks_to_preallocate=4"}},
    {{"host", "binning"}, {"", "bins=256:1KiB:4KiB blocks_to_preallocate=4"}},
    {{"host", "pool", "binning"}, {"", "initial_size=1MiB thread_cache=on", "bins=256:1KiB:4KiB blocks_to_preallocate=4"}},
    {{"host", "tracking"}, {"", ""}},
    {{"host", "aligned"}, {"", "alignment=4096"}},
    {{"host", "pool", "statistics"}, {"", "initial_size=1MiB thread_cache=on", ""}},
};
#define N_STACKS ((int)(sizeof stacks / sizeof stacks[0]))

/* "pool over host" and the like, into buf. */
static const char *stack_name(const stack_spec *spec, char *buf, size_t size)
{
    buf[0] = 0;
    for (int i = 2; i >= 0; i--)
        if (spec->plugin[i])
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s (%s)", buf[0] ? " over " : "", spec->plugin[i],
                     spec->params[i]);
    return buf;
}

/* In a test: the stack (one reference, to its top). */
static crmm_resource *make_stack(const stack_spec *spec)
{
    crmm_resource *top = NULL;
    for (int i = 0; i < 3 && spec->plugin[i]; i++) {
        crmm_resource *r = crmm_test_create(spec->plugin[i], spec->params[i], top);
        if (top)
            crmm_resource_release(top); /* the layer above holds it */
        top = r;
    }
    return top;
}

/* The size of the n-th request: small ones of several sizes (the bins, the caches, the host
 * shards), and now and then one of 64 KiB (past the bins, to the upstream). fixed_size takes
 * only up to its block. */
static size_t request_size(uint64_t n, size_t most)
{
    size_t s = n % 16 == 15 ? 64 << 10 : (size_t)(n * 2654435761u % 4000) + 1;
    return s < most ? s : most;
}

typedef struct worker {
    pthread_t thread;
    crmm_resource *mr;
    size_t most;
    atomic_int *stop;      /* NULL: run until the process ends */
    atomic_ulong *ops;     /* operations done, by all workers */
    unsigned seed;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    void *live[LIVE_PER_WORKER] = {0};
    size_t size[LIVE_PER_WORKER] = {0};
    uint64_t n = w->seed;
    for (unsigned i = 0; !w->stop || !atomic_load(w->stop); i = (i + 1) % LIVE_PER_WORKER) {
        if (live[i] && crmm_resource_deallocate(w->mr, live[i], size[i], NULL) == CRMM_OK)
            live[i] = NULL;
        size[i] = request_size(n++, w->most);
        if (crmm_resource_allocate(w->mr, size[i], NULL, &live[i]) != CRMM_OK)
            live[i] = NULL;
        atomic_fetch_add(w->ops, 1);
    }
    for (unsigned i = 0; i < LIVE_PER_WORKER; i++)
        if (live[i])
            crmm_resource_deallocate(w->mr, live[i], size[i], NULL);
    return NULL;
}

/* Start n workers on mr; stop NULL: detached, without end. Returns whether all started. */
static int start_workers(worker *w, int n, crmm_resource *mr, size_t most, atomic_int *stop, atomic_ulong *ops)
{
    for (int i = 0; i < n; i++) {
        w[i] = (worker){.mr = mr, .most = most, .stop = stop, .ops = ops, .seed = 1000u * (unsigned)i + 1};
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0)
            return 0;
        if (!stop)
            pthread_detach(w[i].thread);
    }
    return 1;
}

/* Wait until the workers have done at least `ops` operations in all (bounded in tries). */
static int wait_for_ops(atomic_ulong *done, unsigned long ops)
{
    for (long tries = 0; tries < 100L * 1000 * 1000; tries++) {
        if (atomic_load(done) >= ops)
            return 1;
        sched_yield();
    }
    return 0;
}

typedef enum child_end { CHILD_OK, CHILD_FAILED, CHILD_HUNG } child_end;

/* Wait for child pid at most WAIT_SECONDS; a child still running then is killed. *why says how
 * a child that did not end with status 0 ended. */
static child_end wait_bounded(pid_t pid, char *why, size_t why_size)
{
    int status;
    if (!crmm_test_wait_child(pid, WAIT_SECONDS, &status)) {
        snprintf(why, why_size, "still running after %d s (or not to be waited for): hung", WAIT_SECONDS);
        return CHILD_HUNG;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return CHILD_OK;
    if (WIFSIGNALED(status))
        snprintf(why, why_size, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(why, why_size, "exit status %d", WEXITSTATUS(status));
    return CHILD_FAILED;
}

static size_t most_of(const stack_spec *spec)
{
    for (int i = 0; i < 3 && spec->plugin[i]; i++)
        if (strcmp(spec->plugin[i], "fixed_size") == 0)
            return 4096;
    return SIZE_MAX;
}

/* ---- fork ----------------------------------------------------------------------------------- */

/* In the child: allocate and free through mr as the parent's threads did (every size, so every
 * layer's locks and many of the host's shards are taken); status 0 when all went well. */
static int child_uses(crmm_resource *mr, size_t most)
{
    enum { N = 64 };
    void *p[N];
    size_t s[N];
    for (int i = 0; i < N; i++) {
        s[i] = request_size((uint64_t)i * 7 + 3, most);
        if (crmm_resource_allocate(mr, s[i], NULL, &p[i]) != CRMM_OK)
            return 2;
        memset(p[i], 0x5A, s[i]);
    }
    for (int i = 0; i < N; i++)
        if (crmm_resource_deallocate(mr, p[i], s[i], NULL) != CRMM_OK)
            return 3;
    return 0;
}

/* Up to FORKS children, each forked once the workers counting into `ops` have done `busy` more
 * operations (they are at work at the fork) and running child(arg) as its exit status, one at a
 * time; stops at the first that hangs or fails. Stops the workers (*stop) and joins them. True
 * when every child ended with status 0; else *why says how one ended. */
static bool fork_children_at_work(worker *w, atomic_int *stop, atomic_ulong *ops, unsigned long busy,
                                  int (*child)(void *), void *arg, char *why, size_t why_size)
{
    bool ok = true;
    for (int k = 0; k < FORKS && ok; k++) {
        unsigned long before = atomic_load(ops);
        ck_assert(wait_for_ops(ops, before + busy));
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            _exit(child(arg));
        ok = wait_bounded(pid, why, why_size) == CHILD_OK;
    }
    atomic_store(stop, 1);
    for (int i = 0; i < WORKERS; i++) {
        void *failed = NULL;
        ck_assert_int_eq(pthread_join(w[i].thread, &failed), 0);
        ck_assert_msg(failed == NULL, "worker %d stopped on a failed call", i);
    }
    return ok;
}

typedef struct stack_use {
    crmm_resource *mr;
    size_t most;
} stack_use;

static int child_uses_the_stack(void *arg)
{
    stack_use *u = arg;
    return child_uses(u->mr, u->most);
}

CRMM_LOOP_TEST_IN("fork", a_child_forked_while_threads_allocate_can_allocate, N_STACKS)
{
    const stack_spec *spec = &stacks[_i];
    crmm_resource *mr = make_stack(spec);
    size_t most = most_of(spec);
    atomic_int stop = 0;
    atomic_ulong ops = 0;
    worker w[WORKERS];
    ck_assert(start_workers(w, WORKERS, mr, most, &stop, &ops));
    char why[160] = "";
    stack_use use = {mr, most};
    bool ok = fork_children_at_work(w, &stop, &ops, 16, child_uses_the_stack, &use, why, sizeof why);
    char name[200];
    ck_assert_msg(ok, "%s: a forked child: %s", stack_name(spec, name, sizeof name), why);
    ck_assert_uint_eq(crmm_test_query(mr, CRMM_QUERY_ALLOCATIONS), 0);
    crmm_resource_release(mr);
}

/* The core's own locks: threads take the current resource's reference and let it go (the device
 * registry's lock), log lines (the log's lock), build resources by plugin name (the plugin
 * loader's lock) and load the config again (which retires the one before: the list the child
 * walks) while the test forks; each child does the same. */
static char runtime_config[] = "/tmp/crmm-fork-XXXXXX";

static void *runtime_worker(void *arg)
{
    worker *w = arg;
    for (unsigned i = 0; !atomic_load(w->stop); i++) {
        crmm_resource *mr = crmm_get_current_device_resource_ref(), *h = NULL;
        crmm_resource_release(mr);
        crmm_log(CRMM_LOG_INFO, "worker %u, round %u", w->seed, i);
        if (i % 16 == 0 && crmm_resource_create("host", "", NULL, &h) == CRMM_OK)
            crmm_resource_release(h);
        if (i % 64 == 0 && crmm_init(runtime_config) != CRMM_OK)
            return (void *)1;
        atomic_fetch_add(w->ops, 1);
    }
    return NULL;
}

static int child_uses_the_runtime(void *unused)
{
    (void)unused;
    crmm_resource *mr = crmm_get_current_device_resource_ref(), *h = NULL;
    if (!mr)
        return 2;
    int status = child_uses(mr, 4096);
    crmm_resource_release(mr);
    crmm_log(CRMM_LOG_INFO, "child");
    if (crmm_resource_create("host", "", NULL, &h) != CRMM_OK)
        return 4;
    crmm_resource_release(h);
    if (crmm_init(runtime_config) != CRMM_OK)
        return 5;
    return status;
}

CRMM_TEST_IN("fork", a_child_forked_while_threads_use_the_runtime_can_use_it)
{
    /* no device for this process: CUDA does not survive fork, and a child of a parent that used
     * it could not ask for a device; the host config serves device 0 in both */
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    int fd = mkstemp(runtime_config);
    ck_assert_int_ge(fd, 0);
    const char text[] = "[resource.h]\nplugin = host\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    ck_assert_crmm_ok(crmm_init(runtime_config));
    crmm_log_level level = crmm_log_get_level();
    ck_assert_crmm_ok(crmm_log_set_file("/dev/null"));
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO));
    atomic_int stop = 0;
    atomic_ulong ops = 0;
    worker w[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (worker){.stop = &stop, .ops = &ops, .seed = (unsigned)i};
        ck_assert_int_eq(pthread_create(&w[i].thread, NULL, runtime_worker, &w[i]), 0);
    }
    char why[160] = "";
    bool ok = fork_children_at_work(w, &stop, &ops, 16, child_uses_the_runtime, NULL, why, sizeof why);
    unlink(runtime_config);
    ck_assert_msg(ok, "a forked child: %s", why);
    crmm_log_set_level(level);
    crmm_log_set_file(NULL);
    crmm_finalize();
}

/* The arena's registry of live arenas is one for the process, and so is each plugin's lock of
 * graph records, which every arena and fixed_size destroy takes: threads make arenas and
 * binnings (whose bins are fixed_size), use the arenas from short-lived threads of their own
 * (whose exit retires their thread arenas under the registry's lock) and destroy both while the
 * test forks; each child makes, uses and destroys an arena and a binning of its own. */
#define ARENAS_PER_MAKER 16 /* a thread that used them all retires 16 thread arenas at its exit */

static void *arena_user(void *arg)
{
    crmm_resource **arenas = arg;
    for (int i = 0; i < ARENAS_PER_MAKER; i++) {
        void *p;
        if (arenas[i] && crmm_resource_allocate(arenas[i], 512, NULL, &p) == CRMM_OK)
            crmm_resource_deallocate(arenas[i], p, 512, NULL);
    }
    return NULL;
}

static crmm_resource *over_new_host(const char *plugin, const char *params)
{
    crmm_resource *host = NULL, *r = NULL;
    if (crmm_resource_create("host", "", NULL, &host) != CRMM_OK)
        return NULL;
    crmm_resource_create(plugin, params, host, &r);
    crmm_resource_release(host);
    return r;
}

static crmm_resource *new_arena(void) { return over_new_host("arena", "arena_size=16MiB"); }
static crmm_resource *new_binning(void) { return over_new_host("binning", "bins=256:4KiB blocks_to_preallocate=4"); }

static void *arena_maker(void *arg)
{
    worker *w = arg;
    crmm_resource *arenas[ARENAS_PER_MAKER];
    for (int i = 0; i < ARENAS_PER_MAKER; i++)
        arenas[i] = new_arena();
    for (unsigned round = 0; !atomic_load(w->stop); round++) {
        pthread_t t;
        if (pthread_create(&t, NULL, arena_user, arenas) == 0)
            pthread_join(t, NULL);
        int k = round % ARENAS_PER_MAKER; /* one made anew each round */
        crmm_resource_release(arenas[k]);
        arenas[k] = new_arena();
        crmm_resource_release(new_binning());
        atomic_fetch_add(w->ops, 1);
    }
    for (int i = 0; i < ARENAS_PER_MAKER; i++)
        crmm_resource_release(arenas[i]);
    return NULL;
}

static int child_makes_an_arena_and_a_binning(void *unused)
{
    (void)unused;
    crmm_resource *arena = new_arena();
    int status = arena ? child_uses(arena, 4096) : 7;
    crmm_resource_release(arena);
    crmm_resource *binning = new_binning();
    if (status == 0)
        status = binning ? child_uses(binning, 4096) : 8;
    crmm_resource_release(binning);
    return status;
}

CRMM_TEST_IN("fork", a_child_forked_while_threads_make_arenas_and_binnings_can_make_them)
{
    atomic_int stop = 0;
    atomic_ulong ops = 0;
    worker w[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (worker){.stop = &stop, .ops = &ops};
        ck_assert_int_eq(pthread_create(&w[i].thread, NULL, arena_maker, &w[i]), 0);
    }
    char why[160] = "";
    bool ok = fork_children_at_work(w, &stop, &ops, 4, child_makes_an_arena_and_a_binning, NULL, why, sizeof why);
    ck_assert_msg(ok, "a forked child making an arena and a binning: %s", why);
}

/* ---- exit ----------------------------------------------------------------------------------- */

/* In the child: workers without end, then exit() while they run. */
static void child_exits_under_load(crmm_resource *mr, size_t most)
{
    static atomic_ulong ops;
    static worker w[WORKERS];
    if (!start_workers(w, WORKERS, mr, most, NULL, &ops))
        _exit(5);
    if (!wait_for_ops(&ops, 64 * WORKERS))
        _exit(6);
    exit(0);
}

CRMM_LOOP_TEST_IN("exit", exit_while_threads_allocate_is_clean, N_STACKS)
{
    const stack_spec *spec = &stacks[_i];
    crmm_resource *mr = make_stack(spec);
    size_t most = most_of(spec);
    int bad = 0;
    char why[160] = "";
    for (int k = 0; k < EXITS && !bad; k++) {
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            child_exits_under_load(mr, most);
        bad = wait_bounded(pid, why, sizeof why) != CHILD_OK;
    }
    char name[200];
    ck_assert_msg(!bad, "%s: a child that exits while its threads allocate: %s", stack_name(spec, name, sizeof name), why);
    crmm_resource_release(mr);
}

/* Under ThreadSanitizer: its lock-order detector follows at most 64 locks held by one thread,
 * and before a fork crmm holds every guarded lock at once (tracking's table alone has 64
 * shards); that detector is off for this program. Other builds never call this. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "detect_deadlocks=0"; }

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

int main(void)
{
#ifdef UNDER_ASAN
    /* AddressSanitizer's own allocator takes locks that it does not take around fork(): a child
     * forked while other threads call malloc hangs inside the sanitizer's malloc, whatever crmm
     * does; and its leak check at exit stops threads in the middle of their allocations. */
    puts("SKIP: fork and exit under load are not checked under AddressSanitizer (its allocator is not fork-safe)");
    return CRMM_TEST_SKIP;
#endif
#ifdef UNDER_TSAN
    /* ThreadSanitizer runs a forked child of a multithreaded parent single-threaded and slows
     * every guarded lock by its bookkeeping: 150 children per stack did not end within minutes.
     * The race this program looks for is checked by the plain build (which crashed or hung on the
     * code before the fork guards). */
    puts("SKIP: fork and exit under load are not checked under ThreadSanitizer (too slow to finish)");
    return CRMM_TEST_SKIP;
#endif
    Suite *s = suite_create("fork_exit");
    crmm_test_tcase(s, "fork", 600);
    crmm_test_tcase(s, "exit", 600);
    return crmm_test_run(s);
}
