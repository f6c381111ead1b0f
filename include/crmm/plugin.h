/* crmm/plugin.h — the plugin ABI.
 *
 * A plugin is a shared object `crmm_<name>.so` that exports one function,
 * `const crmm_plugin *crmm_plugin_entry(void)`, returning a const descriptor:
 *
 *   typedef struct my_config { uint64_t block_size; int mode; } my_config;
 *   static const crmm_param my_params[] = {
 *       {.key = "block_size", .type = CRMM_PARAM_SIZE, .default_value = "1MiB", .help = "bytes per block",
 *        .offset = offsetof(my_config, block_size), .min = 256},
 *       {.key = "mode", .type = CRMM_PARAM_ENUM, .default_value = "fast", .help = "fast or safe",
 *        .offset = offsetof(my_config, mode), .choices = "fast|safe"},
 *       {.key = NULL}
 *   };
 *   static const crmm_plugin my_plugin = {
 *       CRMM_PLUGIN_HEADER,
 *       .name = "mine", .version = "1.0", .description = "what it does",
 *       .upstream = CRMM_UPSTREAM_REQUIRED, .params = my_params, .config_size = sizeof(my_config),
 *       .create = my_create,
 *   };
 *   CRMM_PLUGIN_DEFINE(my_plugin)
 *
 * The loader checks the ABI major (equal: a plugin built for 1.x is refused, naming what to
 * change), minor (not newer than the loader's), struct_size (at least the 2.0 size), the name
 * (equal to the file's <name>) and the parameter table before calling anything else. Parameter
 * values are parsed from text once, when a config or crmm_resource_create is checked, and reach
 * `create` validated and typed: crmm_params_parse fills the plugin's config struct from the rows.
 * docs/plugin-abi.md says what changed from ABI 1.x. */
#ifndef CRMM_PLUGIN_H
#define CRMM_PLUGIN_H

#include <crmm/export.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRMM_PLUGIN_ABI_MAJOR 2
#define CRMM_PLUGIN_ABI_MINOR 0
#define CRMM_PLUGIN_ENTRY_SYMBOL "crmm_plugin_entry"

typedef enum crmm_param_type {
    CRMM_PARAM_SIZE = 1,   /* bytes: "4096", "1.5GiB", "512MB", "80%" (of the device's total memory) */
    CRMM_PARAM_UINT = 2,   /* unsigned 64-bit integer, decimal or 0x hex */
    CRMM_PARAM_BOOL = 3,   /* true/false, yes/no, on/off, 1/0 */
    CRMM_PARAM_STRING = 4, /* any text */
    CRMM_PARAM_ENUM = 5,   /* one of `choices`, a '|'-separated list: "none|posix_fd|fabric"; the
                            * plugin receives the choice's index (0 for "none" here) */
    CRMM_PARAM_DOUBLE = 6  /* floating-point number */
} crmm_param_type;

/* crmm_param.flags */
#define CRMM_PARAM_REQUIRED 0x1u /* the parameter must be given */

/* The most rows a parameter table may have: crmm_params_given() reports them as bits. */
#define CRMM_PARAMS_MAX 64

/* One row of a plugin's parameter table: everything about one parameter. The table ends with a
 * row whose key is NULL. `crmm info`, crmm.ini(5) and the README's plugin table are written from
 * these rows.
 *
 * The member at `offset` in the plugin's config struct (crmm_plugin.config_size bytes) is a
 * uint64_t for SIZE and UINT, a bool for BOOL, a double for DOUBLE, a const char * for STRING,
 * and an int for ENUM: the index of the value among `choices`. For SIZE and UINT a value below
 * `min` or above `max` (0: no upper bound) is refused when it is set; a size given as a
 * percentage is checked when it is resolved. */
typedef struct crmm_param {
    const char *key;           /* [a-z0-9_]+ */
    crmm_param_type type;
    const char *default_value; /* text parsed like a config value; NULL = no default (unset) */
    const char *help;          /* one line for `crmm info` and the README */
    size_t offset;             /* offsetof(the plugin's config struct, member) */
    uint64_t min;              /* SIZE, UINT: the smallest value accepted */
    uint64_t max;              /* SIZE, UINT: the largest value accepted; 0 = no upper bound */
    const char *choices;       /* ENUM only: "a|b|c" */
    unsigned flags;            /* CRMM_PARAM_* flags */
} crmm_param;

