/* fake_mempool.h — the scripted CUDA runtime of one device with memory pools, for the programs
 * that test the `async` plugin against CUDA defined in the program (linked -export-dynamic):
 * device 0 (or fake_mempool_devices of them), their attributes (pools supported, the handle types
 * they export), and pools that are tokens, counted. Each program defines the allocations themselves
 * (cudaMallocFromPoolAsync, cudaFreeAsync) as its test needs. */
#ifndef CRMM_TESTS_FAKE_MEMPOOL_H
#define CRMM_TESTS_FAKE_MEMPOOL_H

#include <cuda_runtime_api.h>

/* Pools created (or imported) and not yet destroyed. */
extern int fake_mempool_pools_live;

/* The devices there are (1 unless a test says more) and the one current (cudaGetDevice,
 * cudaSetDevice), for the tests of a resource used while another device is current. */
extern int fake_mempool_devices;
extern int fake_mempool_current;

/* The handle types the device's pools may export (cudaDevAttrMemoryPoolSupportedHandleTypes;
 * default: POSIX file descriptors), and those the last cudaMemPoolCreate asked for. */
extern int fake_mempool_supported_handle_types;
extern int fake_mempool_created_handle_types;

#endif
