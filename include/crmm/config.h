/* crmm/config.h — INI configs that build the resource graph, and library init/finalize.
 *
 *   [crmm]                      default = main, plugin_path = DIR:DIR, log_level = warn
 *   [resource.NAME]             plugin = PLUGIN, upstream = NAME, then the plugin's parameters
 *   [device.N]                  resource = NAME (overrides default for device N)
 *
 * Loading is strict and touches no GPU: an unknown or repeated section or key, an unknown plugin
 * or upstream, a cycle, a bad size or number → CRMM_ERROR_CONFIG with "FILE:LINE: message" for
 * the error on the lowest line. Syntax: ';' and '#' start comment lines, ';' after a blank starts
 * an inline comment ('#' does not), indentation is ignored (no continuation lines), CRLF line
 * endings and a UTF-8 byte-order mark are accepted, a line holds at most 198 characters. A config is a
 * template: crmm_config_create_resource() instantiates a named resource (and its upstream chain)
 * for one device; resources that share an upstream share one instance per device. */
#ifndef CRMM_CONFIG_H
#define CRMM_CONFIG_H

#include <crmm/export.h>
#include <stddef.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct crmm_config crmm_config;

/* Parse and validate a config file (plugins are loaded to check parameters; no CUDA call).
 * Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL), CRMM_ERROR_IO (cannot read), CRMM_ERROR_CONFIG
 * ("FILE:LINE: message"; plugin load failures are reported this way too; a file larger than
 * 16 MiB or one with a NUL byte; a file that belongs to neither root nor the effective user, or
 * that others, or a group not its owner's alone, can write: named with its owner and mode),
 * CRMM_ERROR_OUT_OF_MEMORY. */
CRMM_API crmm_status crmm_config_load_file(const char *path, crmm_config **out);
/* As crmm_config_load_file, but a [resource.*] whose plugin cannot be loaded is left out instead
 * of failing the load, with every resource stacked on a left-out one and the [crmm] default or
 * [device.N] section that names one: for tools that work with what is installed (crmm bench).
 * crmm_config_skipped_* list what was left out. Errors otherwise as crmm_config_load_file. */
CRMM_API crmm_status crmm_config_load_file_skipping(const char *path, crmm_config **out);
/* The same from text; `origin` names it in messages (NULL → "<string>"). Errors as
 * crmm_config_load_file but CRMM_ERROR_IO, with CRMM_ERROR_INVALID_ARGUMENT for a NULL text or
 * out. */
CRMM_API crmm_status crmm_config_load_string(const char *text, const char *origin, crmm_config **out);
/* The built-in default: one resource "default" of plugin `cuda`. Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (NULL out), CRMM_ERROR_OUT_OF_MEMORY, CRMM_ERROR_CONFIG (the `cuda`
 * plugin cannot be loaded). */
CRMM_API crmm_status crmm_config_load_default(crmm_config **out);
/* Free a config (resources created from it live on). NULL: no-op. Leaves the thread's last error
 * as it was. */
CRMM_API void crmm_config_free(crmm_config *cfg);

/* Where the config came from (a path, the origin given, or "<built-in>"; "" for NULL). */
CRMM_API const char *crmm_config_origin(const crmm_config *cfg);
/* Number of [resource.*] sections, and the i-th one's name, plugin and upstream (NULL if none),
 * in file order. NULL for i out of range. */
CRMM_API size_t crmm_config_resource_count(const crmm_config *cfg);
CRMM_API const char *crmm_config_resource_name(const crmm_config *cfg, size_t i);
CRMM_API const char *crmm_config_resource_plugin(const crmm_config *cfg, size_t i);
CRMM_API const char *crmm_config_resource_upstream(const crmm_config *cfg, size_t i);
/* The index of [resource.NAME] among them, or -1 when there is none (or an argument is NULL). */
CRMM_API long crmm_config_find_resource(const crmm_config *cfg, const char *name);
/* The resource's parameters as given in the file: count, and key/value of the j-th one (0 and
 * NULL when i or j is out of range or cfg is NULL). */
CRMM_API size_t crmm_config_resource_param_count(const crmm_config *cfg, size_t i);
CRMM_API const char *crmm_config_resource_param_key(const crmm_config *cfg, size_t i, size_t j);
CRMM_API const char *crmm_config_resource_param_value(const crmm_config *cfg, size_t i, size_t j);
/* True when the resource's chain ends in a host-only plugin (usable without a GPU). */
CRMM_API bool crmm_config_resource_is_host(const crmm_config *cfg, size_t i);
/* The resource device `device` starts with: [device.N] resource, else [crmm] default, else the
 * first [resource.*] of the file, else NULL (nothing configured: crmm_init's per-device default
 * is then the built-in `cuda` plugin). */
CRMM_API const char *crmm_config_default_resource(const crmm_config *cfg, int device);
/* The [crmm] plugin_path as used: entries relative to the config file's directory made absolute
 * (a config from a string may not have relative ones). NULL if none. */
CRMM_API const char *crmm_config_plugin_path(const crmm_config *cfg);
/* The [crmm] log_level as written (crmm_init applies it unless $CRMM_LOG_LEVEL names a level:
 * crmm_log_level_from_env), or NULL when it is not given. */
