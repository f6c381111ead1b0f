/* check_config_init.c — the INI config on disk (binary, missing and big files, plugin paths, the
 * default file), instances of a config, and crmm_init. No CUDA call may happen while a config is
 * loaded: config_test.h counts them. Everything here runs without a GPU. */
#include "build_config.h"
#include "config_test.h"
#include "loader_test.h"

CRMM_TEST_IN("disk", test_binary_file)
{
    static const char data[] = "[crmm]\ndefault = a\0\x01\x02\n[resource.a]\nplugin = host\n";
    const char *path = write_tmp("binary.ini", data, sizeof data - 1);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "not a text file (contains NUL bytes)"));
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), path));
    ck_assert_ptr_null(cfg);
}

CRMM_TEST_IN("disk", test_missing_file_and_directory)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/absent.ini", tmpdir);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), path));
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "No such file"));
    ck_assert_crmm(crmm_config_load_file(tmpdir, &cfg), CRMM_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), tmpdir));
    ck_assert_ptr_null(cfg);
}

CRMM_TEST_IN("disk", test_big_file)
{
    /* many lines, past the reader's first buffer; the error line is counted right */
    size_t n = 20000;
    char *text = malloc(n * 16 + 64), *t = text;
    ck_assert_ptr_nonnull(text);
    t += sprintf(t, "[resource.h]\nplugin = host\n");
    for (size_t i = 0; i < n; i++)
        t += sprintf(t, "; comment %zu\n", i);
    t += sprintf(t, "[crmm]\ndefault = x\n");
    const char *path = write_tmp("big.ini", text, (size_t)(t - text));
    crmm_config *cfg = NULL;
    assert_config_error(crmm_config_load_file(path, &cfg), path, (int)n + 4, "default 'x' is not a [resource.*]");
    free(text);
}

