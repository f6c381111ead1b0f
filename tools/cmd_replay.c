/* cmd_replay.c — `crmm replay` (placeholder until the replaymark lands). */
#include "config.h"
#include <stdio.h>
#include "commands.h"

int crmm_cmd_replay(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "crmm replay: not built yet\n");
    return 1;
}
