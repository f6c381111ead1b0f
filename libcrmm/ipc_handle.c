/* ipc_handle.c — crmm IPC handles (crmm/ipc.h): their wire form, and passing them with their
 * file descriptors over a UNIX socket (SCM_RIGHTS).
 *
 * On the socket a handle is: a frame header (the byte count and the descriptor count), the
 * bytes, then the descriptors in batches of at most IPC_FDS_PER_MESSAGE, each batch attached to
 * one byte of its own. The receiver reads exactly the lengths it expects, so a read never runs
 * into the next batch and every descriptor arrives with the byte it was sent with. */
#include "build_config.h"
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "internal.h"
#include "ipc_internal.h"

/* Below the kernel's limit of descriptors per message (SCM_MAX_FD, 253). */
#define IPC_FDS_PER_MESSAGE 250
/* Room the receiver keeps beside the descriptors for what a socket option makes the kernel add to
 * every message (SO_PASSCRED's credentials, SO_PASSPIDFD's pidfd, SO_PASSSEC's label): without
 * it a full batch does not fit and arrives truncated. */
#define IPC_OTHER_CONTROL 512
/* Linux's pidfd of the sender (SO_PASSPIDFD), a descriptor installed in the receiver. */
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif

typedef struct ipc_frame {
    uint64_t bytes;
    uint64_t fds;
} ipc_frame;

void ipc_close_fds(const int *fds, size_t n)
{
    for (size_t i = 0; fds && i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* The checks of a handle's header alone: what it announces is consistent; then *want_bytes and
 * *want_fds are the bytes and descriptors a handle with this header has. */
static crmm_status check_header(const ipc_wire *hdr, size_t *want_bytes, size_t *want_fds)
{
    ipc_wire w = *hdr;
    if (memcmp(w.magic, IPC_MAGIC, sizeof w.magic) != 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: not a crmm IPC handle (bad magic)");
    if (w.kind != CRMM_IPC_KIND_ASYNC && w.kind != CRMM_IPC_KIND_VMM)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: handle of unknown kind %u", w.kind);
    if (w.handle_type != CRMM_IPC_POSIX_FD && w.handle_type != CRMM_IPC_FABRIC)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: handle of unknown handle type %u", w.handle_type);
    if (!w.count || w.count > IPC_MAX_COUNT || !w.size)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: handle with %u shareable handles for %llu bytes",
                              w.count, (unsigned long long)w.size);
    if (w.kind == CRMM_IPC_KIND_ASYNC && w.count != 1)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: async handle with %u pool handles (1 expected)", w.count);
    if (w.kind == CRMM_IPC_KIND_VMM &&
        (!w.page || w.offset >= w.page || w.page > UINT64_MAX / w.count || w.size > w.count * w.page - w.offset))
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "ipc: handle's %u pages of %llu bytes do not hold %llu bytes from offset %llu", w.count,
                              (unsigned long long)w.page, (unsigned long long)w.size, (unsigned long long)w.offset);
    *want_bytes = sizeof w + (w.handle_type == CRMM_IPC_FABRIC ? (size_t)w.count * CRMM_IPC_FABRIC_BYTES : 0);
    *want_fds = w.handle_type == CRMM_IPC_POSIX_FD ? w.count : 0;
    return CRMM_OK;
}

/* The bytes and descriptor count a handle's header announces match these. */
static crmm_status check_counts(size_t size, size_t fd_count, size_t want_bytes, size_t want_fds)
{
    if (size != want_bytes || fd_count != want_fds)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "ipc: handle has %zu bytes and %zu descriptors; its header announces %zu and %zu", size,
                              fd_count, want_bytes, want_fds);
    return CRMM_OK;
}

crmm_status ipc_wire_check(const void *bytes, size_t size, size_t fd_count)
{
    ipc_wire w;
    if (size < sizeof w)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: not a crmm IPC handle (%zu bytes, at least %zu expected)",
                              size, sizeof w);
    memcpy(&w, bytes, sizeof w);
    size_t want_bytes, want_fds;
    crmm_status st = check_header(&w, &want_bytes, &want_fds);
    return st == CRMM_OK ? check_counts(size, fd_count, want_bytes, want_fds) : st;
}

static int compare_fds(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* fds[0, n) sorted, in a malloc'd copy (NULL when malloc fails). */
static int *sorted_copy(const int *fds, size_t n)
{
    int *sorted = malloc(n * sizeof *sorted);
    if (sorted) {
        memcpy(sorted, fds, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, compare_fds);
    }
    return sorted;
}

/* Whether fds[0, n) are descriptors (not negative), each given once: a handle closes each of
 * its descriptors, and a second close of one may close what another thread opened since. */
static crmm_status check_fds(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] < 0)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: handle_from: descriptor %zu is negative (%d)", i, fds[i]);
    if (n < 2)
        return CRMM_OK;
    int *sorted = sorted_copy(fds, n);
    if (!sorted)
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "ipc: handle_from: malloc failed (%zu descriptors)", n);
    crmm_status st = CRMM_OK;
    for (size_t i = 1; i < n && st == CRMM_OK; i++)
        if (sorted[i] == sorted[i - 1])
            st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: handle_from: descriptor %d is given twice", sorted[i]);
    free(sorted);
    return st;
}

