/* crmm_main.c — the `crmm` program: dispatches to a subcommand. */
#include "build_config.h"
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <crmm/crmm.h>
#include "commands.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} commands[] = {
    {"info", crmm_cmd_info, "versions, devices, plugins and their parameters, the active resource graph"},
    {"check-config", crmm_cmd_check_config, "validate a config file without touching a GPU"},
    {"bench", crmm_cmd_bench, "allocation benchmark over the config's resources and raw CUDA"},
    {"replay", crmm_cmd_replay, "replay an RMM-format allocation log against a resource"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: crmm COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'crmm COMMAND --help' describes each. crmm %s\n", crmm_version());
}

/* Every command's end: what it printed must have reached standard output (a full disk, a closed
 * pipe, /dev/full). When it did not, say so on stderr and turn a success into exit status 1, so
 * no command reports success over output that was lost. */
static int finish_stdout(const char *command, int rc)
{
    errno = 0;
    bool failed = fflush(stdout) != 0 || ferror(stdout);
    int flush_errno = errno;
    if (fclose(stdout) != 0 && !failed) {
        failed = true;
        flush_errno = errno;
    }
    if (!failed)
        return rc;
    fprintf(stderr, "crmm%s%s: cannot write standard output%s%s\n", command ? " " : "", command ? command : "",
            flush_errno ? ": " : "", flush_errno ? strerror(flush_errno) : "");
    return rc ? rc : 1;
}

int main(int argc, char **argv)
{
    crmm_use_build_tree_plugins();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return finish_stdout(NULL, 0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("crmm %s\n", crmm_version());
        return finish_stdout(NULL, 0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return finish_stdout(commands[i].name, commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "crmm: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
