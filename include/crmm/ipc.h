/* crmm/ipc.h — sharing crmm device memory with another process (CUDA IPC).
 *
 * The exporting process turns an allocation into a handle; the handle travels to another
 * process (its bytes plus the file descriptors it carries, over a UNIX socket with
 * crmm_ipc_send/crmm_ipc_recv, or any way that passes descriptors); that process imports it and
 * gets a device pointer to the same memory:
 *
 *   exporter                                   importer
 *   crmm_ipc_export(mr, p, n, &h);             crmm_ipc_recv(sock, &h);
 *   crmm_ipc_send(sock, h);                    crmm_ipc_import(h, &m);
 *   crmm_ipc_handle_free(h);                   use crmm_ipc_mapping_ptr(m) ... crmm_ipc_close(m);
 *                                              crmm_ipc_handle_free(h);
 *
 * What can be exported (the first layer of mr's chain that holds the memory decides; adaptors
 * such as logging or statistics are looked through):
 *  - `async` made with enable_ipc = true (or export_handle_type = posix_fd): the pool's
 *    shareable handle (one file descriptor) and the allocation's export data. The allocation
 *    must be one the async pool handed out, exported whole; a range that runs past it is refused
 *    (the driver's cuMemGetAddressRange says where it ends, where a driver answers). The importer must close its mapping
 *    before the exporter frees the allocation (the driver's rule for pool allocations).
 *  - `pool` with expandable = true and ipc = true: the physical pages that back
 *    [ptr, ptr + size), one file descriptor each. The importer maps them into an address range
 *    of its own. The physical memory stays until both sides let go: the exporter may free (and
 *    the pool reuse or give back the pages) while the importer still maps them; the importer
 *    then still sees the same physical pages, whatever the exporter puts there next.
 *  - enable_fabric / export_handle_type = fabric (async) and ipc_handle_type = fabric (pool)
 *    export fabric handles (bytes, no descriptor) where the driver offers them.
 * Everything else is refused with CRMM_ERROR_UNSUPPORTED naming the reason: host memory, a pool
 * that grows by chunks from cudaMalloc (legacy cudaIpcGetMemHandle is not used: it cannot share
 * part of a chunk safely), a pool or async resource made without IPC, other plugins.
 *
 * Ordering: no stream of the importer waits for the exporter's work. Before the importer uses the
 * memory, the exporter synchronizes the stream the memory was allocated and written on (or the
 * device), and tells the importer after that, e.g. by sending the handle then.
 *
 * Lifetime: a handle owns its file descriptors (closed by crmm_ipc_handle_free); a mapping owns
 * what it imported (released by crmm_ipc_close; a close that fails keeps what it could not
 * release: see there). A process that dies releases both with its descriptors and its CUDA
 * context. */
#ifndef CRMM_IPC_H
#define CRMM_IPC_H

#include <crmm/export.h>
#include <stddef.h>
#include <stdint.h>
#include <crmm/error.h>
#include <crmm/resource.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An exported allocation: a few bytes and zero or more file descriptors. */
typedef struct crmm_ipc_handle crmm_ipc_handle;
/* An imported allocation, mapped in this process. */
typedef struct crmm_ipc_mapping crmm_ipc_mapping;

/* Export [ptr, ptr + size) of memory allocated from mr (size > 0). Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (NULL mr, ptr or out, size 0, or a range the exporting layer does
 * not hold), CRMM_ERROR_UNSUPPORTED (mr's chain cannot export: see above; the message says
 * why), CRMM_ERROR_CUDA (the driver refused), CRMM_ERROR_OUT_OF_MEMORY. *out is NULL on error. */
CRMM_API crmm_status crmm_ipc_export(crmm_resource *mr, void *ptr, size_t size, crmm_ipc_handle **out);

/* Close the handle's file descriptors and free it. NULL: no-op. */
CRMM_API void crmm_ipc_handle_free(crmm_ipc_handle *h);

/* The handle's bytes (valid while the handle lives) and its file descriptors (owned by the
 * handle), e.g. to send them another way. NULL out arguments are skipped; a NULL handle gives
 * 0 and NULL. */
CRMM_API size_t crmm_ipc_handle_bytes(const crmm_ipc_handle *h, const void **bytes);
CRMM_API size_t crmm_ipc_handle_fds(const crmm_ipc_handle *h, const int **fds);

/* Make a handle from bytes and descriptors received another way; the handle takes ownership of
 * the `fd_count` descriptors in fds (also on error, when it closes each once). Errors:
 * CRMM_ERROR_INVALID_ARGUMENT (NULL bytes or out, fds NULL with fd_count > 0, bytes that are not
 * a crmm IPC handle, a descriptor count other than the one the bytes announce, a negative
 * descriptor or one given twice), CRMM_ERROR_OUT_OF_MEMORY. */
CRMM_API crmm_status crmm_ipc_handle_from(const void *bytes, size_t size, const int *fds, size_t fd_count,
                                          crmm_ipc_handle **out);

/* Send a handle over a connected UNIX stream socket (its descriptors as SCM_RIGHTS, in batches
 * the kernel accepts); the handle stays the caller's. A non-blocking socket is waited on (poll)
 * as a blocking one would wait. Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL handle, negative
 * socket), CRMM_ERROR_IO (sendmsg failed or the peer went away, with errno's text). After an
 * error part of a handle may have gone: the socket is out of step with its peer. */
