/* peer_process.c — see peer_process.h. */
#include "build_config.h"
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include "peer_process.h"
#include "test_support.h"

pid_t crmm_test_fork_peer(enum crmm_test_channel channel, int *fd)
{
    int ends[2]; /* [0] the parent's, [1] the child's */
    if (channel == CRMM_TEST_PIPE)
        ck_assert_int_eq(pipe(ends), 0);
    else
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ends[0]);
        *fd = ends[1];
        return 0;
    }
    ck_assert_int_eq(close(ends[1]), 0);
    *fd = ends[0];
    return pid;
}
