/* check_conformance_host.c — the conformance suite over host-memory chains (runs without a GPU). */
#include "build_config.h"
#include "conformance.h"
#include "test_support.h"

static const crmm_test_chain host_chains[] = {
    {"host", "[resource.h]\nplugin = host\n", "h", 0, 0},
    {"template_over_host", "[resource.h]\nplugin = host\n[resource.t]\nplugin = template\nupstream = h\n", "t", 0, 0},
};

int main(void)
{
    Suite *s = suite_create("conformance_host");
    crmm_conformance_add(s, host_chains, (int)(sizeof host_chains / sizeof host_chains[0]));
    return crmm_test_run(s);
}
