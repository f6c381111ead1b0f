/* crmm_main.c — the `crmm` program: dispatches to a subcommand. */
#include "build_config.h"
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/crmm.h>
#include "commands.h"
#include "long_option.h"

/* The options of info, check-config, replay and plan that take no value (NULL-terminated). */
static const char *const info_flags[] = {"--json", "--roff", "--markdown", "--help", NULL};
static const char *const check_config_flags[] = {"--help", NULL};
static const char *const replay_flags[] = {"--json", "--csv", "--strict", "--threads-as-logged", "--help", NULL};
static const char *const plan_flags[] = {"--help", NULL};

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
    bool reads_equals; /* reads "--name=value" itself (and says which flags take no value) */
    const char *const *flags; /* otherwise: its options that take no value, refused with one */
} commands[] = {
    {"info", crmm_cmd_info, "versions, devices, plugins and their parameters, the active resource graph", false,
     info_flags},
    {"check-config", crmm_cmd_check_config, "validate a config file without touching a GPU", false, check_config_flags},
    {"bench", crmm_cmd_bench, "allocation benchmark over the config's resources and raw CUDA", true, NULL},
    {"replay", crmm_cmd_replay, "replay an RMM-format allocation log against a resource", false, replay_flags},
    {"plan", crmm_cmd_plan, "learn a pool's placement plan from an allocation log", false, plan_flags},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: crmm COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'crmm COMMAND --help' describes each. An option's value follows it as the next argument\n"
               "or after '=' (--repeats 3, --repeats=3). crmm %s\n", crmm_version());
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

/* argv with every "--name=value" as the two arguments "--name" "value", as each command reads
 * them (NULL when out of memory). A flag of `flags` with "=value" is refused (*bad: that argument,
 * NULL returned), else its value would be read as the next argument (--json=pool as --json pool). */
static char **split_long_options(int argc, char **argv, const char *const *flags, int *out_argc, const char **bad)
{
    *bad = NULL;
    for (int i = 1; i < argc; i++) {
        const char *eq = long_option_equals(argv[i]);
        for (const char *const *f = flags; eq && *f; f++)
            if (strlen(*f) == (size_t)(eq - argv[i]) && strncmp(argv[i], *f, (size_t)(eq - argv[i])) == 0) {
                *bad = argv[i];
                return NULL;
            }
    }
    char **out = malloc((2 * (size_t)argc + 1) * sizeof *out);
    if (!out)
        return NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *eq = long_option_equals(argv[i]);
        if (!eq || i == 0) {
            out[n++] = argv[i];
            continue;
        }
        argv[i][eq - argv[i]] = '\0'; /* argv's strings are the program's to change */
        out[n++] = argv[i];
        out[n++] = argv[i] + (eq - argv[i]) + 1;
    }
    out[n] = NULL;
    *out_argc = n;
    return out;
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
        if (strcmp(argv[1], commands[i].name) == 0) {
            if (commands[i].reads_equals)
                return finish_stdout(commands[i].name, commands[i].run(argc - 1, argv + 1));
            int n;
            const char *bad;
            char **args = split_long_options(argc - 1, argv + 1, commands[i].flags, &n, &bad);
            if (bad) {
                fprintf(stderr, "crmm %s: %.*s takes no value (see 'crmm %s --help')\n", commands[i].name,
                        (int)(strchr(bad, '=') - bad), bad, commands[i].name);
                return 2;
            }
            if (!args) {
                fprintf(stderr, "crmm: out of memory\n");
                return 1;
            }
            int rc = finish_stdout(commands[i].name, commands[i].run(n, args));
            free(args);
            return rc;
        }
    fprintf(stderr, "crmm: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