CRMM_TEST_IN("disk", test_skipping_load_leaves_out_unloadable_plugins)
{
    static const char text[] =
        "[crmm]\n"
        "default = q\n"
        "[resource.early]\nplugin = template\nupstream = p\n" /* stacked on a later one */
        "[resource.h]\nplugin = host\n"
        "[resource.p]\nplugin = nosuchplugin\nupstream = h\nbogus = 1\n" /* its keys are not checked */
        "[resource.q]\nplugin = template\nupstream = p\n"
        "[resource.r]\nplugin = template\nupstream = q\n"
        "[resource.t]\nplugin = template\nupstream = h\n"
        "[device.0]\nresource = r\n"
        "[device.1]\nresource = t\n";
    const char *path = write_tmp("skip.ini", text, sizeof text - 1);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_CONFIG); /* the strict loader refuses it */
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "nosuchplugin"));
    ck_assert_crmm_ok(crmm_config_load_file_skipping(path, &cfg));
    ck_assert_uint_eq(crmm_config_resource_count(cfg), 2);
    ck_assert_str_eq(crmm_config_resource_name(cfg, 0), "h");
    ck_assert_str_eq(crmm_config_resource_name(cfg, 1), "t");
    ck_assert_int_eq(crmm_config_find_resource(cfg, "h"), 0);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "t"), 1);
    ck_assert_int_eq(crmm_config_find_resource(cfg, "p"), -1); /* left out */
    ck_assert_int_eq(crmm_config_find_resource(cfg, NULL), -1);
    ck_assert_int_eq(crmm_config_find_resource(NULL, "h"), -1);
    /* in file order */
    ck_assert_uint_eq(crmm_config_skipped_count(cfg), 4);
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 0), "early");
    ck_assert_str_eq(crmm_config_skipped_reason(cfg, 0), "its upstream 'p' was skipped");
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 1), "p");
    ck_assert_ptr_nonnull(strstr(crmm_config_skipped_reason(cfg, 1), "nosuchplugin"));
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 2), "q");
    ck_assert_str_eq(crmm_config_skipped_reason(cfg, 2), "its upstream 'p' was skipped");
    ck_assert_str_eq(crmm_config_skipped_name(cfg, 3), "r");
    ck_assert_str_eq(crmm_config_skipped_reason(cfg, 3), "its upstream 'q' was skipped");
    ck_assert_ptr_null(crmm_config_skipped_name(cfg, 4));
    ck_assert_ptr_null(crmm_config_skipped_reason(cfg, 4));
    /* the default and [device.0] named left-out resources: gone; [device.1] stays */
    ck_assert_str_eq(crmm_config_default_resource(cfg, 0), "h");
    ck_assert_str_eq(crmm_config_default_resource(cfg, 1), "t");
    crmm_resource *mr;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "t", -1, &mr));
    ck_assert_str_eq(crmm_resource_kind(mr), "template");
    crmm_resource_release(mr);
    ck_assert_crmm(crmm_config_create_resource(cfg, "q", -1, &mr), CRMM_ERROR_NOT_FOUND);
    crmm_config_free(cfg);
    /* any other mistake still fails, with its line */
    static const char bad[] = "[resource.h]\nplugin = host\nbogus_key = 1\n[resource.p]\nplugin = nosuchplugin\n";
    path = write_tmp("bad.ini", bad, sizeof bad - 1);
    cfg = NULL;
    assert_config_error(crmm_config_load_file_skipping(path, &cfg), path, 3, "bogus_key");
    ck_assert_ptr_null(cfg);
    /* nothing to leave out: nothing skipped; the other loaders skip nothing */
    static const char ok[] = "[resource.h]\nplugin = host\n";
    path = write_tmp("ok.ini", ok, sizeof ok - 1);
    ck_assert_crmm_ok(crmm_config_load_file_skipping(path, &cfg));
    ck_assert_uint_eq(crmm_config_skipped_count(cfg), 0);
    ck_assert_ptr_null(crmm_config_skipped_name(cfg, 0));
    crmm_config_free(cfg);
    ck_assert_uint_eq(crmm_config_skipped_count(NULL), 0);
    ck_assert_crmm(crmm_config_load_file_skipping(NULL, &cfg), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_load_file_skipping(path, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    char absent[PATH_MAX + 32];
    snprintf(absent, sizeof absent, "%s/absent.ini", tmpdir);
    ck_assert_crmm(crmm_config_load_file_skipping(absent, &cfg), CRMM_ERROR_IO);
}

CRMM_TEST_IN("disk", test_default_file)
{
    char buf[PATH_MAX];
    setenv("CRMM_CONFIG", "/some/where.ini", 1);
    ck_assert_str_eq(crmm_config_default_file(buf, sizeof buf), "/some/where.ini");
    /* unset or empty: the installed file when it exists, else NULL (the built-in default) */
    setenv("CRMM_CONFIG", "", 1);
    const char *f = crmm_config_default_file(buf, sizeof buf);
    if (f) {
        ck_assert_ptr_eq(f, buf);
        ck_assert_ptr_nonnull(strstr(f, "/crmm/crmm.ini"));
        ck_assert_int_eq(access(f, R_OK), 0);
    }
    unsetenv("CRMM_CONFIG");
    ck_assert_ptr_eq(crmm_config_default_file(buf, sizeof buf), f);
    ck_assert_ptr_null(crmm_config_default_file(buf, 4)); /* no room for the name */
}

CRMM_TEST_IN("disk", test_plugin_path_relative_to_config)
{
    /* a plugin that is only in the config's own plugins/ folder: the loader also checks its name,
     * so the copy keeps the name `host` */
    char sub[PATH_MAX + 16], plugins[PATH_MAX + 32];
    snprintf(sub, sizeof sub, "%s/conf", tmpdir);
    snprintf(plugins, sizeof plugins, "%s/plugins", sub);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    ck_assert_int_eq(mkdir(plugins, 0755), 0);
    copy_plugin("host", plugins, "host", 0755);
    unsetenv("CRMM_PLUGIN_PATH");
    static const char text[] = "[crmm]\nplugin_path = plugins:/nonexistent\ndefault = h\n[resource.h]\nplugin = host\n";
    const char *cfgpath = write_tmp("conf/crmm.ini", text, sizeof text - 1);
    /* from another working directory: relative to the file, not to the cwd */
    ck_assert_int_eq(chdir("/"), 0);
    crmm_config *cfg = NULL;
    ck_assert_crmm_ok(crmm_config_load_file(cfgpath, &cfg));
    char want[PATH_MAX + 64];
    char real[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(sub, real));
    snprintf(want, sizeof want, "%s/plugins:/nonexistent", real);
    ck_assert_str_eq(crmm_config_plugin_path(cfg), want);
    crmm_resource *mr = NULL;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "h", -1, &mr));
    ck_assert_str_eq(crmm_resource_kind(mr), "host");
    crmm_resource_release(mr);
    crmm_config_free(cfg);
    /* the same text from a string has no directory to be relative to */
    ck_assert_crmm(crmm_config_load_string(text, "s", &cfg), CRMM_ERROR_CONFIG);
    /* and without plugin_path the plugin is not found at all (unless crmm is installed) */
    char installed[PATH_MAX + 32];
    crmm_plugin_search_path(NULL, installed, PATH_MAX);
    strcat(installed, "/crmm_host.so");
    if (access(installed, F_OK) != 0) {
        ck_assert_crmm(crmm_config_load_string("[resource.h]\nplugin = host\n", "s", &cfg), CRMM_ERROR_CONFIG);
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no plugin 'host'"));
    }
}

