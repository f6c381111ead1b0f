/* crmm/fork_guard.h — making a plugin's locks safe across fork().
 *
 * A child forked from a multithreaded parent has only the thread that forked. A lock that
 * another thread held at the fork stays held in the child for ever, and the child's first
 * allocation through it hangs. A plugin therefore adds one guard per lock-owning object (a
 * resource, or a table its resources share) to crmm's one process-wide list; crmm registers
 * pthread_atfork handlers once and, around every fork():
 *  - before it, takes the list's own lock, then calls each guard's `prepare` (which takes the
 *    object's locks) from the newest guard to the oldest: a resource is made after its
 *    upstream, so an adaptor's locks are taken before those of the resources it calls into,
 *    the order in which the plugins' code takes them;
 *  - after it, in the parent calls each guard's `parent` (which releases them) and in the child
 *    each guard's `child` (which releases them, or makes them anew), then releases the list.
 * So in the child every guarded lock is free and the data it guards is as it was between two
 * operations. A guard's functions must not allocate through crmm, add or remove guards, or take
 * a lock that code holding one of its locks may wait for outside this order; and code that holds
 * a guarded lock must not add or remove a guard. */
#ifndef CRMM_FORK_GUARD_H
#define CRMM_FORK_GUARD_H

#include <crmm/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crmm_fork_guard {
    void (*prepare)(void *arg); /* take the object's locks, in the order its code takes them */
    void (*parent)(void *arg);  /* release them in the parent */
    void (*child)(void *arg);   /* release them (or make them anew) in the child */
    void *arg;
    struct crmm_fork_guard *older, *newer; /* crmm's links: zero before add */
} crmm_fork_guard;

/* Add g (its three functions set, its links zero) as the newest guard: from now on every fork()
 * runs it. g must stay valid until crmm_fork_guard_remove. Returns no error (never fails); a NULL
 * g is ignored. */
CRMM_API void crmm_fork_guard_add(crmm_fork_guard *g);
/* Remove g (waits for a fork in progress to finish with it); a guard removed already, or never
 * added (its links zero), is left as it is and the list untouched; so is a NULL g. Returns no
 * error. */
CRMM_API void crmm_fork_guard_remove(crmm_fork_guard *g);

#ifdef __cplusplus
}
#endif

#endif
