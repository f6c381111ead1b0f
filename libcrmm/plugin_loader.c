/* plugin_loader.c — finds, loads and validates crmm_<name>.so plugins.
 *
 * Search order for a name: the caller's directories (a config's plugin_path), $CRMM_PLUGIN_PATH,
 * then the installed plugin directory; an absolute path loads that file. Before dlopen the file
 * and its directory are checked: a plugin that group or others can write is refused, since a
 * config that loads code must not load code someone else could have replaced. After dlopen the
 * descriptor is checked (ABI version, struct size, name, create, parameter table) before any of
 * its functions is called except the entry itself. Loaded plugins stay loaded; a small list
 * keyed by real path makes a second load of the same file return the same descriptor. */
#include "build_config.h"
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "file_trust.h"
#include "internal.h"
#include "settings.h"
#include "suggest.h"

#ifndef CRMM_PLUGIN_DIR
#define CRMM_PLUGIN_DIR "/usr/local/lib/crmm"
#endif

typedef struct loaded_plugin {
    struct loaded_plugin *next;
    char path[PATH_MAX];
    void *handle;
    const crmm_plugin *plugin;
} loaded_plugin;

static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded_plugin *loaded;

const char *crmm_plugin_search_path(const char *dirs, char *buf, size_t bufsize)
{
    if (!buf)
        return NULL; /* nowhere to put it: as for a path that does not fit */
    const char *env = crmm_setting_env(CRMM_SETTING_PLUGIN_PATH_ENV);
    int n = snprintf(buf, bufsize, "%s%s%s%s%s", dirs && *dirs ? dirs : "", dirs && *dirs ? ":" : "",
                     env && *env ? env : "", env && *env ? ":" : "", CRMM_PLUGIN_DIR);
    /* a cut path would name a directory nobody gave (and drop the installed one) */
    return n < 0 || (size_t)n >= bufsize ? NULL : buf;
}

static bool name_well_formed(const char *n)
{
    if (!*n || strlen(n) > 64)
        return false;
    for (; *n; n++)
        if (!((*n >= 'a' && *n <= 'z') || (*n >= '0' && *n <= '9') || *n == '_'))
            return false;
    return true;
}

/* The <name> in ".../crmm_<name>.so", or NULL. */
static bool name_from_path(const char *path, char *name, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len <= 8 || strncmp(base, "crmm_", 5) != 0 || strcmp(base + len - 3, ".so") != 0)
        return false;
    size_t nl = len - 8;
    if (nl + 1 > n)
        return false;
    memcpy(name, base + 5, nl);
    name[nl] = '\0';
    return true;
}

/* A plugin file or a directory on its way: see file_trust.c. */
static crmm_status check_not_writable(const char *path, const char *what)
{
    return file_trust_check_path(path, CRMM_ERROR_PLUGIN, what, "could replace the code a config loads");
}

/* The directory `dir` and every directory above it: whoever can write any of them can swap what
 * lies below. A root-owned directory with the sticky bit (/tmp) is fine: others can add entries
 * there but not replace ours. */
static crmm_status check_dir_chain(const char *dir)
{
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", dir);
    crmm_status st = check_not_writable(d, "plugin directory");
    if (st != CRMM_OK)
        return st;
    for (char *slash = strrchr(d, '/'); slash && slash != d; slash = strrchr(d, '/')) {
        *slash = '\0';
        struct stat sb;
        if (stat(d, &sb) == 0 && sb.st_uid == 0 && (sb.st_mode & S_ISVTX))
            continue;
        if ((st = check_not_writable(d, "directory above a plugin")) != CRMM_OK)
            return st;
    }
    return dir[0] == '/' && dir[1] ? check_not_writable("/", "directory above a plugin") : CRMM_OK;
}

/* The error for a plugin path that realpath() could not resolve (errno `err`): a symbolic link
 * loop and a link to nothing are named as such. */
