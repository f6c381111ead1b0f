/* bench_config.h — the config `crmm bench` measures, loaded so that a resource whose plugin
 * cannot be loaded is skipped instead of failing the whole run.
 *
 * crmm_config_load_file() is strict: one plugin that is missing (not built yet, not installed)
 * rejects the file. The bench first tries exactly that; when it fails, it loads the file with
 * crmm_config_load_file_skipping, which leaves out every [resource.*] whose plugin does not load
 * (and every resource stacked on a left-out one, and the [crmm] default / [device.N] that name
 * one) and says what it left out and why. Any other mistake in the file still fails with the
 * strict loader's message.
 *
 * Each measurement gets fresh instances (bench_config_create), so that one resource's cached
 * memory and peak statistics never leak into the next measurement. */
#ifndef CRMM_BENCH_CONFIG_H
#define CRMM_BENCH_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <crmm/config.h>
#include <crmm/resource.h>

typedef struct bench_config bench_config;

/* Load `path`, or with NULL the config crmm_init(NULL) would load ($CRMM_CONFIG, then the
 * installed $(sysconfdir)/crmm/crmm.ini, then the built-in default). Errors as
 * crmm_config_load_file (the strict loader's message when skipping plugins does not help). */
crmm_status bench_config_open(const char *path, bench_config **out);
/* Free it (resources created from it live on). NULL: no-op. */
void bench_config_close(bench_config *bc);

/* Where it came from: a path or "<built-in>". */
const char *bench_config_origin(const bench_config *bc);
/* The resources that loaded, in file order: name, plugin, and whether the chain is host memory. */
size_t bench_config_resource_count(const bench_config *bc);
const char *bench_config_resource_name(const bench_config *bc, size_t i);
const char *bench_config_resource_plugin(const bench_config *bc, size_t i);
bool bench_config_resource_is_host(const bench_config *bc, size_t i);
/* Index of resource `name`, or -1 when it is not among the loaded ones. */
long bench_config_find(const bench_config *bc, const char *name);
/* The resources that were skipped: name and why. */
size_t bench_config_skipped_count(const bench_config *bc);
const char *bench_config_skipped_name(const bench_config *bc, size_t i);
const char *bench_config_skipped_reason(const bench_config *bc, size_t i);

/* What each instance is built from: the file (*path) loaded strictly or, with *skipping, by
 * crmm_config_load_file_skipping; or the built-in default (*path NULL). Valid while bc lives.
 * `crmm bench --overhead` hands this to child processes that time the load. */
void bench_config_source(const bench_config *bc, const char **path, bool *skipping);
/* Load such a source as bench_config_create does. Errors as crmm_config_load_file /
 * crmm_config_load_file_skipping / crmm_config_load_default. */
crmm_status bench_config_load_source(const char *path, bool skipping, crmm_config **out);

/* A fresh instance of resource `name` (and its own upstream chain) on CUDA device `device`
 * (ignored for host chains). Errors: as crmm_config_create_resource. */
crmm_status bench_config_create(const bench_config *bc, const char *name, int device, crmm_resource **out);

#endif
