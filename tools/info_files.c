/* info_files.c — the loop over plugin files that `crmm info`'s printers share (info.h). Its own
 * file, so that info_roff.c and info_markdown.c do not call back into cmd_info.c, which calls them. */
#include "build_config.h"
#include <stdio.h>
#include <crmm/crmm.h>
#include "info.h"

int crmm_info_print_files(int nfiles, char **files, void (*print)(const crmm_plugin *pl))
{
    int rc = 0;
    for (int i = 0; i < nfiles; i++) {
        const crmm_plugin *pl = NULL;
        if (crmm_plugin_load(files[i], NULL, &pl) != CRMM_OK) {
            fprintf(stderr, "crmm info: %s\n", crmm_last_error());
            rc = 1;
            continue;
        }
        print(pl);
    }
    return rc;
}
