/* file_trust.c — the owner and mode a file must have before crmm acts on what it says.
 *
 * A plugin is code and a config chooses plugins and the files crmm writes: whoever can write
 * either decides what a process running crmm does. So, as OpenSSH's StrictModes does for its
 * files, such a file must belong to root or to the effective user, must not be writable by
 * others, and may be writable by its group only when that group is its owner's alone. */
#include "build_config.h"
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "file_trust.h"

/* getpwent iterates shared state: one walk at a time */
static pthread_mutex_t user_db_lock = PTHREAD_MUTEX_INITIALIZER;

/* True when group `gid` has exactly one member and that member is user `owner`: its primary
 * group is gid (no other user's is) and the group lists no one else. This is a user's private
 * group (Debian, Ubuntu, Fedora give every user one, and umask 002 then makes files
 * group-writable); writing through it is writing as the owner. A group with no member at all is
 * not accepted (such groups serve setgid programs), nor one the system does not know. OpenSSH's
 * StrictModes on Debian accepts exactly this. */
static bool group_is_owners_alone(gid_t gid, uid_t owner)
{
    pthread_mutex_lock(&user_db_lock);
    bool alone = false;
    struct group *gr = getgrgid(gid);
    if (!gr)
        goto out;
    gid_t g = gr->gr_gid;
    char member[256] = "";
    if (gr->gr_mem[0]) {
        if (gr->gr_mem[1])
            goto out;
        snprintf(member, sizeof member, "%s", gr->gr_mem[0]);
    }
    int primary_members = 0;
    bool other = false;
    setpwent();
    for (struct passwd *pw; (pw = getpwent()) != NULL;)
        if (pw->pw_gid == g) {
            primary_members++;
            other |= pw->pw_uid != owner;
        }
    endpwent();
    if (other)
        goto out;
    if (member[0]) {
        struct passwd *pw = getpwnam(member);
        alone = pw && pw->pw_uid == owner;
    } else
        alone = primary_members > 0;
out:
    pthread_mutex_unlock(&user_db_lock);
    return alone;
}

crmm_status file_trust_check(const char *path, const struct stat *st, crmm_status code, const char *what,
                             const char *harm)
{
    unsigned mode = (unsigned)(st->st_mode & 07777);
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return crmm_set_error(code, "refusing %s %s: it belongs to user %u (mode %04o), neither you nor root, who %s",
                              what, path, (unsigned)st->st_uid, mode, harm);
    if (st->st_mode & S_IWOTH)
        return crmm_set_error(code,
                              "refusing %s %s: it is writable by others (owner %u, mode %04o), so anyone %s; fix it "
                              "with: chmod go-w %s",
                              what, path, (unsigned)st->st_uid, mode, harm, path);
    if ((st->st_mode & S_IWGRP) && !group_is_owners_alone(st->st_gid, st->st_uid))
        return crmm_set_error(code,
                              "refusing %s %s: it is writable by group %u (owner %u, mode %04o), which is not its "
                              "owner's private group (the owner its only member), so others %s; fix it with: chmod "
                              "g-w %s",
                              what, path, (unsigned)st->st_gid, (unsigned)st->st_uid, mode, harm, path);
    return CRMM_OK;
}

crmm_status file_trust_check_path(const char *path, crmm_status code, const char *what, const char *harm)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return crmm_set_error(code, "cannot stat %s %s: %s", what, path, strerror(errno));
    return file_trust_check(path, &st, code, what, harm);
}