/* A config in a directory whose name holds ':' cannot name a plugin_path entry relative to it: the
 * resolved entry would split at the ':' into a piece relative to the working directory, where a
 * plugin would then be found by itself. */
CRMM_TEST_IN("disk", test_plugin_path_relative_to_a_directory_with_a_colon)
{
    char top[PATH_MAX + 16], colon[PATH_MAX + 32], b[PATH_MAX + 32], plugins[PATH_MAX + 48];
    snprintf(top, sizeof top, "%s/colon", tmpdir);
    snprintf(colon, sizeof colon, "%s/a:b", top);
    snprintf(b, sizeof b, "%s/b", top);
    snprintf(plugins, sizeof plugins, "%s/plugins", b);
    ck_assert_int_eq(mkdir(top, 0755), 0);
    ck_assert_int_eq(mkdir(colon, 0755), 0);
    ck_assert_int_eq(mkdir(b, 0755), 0);
    ck_assert_int_eq(mkdir(plugins, 0755), 0);
    copy_plugin("host", plugins, "host", 0755); /* in b/plugins of the working directory */
    unsetenv("CRMM_PLUGIN_PATH");
    static const char text[] = "[crmm]\nplugin_path = plugins\n[resource.h]\nplugin = host\n";
    const char *cfgpath = write_tmp("colon/a:b/crmm.ini", text, sizeof text - 1);
    ck_assert_int_eq(chdir(top), 0);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(cfgpath, &cfg), CRMM_ERROR_CONFIG);
    ck_assert_ptr_null(cfg);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), ":2: plugin_path entry 'plugins' is relative"));
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "':'"));
    ck_assert_int_eq(chdir("/"), 0);
}

/* ---- instances ----------------------------------------------------------------------------- */

CRMM_TEST_IN("instances", test_instances_shared_upstream)
{
    crmm_config *cfg = load_configs_file("good-shared-upstream.ini");
    crmm_resource *left = NULL, *right = NULL, *heap = NULL;
    cuda_calls = 0;
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "left", -1, &left));
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "right", 3, &right));
    ck_assert_int_eq(cuda_calls, 0); /* host chains need no device */
    ck_assert_ptr_ne(left, right);
    ck_assert_ptr_nonnull(crmm_resource_upstream(left));
    ck_assert_ptr_eq(crmm_resource_upstream(left), crmm_resource_upstream(right));
    ck_assert_str_eq(crmm_resource_name(left), "left");
    ck_assert_str_eq(crmm_resource_name(right), "right");
    ck_assert_str_eq(crmm_resource_kind(left), "template");
    /* asking for the upstream itself gives the shared instance, one more reference */
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "heap", -1, &heap));
    ck_assert_ptr_eq(heap, crmm_resource_upstream(left));
    ck_assert_str_eq(crmm_resource_name(heap), "heap");
    /* refs of heap: the cache, left, right, and ours */
    ck_assert_int_eq(crmm_resource_refcount(heap), 4);
    /* asking twice: the same resource, one more reference */
    crmm_resource *again = NULL;
    long before = crmm_resource_refcount(left);
    ck_assert_int_eq(before, 2); /* the cache and ours */
    ck_assert_crmm_ok(crmm_config_create_resource(cfg, "left", -1, &again));
    ck_assert_ptr_eq(again, left);
    ck_assert_int_eq(crmm_resource_refcount(left), before + 1);
    crmm_resource_release(again);
    /* freeing the config drops its references only: ours stay usable */
    crmm_config_free(cfg);
    ck_assert_int_eq(crmm_resource_refcount(left), 1);
    ck_assert_int_eq(crmm_resource_refcount(heap), 3);
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(left, 4096, NULL, &p));
    memset(p, 1, 4096);
    ck_assert_crmm_ok(crmm_resource_deallocate(left, p, 4096, NULL));
    crmm_resource_release(left);
    ck_assert_int_eq(crmm_resource_refcount(heap), 2);
    crmm_resource_release(right);
    ck_assert_int_eq(crmm_resource_refcount(heap), 1);
    crmm_resource_release(heap);
}