/* Validated parameters of one resource, handed to validate and create. */
typedef struct crmm_params crmm_params;

/* crmm_plugin.flags */
#define CRMM_PLUGIN_HOST_MEMORY 0x1u /* allocates host memory by itself and needs no GPU (host) */

/* Whether a plugin takes an upstream resource. */
typedef enum crmm_upstream_rule {
    CRMM_UPSTREAM_NONE = 0,     /* allocates by itself (cuda, host, ...) */
    CRMM_UPSTREAM_REQUIRED = 1, /* adaptors and suballocators (pool, logging, ...) */
    CRMM_UPSTREAM_OPTIONAL = 2
} crmm_upstream_rule;

typedef struct crmm_plugin {
    uint16_t abi_major;        /* CRMM_PLUGIN_ABI_MAJOR the plugin was built with */
    uint16_t abi_minor;        /* CRMM_PLUGIN_ABI_MINOR the plugin was built with */
    uint32_t struct_size;      /* sizeof(crmm_plugin) the plugin was built with */
    const char *name;          /* must equal <name> in crmm_<name>.so */
    const char *version;       /* the plugin's own version, e.g. "1.0.0" */
    const char *description;   /* one line */
    crmm_upstream_rule upstream;
    unsigned flags;            /* CRMM_PLUGIN_* flags */
    const crmm_param *params;  /* table ending with {.key = NULL}; NULL = none */
    size_t config_size;        /* sizeof the config struct the rows' offsets point into; 0 = none
                                * (then the plugin reads its parameters with crmm_params_get_*) */
    /* Optional: the rules between parameters, run once when a config or crmm_resource_create is
     * checked, before create and without building anything. `host_memory`: the upstream chain
     * ends in host memory, where a size given as a percentage has no device to refer to. On a bad
     * combination set the error (CRMM_ERROR_CONFIG, naming the parameter) and *key to the
     * parameter whose line it is. A plugin whose create must check the same rule on resolved
     * values calls one rule function from both. */
    crmm_status (*validate)(const crmm_params *params, bool host_memory, const char **key);
    /* Build a resource for the current CUDA device (params validated; upstream NULL unless the
     * rule allows one; a reference to it must be taken, e.g. via crmm_resource_init). On failure
     * return a status with crmm_set_error() and leave *out untouched. */
    crmm_status (*create)(const crmm_params *params, crmm_resource *upstream, crmm_resource **out);
    void *reserved[6];         /* zero; room for later minor versions */
} crmm_plugin;

/* Fills the version fields of a crmm_plugin initializer. */
#define CRMM_PLUGIN_HEADER \
    .abi_major = CRMM_PLUGIN_ABI_MAJOR, .abi_minor = CRMM_PLUGIN_ABI_MINOR, \
    .struct_size = (uint32_t)sizeof(crmm_plugin)

/* The plugin's entry function signature, and a macro that defines it. */
typedef const crmm_plugin *(*crmm_plugin_entry_fn)(void);
#define CRMM_PLUGIN_DEFINE(descriptor) \
    const crmm_plugin *crmm_plugin_entry(void); \
    __attribute__((visibility("default"))) const crmm_plugin *crmm_plugin_entry(void) { return &(descriptor); }

/* ---- reading parameters in create ---------------------------------------------------------- */
/* Each getter returns CRMM_OK and the value (the given one, else the default);
 * CRMM_ERROR_NOT_FOUND when the key has neither (the out value is left untouched);
 * CRMM_ERROR_INVALID_ARGUMENT when the key is not in the plugin's table or has another type.
 * CRMM_ERROR_INVALID_ARGUMENT also for a NULL p, key or out. A size given as a percentage is
 * resolved against the total memory of the device the resource is created for, and checked
 * against the row's range then (CRMM_ERROR_CONFIG outside it; CRMM_ERROR_CUDA when there is no
 * device, CRMM_ERROR_INVALID_ARGUMENT when that device does not exist, CRMM_ERROR_STATE when the
 * CUDA runtime is unloading). */
