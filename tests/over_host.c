/* over_host.c — see over_host.h. */
#include "over_host.h"
#include "test_support.h"

void over_host_make(const char *plugin, const char *params, crmm_resource **host, crmm_resource **adaptor)
{
    ck_assert_crmm_ok(crmm_resource_create("host", "", NULL, host));
    ck_assert_crmm_ok(crmm_resource_create(plugin, params, *host, adaptor));
}

void over_host_release(crmm_resource **host, crmm_resource **adaptor)
{
    char kind[64] = "the adaptor";
    if (*adaptor) {
        snprintf(kind, sizeof kind, "%s", crmm_resource_kind(*adaptor));
        crmm_resource_release(*adaptor);
        *adaptor = NULL;
    }
    if (*host) {
        uint64_t held = UINT64_MAX;
        ck_assert_crmm_ok(crmm_resource_query(*host, CRMM_QUERY_BYTES_IN_USE, &held));
        ck_assert_msg(held == 0, "%s left %llu bytes of its host upstream in use after its release", kind,
                      (unsigned long long)held);
        crmm_resource_release(*host);
        *host = NULL;
    }
}