static crmm_status cannot_resolve(const char *path, int err)
{
    struct stat ls;
    if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) {
        if (err == ELOOP)
            return crmm_set_error(CRMM_ERROR_PLUGIN, "cannot open plugin %s: it is a symbolic link loop", path);
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        if (err == ENOENT)
            return crmm_set_error(CRMM_ERROR_PLUGIN, "cannot open plugin %s: it is a dangling symbolic link (to %s, which does not exist)",
                                  path, n > 0 ? target : "?");
    }
    return crmm_set_error(CRMM_ERROR_PLUGIN, "cannot open plugin %s: %s", path, strerror(err));
}

/* The directory part of `path` ("/" for "/x"), in dir. */
static void dir_of(const char *path, char *dir, size_t n)
{
    snprintf(dir, n, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
}

/* Load and validate one file; the caller holds loader_lock. `path` is the file as found (absolute,
 * or under a search-path entry); expect_name is the <name> its file name gives. */
static crmm_status load_file(const char *path, const char *expect_name, const crmm_plugin **out)
{
    /* The directory the path names comes first: when the file is a link, whoever can write that
     * directory decides which code is loaded, wherever the link points. Checked even when the
     * file behind the link is loaded already. */
    char dir[PATH_MAX], real[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    crmm_status st = check_dir_chain(dir);
    if (st != CRMM_OK)
        return st;
    if (!realpath(path, real))
        return cannot_resolve(path, errno);
    for (loaded_plugin *l = loaded; l; l = l->next)
        if (strcmp(l->path, real) == 0) {
            /* a link crmm_a.so -> crmm_b.so must not turn a request for "a" into plugin "b" */
            if (expect_name && strcmp(l->plugin->name, expect_name) != 0)
                return crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s (%s) calls itself '%s' but its file name says '%s' "
                                      "(load it as '%s', or name the link crmm_%s.so)",
                                      path, real, l->plugin->name, expect_name, l->plugin->name, l->plugin->name);
            *out = l->plugin;
            return CRMM_OK;
        }
    /* dlopen of a FIFO or a device would wait for a writer, or read what is not a file */
    struct stat fs;
    if (stat(real, &fs) == 0 && !S_ISREG(fs.st_mode))
        return crmm_set_error(CRMM_ERROR_PLUGIN, "cannot load plugin %s: it is not a regular file", real);
    st = check_not_writable(real, "plugin file");
    if (st == CRMM_OK) {
        dir_of(real, dir, sizeof dir);
        st = check_dir_chain(dir);
    }
    if (st != CRMM_OK)
        return st;

    dlerror();
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return crmm_set_error(CRMM_ERROR_PLUGIN, "cannot load plugin %s: %s", real, dlerror());
    void *sym = dlsym(h, CRMM_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        const char *why = dlerror();
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s has no %s() entry function (define it with "
                            "CRMM_PLUGIN_DEFINE(descriptor) of <crmm/plugin.h>, which also exports it): %s", real,
                            CRMM_PLUGIN_ENTRY_SYMBOL, why ? why : "symbol not found");
        dlclose(h);
        return st;
    }
    crmm_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const crmm_plugin *pl = entry();
    if (!pl)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s: %s() returned NULL (it must return the plugin's crmm_plugin "
                            "descriptor)", real, CRMM_PLUGIN_ENTRY_SYMBOL);
    else if (pl->abi_major == 1)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s was built for plugin ABI %u.%u; this crmm loads %d.%d, where "
                            "each parameter is one crmm_param row (offset and range in the row, enums as integers) "
                            "and crmm_plugin has config_size instead of fields: convert and rebuild the plugin "
                            "(man crmm-plugin, PLUGINS BUILT FOR ABI 1.x; docs/plugin-abi.md)",
                            real, pl->abi_major, pl->abi_minor, CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    else if (pl->abi_major != CRMM_PLUGIN_ABI_MAJOR)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s was built for plugin ABI %u.%u; this crmm supports %d.%d "
                            "(rebuild the plugin against this crmm's <crmm/plugin.h>, or use a crmm of plugin ABI %u)",
                            real, pl->abi_major, pl->abi_minor, CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR, pl->abi_major);
    else if (pl->abi_minor > CRMM_PLUGIN_ABI_MINOR)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s needs plugin ABI %u.%u, newer than this crmm's %d.%d (upgrade crmm)",
                            real, pl->abi_major, pl->abi_minor, CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    else if (pl->struct_size < sizeof(crmm_plugin))
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s: descriptor struct_size %u is smaller than ABI %d.%d's %zu "
                            "(start the descriptor with CRMM_PLUGIN_HEADER and rebuild against this crmm's <crmm/plugin.h>)",
                            real, pl->struct_size, CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR, sizeof(crmm_plugin));
    else if (!pl->name)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s has no name (its descriptor's .name is NULL): set .name = \"%s\", "
                            "the <name> of its file crmm_<name>.so", real, expect_name ? expect_name : "<name>");
    else if (expect_name && strcmp(pl->name, expect_name) != 0)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s calls itself '%s' but its file name says '%s' "
                            "(rename the file crmm_%s.so, or set .name = \"%s\")", real, pl->name, expect_name,
                            pl->name, expect_name);
    else if (!pl->create)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s has no create function (set the descriptor's .create)", real);
    else if ((int)pl->upstream < CRMM_UPSTREAM_NONE || (int)pl->upstream > CRMM_UPSTREAM_OPTIONAL)
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin %s: unknown upstream rule %d", real, (int)pl->upstream);
    else if (crmm_param_table_validate(pl) != CRMM_OK)
        st = crmm_error_add_context("plugin %s", real);
    if (st != CRMM_OK) {
        dlclose(h);
        return crmm_last_status() == CRMM_OK ? CRMM_ERROR_PLUGIN : st;
    }
    loaded_plugin *l = calloc(1, sizeof *l);
    if (!l) {
        dlclose(h);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "plugin loader: malloc failed");
    }
    snprintf(l->path, sizeof l->path, "%s", real);
    l->handle = h;
    l->plugin = pl;
    l->next = loaded;
    __atomic_store_n(&loaded, l, __ATOMIC_RELEASE); /* whole before it is seen: a child forked now walks it */
    *out = pl;
    return CRMM_OK;
}

