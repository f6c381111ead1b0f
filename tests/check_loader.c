/* check_loader.c — the plugin loader and the resource ABI's basics, on the CPU.
 *
 * The loader half loads the broken test-only plugins of tests/plugins/bad_plugin.c (each must
 * fail with CRMM_ERROR_PLUGIN and a message that names the file and what is wrong), copies good
 * plugin files into temporary directories to check the search order, the permission checks and
 * crmm_plugin_foreach, and builds resources through plugins whose create misbehaves. The other
 * half checks the resource ABI over the `host` plugin: reference counts, the leak report, NULL
 * arguments, find_kind and control. */
#include "build_config.h"
#include <dirent.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "test_support.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* The first directory of $CRMM_PLUGIN_PATH: the build tree's plugins/built. */
static const char *built_dir(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("CRMM_PLUGIN_PATH");
    ck_assert_msg(env && *env, "CRMM_PLUGIN_PATH is not set: run through make check");
    snprintf(dir, sizeof dir, "%s", env);
    char *colon = strchr(dir, ':');
    if (colon)
        *colon = '\0';
    return dir;
}

static const char *test_plugin_dir(void)
{
    const char *d = getenv("CRMM_TEST_PLUGIN_DIR");
    ck_assert_msg(d && *d, "CRMM_TEST_PLUGIN_DIR is not set: run through make check");
    return d;
}

/* Path of a built plugin (`host`) or a test-only one (`badmajor`), in buf. */
static const char *plugin_file(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/crmm_%s.so", built_dir(), name);
    if (access(buf, R_OK) != 0)
        snprintf(buf, n, "%s/crmm_%s.so", test_plugin_dir(), name);
    ck_assert_msg(access(buf, R_OK) == 0, "plugin file %s is missing", buf);
    return buf;
}

/* Copy plugin `name`'s file into dir as crmm_<as>.so with `mode`. */
static void copy_plugin(const char *name, const char *dir, const char *as, mode_t mode)
{
    char src[PATH_MAX], dst[PATH_MAX];
    plugin_file(name, src, sizeof src);
    snprintf(dst, sizeof dst, "%s/crmm_%s.so", dir, as);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    ck_assert_msg(in && out, "cannot copy %s to %s", src, dst);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, k, out), k);
    fclose(in);
    fclose(out);
    ck_assert_int_eq(chmod(dst, mode), 0);
}

static char *new_dir(void)
{
    char *d = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    return d;
}

#define ck_assert_error_has(needle) \
    ck_assert_msg(strstr(crmm_last_error(), (needle)) != NULL, "error message lacks \"%s\": %s", (needle), \
                  crmm_last_error())