CRMM_API crmm_status crmm_ipc_send(int socket_fd, const crmm_ipc_handle *h);

/* Receive a handle crmm_ipc_send sent; a non-blocking socket is waited on as a blocking one
 * would wait. Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL out, negative socket, or what arrived is
 * not a crmm IPC handle: every descriptor received is closed, and nothing past a bad header is
 * read), CRMM_ERROR_IO (recvmsg failed, the peer closed the socket before a whole handle
 * arrived, or the kernel cut the descriptors short: this process at its open-file limit),
 * CRMM_ERROR_OUT_OF_MEMORY. After an error the socket is out of step with its peer (the rest of
 * that handle is still queued): close it. */
CRMM_API crmm_status crmm_ipc_recv(int socket_fd, crmm_ipc_handle **out);

/* Map an exported allocation in this process, on the current CUDA device. The handle may be
 * freed afterwards. Errors: CRMM_ERROR_INVALID_ARGUMENT (NULL argument, or an `async` handle whose
 * size is more than the allocation it names: the size is the peer's word), CRMM_ERROR_UNSUPPORTED
 * (the driver lacks a function the import needs), CRMM_ERROR_CUDA (the driver refused, e.g. the
 * handle comes from this very process, or the memory is gone, or it would not release an imported
 * page's handle, which would then hold its memory after close), CRMM_ERROR_OUT_OF_MEMORY,
 * CRMM_ERROR_STATE (the CUDA runtime is unloading). A failed import releases what it mapped; a
 * page whose unmap fails there stays mapped, and the range reserved, as after a failed close (the
 * message says so). */
CRMM_API crmm_status crmm_ipc_import(const crmm_ipc_handle *h, crmm_ipc_mapping **out);

/* The imported memory's device pointer and size (NULL and 0 for NULL, and for a mapping whose
 * crmm_ipc_close failed). */
CRMM_API void *crmm_ipc_mapping_ptr(const crmm_ipc_mapping *m);
CRMM_API size_t crmm_ipc_mapping_size(const crmm_ipc_mapping *m);

/* Unmap and release what crmm_ipc_import mapped, and free m (no more work may be queued that uses
 * it). Work already queued on the device the import was made on may still use it: close waits for
 * that device first (cudaDeviceSynchronize; for an `async` import, cudaFree's own wait), making it
 * current for the call whichever device the caller has current; the caller's current device is
 * the same on return. NULL: CRMM_OK.
 * Errors: CRMM_ERROR_CUDA (a CUDA call failed, the message names it: cudaSetDevice when the
 * import's device cannot be made current, then nothing is released since nothing can wait for
 * its work; cudaDeviceSynchronize, cudaFree; cuMemUnmap, then each page that could not be
 * unmapped stays mapped, holding its memory, and the import's address range stays reserved rather
 * than freed, so that nothing else is placed over a live mapping; cuMemAddressFree),
 * CRMM_ERROR_STATE (m's close failed before; or the CUDA runtime reported that it is unloading
 * during the close). Once the process is exiting (crmm_process_exiting) close makes no CUDA call:
 * it frees m and returns CRMM_OK, leaving the mappings to the driver's teardown. After an error m
 * is not freed: it is kept, closed, with whatever could not be released (both leak), its pointer
 * and size read NULL and 0, and passing it to crmm_ipc_close again is refused with
 * CRMM_ERROR_STATE without a CUDA call. */
CRMM_API crmm_status crmm_ipc_close(crmm_ipc_mapping *m);

/* ---- for plugins: the export control op ---------------------------------------------------- */

/* crmm_ipc_export asks the first `async` or `pool` layer of the chain through
 * crmm_resource_control with this op and a crmm_ipc_export_request. It is one of the core's
 * ops (numbered below 1, see crmm_resource_ops.control), which mean the same to every kind. */
#define CRMM_IPC_OP_EXPORT (-1)

#define CRMM_IPC_KIND_ASYNC 1   /* a cudaMemPool allocation: one pool handle + pointer_data */
#define CRMM_IPC_KIND_VMM 2     /* physical pages of `page` bytes mapped in a row */
#define CRMM_IPC_POSIX_FD 1     /* shareable handles are file descriptors */
#define CRMM_IPC_FABRIC 2       /* shareable handles are CRMM_IPC_FABRIC_BYTES bytes each */
#define CRMM_IPC_FABRIC_BYTES 64
#define CRMM_IPC_POINTER_BYTES 64

typedef struct crmm_ipc_export_request {
    void *ptr;                 /* in: the range to export */
    size_t size;
    int kind;                  /* out: CRMM_IPC_KIND_* */
    int handle_type;           /* out: CRMM_IPC_POSIX_FD or CRMM_IPC_FABRIC */
    int device;                /* out: the exporting device */
    size_t count;              /* out: shareable handles */
    int *fds;                  /* out (posix_fd): malloc'd array of `count` descriptors */
    unsigned char *fabric;     /* out (fabric): malloc'd count * CRMM_IPC_FABRIC_BYTES */
    uint64_t page;             /* out (VMM): bytes each handle maps */
    uint64_t offset;           /* out (VMM): ptr minus the first page's address */
    unsigned char pointer_data[CRMM_IPC_POINTER_BYTES]; /* out (async): cudaMemPoolPtrExportData */
} crmm_ipc_export_request;

#ifdef __cplusplus
}
#endif
#endif
