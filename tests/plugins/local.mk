# Test-only plugins: never installed; tests find them in tests/plugins/.libs.
# crmm_template is the README's minimal plugin (its source is plugins/template/).
check_LTLIBRARIES += tests/plugins/crmm_template.la
tests_plugins_crmm_template_la_SOURCES = plugins/template/template_plugin.c
tests_plugins_crmm_template_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_template_la_LIBADD = $(PLUGIN_LIBADD)

# crmm_budget: host memory with a byte budget, to make allocations fail on purpose (adaptors2 tests).
check_LTLIBRARIES += tests/plugins/crmm_budget.la
tests_plugins_crmm_budget_la_SOURCES = tests/plugins/budget_plugin.c
tests_plugins_crmm_budget_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_budget_la_LIBADD = $(PLUGIN_LIBADD)

# crmm_paramtest declares one parameter of every type (one required) and records what create
# read, for the parameter and config suites.
check_LTLIBRARIES += tests/plugins/crmm_paramtest.la
tests_plugins_crmm_paramtest_la_SOURCES = tests/plugins/paramtest_plugin.c tests/plugins/paramtest_plugin.h
tests_plugins_crmm_paramtest_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_paramtest_la_LIBADD = $(PLUGIN_LIBADD)