/* Calls fn(dir) for each directory of the search path; stops when fn returns true. */
static bool foreach_dir(const char *dirs, bool (*fn)(const char *dir, void *arg), void *arg)
{
    char path[8192];
    if (!crmm_plugin_search_path(dirs, path, sizeof path))
        return false; /* too long: search nothing rather than a cut path */
    char *save = NULL;
    for (char *d = strtok_r(path, ":", &save); d; d = strtok_r(NULL, ":", &save))
        if (*d && fn(d, arg))
            return true;
    return false;
}

struct find_ctx { const char *name; char found[PATH_MAX]; crmm_suggestion near; };

static bool find_in_dir(const char *dir, void *arg)
{
    struct find_ctx *c = arg;
    snprintf(c->found, sizeof c->found, "%s/crmm_%s.so", dir, c->name);
    struct stat st;
    if (stat(c->found, &st) == 0 || lstat(c->found, &st) == 0)
        return true; /* a link that leads nowhere is found too, so that load_file says what is wrong */
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *e;
    char n[72];
    while ((e = readdir(d))) {
        if (!name_from_path(e->d_name, n, sizeof n))
            continue;
        crmm_suggestion_consider(&c->near, n);
    }
    closedir(d);
    return false;
}

void crmm_plugin_loader_fork_child(void) { pthread_mutex_init(&loader_lock, NULL); }