CRMM_API crmm_status crmm_params_get_size(const crmm_params *p, const char *key, uint64_t *out);
CRMM_API crmm_status crmm_params_get_uint(const crmm_params *p, const char *key, uint64_t *out);
CRMM_API crmm_status crmm_params_get_bool(const crmm_params *p, const char *key, bool *out);
CRMM_API crmm_status crmm_params_get_double(const crmm_params *p, const char *key, double *out);
/* Strings and enums (an enum's text): *out points into p (valid during create). */
CRMM_API crmm_status crmm_params_get_string(const crmm_params *p, const char *key, const char **out);
/* An enum's value as the index of its choice (0 for the first of `choices`). */
CRMM_API crmm_status crmm_params_get_enum(const crmm_params *p, const char *key, int *out);
/* For a SIZE given as a percentage: true and *percent (when non-NULL) set to it; false for any
 * other value, type or key. Lets validate compare sizes without a device. */
CRMM_API bool crmm_params_size_percent(const crmm_params *p, const char *key, double *percent);
/* Fill the config struct `cfg` (crmm_plugin.config_size bytes) from the rows: each parameter
 * that has a value (given or default) is written at its offset, those without one are left as
 * they are; sizes given as a percentage are resolved as crmm_params_get_size does and checked
 * against the row's range. Errors: CRMM_ERROR_INVALID_ARGUMENT for a NULL argument or a plugin
 * whose config_size is 0; CRMM_ERROR_CONFIG naming the plugin and key for a value out of range;
 * those of crmm_params_get_size. */
CRMM_API crmm_status crmm_params_parse(const crmm_params *p, void *cfg);
/* Which parameters were given explicitly (not defaulted): bit i for row i of the table. */
CRMM_API uint64_t crmm_params_given(const crmm_params *p);
/* True when the key was given explicitly (not defaulted). */
CRMM_API bool crmm_params_is_set(const crmm_params *p, const char *key);
/* The instance name ("main" for [resource.main]; "" for crmm_resource_create). */
CRMM_API const char *crmm_params_resource_name(const crmm_params *p);
/* The CUDA device ordinal the resource is created for; -1 when none is known. */
CRMM_API int crmm_params_device(const crmm_params *p);
/* The plugin search path of the config (or crmm_resource_create call) the resource is built
 * for, ':'-separated; NULL when it has none. */
CRMM_API const char *crmm_params_plugin_path(const crmm_params *p);
/* From inside a plugin's create: build a resource of another plugin (e.g. binning's fixed_size
 * bins), searched in the creator's plugin path (crmm_params_plugin_path), for the creator's
 * device, named `name` (NULL: unnamed). `params` and `upstream` as for crmm_resource_create;
 * takes no lock of the core, so a plugin never re-enters the loaded config. Errors: those of
 * crmm_resource_create. */
CRMM_API crmm_status crmm_params_create_resource(const crmm_params *creator, const char *plugin, const char *params,
                                        const char *name, crmm_resource *upstream, crmm_resource **out);
/* After create (binning's add_bin): the same, searched in `plugin_path`, a copy the plugin kept
 * of its crmm_params_plugin_path (NULL: none), for `device`. Errors: CRMM_ERROR_INVALID_ARGUMENT
 * (plugin or out NULL), those of crmm_resource_create. */
CRMM_API crmm_status crmm_plugin_path_create_resource(const char *plugin_path, int device, const char *plugin,
                                                      const char *params, const char *name, crmm_resource *upstream,
                                                      crmm_resource **out);

/* ---- helpers for plugins ------------------------------------------------------------------- */
/* Name of a parameter type as `crmm info` shows it: "size", "uint", "bool", "string", "enum",
 * "double"; "?" for a value outside crmm_param_type. */
CRMM_API const char *crmm_param_type_name(crmm_param_type t);

/* Expand a file-name pattern given as a parameter into out (size bytes, NUL included):
 * %d = `device` ("host" when device < 0), %p = the process id, %% = %. Errors:
 * CRMM_ERROR_CONFIG naming the pattern for any other % sequence (or a lone % at the end);
 * CRMM_ERROR_INVALID_ARGUMENT when the name does not fit in out, or for a NULL argument. */
CRMM_API crmm_status crmm_expand_file_name(const char *pattern, int device, char *out, size_t size);