/* Close each of fds[0, n) once (a descriptor given twice is closed once), negative ones not. */
static void close_fds_once(const int *fds, size_t n)
{
    int *sorted = fds && n > 1 ? sorted_copy(fds, n) : NULL;
    if (!sorted) { /* one descriptor, or no memory to find those given twice */
        ipc_close_fds(fds, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (sorted[i] >= 0 && (i == 0 || sorted[i] != sorted[i - 1]))
            close(sorted[i]);
    free(sorted);
}

void crmm_ipc_handle_free(crmm_ipc_handle *h)
{
    if (!h)
        return;
    ipc_close_fds(h->fds, h->fd_count);
    free(h->fds);
    free(h->bytes);
    free(h);
}

size_t crmm_ipc_handle_bytes(const crmm_ipc_handle *h, const void **bytes)
{
    if (bytes)
        *bytes = h ? h->bytes : NULL;
    return h ? h->size : 0;
}

size_t crmm_ipc_handle_fds(const crmm_ipc_handle *h, const int **fds)
{
    if (fds)
        *fds = h ? h->fds : NULL;
    return h ? h->fd_count : 0;
}

crmm_status crmm_ipc_handle_from(const void *bytes, size_t size, const int *fds, size_t fd_count,
                                          crmm_ipc_handle **out)
{
    if (out)
        *out = NULL;
    if (!bytes || !out || (fd_count && !fds)) {
        close_fds_once(fds, fd_count);
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: handle_from: %s is NULL",
                              !bytes ? "bytes" : !out ? "out" : "fds");
    }
    crmm_status st = ipc_wire_check(bytes, size, fd_count);
    if (st == CRMM_OK)
        st = check_fds(fds, fd_count);
    if (st != CRMM_OK) {
        close_fds_once(fds, fd_count);
        return st;
    }
    crmm_ipc_handle *h = calloc(1, sizeof *h);
    unsigned char *copy = malloc(size);
    int *own = fd_count ? malloc(fd_count * sizeof *own) : NULL;
    if (!h || !copy || (fd_count && !own)) {
        free(h), free(copy), free(own);
        ipc_close_fds(fds, fd_count);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "ipc: malloc failed (handle of %zu bytes)", size);
    }
    memcpy(copy, bytes, size);
    if (fd_count)
        memcpy(own, fds, fd_count * sizeof *own);
    h->bytes = copy;
    h->size = size;
    h->fds = own;
    h->fd_count = fd_count;
    *out = h;
    return CRMM_OK;
}

/* ---- the socket ------------------------------------------------------------------------------ */

static crmm_status io_error(const char *what, int err)
{
    if (!err)
        return crmm_set_error(CRMM_ERROR_IO, "ipc: %s: the peer closed the socket", what);
    return crmm_set_error(CRMM_ERROR_IO, "ipc: %s: %s", what, strerror(err));
}

/* A non-blocking socket (a Python socket with a timeout is one) that cannot take or give more
 * now: wait until it can, as a blocking socket would. False when poll fails (errno set). */
static bool wait_for_socket(int sock, short events)
{
    struct pollfd p = {.fd = sock, .events = events};
    int r;
    while ((r = poll(&p, 1, -1)) < 0 && errno == EINTR)
        ;
    return r >= 0;
}

static bool would_block(int err) { return err == EAGAIN || err == EWOULDBLOCK; }

/* Send data[0, n) with `nfds` descriptors attached to its first byte. */
static crmm_status send_part(int sock, const void *data, size_t n, const int *fds, size_t nfds)
{
    union {
        char buf[CMSG_SPACE(IPC_FDS_PER_MESSAGE * sizeof(int))];
        struct cmsghdr align;
    } control;
    size_t done = 0;
    while (done < n) {
        struct iovec iov = {.iov_base = (char *)data + done, .iov_len = n - done};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (nfds && done == 0) {
            memset(&control, 0, sizeof control);
            msg.msg_control = control.buf;
            msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
            memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
        }
        ssize_t r = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (r < 0 && (errno == EINTR || (would_block(errno) && wait_for_socket(sock, POLLOUT))))
            continue;
        if (r <= 0)
            return io_error("sendmsg", r < 0 ? errno : 0);
        done += (size_t)r;
    }
    return CRMM_OK;
}

