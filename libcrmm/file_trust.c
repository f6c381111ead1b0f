/* file_trust.c — the owner and mode a file must have before crmm acts on what it says.
 *
 * A plugin is code and a config chooses plugins and the files crmm writes: whoever can write
 * either decides what a process running crmm does. So, as OpenSSH's StrictModes does for its
 * files, such a file must belong to root or to the effective user, must not be writable by
 * others, and may be writable by its group only when that group is its owner's alone. A POSIX
 * access ACL counts too: with one, the mode's group bits are the ACL's mask, and each named user
 * or group the ACL lets write is someone else who could. */
#include "build_config.h"
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/xattr.h>
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

/* The Linux xattr form of a POSIX ACL (linux/posix_acl_xattr.h): a version, then entries of a
 * tag, permission bits and an id, little-endian. */
#define ACL_XATTR "system.posix_acl_access"
#define ACL_XATTR_VERSION 2
#define ACL_TAG_USER 0x02
#define ACL_TAG_GROUP_OBJ 0x04
#define ACL_TAG_GROUP 0x08
#define ACL_PERM_WRITE 0x2
#define ACL_MAX_BYTES 4096 /* 511 entries; more are refused as unreadable */

static uint32_t le32(const unsigned char *b) { return b[0] | b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }
static unsigned le16(const unsigned char *b) { return b[0] | (unsigned)b[1] << 8; }

/* `acl`, len bytes of that form: no write entry for another user, or a group not the owner's
 * alone (the owner, root and the effective user may write the file anyway). */
static crmm_status acl_check(const char *path, const unsigned char *acl, size_t len, const struct stat *st,
                             crmm_status code, const char *what, const char *harm)
{
    unsigned mode = (unsigned)(st->st_mode & 07777);
    if (len < 4 || (len - 4) % 8 != 0 || le32(acl) != ACL_XATTR_VERSION)
        return crmm_set_error(code, "refusing %s %s: its access ACL is not one crmm can read (%zu bytes), so who may "
                              "write it is not known", what, path, len);
    for (size_t at = 4; at < len; at += 8) {
        unsigned tag = le16(acl + at), perm = le16(acl + at + 2);
        uint32_t id = le32(acl + at + 4);
        if (!(perm & ACL_PERM_WRITE)) /* the mode's group bits, the mask, let write through */
            continue;
        if (tag == ACL_TAG_USER && id != st->st_uid && id != 0 && id != geteuid())
            return crmm_set_error(code, "refusing %s %s: its ACL lets user %u write it (owner %u, mode %04o), so "
                                  "that user %s; fix it with: setfacl -x u:%u %s",
                                  what, path, (unsigned)id, (unsigned)st->st_uid, mode, harm, (unsigned)id, path);
        gid_t gid = tag == ACL_TAG_GROUP ? (gid_t)id : st->st_gid;
        if ((tag == ACL_TAG_GROUP || tag == ACL_TAG_GROUP_OBJ) && !group_is_owners_alone(gid, st->st_uid))
            return crmm_set_error(code, "refusing %s %s: its ACL lets group %u write it (owner %u, mode %04o), which "
                                  "is not its owner's private group, so others %s; fix it with: chmod g-w %s",
                                  what, path, (unsigned)gid, (unsigned)st->st_uid, mode, harm, path);
    }
    return CRMM_OK;
}

/* With the mode's group write bit set: the file's access ACL checked when it has one, else the
 * group's own rule. */
static crmm_status group_write_check(const char *path, int fd, const struct stat *st, crmm_status code,
                                     const char *what, const char *harm)
{
    unsigned char acl[ACL_MAX_BYTES];
    ssize_t n = fd >= 0 ? fgetxattr(fd, ACL_XATTR, acl, sizeof acl) : getxattr(path, ACL_XATTR, acl, sizeof acl);
    if (n >= 0)
        return acl_check(path, acl, (size_t)n, st, code, what, harm);
    if (errno != ENODATA && errno != ENOTSUP)
        return crmm_set_error(code, "refusing %s %s: its access ACL cannot be read (%s), so who may write it is not "
                              "known", what, path, strerror(errno));
    if (group_is_owners_alone(st->st_gid, st->st_uid))
        return CRMM_OK;
    return crmm_set_error(code,
                          "refusing %s %s: it is writable by group %u (owner %u, mode %04o), which is not its "
                          "owner's private group (the owner its only member), so others %s; fix it with: chmod "
                          "g-w %s",
                          what, path, (unsigned)st->st_gid, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777),
                          harm, path);
}

crmm_status file_trust_check(const char *path, int fd, const struct stat *st, crmm_status code, const char *what,
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
    if (st->st_mode & S_IWGRP)
        return group_write_check(path, fd, st, code, what, harm);
    return CRMM_OK;
}

crmm_status file_trust_check_path(const char *path, crmm_status code, const char *what, const char *harm)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return crmm_set_error(code, "cannot stat %s %s: %s", what, path, strerror(errno));
    return file_trust_check(path, -1, &st, code, what, harm);
}
