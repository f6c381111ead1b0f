/* check_loader.c — the plugin loader, on the CPU: the broken test-only plugins of
 * tests/plugins/bad_plugin.c (each must fail with CRMM_ERROR_PLUGIN and a message that names the
 * file and what is wrong), and the search order over plugin names and paths (good plugin files
 * copied into temporary directories). Permissions and crmm_plugin_foreach:
 * check_loader_files.c; the resource ABI: check_resource_abi.c. */
#include "build_config.h"
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <cuda_runtime_api.h>
#include "loader_test.h"

/* Load a test plugin by name; it must fail with CRMM_ERROR_PLUGIN and name its file. */
static void expect_load_failure(const char *name)
{
    const crmm_plugin *pl = NULL;
    crmm_clear_error();
    ck_assert_crmm(crmm_plugin_load(name, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    char file[PATH_MAX];
    snprintf(file, sizeof file, "/crmm_%s.so", name);
    ck_assert_error_contains(file);
    ck_assert_error_contains("plugin error: ");
}

/* ---- broken plugins ------------------------------------------------------------------------ */

CRMM_TEST_IN("broken_plugins", well_formed_base_loads)
{
    const crmm_plugin *pl = NULL;
    ck_assert_crmm_ok(crmm_plugin_load("sizeparam", NULL, &pl));
    ck_assert_ptr_nonnull(pl);
    ck_assert_str_eq(pl->name, "sizeparam");
    ck_assert_uint_eq(pl->abi_major, CRMM_PLUGIN_ABI_MAJOR);
}

/* A plugin of another ABI major, or of a newer minor: the message names its ABI and the one
 * this crmm loads (and, for another major, to rebuild). */
static const struct { const char *name; int major, minor; bool rebuild; } other_abis[] = {
    {"badmajor", CRMM_PLUGIN_ABI_MAJOR + 1, 0, true},
    {"newminor", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR + 1, false},
};

CRMM_LOOP_TEST_IN("broken_plugins", other_abi_names_both_versions, 2)
{
    expect_load_failure(other_abis[_i].name);
    char v[32];
    snprintf(v, sizeof v, "ABI %d.%d", other_abis[_i].major, other_abis[_i].minor);
    ck_assert_error_contains(v);
    snprintf(v, sizeof v, "%d.%d", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    ck_assert_error_contains(v);
    if (other_abis[_i].rebuild) { /* rebuild against this crmm, or run the crmm the plugin was built for */
        ck_assert_error_contains("rebuild the plugin against this crmm's <crmm/plugin.h>");
        snprintf(v, sizeof v, "a crmm of plugin ABI %d", other_abis[_i].major);
        ck_assert_error_contains(v);
    }
}

/* The other broken plugins of bad_plugin.c: what each message must say besides the file, and
 * the fix it must name (the author of the plugin reads it, so it says what to change). */
static const struct { const char *name, *says, *also, *fix; } broken[] = {
    {"shortstruct", "struct_size 24", NULL, "start the descriptor with CRMM_PLUGIN_HEADER"},
    {"misnamed", "'some_other_name'", "'misnamed'", "rename the file crmm_some_other_name.so, or set .name = \"misnamed\""},
    {"nullname", "has no name", NULL, "set .name = \"nullname\""},
    {"noentry", CRMM_PLUGIN_ENTRY_SYMBOL, "undefined symbol", "CRMM_PLUGIN_DEFINE(descriptor)"}, /* dlerror()'s words */
    {"nullentry", "returned NULL", NULL, "must return the plugin's crmm_plugin descriptor"},
    {"nocreate", "no create function", NULL, "set the descriptor's .create"},
    {"badrule", "upstream rule 7", NULL, NULL},
    {"dupparam", "'size' appears twice", NULL, NULL},
    {"baddefault", "count", "'many'", NULL},
    {"nochoices", "'mode' has no choices", NULL, NULL},
    {"badfield", "parameter 'size' lies outside the 8-byte config struct (offset 64)", NULL, NULL},
    {"badrange", "default of badrange: size: 1048576 is below the minimum 2097152", NULL, NULL},
};

CRMM_LOOP_TEST_IN("broken_plugins", broken_plugin_is_refused_saying_why, (int)(sizeof broken / sizeof broken[0]))
{
    expect_load_failure(broken[_i].name);
    ck_assert_error_contains(broken[_i].says);
    if (broken[_i].also)
        ck_assert_error_contains(broken[_i].also);
    if (broken[_i].fix)
        ck_assert_error_contains(broken[_i].fix);
    ck_assert_msg(!strstr(crmm_last_error(), "(null)"), "a NULL printed in: %s", crmm_last_error());
}

/* A plugin built against ABI 1.1 (two tables joined by key, enums as text) is refused with what
 * to change, before anything of it is called; creating through it fails the same way. */
CRMM_TEST_IN("broken_plugins", abi_1_plugin_is_refused_saying_what_changed)
{
    expect_load_failure("oldminor");
    ck_assert_error_contains("built for plugin ABI 1.1");
    char v[32];
    snprintf(v, sizeof v, "loads %d.%d", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    ck_assert_error_contains(v);
    ck_assert_error_contains("one crmm_param row");
    ck_assert_error_contains("docs/plugin-abi.md");
    /* docs/ is not installed: the message also names the installed page that says what to do */
    ck_assert_error_contains("man crmm-plugin, PLUGINS BUILT FOR ABI 1.x");
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("oldminor", "size=4KiB", NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
}

CRMM_TEST_IN("broken_plugins", not_a_shared_object_gives_dlerror)
{
    char *dir = new_dir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/crmm_garbage.so", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("this is not an ELF file\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, 0644), 0);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load(path, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_error_contains("cannot load plugin");
    ck_assert_error_contains(path);
    /* dlerror() repeats the path after ours: "...: PATH: invalid ELF header" */
    ck_assert_msg(strstr(strstr(crmm_last_error(), path) + strlen(path), path) != NULL, "no dlerror() in: %s",
                  crmm_last_error());
    free(dir);
}

CRMM_TEST_IN("broken_plugins", failure_is_not_cached)
{
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("badmajor", NULL, &pl), CRMM_ERROR_PLUGIN);
    char first[1024];
    snprintf(first, sizeof first, "%s", crmm_last_error());
    ck_assert_crmm_ok(crmm_plugin_load("host", NULL, &pl));
    ck_assert_str_eq(pl->name, "host");
    pl = NULL;
    ck_assert_crmm(crmm_plugin_load("badmajor", NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_str_eq(crmm_last_error(), first);
    /* a good plugin loaded after a failure works end to end */
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &mr));
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 100, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 100, NULL));
    crmm_resource_release(mr);
}

/* ---- names, paths, search order ------------------------------------------------------------ */

CRMM_TEST_IN("search", null_arguments)
{
    const crmm_plugin *pl;
    ck_assert_crmm(crmm_plugin_load(NULL, NULL, &pl), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_plugin_load("host", NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_plugin_foreach(NULL, NULL, NULL), 0);
}

CRMM_TEST_IN("search", bad_names_are_refused)
{
    static const char *const names[] = {"Host", "..", "", "ho st", "host.so", "crmm_host.so", "h\xc3\xa9"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const crmm_plugin *pl = NULL;
        ck_assert_crmm(crmm_plugin_load(names[i], NULL, &pl), CRMM_ERROR_PLUGIN);
        ck_assert_ptr_null(pl);
        ck_assert_error_contains("is not a plugin name");
    }
}

CRMM_TEST_IN("search", relative_path_is_refused)
{
    static const char *const paths[] = {"./crmm_host.so", "plugins/built/crmm_host.so", "../crmm_host.so"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const crmm_plugin *pl = NULL;
        ck_assert_crmm(crmm_plugin_load(paths[i], NULL, &pl), CRMM_ERROR_PLUGIN);
        ck_assert_ptr_null(pl);
        ck_assert_error_contains("relative");
        ck_assert_error_contains(paths[i]);
    }
}

CRMM_TEST_IN("search", absolute_path_must_be_named_like_a_plugin)
{
    char path[PATH_MAX], other[PATH_MAX];
    char *dir = new_dir_with_host(0755, path);
    snprintf(other, sizeof other, "%s/libhost.so", dir);
    ck_assert_int_eq(rename(path, other), 0);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load(other, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("crmm_<name>.so");
    /* and named right, a copy that calls itself something else is refused */
    snprintf(other, sizeof other, "%s/crmm_notahost.so", dir);
    copy_plugin("host", dir, "notahost", 0755);
    ck_assert_crmm(crmm_plugin_load(other, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("'host'");
    ck_assert_error_contains("'notahost'");
    free(dir);
}

CRMM_TEST_IN("search", missing_plugin_lists_directories_and_suggests)
{
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("nosuchplugin", "/nonexistent/dir", &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_error_contains("no plugin 'nosuchplugin'");
    ck_assert_error_contains("crmm_nosuchplugin.so");
    ck_assert_error_contains("/nonexistent/dir");
    ck_assert_error_contains(built_dir());
    ck_assert_error_contains(test_plugin_dir());
    ck_assert_msg(strstr(crmm_last_error(), "did you mean") == NULL, "%s", crmm_last_error());

    ck_assert_crmm(crmm_plugin_load("hots", NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("did you mean 'host'");
    ck_assert_crmm(crmm_plugin_load("tempalte", NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("did you mean 'template'");
}

/* A plugin that is a symbolic link loop or a link to nothing is named as such, not "no plugin
 * 'x' (did you mean 'x'?)". */
CRMM_TEST_IN("search", broken_links_are_named)
{
    char *d = new_dir();
    char loop[PATH_MAX], gone[PATH_MAX];
    snprintf(loop, sizeof loop, "%s/crmm_loopy.so", d);
    snprintf(gone, sizeof gone, "%s/crmm_gone.so", d);
    ck_assert_int_eq(symlink(loop, loop), 0);
    ck_assert_int_eq(symlink("/nonexistent/crmm_gone.so", gone), 0);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("loopy", d, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains(loop);
    ck_assert_error_contains("symbolic link loop");
    ck_assert_msg(strstr(crmm_last_error(), "did you mean") == NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_plugin_load("gone", d, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("dangling symbolic link (to /nonexistent/crmm_gone.so");
    ck_assert_msg(strstr(crmm_last_error(), "did you mean") == NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_plugin_load(loop, NULL, &pl), CRMM_ERROR_PLUGIN); /* by path too */
    ck_assert_error_contains("symbolic link loop");
    ck_assert_ptr_null(pl);
    free(d);
}

CRMM_TEST_IN("search", search_path_order)
{
    char buf[8192];
    const char *env = getenv("CRMM_PLUGIN_PATH");
    ck_assert_ptr_eq(crmm_plugin_search_path("/a:/b", buf, sizeof buf), buf);
    char expect[8192];
    snprintf(expect, sizeof expect, "/a:/b:%s:", env);
    ck_assert_msg(strncmp(buf, expect, strlen(expect)) == 0, "search path %s does not start with %s", buf, expect);
    ck_assert_msg(strlen(buf) > strlen(expect), "no installed directory at the end of %s", buf);
    ck_assert_ptr_eq(crmm_plugin_search_path(NULL, buf, sizeof buf), buf);
    snprintf(expect, sizeof expect, "%s:", env);
    ck_assert_msg(strncmp(buf, expect, strlen(expect)) == 0, "search path %s does not start with %s", buf, expect);
    /* without $CRMM_PLUGIN_PATH only the installed directory is left */
    unsetenv("CRMM_PLUGIN_PATH");
    ck_assert_ptr_eq(crmm_plugin_search_path(NULL, buf, sizeof buf), buf);
    ck_assert_msg(buf[0] == '/' && strchr(buf, ':') == NULL, "installed directory alone: %s", buf);
}

/* A NULL buffer gets NULL, as a path that does not fit does, whatever size comes with it. */
CRMM_TEST_IN("search", search_path_into_null_buffer)
{
    ck_assert_ptr_null(crmm_plugin_search_path("/a:/b", NULL, 8192));
    ck_assert_ptr_null(crmm_plugin_search_path(NULL, NULL, 64));
    ck_assert_ptr_null(crmm_plugin_search_path(NULL, NULL, 0));
}

CRMM_TEST_IN("search", first_directory_wins)
{
    char pa[PATH_MAX], pb[PATH_MAX], ab[2 * PATH_MAX + 2], ba[2 * PATH_MAX + 2];
    char *a = new_dir_with_host(0755, pa), *b = new_dir_with_host(0755, pb);
    snprintf(ab, sizeof ab, "%s:%s", a, b);
    snprintf(ba, sizeof ba, "%s:%s", b, a);
    const crmm_plugin *from_a, *from_b, *from_env, *pl;
    ck_assert_crmm_ok(crmm_plugin_load(pa, NULL, &from_a));
    ck_assert_crmm_ok(crmm_plugin_load(pb, NULL, &from_b));
    ck_assert_crmm_ok(crmm_plugin_load("host", NULL, &from_env));
    ck_assert_ptr_ne(from_a, from_b); /* two files, two copies of the code */
    ck_assert_ptr_ne(from_a, from_env);
    ck_assert_crmm_ok(crmm_plugin_load("host", ab, &pl));
    ck_assert_ptr_eq(pl, from_a);
    ck_assert_crmm_ok(crmm_plugin_load("host", ba, &pl));
    ck_assert_ptr_eq(pl, from_b);
    /* dirs come before $CRMM_PLUGIN_PATH, which comes before the installed directory */
    char env[3 * PATH_MAX];
    snprintf(env, sizeof env, "%s:%s", b, getenv("CRMM_PLUGIN_PATH"));
    setenv("CRMM_PLUGIN_PATH", env, 1);
    ck_assert_crmm_ok(crmm_plugin_load("host", NULL, &pl));
    ck_assert_ptr_eq(pl, from_b);
    ck_assert_crmm_ok(crmm_plugin_load("host", a, &pl));
    ck_assert_ptr_eq(pl, from_a);
    free(a);
    free(b);
}

CRMM_TEST_IN("search", loading_twice_gives_the_same_descriptor)
{
    const crmm_plugin *p1, *p2, *p3, *p4;
    ck_assert_crmm_ok(crmm_plugin_load("host", NULL, &p1));
    ck_assert_crmm_ok(crmm_plugin_load("host", NULL, &p2));
    ck_assert_ptr_eq(p1, p2);
    char path[PATH_MAX], real[PATH_MAX];
    plugin_file("host", path, sizeof path); /* the plugins/built link */
    ck_assert_crmm_ok(crmm_plugin_load(path, NULL, &p3));
    ck_assert_ptr_eq(p1, p3);
    ck_assert_ptr_nonnull(realpath(path, real)); /* the file behind it */
    ck_assert_crmm_ok(crmm_plugin_load(real, NULL, &p4));
    ck_assert_ptr_eq(p1, p4);
}

CRMM_TEST_IN("search", cached_plugin_still_checks_its_name)
{
    /* crmm_alias.so is a link to the host plugin: asking for "alias" must not give "host", even
     * after the file behind it has been loaded (and cached) as "host". */
    const crmm_plugin *pl;
    ck_assert_crmm_ok(crmm_plugin_load("host", NULL, &pl));
    char *dir = new_dir();
    char target[PATH_MAX], real[PATH_MAX], link[PATH_MAX];
    plugin_file("host", target, sizeof target);
    ck_assert_ptr_nonnull(realpath(target, real));
    snprintf(link, sizeof link, "%s/crmm_alias.so", dir);
    ck_assert_int_eq(symlink(real, link), 0);
    pl = NULL;
    ck_assert_crmm(crmm_plugin_load("alias", dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_error_contains("'alias'");
    ck_assert_crmm(crmm_plugin_load(link, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    free(dir);
}

int main(void)
{
    return CRMM_TEST_MAIN_CASES("loader", {"broken_plugins", 0}, {"search", 0});
}
