/* info_files.c — the loop over plugin files that `crmm info`'s printers share (info.h). Its own
 * file, so that info_roff.c and info_markdown.c do not call back into cmd_info.c, which calls them. */
#include "build_config.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/crmm.h>
#include "info.h"

crmm_status crmm_info_load(const char *name, const char *dirs, const crmm_plugin **out)
{
    if (!strchr(name, '/') || name[0] == '/')
        return crmm_plugin_load(name, dirs, out);
    /* a path from here (plugins/built/crmm_pool.so, ./crmm_template.so): the loader takes it whole */
    char *full = realpath(name, NULL);
    if (!full)
        return crmm_set_error(CRMM_ERROR_PLUGIN, "plugin file %s: %s", name, strerror(errno));
    crmm_status st = crmm_plugin_load(full, dirs, out);
    free(full);
    return st;
}

int crmm_info_print_files(int nfiles, char **files, void (*print)(const crmm_plugin *pl))
{
    int rc = 0;
    for (int i = 0; i < nfiles; i++) {
        const crmm_plugin *pl = NULL;
        if (crmm_info_load(files[i], NULL, &pl) != CRMM_OK) {
            fprintf(stderr, "crmm info: %s\n", crmm_last_error());
            rc = 1;
            continue;
        }
        print(pl);
    }
    return rc;
}
