/* over_host.h — the fixture of the CPU adaptor tests (aligned, binning, fixed_size): one adaptor
 * over a fresh host resource, and its release, which checks that the adaptor gave the host back
 * every byte it took. */
#ifndef CRMM_TESTS_OVER_HOST_H
#define CRMM_TESTS_OVER_HOST_H

#include <crmm/crmm.h>

/* Creates *host, a host resource, and *adaptor, plugin `plugin` with `params` over it, asserting
 * both. */
void over_host_make(const char *plugin, const char *params, crmm_resource **host, crmm_resource **adaptor);

/* Releases *adaptor, asserts that *host then holds no byte (the adaptor gave back everything, its
 * preallocation included), releases *host; both become NULL. Either may be NULL already. */
void over_host_release(crmm_resource **host, crmm_resource **adaptor);

#endif