CRMM_TEST_IN("instances", test_instances_errors)
{
    crmm_config *cfg = load_configs_file("good-shared-upstream.ini");
    crmm_resource *mr = (crmm_resource *)&cfg;
    ck_assert_crmm(crmm_config_create_resource(cfg, "lfet", -1, &mr), CRMM_ERROR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "no [resource.lfet]"));
    ck_assert_ptr_eq(mr, (crmm_resource *)&cfg);
    ck_assert_crmm(crmm_config_create_resource(cfg, NULL, -1, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(cfg, "left", -1, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(cfg, "left", -2, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_config_create_resource(cfg, "left", 128, &mr), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_eq(mr, (crmm_resource *)&cfg);
    crmm_config_free(cfg);

    /* a create that fails in the plugin names the section; nothing is cached or leaked (without
     * an upstream: over host memory a percentage is refused when the config is loaded) */
    ck_assert_crmm_ok(crmm_config_load_string("[resource.h]\nplugin = host\n"
                                              "[resource.p]\nplugin = paramtest\nid = 1\nlimit = 50%\n",
                                              "pct.ini", &cfg));
    int n = 0;
    if (crmm_cuda_device_count(&n) != CRMM_OK) {
        ck_assert_crmm(crmm_config_create_resource(cfg, "p", -1, &mr), CRMM_ERROR_CUDA);
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "pct.ini:3: resource.p: "));
        ck_assert_ptr_nonnull(strstr(crmm_last_error(), "limit = 50%"));
        ck_assert_crmm(crmm_config_create_resource(cfg, "p", -1, &mr), CRMM_ERROR_CUDA);
    }
    crmm_config_free(cfg);
}

CRMM_TEST_IN("cuda", test_instances_gpu_chain_without_gpu)
{
    int n = 0;
    if (crmm_cuda_device_count(&n) == CRMM_OK)
        return; /* this checks the message a machine without a GPU gives */
    crmm_config *cfg = load_configs_file("good-full.ini");
    crmm_resource *mr = NULL;
    ck_assert_crmm(crmm_config_create_resource(cfg, "gpu", -1, &mr), CRMM_ERROR_CUDA);
    ck_assert_ptr_nonnull(strstr(crmm_last_error(), "resource.gpu needs a CUDA device"));
    ck_assert_ptr_null(mr);
    crmm_config_free(cfg);
}

/* ---- crmm_init ----------------------------------------------------------------------------- */

CRMM_TEST_IN("init", test_init_with_path)
{
    static const char text[] = "[crmm]\nlog_level = debug\ndefault = h\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("init.ini", text, sizeof text - 1);
    ck_assert_ptr_null(crmm_current_config());
    ck_assert_crmm_ok(crmm_init(path));
    ck_assert_ptr_nonnull(crmm_current_config());
    ck_assert_str_eq(crmm_config_origin(crmm_current_config()), path);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_DEBUG);
    /* a bad config is refused and the loaded one stays */
    const char *bad = write_tmp("bad.ini", "[crmm]\nlog_level = loud\n", 24);
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_WARN));
    ck_assert_crmm(crmm_init(bad), CRMM_ERROR_CONFIG);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_WARN);
    ck_assert_str_eq(crmm_config_default_resource(crmm_current_config(), 0), "h");
    /* again with a good one: replaced; the first stays readable and usable until finalize */
    const crmm_config *first = crmm_current_config();
    const char *second = write_tmp("second.ini", "[resource.z]\nplugin = host\n", 27);
    ck_assert_crmm_ok(crmm_init(second));
    ck_assert_str_eq(crmm_config_origin(crmm_current_config()), second);
    ck_assert_str_eq(crmm_config_origin(first), path);
    crmm_resource *h;
    ck_assert_crmm_ok(crmm_config_create_resource((crmm_config *)first, "h", 0, &h));
    crmm_resource_release(h);
    crmm_finalize();
    ck_assert_ptr_null(crmm_current_config());
    crmm_finalize(); /* twice is safe */
    ck_assert_ptr_null(crmm_current_config());
}

