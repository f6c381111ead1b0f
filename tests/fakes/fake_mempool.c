/* fake_mempool.c — see fake_mempool.h. */
#include "build_config.h"
#include <stdint.h>
#include "fake_mempool.h"

int fake_mempool_pools_live;
int fake_mempool_devices = 1;
int fake_mempool_current;
int fake_mempool_supported_handle_types = cudaMemHandleTypePosixFileDescriptor;
int fake_mempool_created_handle_types;

cudaError_t cudaGetDevice(int *device) { *device = fake_mempool_current; return cudaSuccess; }
cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= fake_mempool_devices)
        return cudaErrorInvalidDevice;
    fake_mempool_current = device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *count) { *count = fake_mempool_devices; return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    (void)device;
    *value = attr == cudaDevAttrMemoryPoolsSupported                ? 1
             : attr == cudaDevAttrMemoryPoolSupportedHandleTypes ? fake_mempool_supported_handle_types
                                                                  : 0;
    return cudaSuccess;
}
cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props)
{
    fake_mempool_created_handle_types = (int)props->handleTypes;
    static int token;
    *pool = (cudaMemPool_t)&token;
    fake_mempool_pools_live++;
    return cudaSuccess;
}
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) { (void)pool; fake_mempool_pools_live--; return cudaSuccess; }
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    (void)pool, (void)attr, (void)value;
    return cudaSuccess;
}
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    (void)pool, (void)attr;
    *(uint64_t *)value = 0;
    return cudaSuccess;
}
