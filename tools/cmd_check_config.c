/* cmd_check_config.c — `crmm check-config FILE`: validate a config without touching a GPU. */
#include "build_config.h"
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <crmm/crmm.h>
#include "commands.h"

int crmm_cmd_check_config(int argc, char **argv)
{
    if (crmm_wants_help(argc, argv)) {
        printf("usage: crmm check-config FILE\n\n"
               "Parses FILE, loads each plugin it names and checks every parameter, upstream and\n"
               "device section, without any CUDA call. Prints 'FILE: OK' and exits 0, or prints\n"
               "'FILE:LINE: message' for the first error in it (or why FILE cannot be read) and\n"
               "exits 1. --help: this text.\n");
        return 0;
    }
    /* an option is a usage error, not a file name (./-name names a file that starts with '-') */
    if (argc != 2 || (argv[1][0] == '-' && argv[1][1])) {
        if (argc == 2)
            fprintf(stderr, "crmm check-config: unknown option '%s'\n", argv[1]);
        fprintf(stderr, "usage: crmm check-config FILE\n");
        return 2;
    }
    crmm_config *cfg;
    if (crmm_config_load_file(argv[1], &cfg) != CRMM_OK) {
        /* a config error carries its own "FILE:LINE: "; any other keeps its category */
        bool config = crmm_last_status() == CRMM_ERROR_CONFIG;
        fprintf(stderr, "%s\n", config ? crmm_last_error_detail() : crmm_last_error());
        return 1;
    }
    size_t n = crmm_config_resource_count(cfg);
    const char *def = crmm_config_default_resource(cfg, -1);
    if (def)
        printf("%s: OK (%zu resource%s, default '%s')\n", argv[1], n, n == 1 ? "" : "s", def);
    else
        printf("%s: OK (%zu resource%s, no default: devices use the built-in cuda plugin)\n", argv[1], n, n == 1 ? "" : "s");
    crmm_config_free(cfg);
    return 0;
}
