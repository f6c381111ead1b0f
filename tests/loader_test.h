/* loader_test.h — what the loader suites (check_loader, check_loader_files, check_resource_abi)
 * share: where the built and the test-only plugins are, copying a plugin file and a fresh directory. */
#ifndef CRMM_TESTS_LOADER_TEST_H
#define CRMM_TESTS_LOADER_TEST_H

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_support.h"

/* The first directory of $CRMM_PLUGIN_PATH: the build tree's plugins/built. */
static inline const char *built_dir(void)
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

static inline const char *test_plugin_dir(void)
{
    const char *d = getenv("CRMM_TEST_PLUGIN_DIR");
    ck_assert_msg(d && *d, "CRMM_TEST_PLUGIN_DIR is not set: run through make check");
    return d;
}

/* Path of a built plugin (`host`) or a test-only one (`badmajor`), in buf. */
static inline const char *plugin_file(const char *name, char *buf, size_t n)
{
    int len = snprintf(buf, n, "%s/crmm_%s.so", built_dir(), name);
    if (len >= 0 && (size_t)len < n && access(buf, R_OK) != 0)
        len = snprintf(buf, n, "%s/crmm_%s.so", test_plugin_dir(), name);
    ck_assert_msg(len >= 0 && (size_t)len < n, "the path of plugin %s is too long", name);
    ck_assert_msg(access(buf, R_OK) == 0, "plugin file %s is missing", buf);
    return buf;
}

/* Copy plugin `name`'s file into dir as crmm_<as>.so with `mode`. */
static inline void copy_plugin(const char *name, const char *dir, const char *as, mode_t mode)
{
    char src[PATH_MAX], dst[PATH_MAX];
    plugin_file(name, src, sizeof src);
    int len = snprintf(dst, sizeof dst, "%s/crmm_%s.so", dir, as);
    ck_assert_msg(len >= 0 && (size_t)len < sizeof dst, "the path %s/crmm_%s.so is too long", dir, as);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    ck_assert_msg(in && out, "cannot copy %s to %s", src, dst);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, k, out), k);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
    ck_assert_int_eq(chmod(dst, mode), 0);
}

static inline char *new_dir(void)
{
    char *d = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    return d;
}

/* A fresh directory (returned, malloc'd) holding a copy of the host plugin with `mode`, whose
 * path goes to `file` (PATH_MAX bytes). */
static inline char *new_dir_with_host(mode_t mode, char *file)
{
    char *dir = new_dir();
    copy_plugin("host", dir, "host", mode);
    snprintf(file, PATH_MAX, "%s/crmm_host.so", dir);
    return dir;
}

#endif
