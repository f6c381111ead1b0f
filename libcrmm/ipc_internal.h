/* ipc_internal.h — the wire form of a crmm IPC handle (crmm/ipc.h), shared by the ipc_*.c files.
 *
 * A handle's bytes are one ipc_wire followed, for fabric handles, by `count` fabric handles of
 * CRMM_IPC_FABRIC_BYTES each; for file descriptors, the handle carries `count` of them. Integers
 * are in the host's byte order: both processes run on one machine. */
#ifndef CRMM_LIBCRMM_IPC_INTERNAL_H
#define CRMM_LIBCRMM_IPC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <crmm/ipc.h>

#define IPC_MAGIC "crmmIPC1"
/* The most shareable handles one handle may carry (4 TiB of 2 MiB pages). */
#define IPC_MAX_COUNT ((uint32_t)1 << 21)

typedef struct ipc_wire {
    char magic[8];
    uint32_t kind;             /* CRMM_IPC_KIND_* */
    uint32_t handle_type;      /* CRMM_IPC_POSIX_FD or CRMM_IPC_FABRIC */
    int32_t device;            /* the exporting device (for messages) */
    uint32_t count;            /* shareable handles */
    uint64_t size;             /* bytes of the exported range */
    uint64_t page;             /* VMM: bytes per handle */
    uint64_t offset;           /* VMM: where the range starts in the first page */
    unsigned char pointer_data[CRMM_IPC_POINTER_BYTES];
} ipc_wire;

struct crmm_ipc_handle {
    unsigned char *bytes;      /* an ipc_wire and the fabric handles */
    size_t size;
    int *fds;
    size_t fd_count;
};

/* Check that bytes[0, size) with fd_count descriptors form a handle; CRMM_ERROR_INVALID_ARGUMENT
 * saying what is wrong otherwise. */
crmm_status ipc_wire_check(const void *bytes, size_t size, size_t fd_count);

/* Close every descriptor of fds[0, n) that is >= 0. */
void ipc_close_fds(const int *fds, size_t n);

#endif
