/* fuzz_replay.c — libFuzzer target: the replay log reader (replay_log_read) on any bytes, given
 * to it as a file through a memfd. A log that reads must pair consistently: every pair points
 * back. */
#include "build_config.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../tools/replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("replay-fuzz", 0)) < 0)
        abort();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    replay_log log;
    if (replay_log_read(path, &log) == CRMM_OK) {
        for (size_t i = 0; i < log.count; i++) {
            int64_t j = log.events[i].pair;
            if (j >= 0 && ((size_t)j >= log.count || log.events[j].pair != (int64_t)i))
                abort();
        }
        replay_log_free(&log);
    }
    return 0;
}
