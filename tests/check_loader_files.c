/* check_loader_files.c — the plugin loader, on the CPU: the permission checks on plugin files and
 * the directories above them, and crmm_plugin_foreach over good and broken plugin files (copied
 * into temporary directories). */
#include "build_config.h"
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <cuda_runtime_api.h>
#include "loader_test.h"

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

CRMM_TEST_IN("permissions", group_writable_file_is_refused)
{
    char file[PATH_MAX];
    char *dir = new_dir_with_host(0775, file);
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
    ck_assert_error_contains(fix);
    ck_assert_error_contains("writable by group");
    /* not a silent fallback to the next directory, and not cached */
    ck_assert_crmm(crmm_plugin_load("host", dir, &pl), CRMM_ERROR_PLUGIN);
    free(dir);
}

CRMM_TEST_IN("permissions", world_writable_file_is_refused)
{
    char path[PATH_MAX];
    char *dir = new_dir_with_host(0757, path);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load(path, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("writable by others");
    ck_assert_error_contains("chmod go-w");
    /* fixed as the message says, it loads */
    ck_assert_int_eq(chmod(path, 0755), 0);
    ck_assert_crmm_ok(crmm_plugin_load(path, NULL, &pl));
    ck_assert_str_eq(pl->name, "host");
    free(dir);
}

/* A plugin path that names a FIFO (or a link to one) is refused before dlopen, which would wait
 * for a writer forever; by name in a search directory too. */
CRMM_TEST_IN("permissions", a_fifo_is_refused_not_opened)
{
    char *dir = new_dir();
    char path[PATH_MAX], link[PATH_MAX];
    snprintf(path, sizeof path, "%s/crmm_fifo.so", dir);
    snprintf(link, sizeof link, "%s/crmm_piped.so", dir);
    ck_assert_int_eq(mkfifo(path, 0644), 0);
    ck_assert_int_eq(symlink(path, link), 0);
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load(path, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("not a regular file");
    ck_assert_crmm(crmm_plugin_load("fifo", dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("not a regular file");
    ck_assert_crmm(crmm_plugin_load("piped", dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("not a regular file");
    ck_assert_ptr_null(pl);
    unlink(link);
    unlink(path);
    free(dir);
}

/* Group-writable (umask 002, or a tarball git archive made, unpacked as root) is accepted where
 * the group is the owner's private group: no one else can write through it. */
CRMM_TEST_IN("permissions", directory_writable_by_owners_private_group_loads)
{
    char file[PATH_MAX];
    char *dir = new_dir_with_host(0775, file);
    ck_assert_int_eq(chmod(dir, 0775), 0);
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

/* An ACL that lets another user, or a group not the owner's alone, write a plugin file or its
 * directory: the mode shows only the ACL's mask (group-writable), which the owner's private
 * group would pass; the named entry is refused, with the fix. A named user who may only read is
 * fine. Where the file system takes no ACL, the plain mode rules apply (the file loads). */
CRMM_TEST_IN("permissions", an_acl_that_lets_others_write_is_refused)
{
    char file[PATH_MAX];
    char *dir = new_dir_with_host(0644, file);
    const crmm_plugin *pl = NULL;
    unsigned user = crmm_test_other_uid();
    char user_says[64];
    snprintf(user_says, sizeof user_says, "its ACL lets user %u write it", user);
    if (!crmm_test_set_acl(file, 0x02, user, 6)) {
        ck_assert_crmm_ok(crmm_plugin_load(file, NULL, &pl));
        free(dir);
        return;
    }
    ck_assert_crmm(crmm_plugin_load(file, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains(user_says);
    char fix[PATH_MAX + 32];
    snprintf(fix, sizeof fix, "setfacl -x u:%u %s", user, file);
    ck_assert_error_contains(fix);
    gid_t other = 0;
    for (gid_t g = 60001; g < 65000 && !other; g++)
        other = getgrgid(g) ? 0 : g; /* a group no one is in: not the owner's alone */
    ck_assert(crmm_test_set_acl(file, 0x08, (unsigned)other, 6));
    ck_assert_crmm(crmm_plugin_load(file, NULL, &pl), CRMM_ERROR_PLUGIN);
    char says[64];
    snprintf(says, sizeof says, "its ACL lets group %u write it", (unsigned)other);
    ck_assert_error_contains(says);
    ck_assert(crmm_test_set_acl(file, 0x02, user, 4)); /* read only */
    ck_assert_crmm_ok(crmm_plugin_load(file, NULL, &pl));
    ck_assert_str_eq(pl->name, "host");
    ck_assert(crmm_test_set_acl(dir, 0x02, user, 7)); /* the directory, writable through its ACL */
    ck_assert_crmm(crmm_plugin_load("host", dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains("plugin directory");
    ck_assert_error_contains(user_says);
    free(dir);
}

static const mode_t writable_modes[] = {0775, 0777, 01777};

CRMM_LOOP_TEST_IN("permissions", writable_directory_is_refused, 3)
{
    mode_t mode = writable_modes[_i];
    char *dir = new_dir();
    copy_plugin("host", dir, "host", 0755);
    ck_assert_int_eq(chmod(dir, mode), 0);
    if (mode == 0775 && !unknown_group_of(dir)) {
        fprintf(stderr, "writable_directory_is_refused: mode 0775 skipped (giving a directory another group needs root)\n");
        free(dir);
        return;
    }
    const crmm_plugin *pl = NULL;
    ck_assert_crmm(crmm_plugin_load("host", dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_ptr_null(pl);
    ck_assert_error_contains("plugin directory");
    char fix[PATH_MAX + 32];
    snprintf(fix, sizeof fix, "chmod %s-w %s", mode == 0775 ? "g" : "go", dir);
    ck_assert_error_contains(fix);
    free(dir);
}

CRMM_TEST_IN("permissions", writable_directory_above_is_refused)
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
    ck_assert_error_contains("directory above a plugin");
    ck_assert_error_contains(top);
    /* kept again: loads */
    ck_assert_int_eq(chmod(top, 0755), 0);
    ck_assert_crmm_ok(crmm_plugin_load("host", sub, &pl));
    ck_assert_ptr_nonnull(pl);
    free(top);
}

CRMM_TEST_IN("permissions", link_in_writable_directory_is_refused)
{
    /* A link to a well-kept plugin, in a directory anyone can write: anyone could point it at
     * other code, so the directory the link is in counts too. */
    char target[PATH_MAX], link[PATH_MAX];
    char *safe = new_dir_with_host(0755, target), *open_dir = new_dir();
    snprintf(link, sizeof link, "%s/crmm_host.so", open_dir);
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_int_eq(chmod(open_dir, 0777), 0);
    const crmm_plugin *pl = NULL, *direct;
    ck_assert_crmm_ok(crmm_plugin_load(target, NULL, &direct)); /* loaded (and cached) first */
    ck_assert_crmm(crmm_plugin_load("host", open_dir, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains(open_dir);
    ck_assert_crmm(crmm_plugin_load(link, NULL, &pl), CRMM_ERROR_PLUGIN);
    ck_assert_error_contains(open_dir);
    ck_assert_ptr_null(pl);
    /* the same link in a kept directory is fine */
    ck_assert_int_eq(chmod(open_dir, 0755), 0);
    ck_assert_crmm_ok(crmm_plugin_load("host", open_dir, &pl));
    ck_assert_ptr_eq(pl, direct);
    free(safe);
    free(open_dir);
}

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

CRMM_TEST_IN("foreach", foreach_reports_good_and_broken)
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

/* Count the distinct crmm_<name>.so names in the ':'-list `dirs`. */
static int count_plugin_names(const char *dirs)
{
    char names[128][256]; /* a d_name fits */
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

CRMM_TEST_IN("foreach", foreach_lists_every_plugin_once)
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

CRMM_TEST_IN("foreach", foreach_reports_many_plugins_once)
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

int main(void)
{
    return CRMM_TEST_MAIN_CASES("loader_files", {"permissions", 0}, {"foreach", 0});
}