/* Flags of crmm_output_file_open. */
#define CRMM_OUTPUT_APPEND 1u    /* write at the end; without it an existing file is truncated */
#define CRMM_OUTPUT_EXCLUSIVE 2u /* hold an exclusive flock: refuse a file another open holds */

/* Open `path` for writing as crmm writes every file (docs/files-and-privileges.md): a symbolic
 * link as the last component is refused unless it leads to a stream with nothing to overwrite (a
 * pipe, /dev/null or a terminal: /dev/stderr works); a new file is created (O_EXCL, mode 0644); an
 * existing regular file is written only when the effective user owns it and it has one hard link,
 * and is then truncated unless CRMM_OUTPUT_APPEND; a character device, or a pipe of the
 * effective user's or root's, is written as it is. O_CLOEXEC always. On success *fd is the
 * descriptor. Errors: CRMM_ERROR_INVALID_ARGUMENT for a NULL or empty path, NULL fd or unknown
 * flags; CRMM_ERROR_IO naming the path and why for a link to anything else, someone else's or a
 * hard-linked file, another user's pipe, another kind of file, a file another exclusive writer
 * holds (in this process or another), or a failed open. */
CRMM_API crmm_status crmm_output_file_open(const char *path, unsigned flags, int *fd);

/* The value of crmm's environment variable `name` (e.g. "CRMM_LOG_FILE"), or NULL when it is not
 * set or when the process runs with elevated privileges (setuid, setgid or file capabilities:
 * secure_getenv), where the invoking user must not choose what crmm loads or writes; an ignored
 * variable is said at info level in crmm's log. A name that is no row's variable in
 * crmm_settings() (crmm/config.h) is not read: NULL, said at warn level. Sets no error. */
CRMM_API const char *crmm_getenv(const char *name);

/* ---- the loader ---------------------------------------------------------------------------- */
/* Find and load plugin `name_or_path` ("pool", or "/abs/dir/crmm_pool.so"), searching `dirs`
 * (a ':'-separated list, may be NULL), then $CRMM_PLUGIN_PATH, then the installed plugin
 * directory. Plugins stay loaded until the process exits; loading twice gives the same
 * descriptor. Errors (CRMM_ERROR_PLUGIN unless said): CRMM_ERROR_INVALID_ARGUMENT (name_or_path
 * or out NULL), CRMM_ERROR_OUT_OF_MEMORY; a name that is neither [a-z0-9_]+ nor an absolute path
 * to a crmm_<name>.so, not found (with the directories searched and a "did you mean" when a close
 * name exists), dlopen failure (with dlerror()), no entry symbol, entry returning NULL, wrong ABI
 * major, too-new minor, short struct, no name (.name NULL), name mismatch, no create function,
 * unknown upstream rule, bad parameter table; a path that is no regular file (a FIFO, a device,
 * a link to one: never opened); a file or directory that neither root nor the
 * effective user owns, or that others may write (or a group other than its owner's private group),
 * is refused. Each message names the file, what is wrong and what to change. */
CRMM_API crmm_status crmm_plugin_load(const char *name_or_path, const char *dirs, const crmm_plugin **out);

/* Call `fn` for every loadable plugin in the search path (dirs as for crmm_plugin_load) with
 * its path, and the descriptor or NULL and the load error when it fails to load. Each name is
 * reported once (the first found); a directory that cannot be listed for want of memory is
 * reported too, with CRMM_ERROR_OUT_OF_MEMORY. Returns how many were reported (0 for a NULL fn). */
typedef void (*crmm_plugin_visit_fn)(const char *path, const crmm_plugin *plugin,
                                     crmm_status status, const char *error, void *arg);
CRMM_API int crmm_plugin_foreach(const char *dirs, crmm_plugin_visit_fn fn, void *arg);

/* The search path as used: dirs, $CRMM_PLUGIN_PATH (not in a privileged process: crmm_getenv),
 * installed dir, ':'-joined into buf; NULL when it does not fit in bufsize (the loader then
 * searches nothing and says why), and NULL with nothing written when buf is NULL. */
CRMM_API const char *crmm_plugin_search_path(const char *dirs, char *buf, size_t bufsize);

#ifdef __cplusplus
}
#endif
#endif
