/* help_option.c — whether a command's arguments ask for its help (commands.h). Its own file, so
 * that the commands do not call back into crmm_main.c, which calls them. */
#include "build_config.h"
#include <string.h>
#include "commands.h"

int crmm_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    return 0;
}
