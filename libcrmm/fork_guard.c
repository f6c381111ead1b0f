/* fork_guard.c — the process-wide list of the plugins' fork guards (crmm/fork_guard.h) and the
 * pthread_atfork handlers that run them, with the core's own locks (internal.h).
 *
 * The list is doubly linked, newest at the head. Before a fork the handlers take the list's mutex,
 * then each guard's locks, then the log's lock; after it they release them in the reverse order,
 * so a guard cannot come or go while its locks are held for a fork. The core's other locks (the
 * current resources' registry, the config and its instances, the plugin loader, the logging
 * switch, the graph owners) are not taken before a fork: code holding them builds resources and loads plugins,
 * which may call pthread_atfork (a library initialized there may; crmm's logging and async
 * plugins do at their first resource), and glibc's fork holds its own lock against that call
 * while the handlers run. The child makes them anew instead: the thread that held one does not
 * exist there, and what they guard is pointers stored whole. The handlers are installed when the
 * library is loaded, so that a child makes the core's locks anew before any plugin adds a guard. */
#include "build_config.h"
#include <pthread.h>
#include <crmm/fork_guard.h>
#include "internal.h"

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static crmm_fork_guard *newest, *oldest;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

static void before_fork(void)
{
    pthread_mutex_lock(&list_lock);
    for (crmm_fork_guard *g = newest; g; g = g->older)
        g->prepare(g->arg);
    crmm_log_fork_lock();
}

static void after_fork_in_parent(void)
{
    crmm_log_fork_unlock();
    for (crmm_fork_guard *g = oldest; g; g = g->newer)
        g->parent(g->arg);
    pthread_mutex_unlock(&list_lock);
}

static void after_fork_in_child(void)
{
    /* the parent's forking thread took these, and that thread is this one in the child: released,
     * as in the parent (made anew, they would still count as held for ThreadSanitizer, which then
     * saw a lock-order cycle with the logging plugin's own fork lock) */
    crmm_log_fork_unlock();
    for (crmm_fork_guard *g = oldest; g; g = g->newer)
        g->child(g->arg);
    pthread_mutex_unlock(&list_lock);
    crmm_runtime_fork_child();
    crmm_plugin_loader_fork_child();
    crmm_logging_switch_fork_child();
    crmm_graph_owner_fork_child();
}

static void install_handlers(void) { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); }

__attribute__((constructor)) static void install_at_load(void) { pthread_once(&handlers_once, install_handlers); }

void crmm_fork_guard_add(crmm_fork_guard *g)
{
    if (!g)
        return; /* nothing to run at fork: the list stays as it is */
    pthread_once(&handlers_once, install_handlers);
    pthread_mutex_lock(&list_lock);
    g->older = newest;
    g->newer = NULL;
    if (newest)
        newest->newer = g;
    else
        oldest = g;
    newest = g;
    pthread_mutex_unlock(&list_lock);
}

void crmm_fork_guard_remove(crmm_fork_guard *g)
{
    if (!g)
        return; /* never added, as a guard with zero links */
    pthread_mutex_lock(&list_lock);
    if ((!g->newer && newest != g) || (!g->older && oldest != g)) { /* not in the list: removed already, or never added */
        pthread_mutex_unlock(&list_lock);
        return;
    }
    if (g->newer)
        g->newer->older = g->older;
    else
        newest = g->older;
    if (g->older)
        g->older->newer = g->newer;
    else
        oldest = g->newer;
    g->older = g->newer = NULL;
    pthread_mutex_unlock(&list_lock);
}