crmm_status crmm_ipc_send(int socket_fd, const crmm_ipc_handle *h)
{
    if (!h || socket_fd < 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: send: %s", !h ? "handle is NULL" : "bad socket");
    ipc_frame frame = {.bytes = h->size, .fds = h->fd_count};
    crmm_status st = send_part(socket_fd, &frame, sizeof frame, NULL, 0);
    if (st == CRMM_OK)
        st = send_part(socket_fd, h->bytes, h->size, NULL, 0);
    for (size_t i = 0; st == CRMM_OK && i < h->fd_count; i += IPC_FDS_PER_MESSAGE) {
        size_t n = h->fd_count - i < IPC_FDS_PER_MESSAGE ? h->fd_count - i : IPC_FDS_PER_MESSAGE;
        char one = 'F';
        st = send_part(socket_fd, &one, 1, h->fds + i, n);
    }
    return st;
}

/* Receive exactly n bytes into data; descriptors that come with them are stored from fds[*got]
 * on (at most `room` of them; more, or any when fds is NULL, is an error and they are closed). */
static crmm_status recv_part(int sock, void *data, size_t n, int *fds, size_t room, size_t *got)
{
    union {
        char buf[CMSG_SPACE(IPC_FDS_PER_MESSAGE * sizeof(int)) + IPC_OTHER_CONTROL];
        struct cmsghdr align;
    } control;
    size_t done = 0;
    bool extra = false, truncated = false;
    while (done < n) {
        struct iovec iov = {.iov_base = (char *)data + done, .iov_len = n - done};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof control.buf};
        ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (r < 0 && (errno == EINTR || (would_block(errno) && wait_for_socket(sock, POLLIN))))
            continue;
        if (r <= 0)
            return io_error("recvmsg", r < 0 ? errno : 0);
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_PIDFD && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
                int pidfd; /* the kernel's, not the sender's: nobody else sees it */
                memcpy(&pidfd, CMSG_DATA(c), sizeof pidfd);
                if (pidfd >= 0)
                    close(pidfd);
                continue;
            }
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int *in = (int *)(void *)CMSG_DATA(c);
            for (size_t j = 0; j < k; j++) {
                int fd;
                memcpy(&fd, in + j, sizeof fd);
                if (fds && *got < room)
                    fds[(*got)++] = fd;
                else {
                    close(fd);
                    extra = true;
                }
            }
        }
        if (msg.msg_flags & MSG_CTRUNC)
            truncated = true;
        done += (size_t)r;
    }
    if (truncated)
        return crmm_set_error(CRMM_ERROR_IO,
                              "ipc: recv: the kernel cut the descriptors short (this process at its open-file limit, "
                              "ulimit -n?); the socket is out of step with its peer: close it");
    if (extra)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: recv: descriptors arrived where none were expected");
    return CRMM_OK;
}

crmm_status crmm_ipc_recv(int socket_fd, crmm_ipc_handle **out)
{
    if (out)
        *out = NULL;
    if (!out || socket_fd < 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: recv: %s", !out ? "out is NULL" : "bad socket");
    ipc_frame frame;
    size_t got = 0;
    crmm_status st = recv_part(socket_fd, &frame, sizeof frame, NULL, 0, &got);
    if (st != CRMM_OK)
        return st;
    if (frame.bytes < sizeof(ipc_wire) || frame.bytes > sizeof(ipc_wire) + (uint64_t)IPC_MAX_COUNT * CRMM_IPC_FABRIC_BYTES ||
        frame.fds > IPC_MAX_COUNT)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: recv: not a crmm IPC handle (%llu bytes, %llu descriptors announced)",
                              (unsigned long long)frame.bytes, (unsigned long long)frame.fds);
    /* the header first: what it announces must be what the frame announced, before the rest
     * (up to IPC_MAX_COUNT fabric handles) is read on the peer's word */
    ipc_wire w;
    size_t want_bytes, want_fds;
    if ((st = recv_part(socket_fd, &w, sizeof w, NULL, 0, &got)) != CRMM_OK)
        return st;
    if ((st = check_header(&w, &want_bytes, &want_fds)) != CRMM_OK ||
        (st = check_counts((size_t)frame.bytes, (size_t)frame.fds, want_bytes, want_fds)) != CRMM_OK)
        return crmm_error_add_context("ipc: recv (the socket is out of step with its peer: close it)");
    unsigned char *bytes = malloc((size_t)frame.bytes);
    int *fds = frame.fds ? malloc((size_t)frame.fds * sizeof *fds) : NULL;
    if (!bytes || (frame.fds && !fds)) {
        free(bytes), free(fds);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "ipc: recv: malloc failed");
    }
    memcpy(bytes, &w, sizeof w);
    st = recv_part(socket_fd, bytes + sizeof w, (size_t)frame.bytes - sizeof w, NULL, 0, &got);
    while (st == CRMM_OK && got < frame.fds) {
        char one;
        size_t before = got;
        st = recv_part(socket_fd, &one, 1, fds, (size_t)frame.fds, &got);
        if (st == CRMM_OK && got == before)
            st = crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "ipc: recv: a batch of descriptors arrived empty");
    }
    if (st == CRMM_OK)
        st = crmm_ipc_handle_from(bytes, (size_t)frame.bytes, fds, got, out); /* takes the descriptors */
    else
        ipc_close_fds(fds, got);
    free(bytes);
    free(fds);
    return st;
}
