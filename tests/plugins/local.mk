# Test-only plugins: never installed; tests find them in tests/plugins/.libs.
# crmm_template is the README's minimal plugin (its source is plugins/template/).
check_LTLIBRARIES += tests/plugins/crmm_template.la
tests_plugins_crmm_template_la_SOURCES = plugins/template/template_plugin.c
tests_plugins_crmm_template_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_template_la_LIBADD = $(PLUGIN_LIBADD)

# crmm_budget: host memory with a byte budget, to make allocations fail on purpose (check_failure_callback and friends).
check_LTLIBRARIES += tests/plugins/crmm_budget.la
tests_plugins_crmm_budget_la_SOURCES = tests/plugins/budget_plugin.c tests/plugins/test_plugin.h
tests_plugins_crmm_budget_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_budget_la_LIBADD = $(PLUGIN_LIBADD)

# crmm_failnth: host memory whose Nth allocation fails, for the fault-injection loops.
check_LTLIBRARIES += tests/plugins/crmm_failnth.la
tests_plugins_crmm_failnth_la_SOURCES = tests/plugins/failnth_plugin.c tests/plugins/test_plugin.h
tests_plugins_crmm_failnth_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_failnth_la_LIBADD = $(PLUGIN_LIBADD)

# crmm_paramtest declares one parameter of every type (one required) and records what create
# read, for the parameter and config suites.
check_LTLIBRARIES += tests/plugins/crmm_paramtest.la
tests_plugins_crmm_paramtest_la_SOURCES = tests/plugins/paramtest_plugin.c tests/plugins/paramtest_plugin.h tests/plugins/test_plugin.h
tests_plugins_crmm_paramtest_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_paramtest_la_LIBADD = $(PLUGIN_LIBADD)

# crmm_recorder: host memory that reports each call and its stream to the test program
# (check_replay_streams: what `crmm replay` calls inside its timed loop).
check_LTLIBRARIES += tests/plugins/crmm_recorder.la
tests_plugins_crmm_recorder_la_SOURCES = tests/plugins/recorder_plugin.c tests/plugins/test_plugin.h
tests_plugins_crmm_recorder_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_recorder_la_LIBADD = $(PLUGIN_LIBADD)

# ---- loader tests (tests/check_loader.c) -----------------------------------------------------
# One source, tests/plugins/bad_plugin.c, built once per plugin below: crmm_sizeparam is the
# well-formed base (a `size` parameter it reports as its maximum size, for percentage tests);
# each other one breaks the plugin ABI in one way, chosen by its BAD_* macro.
check_LTLIBRARIES += tests/plugins/crmm_sizeparam.la
tests_plugins_crmm_sizeparam_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_sizeparam_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"sizeparam"'
tests_plugins_crmm_sizeparam_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_sizeparam_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_badmajor.la
tests_plugins_crmm_badmajor_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_badmajor_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"badmajor"' -DBAD_MAJOR
tests_plugins_crmm_badmajor_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_badmajor_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_newminor.la
tests_plugins_crmm_newminor_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_newminor_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"newminor"' -DBAD_NEW_MINOR
tests_plugins_crmm_newminor_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_newminor_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_shortstruct.la
tests_plugins_crmm_shortstruct_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_shortstruct_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"shortstruct"' -DBAD_SHORT_STRUCT
tests_plugins_crmm_shortstruct_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_shortstruct_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_misnamed.la
tests_plugins_crmm_misnamed_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_misnamed_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"misnamed"' -DBAD_MISNAMED
tests_plugins_crmm_misnamed_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_misnamed_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_nullname.la
tests_plugins_crmm_nullname_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_nullname_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"nullname"' -DBAD_NULL_NAME
tests_plugins_crmm_nullname_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_nullname_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_noentry.la
tests_plugins_crmm_noentry_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_noentry_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"noentry"' -DBAD_NO_ENTRY
tests_plugins_crmm_noentry_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_noentry_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_nullentry.la
tests_plugins_crmm_nullentry_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_nullentry_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"nullentry"' -DBAD_NULL_ENTRY
tests_plugins_crmm_nullentry_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_nullentry_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_nocreate.la
tests_plugins_crmm_nocreate_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_nocreate_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"nocreate"' -DBAD_NO_CREATE
tests_plugins_crmm_nocreate_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_nocreate_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_badrule.la
tests_plugins_crmm_badrule_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_badrule_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"badrule"' -DBAD_UPSTREAM_RULE
tests_plugins_crmm_badrule_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_badrule_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_dupparam.la
tests_plugins_crmm_dupparam_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_dupparam_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"dupparam"' -DBAD_PARAM_DUPLICATE
tests_plugins_crmm_dupparam_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_dupparam_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_baddefault.la
tests_plugins_crmm_baddefault_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_baddefault_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"baddefault"' -DBAD_PARAM_DEFAULT
tests_plugins_crmm_baddefault_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_baddefault_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_nochoices.la
tests_plugins_crmm_nochoices_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_nochoices_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"nochoices"' -DBAD_PARAM_ENUM
tests_plugins_crmm_nochoices_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_nochoices_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_badfield.la
tests_plugins_crmm_badfield_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_badfield_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"badfield"' -DBAD_FIELD_UNKNOWN
tests_plugins_crmm_badfield_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_badfield_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_badrange.la
tests_plugins_crmm_badrange_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_badrange_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"badrange"' -DBAD_FIELD_RANGE
tests_plugins_crmm_badrange_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_badrange_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_oldminor.la
tests_plugins_crmm_oldminor_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_oldminor_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"oldminor"' -DBAD_OLD_MINOR
tests_plugins_crmm_oldminor_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_oldminor_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_createfail.la
tests_plugins_crmm_createfail_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_createfail_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"createfail"' -DBAD_CREATE_FAILS
tests_plugins_crmm_createfail_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_createfail_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_createnomsg.la
tests_plugins_crmm_createnomsg_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_createnomsg_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"createnomsg"' -DBAD_CREATE_NO_MESSAGE
tests_plugins_crmm_createnomsg_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_createnomsg_la_LIBADD = $(PLUGIN_LIBADD)
check_LTLIBRARIES += tests/plugins/crmm_badresource.la
tests_plugins_crmm_badresource_la_SOURCES = tests/plugins/bad_plugin.c
tests_plugins_crmm_badresource_la_CPPFLAGS = $(AM_CPPFLAGS) -DBAD_PLUGIN_NAME='"badresource"' -DBAD_RESOURCE
tests_plugins_crmm_badresource_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS)
tests_plugins_crmm_badresource_la_LIBADD = $(PLUGIN_LIBADD)
# ---- end of the loader tests' plugins ---------------------------------------------------------