crmm_status crmm_plugin_load(const char *name_or_path, const char *dirs, const crmm_plugin **out)
{
    if (!name_or_path || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "plugin_load: %s is NULL", name_or_path ? "out" : "name");
    crmm_status st;
    char name[72];
    pthread_mutex_lock(&loader_lock);
    if (strchr(name_or_path, '/')) {
        if (name_or_path[0] != '/')
            st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin path '%s' is relative: give a plugin name or an absolute path",
                                name_or_path);
        else if (!name_from_path(name_or_path, name, sizeof name))
            st = crmm_set_error(CRMM_ERROR_PLUGIN, "plugin file %s is not named crmm_<name>.so", name_or_path);
        else
            st = load_file(name_or_path, name, out);
    } else if (!name_well_formed(name_or_path)) {
        st = crmm_set_error(CRMM_ERROR_PLUGIN, "'%s' is not a plugin name ([a-z0-9_]+) or an absolute path", name_or_path);
    } else {
        struct find_ctx c = {.name = name_or_path};
        crmm_suggestion_start(&c.near, name_or_path);
        if (foreach_dir(dirs, find_in_dir, &c)) {
            st = load_file(c.found, name_or_path, out);
        } else {
            char sp[8192];
            if (!crmm_plugin_search_path(dirs, sp, sizeof sp))
                st = crmm_set_error(CRMM_ERROR_PLUGIN, "no plugin '%s': the plugin search path (plugin_path, "
                                    "$CRMM_PLUGIN_PATH and the installed directory) is longer than %zu characters",
                                    name_or_path, sizeof sp - 1);
            else if (crmm_suggestion_best(&c.near))
                st = crmm_set_error(CRMM_ERROR_PLUGIN, "no plugin '%s' (crmm_%s.so) in %s (did you mean '%s'?)",
                                    name_or_path, name_or_path, sp, crmm_suggestion_best(&c.near));
            else
                st = crmm_set_error(CRMM_ERROR_PLUGIN, "no plugin '%s' (crmm_%s.so) in %s", name_or_path, name_or_path, sp);
        }
    }
    pthread_mutex_unlock(&loader_lock);
    return st;
}

/* The names reported so far grow in one array, so that any number of plugins is reported once. */
struct visit_ctx {
    crmm_plugin_visit_fn fn;
    void *arg;
    int count;
    char (*seen)[72];
    size_t nseen, cap;
};

static bool visit_seen(struct visit_ctx *c, const char *name)
{
    for (size_t j = 0; j < c->nseen; j++)
        if (strcmp(c->seen[j], name) == 0)
            return true;
    if (c->nseen == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        char(*grown)[72] = realloc(c->seen, cap * sizeof *grown);
        if (!grown)
            return false; /* report it again rather than not at all */
        c->seen = grown;
        c->cap = cap;
    }
    snprintf(c->seen[c->nseen++], sizeof c->seen[0], "%s", name);
    return false;
}

static bool visit_dir(const char *dir, void *arg)
{
    struct visit_ctx *c = arg;
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    if (n < 0 && errno == ENOMEM) { /* not a missing folder: a listing that would leave plugins out unsaid */
        crmm_status st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "cannot list the plugins in %s", dir);
        c->fn(dir, NULL, st, crmm_last_error(), c->arg);
        c->count++;
    }
    if (n < 0)
        return false;
    for (int i = 0; i < n; i++) {
        char name[72], path[PATH_MAX];
        if (name_from_path(list[i]->d_name, name, sizeof name) && !visit_seen(c, name)) {
            snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
            const crmm_plugin *pl = NULL;
            /* as crmm_plugin_load(name) would find it in this directory */
            pthread_mutex_lock(&loader_lock);
            crmm_status st = load_file(path, name, &pl);
            pthread_mutex_unlock(&loader_lock);
            c->fn(path, st == CRMM_OK ? pl : NULL, st, st == CRMM_OK ? "" : crmm_last_error(), c->arg);
            c->count++;
        }
        free(list[i]);
    }
    free(list);
    return false;
}

int crmm_plugin_foreach(const char *dirs, crmm_plugin_visit_fn fn, void *arg)
{
    if (!fn)
        return 0;
    struct visit_ctx c = {.fn = fn, .arg = arg};
    foreach_dir(dirs, visit_dir, &c);
    free(c.seen);
    return c.count;
}
