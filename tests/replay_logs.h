/* replay_logs.h — the logging plugin's CSV logs that the replay suites (check_replay,
 * check_replay_streams) feed to `crmm replay`. */
#ifndef CRMM_TESTS_REPLAY_LOGS_H
#define CRMM_TESTS_REPLAY_LOGS_H

#define HEADER "Thread,Time,Action,Pointer,Size,Stream\n"

/* Five logged threads; the sizes say the order: 100 and 200 allocated, 100 freed, 300 allocated,
 * 200 freed, 700 allocated (1000 bytes in use at the peak). A log goes on from here. */
#define FIVE_THREADS_UP_TO_THE_PEAK                \
    HEADER                                         \
    "11,10:00:00.000001,allocate,0x1000,100,0\n"   \
    "22,10:00:00.000002,allocate,0x2000,200,0\n"   \
    "33,10:00:00.000003,free,0x1000,100,0\n"       \
    "44,10:00:00.000004,allocate,0x3000,300,0\n"   \
    "55,10:00:00.000005,free,0x2000,200,0\n"       \
    "11,10:00:00.000006,allocate,0x4000,700,0\n"

#endif
