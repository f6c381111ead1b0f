/* config_test.h — what the config suites (check_config, check_config_init) share. The CUDA entry
 * points the core and the plugins call are defined here to count each call (cuda_calls) and
 * forward it to libcudart, so that a test can assert that loading a config made none: include
 * this header in one file of a program only. Then: where the table of configs is (tests/configs/),
 * the config error assertion, and a fresh temporary directory per test. */
#ifndef CRMM_TESTS_CONFIG_TEST_H
#define CRMM_TESTS_CONFIG_TEST_H

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "plugins/paramtest_plugin.h"
#include "test_support.h"

/* ---- counting CUDA calls -------------------------------------------------------------------- */

static int cuda_calls;

#define FORWARD(name, params, args) \
    cudaError_t CUDARTAPI name params \
    { \
        cuda_calls++; \
        cudaError_t (*real) params; \
        void *sym = dlsym(RTLD_NEXT, #name); \
        if (!sym) \
            return cudaErrorUnknown; \
        memcpy(&real, &sym, sizeof real); \
        return real args; \
    }
FORWARD(cudaGetDeviceCount, (int *count), (count))
FORWARD(cudaGetDevice, (int *device), (device))
FORWARD(cudaSetDevice, (int device), (device))
FORWARD(cudaMemGetInfo, (size_t *free_bytes, size_t *total), (free_bytes, total))
FORWARD(cudaMalloc, (void **ptr, size_t size), (ptr, size))
FORWARD(cudaMallocManaged, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags))
FORWARD(cudaHostAlloc, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags))
FORWARD(cudaFree, (void *ptr), (ptr))
FORWARD(cudaFreeHost, (void *ptr), (ptr))


static char configs_dir[PATH_MAX];

/* Sets configs_dir: $CRMM_TEST_SRCDIR/configs, else tests/configs (in the parent, before forking). */
static inline void set_configs_dir(void)
{
    const char *src = getenv("CRMM_TEST_SRCDIR");
    snprintf(configs_dir, sizeof configs_dir, "%s/configs", src && *src ? src : "tests");
}

/* Reads "; expect LINE: SUBSTRING" from the first line of a bad config. */
static inline void read_expectation(const char *text, const char *path, int *line, char *sub, size_t subsize)
{
    int n = 0;
    ck_assert_msg(sscanf(text, "; expect %d: %n", line, &n) == 1 && n > 0, "%s: first line is not '; expect LINE: ...'", path);
    const char *s = text + n, *eol = strchr(s, '\n');
    size_t len = eol ? (size_t)(eol - s) : strlen(s);
    ck_assert_uint_lt(len, subsize);
    memcpy(sub, s, len);
    sub[len] = '\0';
}

/* Asserts that the last error is "config error: ORIGIN:LINE: ...SUB...". */
static inline void assert_config_error(crmm_status st, const char *origin, int line, const char *sub)
{
    ck_assert_msg(st == CRMM_ERROR_CONFIG, "%s: %s instead of CRMM_ERROR_CONFIG (%s)", origin, crmm_status_name(st),
                  crmm_last_error());
    char prefix[PATH_MAX + 64];
    snprintf(prefix, sizeof prefix, "config error: %s:%d: ", origin, line);
    const char *msg = crmm_last_error();
    ck_assert_msg(strncmp(msg, prefix, strlen(prefix)) == 0, "%s: expected line %d, got '%s'", origin, line, msg);
    ck_assert_msg(strstr(msg + strlen(prefix), sub) != NULL, "%s: '%s' lacks '%s'", origin, msg, sub);
}

static inline crmm_config *load_configs_file(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%.60s", configs_dir, name);
    crmm_config *cfg = NULL;
    ck_assert_crmm_ok(crmm_config_load_file(path, &cfg));
    return cfg;
}

/* ---- files on disk ------------------------------------------------------------------------- */

static char tmpdir[PATH_MAX];

static inline void tmpdir_setup(void)
{
    char *d = crmm_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    snprintf(tmpdir, sizeof tmpdir, "%s", d);
    free(d);
}

/* Writes `len` bytes to tmpdir/name; returns the path (one of 4 static buffers, in turn). */
static inline const char *write_tmp(const char *name, const char *data, size_t len)
{
    static char paths[4][PATH_MAX + 64];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, sizeof paths[0], "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0); /* the bytes reached the file */
    return path;
}

#endif