CRMM_TEST_IN("init", test_init_missing_file)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/absent.ini", tmpdir);
    ck_assert_crmm(crmm_init(path), CRMM_ERROR_IO);
    ck_assert_ptr_null(crmm_current_config());
    setenv("CRMM_CONFIG", path, 1);
    ck_assert_crmm(crmm_init(NULL), CRMM_ERROR_IO);
    ck_assert_ptr_null(crmm_current_config());
    crmm_finalize();
}

/* A config path that is a directory says so (not just "cannot read"), and nothing is loaded. */
CRMM_TEST_IN("init", test_config_path_is_a_directory)
{
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(tmpdir, &cfg), CRMM_ERROR_IO);
    ck_assert_ptr_null(cfg);
    ck_assert_msg(strstr(crmm_last_error(), "it is a directory") != NULL, "%s", crmm_last_error());
    ck_assert_msg(strstr(crmm_last_error(), tmpdir) != NULL, "%s", crmm_last_error());
    ck_assert_crmm(crmm_init(tmpdir), CRMM_ERROR_IO);
    ck_assert_ptr_null(crmm_current_config());
}

/* A config path that is a FIFO with no writer is refused at once (opening it must not wait). */
CRMM_TEST_IN("init", test_config_path_is_a_fifo)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/fifo.ini", tmpdir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    crmm_config *cfg = NULL;
    ck_assert_crmm(crmm_config_load_file(path, &cfg), CRMM_ERROR_IO);
    ck_assert_ptr_null(cfg);
    ck_assert_error_contains("not a regular file");
    unlink(path);
}

CRMM_TEST_IN("init", test_init_from_environment)
{
    static const char text[] = "[crmm]\nlog_level = error\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("env.ini", text, sizeof text - 1);
    setenv("CRMM_CONFIG", path, 1);
    ck_assert_crmm_ok(crmm_init(NULL));
    ck_assert_str_eq(crmm_config_origin(crmm_current_config()), path);
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_ERROR);
    crmm_finalize();
    crmm_finalize();
}

CRMM_TEST_IN("init", test_init_never_reads_the_working_directory)
{
    /* a cloned repository must not make a program load its config (and so its plugins) */
    static const char evil[] = "[crmm]\nplugin_path = .\ndefault = evil\n[resource.evil]\nplugin = evil\n";
    write_tmp("crmm.ini", evil, sizeof evil - 1);
    unsetenv("CRMM_CONFIG");
    char cwd[PATH_MAX];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(tmpdir), 0);
    crmm_status st = crmm_init(NULL);
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_msg(st == CRMM_OK, "crmm_init(NULL): %s", crmm_last_error());
    const char *origin = crmm_config_origin(crmm_current_config());
    ck_assert_msg(strcmp(origin, "<built-in>") == 0 || strstr(origin, "/crmm/crmm.ini") == origin + strlen(origin) - 14,
                  "crmm_init(NULL) loaded %s", origin);
    ck_assert_ptr_null(strstr(origin, tmpdir));
    crmm_finalize();
}

CRMM_TEST_IN("cuda", test_init_then_registry_without_device)
{
    /* with a host-only default, a program written for the GPU gets the host resource as the
     * current device's resource, and memory from it, also on a machine without a GPU */
    static const char text[] = "[crmm]\ndefault = h\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp("reg.ini", text, sizeof text - 1);
    ck_assert_crmm_ok(crmm_init(path));
    crmm_resource *mr = crmm_get_current_device_resource();
    ck_assert_msg(mr != NULL, "no current resource over a host default: %s", crmm_last_error());
    ck_assert_str_eq(crmm_resource_kind(mr), "host");
    void *p = NULL;
    ck_assert_crmm_ok(crmm_resource_allocate(mr, 4096, NULL, &p));
    memset(p, 1, 4096);
    ck_assert_crmm_ok(crmm_resource_deallocate(mr, p, 4096, NULL));
    crmm_resource *ref = crmm_get_current_device_resource_ref();
    ck_assert_ptr_eq(ref, mr);
    crmm_resource_release(ref);
    /* and it may swap the current resource, as it would on a GPU */
    crmm_resource *mine = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &mine));
    crmm_resource *previous = crmm_set_current_device_resource(mine);
    ck_assert_msg(previous == mr, "set_current_device_resource over a host default: %s", crmm_last_error());
    ck_assert_ptr_eq(crmm_get_current_device_resource(), mine);
    crmm_resource *back = crmm_set_current_device_resource(previous); /* each returned reference is ours */
    ck_assert_ptr_eq(back, mine);
    crmm_resource_release(back);
    crmm_resource_release(previous);
    ck_assert_int_eq(crmm_resource_refcount(mine), 1);
    crmm_resource_release(mine);
    crmm_finalize();
}

