/* info.h — the parts of `crmm info` that live outside cmd_info.c. */
#ifndef CRMM_TOOLS_INFO_H
#define CRMM_TOOLS_INFO_H

#include <crmm/crmm.h>

/* An environment variable crmm reads, and what it does. */
/* The log level a program running over cfg starts with: $CRMM_LOG_LEVEL's, else cfg's
 * log_level, else warn. */
crmm_log_level crmm_info_log_level(const crmm_config *cfg);

/* Where the log level in effect came from: "CRMM_LOG_LEVEL", "config" or "default". */
const char *crmm_info_log_level_origin(const crmm_config *cfg);

/* Print cfg's [crmm] keys (cfg may be NULL), the log level with its origin, and each
 * environment variable with its current value or "(unset)". */
void crmm_info_print_settings(const crmm_config *cfg);

/* Print everything `crmm info` shows as one JSON object on stdout: cfg may be NULL, and
 * config_error is the reason it could not be loaded (or NULL). */
void crmm_info_json(const crmm_config *cfg, const char *config_error);

/* Print one plugin as a JSON object (without a newline): its file, and its descriptor or, when
 * pl is NULL, the load error. */
void crmm_info_json_plugin(const char *path, const crmm_plugin *pl, const char *error);

/* crmm_plugin_load, with a relative path (one with a '/') taken from the current directory, as a
 * user who just built a plugin there gives it; CRMM_ERROR_PLUGIN naming it when it is no file. */
crmm_status crmm_info_load(const char *name, const char *dirs, const crmm_plugin **out);

/* Load each of files (plugin names or paths of crmm_NAME.so) and call print on it; a file that
 * does not load is said on stderr and left out. Returns 0, or 1 when one could not be loaded. */
int crmm_info_print_files(int nfiles, char **files, void (*print)(const crmm_plugin *pl));

/* Print the plugins in files (paths of crmm_NAME.so) as roff, a subsection each with its
 * parameters, for crmm.ini(5). Returns 0, or 1 when one could not be loaded (it is left out). */
int crmm_info_roff(int nfiles, char **files);

/* Print the plugins in files as rows of the README's plugin table (plugin, upstream, description,
 * each parameter with its default). Returns 0, or 1 when one could not be loaded (left out). */
int crmm_info_markdown(int nfiles, char **files);

#endif
