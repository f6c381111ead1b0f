/* file_trust.h — whether a file crmm reads and acts on (a plugin, a config) may be trusted. */
#ifndef CRMM_CORE_FILE_TRUST_H
#define CRMM_CORE_FILE_TRUST_H

#include <sys/stat.h>
#include <crmm/error.h>

/* CRMM_OK when the file `path` whose status is *st belongs to root or the effective user and
 * no one else can write it: not writable by others, and by its group only when that group is its
 * owner's alone; where its mode lets its group write, a POSIX access ACL (read from fd, the file
 * opened, or from path when fd is -1) must let no other user, and no group but the owner's
 * alone, write it. Else sets error `code` naming the path, its owner and mode, `what` it is
 * ("plugin file", "config") and `harm` ("could replace the code a config loads"). */
crmm_status file_trust_check(const char *path, int fd, const struct stat *st, crmm_status code, const char *what,
                             const char *harm);

/* The same for the file `path` (stat follows links): also `code` when it cannot be stat'ed. */
crmm_status file_trust_check_path(const char *path, crmm_status code, const char *what, const char *harm);

#endif
