/* commands.h — the subcommands of the crmm program; each lives in its own cmd_*.c. */
#ifndef CRMM_TOOLS_COMMANDS_H
#define CRMM_TOOLS_COMMANDS_H

/* Each takes the arguments after the subcommand name (argv[0] is the subcommand) and returns
 * the process exit status. */
int crmm_cmd_info(int argc, char **argv);
int crmm_cmd_check_config(int argc, char **argv);
int crmm_cmd_bench(int argc, char **argv);
int crmm_cmd_replay(int argc, char **argv);
int crmm_cmd_plan(int argc, char **argv);

/* When this program runs uninstalled from its build tree, append the build tree's plugin folder
 * to $CRMM_PLUGIN_PATH (tools/build_tree.c); otherwise do nothing. */
void crmm_use_build_tree_plugins(void);

/* True when argv holds -h or --help (tools/help_option.c). */
int crmm_wants_help(int argc, char **argv);

#endif