/* Load a test plugin by name; it must fail with CRMM_ERROR_PLUGIN and name its file. */
static void expect_load_failure(const char *name)
{
    const crmm_plugin *pl = NULL;
    crmm_clear_error();
    ck_assert_crmm(crmm_plugin_load(name, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    char file[PATH_MAX];
    snprintf(file, sizeof file, "/crmm_%s.so", name);
    ck_assert_error_has(file);
    ck_assert_error_has("plugin error: ");
}

/* ---- broken plugins ------------------------------------------------------------------------ */

START_TEST(well_formed_base_loads)
{
    const crmm_plugin *pl = NULL;
    ck_assert_crmm_ok(crmm_plugin_load("sizeparam", NULL, &pl));
    ck_assert_ptr_nonnull(pl);
    ck_assert_str_eq(pl->name, "sizeparam");
    ck_assert_uint_eq(pl->abi_major, CRMM_PLUGIN_ABI_MAJOR);
}
END_TEST

START_TEST(wrong_abi_major_names_both_versions)
{
    expect_load_failure("badmajor");
    char v[32];
    snprintf(v, sizeof v, "ABI %d.0", CRMM_PLUGIN_ABI_MAJOR + 1);
    ck_assert_error_has(v);
    snprintf(v, sizeof v, "%d.%d", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    ck_assert_error_has(v);
    ck_assert_error_has("rebuild");
}
END_TEST

START_TEST(too_new_minor_names_both_versions)
{
    expect_load_failure("newminor");
    char v[32];
    snprintf(v, sizeof v, "ABI %d.%d", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR + 1);
    ck_assert_error_has(v);
    snprintf(v, sizeof v, "%d.%d", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    ck_assert_error_has(v);
}
END_TEST

START_TEST(short_struct_is_refused)
{
    expect_load_failure("shortstruct");
    ck_assert_error_has("struct_size 24");
}
END_TEST

START_TEST(name_mismatch_names_both)
{
    expect_load_failure("misnamed");
    ck_assert_error_has("'some_other_name'");
    ck_assert_error_has("'misnamed'");
}
END_TEST

START_TEST(missing_entry_symbol_gives_dlerror)
{
    expect_load_failure("noentry");
    ck_assert_error_has(CRMM_PLUGIN_ENTRY_SYMBOL);
    ck_assert_error_has("undefined symbol"); /* dlerror()'s words */
}
END_TEST

START_TEST(entry_returning_null_is_refused)
{
    expect_load_failure("nullentry");
    ck_assert_error_has("returned NULL");
}
END_TEST

START_TEST(missing_create_is_refused)
{
    expect_load_failure("nocreate");
    ck_assert_error_has("no create function");
}
END_TEST

START_TEST(unknown_upstream_rule_is_refused)
{
    expect_load_failure("badrule");
    ck_assert_error_has("upstream rule 7");
}
END_TEST

START_TEST(duplicate_parameter_is_refused)
{
    expect_load_failure("dupparam");
    ck_assert_error_has("'size' appears twice");
}
END_TEST

START_TEST(bad_default_is_refused)
{
    expect_load_failure("baddefault");
    ck_assert_error_has("count");
    ck_assert_error_has("'many'");
}
END_TEST

START_TEST(enum_without_choices_is_refused)
{
    expect_load_failure("nochoices");
    ck_assert_error_has("'mode' has no choices");
}
END_TEST

START_TEST(row_outside_the_config_struct_is_refused)
{
    expect_load_failure("badfield");
    ck_assert_error_has("parameter 'size' lies outside the 8-byte config struct (offset 64)");
}
END_TEST

START_TEST(default_outside_its_range_is_refused)
{
    expect_load_failure("badrange");
    ck_assert_error_has("default of badrange: size: 1048576 is below the minimum 2097152");
}
END_TEST

/* A plugin built against ABI 1.1 (two tables joined by key, enums as text) is refused with what
 * to change, before anything of it is called; creating through it fails the same way. */
START_TEST(abi_1_plugin_is_refused_saying_what_changed)
{
    expect_load_failure("oldminor");
    ck_assert_error_has("built for plugin ABI 1.1");
    char v[32];
    snprintf(v, sizeof v, "loads %d.%d", CRMM_PLUGIN_ABI_MAJOR, CRMM_PLUGIN_ABI_MINOR);
    ck_assert_error_has(v);
    ck_assert_error_has("one crmm_param row");
    ck_assert_error_has("docs/plugin-abi.md");
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("oldminor", "size=4KiB", NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
}
END_TEST

START_TEST(not_a_shared_object_gives_dlerror)
{
    char *dir = new_dir();
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/crmm_garbage.so", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("this is not an ELF file\n", f);
    fclose(f);
    chmod(path, 0644);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load(path, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_error_has("cannot load plugin");
    ck_assert_error_has(path);
    /* dlerror() repeats the path after ours: "...: PATH: invalid ELF header" */
    ck_assert_msg(strstr(strstr(crmm_last_error(), path) + strlen(path), path) != NULL, "no dlerror() in: %s",
                  crmm_last_error());
    free(dir);
}
END_TEST

START_TEST(failure_is_not_cached)
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
END_TEST

/* ---- names, paths, search order ------------------------------------------------------------ */

START_TEST(null_arguments)
{
    const crmm_plugin *pl;
    ck_assert_crmm(crmm_plugin_load(NULL, NULL, &pl), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_plugin_load("host", NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(crmm_plugin_foreach(NULL, NULL, NULL), 0);
}
END_TEST

START_TEST(bad_names_are_refused)
{
    static const char *const names[] = {"Host", "..", "", "ho st", "host.so", "crmm_host.so", "h\xc3\xa9"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const crmm_plugin *pl = NULL;
        ck_assert_crmm(crmm_plugin_load(names[i], NULL, &pl), CRMM_ERROR_PLUGIN);
        ck_assert_ptr_null(pl);
        ck_assert_error_has("is not a plugin name");
    }
}
END_TEST

START_TEST(relative_path_is_refused)
{
    static const char *const paths[] = {"./crmm_host.so", "plugins/built/crmm_host.so", "../crmm_host.so"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const crmm_plugin *pl = NULL;
        ck_assert_crmm(crmm_plugin_load(paths[i], NULL, &pl), CRMM_ERROR_PLUGIN);
        ck_assert_ptr_null(pl);
        ck_assert_error_has("relative");
        ck_assert_error_has(paths[i]);
    }
}
END_TEST

START_TEST(absolute_path_must_be_named_like_a_plugin)
{
    char *dir = new_dir();
    copy_plugin("host", dir, "host", 0755);
    char path[PATH_MAX], other[PATH_MAX];
    snprintf(path, sizeof path, "%s/crmm_host.so", dir);
    snprintf(other, sizeof other, "%s/libhost.so", dir);
    ck_assert_int_eq(rename(path, other), 0);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load(other, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has("crmm_<name>.so");
    /* and named right, a copy that calls itself something else is refused */
    snprintf(other, sizeof other, "%s/crmm_notahost.so", dir);
    copy_plugin("host", dir, "notahost", 0755);
    ck_assert_crmm(crmm_plugin_load(other, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has("'host'");
    ck_assert_error_has("'notahost'");
    free(dir);
}
END_TEST

START_TEST(missing_plugin_lists_directories_and_suggests)
{
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("nosuchplugin", "/nonexistent/dir", &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_error_has("no plugin 'nosuchplugin'");
    ck_assert_error_has("crmm_nosuchplugin.so");
    ck_assert_error_has("/nonexistent/dir");
    ck_assert_error_has(built_dir());
    ck_assert_error_has(test_plugin_dir());
    ck_assert_msg(strstr(crmm_last_error(), "did you mean") == NULL, "%s", crmm_last_error());

    ck_assert_crmm(crmm_plugin_load("hots", NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has("did you mean 'host'");
    ck_assert_crmm(crmm_plugin_load("tempalte", NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has("did you mean 'template'");
}
END_TEST

/* A plugin that is a symbolic link loop or a link to nothing is named as such, not "no plugin
 * 'x' (did you mean 'x'?)". */
START_TEST(broken_links_are_named)
{
    char *d = new_dir();
    char loop[PATH_MAX], gone[PATH_MAX];
    snprintf(loop, sizeof loop, "%s/crmm_loopy.so", d);
    snprintf(gone, sizeof gone, "%s/crmm_gone.so", d);
    ck_assert_int_eq(symlink(loop, loop), 0);
    ck_assert_int_eq(symlink("/nonexistent/crmm_gone.so", gone), 0);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("loopy", d, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has(loop);
    ck_assert_error_has("symbolic link loop");
    ck_assert_msg(strstr(crmm_last_error(), "did you mean") == NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_plugin_load("gone", d, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has("dangling symbolic link (to /nonexistent/crmm_gone.so");
    ck_assert_msg(strstr(crmm_last_error(), "did you mean") == NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_plugin_load(loop, NULL, &pl), CRMM_ERROR_PLUGIN); /* by path too */
    ck_assert_error_has("symbolic link loop");
    ck_assert_ptr_null(pl);
    free(d);
}
END_TEST

START_TEST(search_path_order)
{
    char buf[8192];
    const char *env = getenv("CRMM_PLUGIN_PATH");
    crmm_plugin_search_path("/a:/b", buf, sizeof buf);
    char expect[8192];
    snprintf(expect, sizeof expect, "/a:/b:%s:", env);
    ck_assert_msg(strncmp(buf, expect, strlen(expect)) == 0, "search path %s does not start with %s", buf, expect);
    ck_assert_msg(strlen(buf) > strlen(expect), "no installed directory at the end of %s", buf);
    crmm_plugin_search_path(NULL, buf, sizeof buf);
    snprintf(expect, sizeof expect, "%s:", env);
    ck_assert_msg(strncmp(buf, expect, strlen(expect)) == 0, "search path %s does not start with %s", buf, expect);
    /* without $CRMM_PLUGIN_PATH only the installed directory is left */
    unsetenv("CRMM_PLUGIN_PATH");
    crmm_plugin_search_path(NULL, buf, sizeof buf);
    ck_assert_msg(buf[0] == '/' && strchr(buf, ':') == NULL, "installed directory alone: %s", buf);
}
END_TEST

START_TEST(first_directory_wins)
{
    char *a = new_dir(), *b = new_dir();
    copy_plugin("host", a, "host", 0755);
    copy_plugin("host", b, "host", 0755);
    char pa[PATH_MAX], pb[PATH_MAX], ab[2 * PATH_MAX + 2], ba[2 * PATH_MAX + 2];
    snprintf(pa, sizeof pa, "%s/crmm_host.so", a);
    snprintf(pb, sizeof pb, "%s/crmm_host.so", b);
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
END_TEST

START_TEST(loading_twice_gives_the_same_descriptor)
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
END_TEST

START_TEST(cached_plugin_still_checks_its_name)
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
    ck_assert_error_has("'alias'");
    ck_assert_crmm(crmm_plugin_load(link, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    free(dir);
}
END_TEST

/* ---- permissions --------------------------------------------------------------------------- */

/* A group no user or group entry names: a file with it is writable by a group its owner is not
 * alone in. Giving a file that group needs root; 0 when this test cannot. */
static gid_t unknown_group_of(const char *path)
{
    for (gid_t g = 60001; g < 65000; g++)
        if (!getgrgid(g))
            return chown(path, (uid_t)-1, g) == 0 ? g : 0;
    return 0;
}

/* True when the group of `path` is its owner's private group (the only member, primary group
 * of no one else), the case the loader accepts group-writable. */
static bool owners_private_group(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    struct group *gr = getgrgid(st.st_gid);
    struct passwd *owner = getpwuid(st.st_uid);
    if (!gr || !owner || (gr->gr_mem[0] && (strcmp(gr->gr_mem[0], owner->pw_name) != 0 || gr->gr_mem[1])))
        return false;
    bool alone = owner->pw_gid == st.st_gid;
    setpwent();
    for (struct passwd *pw; (pw = getpwent());)
        if (pw->pw_gid == st.st_gid && pw->pw_uid != st.st_uid)
            alone = false;
    endpwent();
    return alone;
}

START_TEST(group_writable_file_is_refused)
{
    char *dir = new_dir();
    copy_plugin("host", dir, "host", 0775);
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/crmm_host.so", dir);
    if (!unknown_group_of(file)) {
        fprintf(stderr, "group_writable_file_is_refused: skipped (giving a file another group needs root)\n");
        free(dir);
        return;
    }
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("host", dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    char fix[PATH_MAX + 32];
    snprintf(fix, sizeof fix, "chmod g-w %s/crmm_host.so", dir);
    ck_assert_error_has(fix);
    ck_assert_error_has("writable by group");
    /* not a silent fallback to the next directory, and not cached */
    ck_assert_crmm(crmm_plugin_load("host", dir, &pl), CRMM_ERROR_PLUGIN);
    free(dir);
}
END_TEST

START_TEST(world_writable_file_is_refused)
{
    char *dir = new_dir();
    copy_plugin("host", dir, "host", 0757);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/crmm_host.so", dir);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load(path, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has("writable by others");
    ck_assert_error_has("chmod go-w");
    /* fixed as the message says, it loads */
    ck_assert_int_eq(chmod(path, 0755), 0);
    ck_assert_crmm_ok(crmm_plugin_load(path, NULL, &pl));
    ck_assert_str_eq(pl->name, "host");
    free(dir);
}
END_TEST

/* Group-writable (umask 002, or a tarball git archive made, unpacked as root) is accepted where
 * the group is the owner's private group: no one else can write through it. */
START_TEST(directory_writable_by_owners_private_group_loads)
{
    char *dir = new_dir();
    copy_plugin("host", dir, "host", 0775);
    ck_assert_int_eq(chmod(dir, 0775), 0);
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/crmm_host.so", dir);
    if (!owners_private_group(dir) || !owners_private_group(file)) {
        fprintf(stderr, "directory_writable_by_owners_private_group_loads: skipped (%s's group is not its owner's private group)\n", dir);
        free(dir);
        return;
    }
    const crmm_plugin *pl = NULL;
    ck_assert_crmm_ok(crmm_plugin_load("host", dir, &pl));
    ck_assert_ptr_nonnull(pl);
    free(dir);
}
END_TEST

START_TEST(writable_directory_is_refused)
{
    static const mode_t modes[] = {0775, 0777, 01777};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char *dir = new_dir();
        copy_plugin("host", dir, "host", 0755);
        ck_assert_int_eq(chmod(dir, modes[i]), 0);
        if (modes[i] == 0775 && !unknown_group_of(dir)) {
            fprintf(stderr, "writable_directory_is_refused: mode 0775 skipped (giving a directory another group needs root)\n");
            free(dir);
            continue;
        }
        const crmm_plugin *pl = NULL;
        ck_assert_crmm(crmm_plugin_load("host", dir, &pl), CRMM_ERROR_PLUGIN);
        ck_assert_ptr_null(pl);
        ck_assert_error_has("plugin directory");
        char fix[PATH_MAX + 32];
        snprintf(fix, sizeof fix, "chmod %s-w %s", modes[i] == 0775 ? "g" : "go", dir);
        ck_assert_error_has(fix);
        free(dir);
    }
}
END_TEST

START_TEST(writable_directory_above_is_refused)
{
    /* The plugin and its directory are kept, but a directory above them is open: anyone could
     * swap the kept directory for one of their own. */
    char *top = new_dir();
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/plugins", top);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    copy_plugin("host", sub, "host", 0755);
    ck_assert_int_eq(chmod(top, 0777), 0);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("host", sub, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_error_has("directory above a plugin");
    ck_assert_error_has(top);
    /* kept again: loads */
    ck_assert_int_eq(chmod(top, 0755), 0);
    ck_assert_crmm_ok(crmm_plugin_load("host", sub, &pl));
    ck_assert_ptr_nonnull(pl);
    free(top);
}
END_TEST

START_TEST(link_in_writable_directory_is_refused)
{
    /* A link to a well-kept plugin, in a directory anyone can write: anyone could point it at
     * other code, so the directory the link is in counts too. */
    char *safe = new_dir(), *open_dir = new_dir();
    copy_plugin("host", safe, "host", 0755);
    char target[PATH_MAX], link[PATH_MAX];
    snprintf(target, sizeof target, "%s/crmm_host.so", safe);
    snprintf(link, sizeof link, "%s/crmm_host.so", open_dir);
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_int_eq(chmod(open_dir, 0777), 0);
    const crmm_plugin *pl = NULL, *direct;
    ck_assert_crmm_ok(crmm_plugin_load(target, NULL, &direct)); /* loaded (and cached) first */
    ck_assert_crmm(crmm_plugin_load("host", open_dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has(open_dir);
    ck_assert_crmm(crmm_plugin_load(link, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_has(open_dir);
    ck_assert_ptr_null(pl);
    /* the same link in a kept directory is fine */
    ck_assert_int_eq(chmod(open_dir, 0755), 0);
    ck_assert_crmm_ok(crmm_plugin_load("host", open_dir, &pl));
    ck_assert_ptr_eq(pl, direct);
    free(safe);
    free(open_dir);
}
END_TEST

/* ---- crmm_plugin_foreach ------------------------------------------------------------------- */

typedef struct visit_entry {
    char path[PATH_MAX];
    const crmm_plugin *plugin;
    crmm_status status;
    char error[1024];
} visit_entry;

typedef struct visit_log { visit_entry e[128]; int n; } visit_log;

static void record_visit(const char *path, const crmm_plugin *plugin, crmm_status status, const char *error, void *arg)
{
    visit_log *v = arg;
    ck_assert_int_lt(v->n, 128);
    visit_entry *e = &v->e[v->n++];
    snprintf(e->path, sizeof e->path, "%s", path);
    e->plugin = plugin;
    e->status = status;
    snprintf(e->error, sizeof e->error, "%s", error ? error : "(null)");
}

static const visit_entry *find_visit(const visit_log *v, const char *file)
{
    for (int i = 0; i < v->n; i++) {
        const char *base = strrchr(v->e[i].path, '/');
        if (base && strcmp(base + 1, file) == 0)
            return &v->e[i];
    }
    return NULL;
}

START_TEST(foreach_reports_good_and_broken)
{
    char *a = new_dir(), *b = new_dir();
    copy_plugin("host", a, "host", 0755);
    copy_plugin("badmajor", a, "badmajor", 0755);
    copy_plugin("host", b, "host", 0755);     /* hidden by a's */
    copy_plugin("template", b, "template", 0755);
    char dirs[2 * PATH_MAX + 2];
    snprintf(dirs, sizeof dirs, "%s:%s", a, b);
    unsetenv("CRMM_PLUGIN_PATH"); /* only a, b and the installed directory (empty or absent) */
    visit_log *v = calloc(1, sizeof *v);
    int n = crmm_plugin_foreach(dirs, record_visit, v);
    ck_assert_int_eq(n, v->n);
    int host_seen = 0;
    for (int i = 0; i < v->n; i++)
        host_seen += strstr(v->e[i].path, "/crmm_host.so") != NULL;
    ck_assert_int_eq(host_seen, 1);
    const visit_entry *host = find_visit(v, "crmm_host.so"), *bad = find_visit(v, "crmm_badmajor.so"),
                      *tmpl = find_visit(v, "crmm_template.so");
    ck_assert_ptr_nonnull(host);
    ck_assert_ptr_nonnull(bad);
    ck_assert_ptr_nonnull(tmpl);
    ck_assert_msg(strncmp(host->path, a, strlen(a)) == 0, "host reported from %s, not the first directory", host->path);
    ck_assert_crmm_ok(host->status);
    ck_assert_ptr_nonnull(host->plugin);
    ck_assert_str_eq(host->plugin->name, "host");
    ck_assert_str_eq(host->error, "");
    ck_assert_int_eq(bad->status, CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(bad->plugin);
    ck_assert_msg(strstr(bad->error, "ABI") && strstr(bad->error, "crmm_badmajor.so"), "error: %s", bad->error);
    ck_assert_ptr_nonnull(tmpl->plugin);
    ck_assert_str_eq(tmpl->plugin->name, "template");
    free(v);
    free(a);
    free(b);
}
END_TEST

/* Count the distinct crmm_<name>.so names in the ':'-list `dirs`. */
static int count_plugin_names(const char *dirs)
{
    char names[128][80];
    int n = 0;
    char *copy = strdup(dirs), *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        DIR *dd = opendir(d);
        struct dirent *e;
        while (dd && (e = readdir(dd))) {
            size_t len = strlen(e->d_name);
            if (len <= 8 || strncmp(e->d_name, "crmm_", 5) != 0 || strcmp(e->d_name + len - 3, ".so") != 0)
                continue;
            bool dup = false;
            for (int i = 0; i < n; i++)
                dup |= strcmp(names[i], e->d_name) == 0;
            if (!dup && n < 128)
                snprintf(names[n++], sizeof names[0], "%s", e->d_name);
        }
        if (dd)
            closedir(dd);
    }
    free(copy);
    return n;
}

START_TEST(foreach_lists_every_plugin_once)
{
    visit_log *v = calloc(1, sizeof *v);
    int n = crmm_plugin_foreach(NULL, record_visit, v);
    char sp[8192];
    crmm_plugin_search_path(NULL, sp, sizeof sp);
    ck_assert_int_eq(n, count_plugin_names(sp));
    for (int i = 0; i < v->n; i++)
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(strrchr(v->e[i].path, '/'), strrchr(v->e[j].path, '/')) != 0, "%s and %s both reported",
                          v->e[i].path, v->e[j].path);
    static const char *const good[] = {"crmm_host.so", "crmm_cuda.so", "crmm_template.so", "crmm_sizeparam.so"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const visit_entry *e = find_visit(v, good[i]);
        ck_assert_msg(e != NULL, "%s not reported", good[i]);
        ck_assert_msg(e->status == CRMM_OK && e->plugin, "%s: %s", good[i], e->error);
    }
    static const char *const bad[] = {"crmm_badmajor.so", "crmm_noentry.so", "crmm_misnamed.so", "crmm_dupparam.so"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const visit_entry *e = find_visit(v, bad[i]);
        ck_assert_msg(e != NULL, "%s not reported", bad[i]);
        ck_assert_int_eq(e->status, CRMM_ERROR_PLUGIN);
        ck_assert_ptr_null(e->plugin);
        ck_assert_msg(strstr(e->error, bad[i]) != NULL, "%s: error does not name the file: %s", bad[i], e->error);
    }
    free(v);
}
END_TEST

START_TEST(foreach_reports_many_plugins_once)
{
    /* more plugins than fit any small fixed table: each name still reported once */
    char *a = new_dir(), *b = new_dir();
    enum { N = 80 };
    for (int i = 0; i < N; i++) {
        char as[32];
        snprintf(as, sizeof as, "copy%02d", i);
        copy_plugin("noentry", a, as, 0755); /* small, and fails fast */
        copy_plugin("noentry", b, as, 0755);
    }
    char dirs[2 * PATH_MAX + 2];
    snprintf(dirs, sizeof dirs, "%s:%s", a, b);
    unsetenv("CRMM_PLUGIN_PATH"); /* a, b, then the installed directory (if any) */
    visit_log *v = calloc(1, sizeof *v);
    int n = crmm_plugin_foreach(dirs, record_visit, v);
    ck_assert_int_eq(n, v->n);
    int from_a = 0;
    for (int i = 0; i < v->n; i++) {
        ck_assert_msg(strncmp(v->e[i].path, b, strlen(b)) != 0, "%s reported from the second directory", v->e[i].path);
        from_a += strncmp(v->e[i].path, a, strlen(a)) == 0;
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(strrchr(v->e[i].path, '/'), strrchr(v->e[j].path, '/')) != 0, "%s reported twice",
                          v->e[i].path);
    }
    ck_assert_int_eq(from_a, N);
    free(v);
    free(a);
    free(b);
}
END_TEST

/* ---- crmm_resource_create through misbehaving plugins -------------------------------------- */

START_TEST(create_failure_keeps_the_plugins_status_and_message)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("createfail", NULL, NULL, &mr), CRMM_ERROR_UNSUPPORTED);
    ck_assert_ptr_null(mr);
    ck_assert_error_has("createfail: this plugin always refuses to create a resource");
}
END_TEST

START_TEST(create_failure_without_message_gets_one)
{
    crmm_resource *mr = NULL;
    crmm_set_error(CRMM_ERROR_CONFIG, "a stale message from before");
    ck_assert_crmm(crmm_resource_create("createnomsg", NULL, NULL, &mr), CRMM_ERROR_BAD_ALLOC);
    ck_assert_ptr_null(mr);
    ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_BAD_ALLOC);
    ck_assert_error_has("createnomsg");
    ck_assert_error_has("without a message");
    ck_assert_msg(strstr(crmm_last_error(), "stale") == NULL, "%s", crmm_last_error());
}
END_TEST

START_TEST(resource_without_deallocate_is_refused_and_freed)
{
    crmm_resource *host = NULL, *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    ck_assert_crmm(crmm_resource_create("badresource", NULL, host, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
    ck_assert_error_has("badresource");
    ck_assert_error_has("deallocate");
    /* the half-built resource was destroyed and gave its upstream reference back (the sanitizer
     * build checks that nothing leaked) */
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    ck_assert_crmm(crmm_resource_create("badresource", NULL, NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
    crmm_resource_release(host);
}
END_TEST

START_TEST(create_refuses_broken_plugins)
{
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create("nocreate", NULL, NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_error_has("crmm_nocreate.so");
    ck_assert_crmm(crmm_resource_create("nosuchplugin", NULL, NULL, &mr), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(mr);
}
END_TEST

START_TEST(upstream_rules)
{
    crmm_resource *host = NULL, *mr = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &host));
    ck_assert_crmm(crmm_resource_create("host", NULL, host, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_has("takes no upstream");
    ck_assert_ptr_null(mr);
    ck_assert_crmm(crmm_resource_create("template", NULL, NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_has("needs an upstream");
    ck_assert_ptr_null(mr);
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    /* optional: both ways */
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, NULL, &mr));
    ck_assert_ptr_null(crmm_resource_upstream(mr));
    crmm_resource_release(mr);
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, host, &mr));
    ck_assert_ptr_eq(crmm_resource_upstream(mr), host);
    ck_assert_int_eq(crmm_resource_refcount(host), 2);
    crmm_resource_release(mr);
    ck_assert_int_eq(crmm_resource_refcount(host), 1);
    crmm_resource_release(host);
}
END_TEST

START_TEST(create_validates_parameters)
{
    crmm_resource *mr = NULL;
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", "size=4KiB", NULL, &mr));
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_uint_eq(v, 4096);
    crmm_resource_release(mr);
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, NULL, &mr)); /* the default */
    ck_assert_crmm_ok(crmm_resource_query(mr, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_uint_eq(v, 1u << 20);
    crmm_resource_release(mr);
    mr = NULL;
    ck_assert_crmm(crmm_resource_create("sizeparam", "size=lots", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_has("size");
    ck_assert_crmm(crmm_resource_create("sizeparam", "szie=1", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_has("did you mean 'size'");
    ck_assert_crmm(crmm_resource_create("sizeparam", "size", NULL, &mr), CRMM_ERROR_CONFIG);
    ck_assert_error_has("key=value");
    ck_assert_ptr_null(mr);
}
END_TEST

/* ---- the resource ABI over host ------------------------------------------------------------ */

START_TEST(refcount_and_upstream_release)
{
    crmm_resource *h = NULL, *t = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    ck_assert_crmm_ok(crmm_resource_create("template", "tag=7", h, &t));
    ck_assert_int_eq(crmm_resource_refcount(h), 2); /* t holds its upstream */
    ck_assert_int_eq(crmm_resource_refcount(t), 1);
    ck_assert_ptr_eq(crmm_resource_upstream(t), h);
    ck_assert_ptr_eq(crmm_resource_retain(t), t);
    ck_assert_int_eq(crmm_resource_refcount(t), 2);
    crmm_resource_release(t);
    ck_assert_int_eq(crmm_resource_refcount(t), 1);
    ck_assert_int_eq(crmm_resource_refcount(h), 2);
    crmm_resource_release(t); /* the last: destroys t, releases h once */
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(h, 64, NULL, &p)); /* h is intact */
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p, 64, NULL));
    crmm_resource_release(h);
}
END_TEST

START_TEST(releasing_the_top_unwinds_the_chain)
{
    /* host <- template <- template: dropping the caller's references below the top leaves the
     * chain alive through the top's; releasing the top frees all (sanitizer build: no leak) */
    crmm_resource *h, *t1, *t2;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_crmm_ok(crmm_resource_create("template", NULL, h, &t1));
    ck_assert_crmm_ok(crmm_resource_create("template", NULL, t1, &t2));
    crmm_resource_release(h);
    crmm_resource_release(t1);
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    ck_assert_int_eq(crmm_resource_refcount(t1), 1);
    ck_assert_ptr_eq(crmm_resource_find_kind(t2, "host"), h);
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(t2, 1000, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(t2, p, 1000, NULL));
    crmm_resource_release(t2);
}
END_TEST

START_TEST(destroy_with_live_allocations_logs_a_warning)
{
    crmm_test_log_capture_begin();
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p1, *p2, *p3;
    ck_assert_crmm_ok(crmm_resource_allocate(h, 1000, NULL, &p1));
    ck_assert_crmm_ok(crmm_resource_allocate(h, 2000, NULL, &p2));
    ck_assert_crmm_ok(crmm_resource_allocate(h, 3000, NULL, &p3));
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p2, 2000, NULL));
    crmm_resource_release(h); /* 2 left: 4000 bytes */
    char *text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "[warn]") && strstr(text, "host resource destroyed with 2 live allocations (3.9 KiB)"),
                  "log: %s", text);
    free(text);
    free(p1); /* the host plugin's memory is aligned_alloc's: give it back by hand */
    free(p3);

    /* a named resource (from a config) is named in the report */
    crmm_test_log_capture_begin();
    crmm_config *cfg;
    ck_assert_crmm_ok(crmm_config_load_string("[resource.main]\nplugin = host\n", "test", &cfg));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "main", -1, &h));
    ck_assert_crmm_ok(crmm_resource_allocate(h, 100, NULL, &p1));
    crmm_resource_release(h);
    crmm_config_free(cfg); /* the config's own reference: the last */
    text = crmm_test_log_capture_end();
    ck_assert_msg(strstr(text, "host resource 'main' destroyed with 1 live allocation (100 B)"), "log: %s", text);
    free(text);
    free(p1);
}
END_TEST

START_TEST(clean_destroy_logs_nothing)
{
    crmm_test_log_capture_begin();
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(h, 1000, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p, 1000, NULL));
    crmm_resource_release(h);
    char *text = crmm_test_log_capture_end();
    ck_assert_str_eq(text, "");
    free(text);
}
END_TEST

START_TEST(null_arguments_to_resource_functions)
{
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p = (void *)0x1;
    uint64_t v;
    double d;
    ck_assert_crmm(crmm_resource_allocate(NULL, 16, NULL, &p), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(p);
    ck_assert_crmm(crmm_resource_allocate(h, 16, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_allocate(NULL, 0, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_deallocate(NULL, (void *)0x100, 16, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm_ok(crmm_resource_deallocate(NULL, NULL, 16, NULL)); /* NULL pointer: a no-op */
    ck_assert_crmm_ok(crmm_resource_deallocate(h, NULL, 16, NULL));
    ck_assert_crmm(crmm_resource_query(NULL, CRMM_QUERY_BYTES_IN_USE, &v), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_fragmentation(NULL, &d), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_fragmentation(h, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_trim(NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_control(NULL, 1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(crmm_resource_find_kind(NULL, "host"));
    ck_assert_ptr_null(crmm_resource_find_kind(h, NULL));
    ck_assert(!crmm_resource_is_device_accessible(NULL));
    ck_assert(!crmm_resource_is_host_accessible(NULL));
    ck_assert_str_eq(crmm_resource_kind(NULL), "");
    ck_assert_str_eq(crmm_resource_name(NULL), "");
    ck_assert_ptr_null(crmm_resource_upstream(NULL));
    ck_assert_ptr_null(crmm_resource_retain(NULL));
    crmm_resource_release(NULL);
    ck_assert_int_eq(crmm_resource_refcount(NULL), 0);
    crmm_resource_report_leaks(NULL, 3, 300); /* no crash */
    crmm_resource_init(NULL, NULL, "x", 0, -1, h); /* no crash, no reference taken */
    ck_assert_int_eq(crmm_resource_refcount(h), 1);
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_resource_create(NULL, NULL, NULL, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_resource_create("host", NULL, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(mr);
    /* h is unharmed */
    ck_assert_crmm_ok(crmm_resource_allocate(h, 16, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p, 16, NULL));
    crmm_resource_release(h);
}
END_TEST

START_TEST(properties_kind_and_find_kind)
{
    crmm_resource *h, *t;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_crmm_ok(crmm_resource_create("template", NULL, h, &t));
    ck_assert(crmm_resource_is_host_accessible(h));
    ck_assert(!crmm_resource_is_device_accessible(h));
    ck_assert(crmm_resource_is_host_accessible(t)); /* template takes its upstream's properties */
    ck_assert_str_eq(crmm_resource_kind(h), "host");
    ck_assert_str_eq(crmm_resource_kind(t), "template");
    ck_assert_str_eq(crmm_resource_name(t), "");
    ck_assert_ptr_eq(crmm_resource_find_kind(t, "template"), t);
    ck_assert_ptr_eq(crmm_resource_find_kind(t, "host"), h);
    ck_assert_ptr_eq(crmm_resource_find_kind(h, "host"), h);
    ck_assert_ptr_null(crmm_resource_find_kind(h, "template")); /* looks down, never up */
    ck_assert_ptr_null(crmm_resource_find_kind(t, "pool"));
    ck_assert_int_eq(crmm_resource_refcount(h), 2); /* find_kind borrows */
    crmm_resource_release(t);
    crmm_resource_release(h);
}
END_TEST

START_TEST(control_and_queries_without_support)
{
    crmm_resource *h, *s;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    ck_assert_crmm(crmm_resource_control(h, 0x1000, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_error_has("host");
    ck_assert_crmm_ok(crmm_resource_trim(h)); /* nothing cached: OK, nothing done */
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_MAXIMUM_SIZE, &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert_crmm(crmm_resource_query(h, CRMM_QUERY_PLUGIN_FIRST + 5, &v), CRMM_ERROR_UNSUPPORTED);
    double frag;
    ck_assert_crmm(crmm_resource_fragmentation(h, &frag), CRMM_ERROR_UNSUPPORTED);
    /* a resource that answers one query only */
    ck_assert_crmm_ok(crmm_resource_create("sizeparam", NULL, NULL, &s));
    ck_assert_crmm(crmm_resource_control(s, 1, NULL), CRMM_ERROR_UNSUPPORTED);
    ck_assert_crmm(crmm_resource_query(s, CRMM_QUERY_BYTES_IN_USE, &v), CRMM_ERROR_UNSUPPORTED);
    crmm_resource_release(s);
    crmm_resource_release(h);
}
END_TEST

START_TEST(host_counts_in_use_bytes)
{
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p[3];
    for (int i = 0; i < 3; i++)
        ck_assert_crmm_ok(crmm_resource_allocate(h, 100 * (size_t)(i + 1), NULL, &p[i]));
    uint64_t v;
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE, &v));
    ck_assert_uint_eq(v, 600);
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_ALLOCATIONS, &v));
    ck_assert_uint_eq(v, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_crmm_ok(crmm_resource_deallocate(h, p[i], 100 * (size_t)(i + 1), NULL));
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE, &v));
    ck_assert_uint_eq(v, 0);
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_BYTES_IN_USE_PEAK, &v));
    ck_assert_uint_eq(v, 600);
    /* more than the machine has: out of memory at once (no abort under AddressSanitizer) */
    void *big = (void *)0x1;
    ck_assert_crmm(crmm_resource_allocate(h, (size_t)1 << 50, NULL, &big), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_ptr_null(big);
    ck_assert_error_has("host: failed to allocate 1.0 PiB: more than the machine's memory");
    ck_assert_crmm(crmm_resource_allocate(h, SIZE_MAX, NULL, &big), CRMM_ERROR_OUT_OF_MEMORY);
    ck_assert_crmm_ok(crmm_resource_query(h, CRMM_QUERY_ALLOCATIONS, &v));
    ck_assert_uint_eq(v, 0);
    crmm_resource_release(h);
}
END_TEST

/* ---- the exit guard's fallback (no CUDA call needed) ----------------------------------------- */

START_TEST(runtime_unloading_means_the_process_is_exiting)
{
    /* Should the CUDA runtime's exit handler run before crmm's, the first call that reports
     * cudaErrorCudartUnloading turns the exit flag on, so that later frees leak quietly. */
    ck_assert(!crmm_process_exiting());
    ck_assert_crmm_ok(crmm_cuda_status(cudaSuccess, "cudaFree"));
    ck_assert(!crmm_process_exiting());
    ck_assert_crmm(crmm_cuda_status(cudaErrorCudartUnloading, "cudaFree"), CRMM_ERROR_STATE);
    ck_assert_error_has("cudaFree");
    ck_assert_error_has("unloading");
    ck_assert(crmm_process_exiting());
    /* host memory needs no CUDA: still served */
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &h));
    void *p;
    ck_assert_crmm_ok(crmm_resource_allocate(h, 100, NULL, &p));
    ck_assert_crmm_ok(crmm_resource_deallocate(h, p, 100, NULL));
    crmm_resource_release(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *bad = tcase_create("broken_plugins");
    tcase_add_test(bad, well_formed_base_loads);
    tcase_add_test(bad, wrong_abi_major_names_both_versions);
    tcase_add_test(bad, too_new_minor_names_both_versions);
    tcase_add_test(bad, short_struct_is_refused);
    tcase_add_test(bad, name_mismatch_names_both);
    tcase_add_test(bad, missing_entry_symbol_gives_dlerror);
    tcase_add_test(bad, entry_returning_null_is_refused);
    tcase_add_test(bad, missing_create_is_refused);
    tcase_add_test(bad, unknown_upstream_rule_is_refused);
    tcase_add_test(bad, duplicate_parameter_is_refused);
    tcase_add_test(bad, bad_default_is_refused);
    tcase_add_test(bad, enum_without_choices_is_refused);
    tcase_add_test(bad, row_outside_the_config_struct_is_refused);
    tcase_add_test(bad, default_outside_its_range_is_refused);
    tcase_add_test(bad, abi_1_plugin_is_refused_saying_what_changed);
    tcase_add_test(bad, not_a_shared_object_gives_dlerror);
    tcase_add_test(bad, failure_is_not_cached);
    suite_add_tcase(s, bad);

    TCase *search = tcase_create("search");
    tcase_add_test(search, null_arguments);
    tcase_add_test(search, bad_names_are_refused);
    tcase_add_test(search, relative_path_is_refused);
    tcase_add_test(search, absolute_path_must_be_named_like_a_plugin);
    tcase_add_test(search, missing_plugin_lists_directories_and_suggests);
    tcase_add_test(search, broken_links_are_named);
    tcase_add_test(search, search_path_order);
    tcase_add_test(search, first_directory_wins);
    tcase_add_test(search, loading_twice_gives_the_same_descriptor);
    tcase_add_test(search, cached_plugin_still_checks_its_name);
    suite_add_tcase(s, search);

    TCase *perm = tcase_create("permissions");
    tcase_add_test(perm, group_writable_file_is_refused);
    tcase_add_test(perm, world_writable_file_is_refused);
    tcase_add_test(perm, writable_directory_is_refused);
    tcase_add_test(perm, directory_writable_by_owners_private_group_loads);
    tcase_add_test(perm, link_in_writable_directory_is_refused);
    tcase_add_test(perm, writable_directory_above_is_refused);
    suite_add_tcase(s, perm);

    TCase *each = tcase_create("foreach");
    tcase_add_test(each, foreach_reports_good_and_broken);
    tcase_add_test(each, foreach_lists_every_plugin_once);
    tcase_add_test(each, foreach_reports_many_plugins_once);
    suite_add_tcase(s, each);

    TCase *create = tcase_create("create");
    tcase_add_test(create, create_failure_keeps_the_plugins_status_and_message);
    tcase_add_test(create, create_failure_without_message_gets_one);
    tcase_add_test(create, resource_without_deallocate_is_refused_and_freed);
    tcase_add_test(create, create_refuses_broken_plugins);
    tcase_add_test(create, upstream_rules);
    tcase_add_test(create, create_validates_parameters);
    suite_add_tcase(s, create);

    TCase *abi = tcase_create("resource_abi");
    tcase_add_test(abi, refcount_and_upstream_release);
    tcase_add_test(abi, releasing_the_top_unwinds_the_chain);
    tcase_add_test(abi, destroy_with_live_allocations_logs_a_warning);
    tcase_add_test(abi, clean_destroy_logs_nothing);
    tcase_add_test(abi, null_arguments_to_resource_functions);
    tcase_add_test(abi, properties_kind_and_find_kind);
    tcase_add_test(abi, control_and_queries_without_support);
    tcase_add_test(abi, host_counts_in_use_bytes);
    tcase_add_test(abi, runtime_unloading_means_the_process_is_exiting);
    suite_add_tcase(s, abi);
    return crmm_test_run(s);
}
