/* build_tree.c — lets the crmm program find the build tree's plugins when it runs uninstalled.
 *
 * `./tools/crmm` in a build directory is libtool's wrapper around tools/.libs/crmm (or
 * lt-crmm). When the running executable lies in that folder of the build tree this program was
 * built in, the build tree's plugin folder (plugins/built) is appended to $CRMM_PLUGIN_PATH, so
 * that `./tools/crmm info` shows the plugins just built. An installed crmm lies elsewhere and
 * never searches the build tree. */
#include "build_config.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "commands.h"

/* True when `exe` is a file directly inside `dir` (both absolute, without symlinks). */
static int directly_inside(const char *exe, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(exe, dir, n) == 0 && exe[n] == '/' && !strchr(exe + n + 1, '/');
}

void crmm_use_build_tree_plugins(void)
{
    char exe[PATH_MAX], dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    const char *build = realpath(CRMM_BUILD_DIR, dir);
    if (!build)
        return;
    char libs[PATH_MAX + 16], tools[PATH_MAX + 16];
    snprintf(libs, sizeof libs, "%s/tools/.libs", build);
    snprintf(tools, sizeof tools, "%s/tools", build);
    if (!directly_inside(exe, libs) && !directly_inside(exe, tools))
        return;
    char plugins[PATH_MAX + 16];
    snprintf(plugins, sizeof plugins, "%s/plugins/built", build);
    const char *old = getenv("CRMM_PLUGIN_PATH");
    size_t len = (old ? strlen(old) : 0) + 1 + strlen(plugins) + 1;
    char *path = malloc(len);
    if (path)
        snprintf(path, len, "%s%s%s", old && *old ? old : "", old && *old ? ":" : "", plugins);
    if (!path || setenv("CRMM_PLUGIN_PATH", path, 1) != 0) /* said, so that a shorter listing is explained */
        fprintf(stderr, "crmm: out of memory: the build tree's plugins (%s) are not searched\n", plugins);
    free(path);
}