CRMM_API const char *crmm_config_log_level(const crmm_config *cfg);
/* The resources crmm_config_load_file_skipping left out, in file order: how many (0 for any other
 * load), and the i-th one's name and why ("plugin error: ..." or "its upstream 'NAME' was
 * skipped"); NULL for i out of range. */
CRMM_API size_t crmm_config_skipped_count(const crmm_config *cfg);
CRMM_API const char *crmm_config_skipped_name(const crmm_config *cfg, size_t i);
CRMM_API const char *crmm_config_skipped_reason(const crmm_config *cfg, size_t i);

/* Build resource `name` (and its upstreams) for CUDA device `device` (-1: the current device;
 * host-only chains need no device and ignore it). Instances are cached per config and device:
 * asking twice gives the same resource with one more reference, and resources sharing an
 * upstream share its instance. Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL, device < -1 or >= CRMM_MAX_DEVICES),
 * CRMM_ERROR_NOT_FOUND (no such resource), CRMM_ERROR_CUDA (no device for -1),
 * CRMM_ERROR_UNSUPPORTED (the current device is CRMM_MAX_DEVICES or above), CRMM_ERROR_STATE (the
 * CUDA runtime is unloading), CRMM_ERROR_OUT_OF_MEMORY, CRMM_ERROR_PLUGIN (a create that gave no
 * resource, or one without its required ops), and the plugin's own errors, those with
 * "FILE:LINE: resource.NAME: " in front. On error *out is untouched. */
CRMM_API crmm_status crmm_config_create_resource(crmm_config *cfg, const char *name, int device, crmm_resource **out);

/* The config file crmm_init(NULL) loads: $CRMM_CONFIG when set (and the process is not
 * privileged: crmm_getenv), else $(sysconfdir)/crmm/crmm.ini
 * (written into buf) when it exists; NULL when neither (then it is the built-in default). */
CRMM_API const char *crmm_config_default_file(char *buf, size_t size);

/* Initialise the library: load the config from `path`, or with NULL from $CRMM_CONFIG (ignored
 * in a setuid, setgid or setcap process: crmm_getenv), then
 * $(sysconfdir)/crmm/crmm.ini, then the built-in default (crmm_config_default_file); apply its
 * log_level; make it the config that per-device defaults come from. Never reads a file from the
 * working directory by itself. Calling again replaces the config for devices whose resource is
 * not yet created; the replaced config (and what it built) is kept until crmm_finalize, so that a
 * pointer crmm_current_config() gave another thread stays valid. Errors as crmm_config_load_file;
 * CRMM_ERROR_OUT_OF_MEMORY when the replaced config cannot be kept (the loaded one then stays). */
CRMM_API crmm_status crmm_init(const char *path);
/* Release the per-device resources (crmm_enable_logging's adaptors too) and the config loaded by
 * crmm_init. Safe to call twice; call it when no other thread is using crmm (a first use racing
 * with it may build a new default). Leaves the thread's last error as it was. */
CRMM_API void crmm_finalize(void);
/* The config crmm_init loaded last (borrowed), or NULL. Thread-safe: the pointer stays valid,
 * even after another thread's crmm_init replaces the config, until crmm_finalize. */
CRMM_API const crmm_config *crmm_current_config(void);

/* One of crmm's own settings: a key of a config's [crmm] section, a CRMM_* environment variable,
 * or both on one row, where the variable wins over the key. `crmm info` lists them. */
typedef struct crmm_setting {
    const char *key;     /* [crmm] key; NULL: a variable only */
    const char *env;     /* environment variable (read with crmm_getenv); NULL: a key only */
    const char *accepts; /* what a value must be, for messages; NULL: any text */
    const char *help;    /* one line */
} crmm_setting;

/* crmm's settings: every [crmm] key a config may give and every variable crmm reads; the table
 * ends with a row whose key and env are both NULL. */
CRMM_API const crmm_setting *crmm_settings(void);

/* Whether `value` is acceptable for setting `s` (a row of crmm_settings()): CRMM_OK, or
 * CRMM_ERROR_CONFIG "KEY: 'VALUE' is not ACCEPTS"; CRMM_ERROR_INVALID_ARGUMENT for NULL. */
CRMM_API crmm_status crmm_setting_check(const crmm_setting *s, const char *value);

/* Parse a size: "4096", "64KiB", "1.5 GiB", "512MB", "2TB"; units B KiB MiB GiB TiB PiB KB MB GB TB PB
 * (case-insensitive; KiB = 1024, KB = 1000). "N%" (0 < N <= 100) gives N% of `percent_of`; it is
 * refused when `percent_of` is 0 and `percent` is NULL. When `percent` is given it receives N
 * (0 for a plain size). A fraction of a larger unit, and a percentage, are rounded down to a byte,
 * exactly, whatever the number of digits. Errors: CRMM_ERROR_INVALID_ARGUMENT for negative values,
 * unknown units, junk, a byte count with a nonzero fraction ("1.5", "1.5B"), and values that do
 * not fit in 64 bits. */
CRMM_API crmm_status crmm_parse_size(const char *text, uint64_t percent_of, uint64_t *out, double *percent);

#ifdef __cplusplus
}
#endif
#endif
