/* fake_no_driver.c — for the programs that script the CUDA runtime without a scripted driver:
 * cudaGetDriverEntryPointByVersion finds no driver function, as on a machine without a driver,
 * so that libcrmm's lookups (the current device's cuCtxGetDevice, the pool's VMM functions) never
 * reach the real driver of a GPU machine from a scripted test. Compiled into each such program
 * and exported (-export-dynamic), as the scripted runtime it completes. */
#include "build_config.h"
#include <cuda_runtime_api.h>

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    (void)symbol, (void)version, (void)flags;
    *fn = NULL;
    if (status)
        *status = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
