/* peer_process.h — a forked peer process joined to the test by one channel, for the tests that
 * talk to a child (IPC handles, what a child prints or leaves behind). */
#ifndef CRMM_TESTS_PEER_PROCESS_H
#define CRMM_TESTS_PEER_PROCESS_H

#include <sys/types.h>

enum crmm_test_channel {
    CRMM_TEST_SOCKETS, /* a connected pair of stream sockets: both sides read and write */
    CRMM_TEST_PIPE,    /* a pipe: the child writes, the parent reads */
};

/* Flushes stdio and forks a child joined to this process by `channel` (asserting each step). In
 * the child it returns 0 with *fd its end; in the parent, the child's pid with *fd the parent's
 * end. Each side has closed the other's end. */
pid_t crmm_test_fork_peer(enum crmm_test_channel channel, int *fd);

#endif