CRMM_TEST_IN("cuda", test_registry_refuses_ordinals_no_machine_has)
{
    /* the caller's error on any machine, GPU or none: INVALID_ARGUMENT, not a CUDA error */
    crmm_resource *mine = NULL;
    ck_assert_crmm_ok(crmm_resource_create("host", NULL, NULL, &mine));
    static const int bad[] = {-1, CRMM_MAX_DEVICES, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_ptr_null(crmm_get_per_device_resource(bad[i]));
        ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
        ck_assert_error_contains("is not a device ordinal");
        ck_assert_ptr_null(crmm_set_per_device_resource(bad[i], mine));
        ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_INVALID_ARGUMENT);
    }
    ck_assert_int_eq(crmm_resource_refcount(mine), 1);
    crmm_resource_release(mine);
    crmm_finalize();
}

CRMM_TEST_IN("cuda", test_init_gpu_default_without_device)
{
    /* a GPU default still needs a device, and says so */
    static const char text[] = "[crmm]\ndefault = g\n[resource.g]\nplugin = cuda\n";
    const char *path = write_tmp("gpu.ini", text, sizeof text - 1);
    ck_assert_crmm_ok(crmm_init(path));
    int n = 0;
    if (crmm_cuda_device_count(&n) != CRMM_OK) {
        ck_assert_ptr_null(crmm_get_current_device_resource());
        ck_assert_int_eq(crmm_last_status(), CRMM_ERROR_CUDA);
        ck_assert_ptr_null(crmm_get_per_device_resource(1));
    }
    crmm_finalize();
}

/* $CRMM_LOG_LEVEL beats the config's log_level, so tracing needs no edit of the file; a value
 * that names no level is ignored: the config's level applies. */
static const struct { const char *env, *file; bool from_env; crmm_log_level level; } env_levels[] = {
    {"trace", "level.ini", true, CRMM_LOG_TRACE},
    {"loud", "junk.ini", false, CRMM_LOG_ERROR},
};

CRMM_LOOP_TEST_IN("cuda", test_init_environment_level, 2)
{
    setenv("CRMM_LOG_LEVEL", env_levels[_i].env, 1);
    static const char text[] = "[crmm]\nlog_level = error\n[resource.h]\nplugin = host\n";
    const char *path = write_tmp(env_levels[_i].file, text, sizeof text - 1);
    ck_assert_crmm_ok(crmm_init(path));
    ck_assert(crmm_log_level_from_env() == env_levels[_i].from_env);
    ck_assert_int_eq(crmm_log_get_level(), env_levels[_i].level);
    ck_assert_crmm_ok(crmm_log_set_level(CRMM_LOG_INFO)); /* a program may still change it */
    ck_assert_int_eq(crmm_log_get_level(), CRMM_LOG_INFO);
    crmm_finalize();
}

int main(void)
{
    set_configs_dir();
    Suite *s = suite_create("config_init");

    TCase *tc = crmm_test_tcase(s, "disk", 0);
    tcase_add_checked_fixture(tc, tmpdir_setup, NULL);

    tc = crmm_test_tcase(s, "instances", 0);

    /* these call CUDA (to see whether there is a device): their own case with a GPU timeout */
    tc = crmm_test_tcase(s, "cuda", CRMM_TEST_GPU_TIMEOUT);
    tcase_add_checked_fixture(tc, tmpdir_setup, NULL);

    tc = crmm_test_tcase(s, "init", 0);
    tcase_add_checked_fixture(tc, tmpdir_setup, NULL);

    return crmm_test_run(s);
}
