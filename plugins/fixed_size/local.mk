pkglib_LTLIBRARIES += plugins/fixed_size/crmm_fixed_size.la
plugins_fixed_size_crmm_fixed_size_la_SOURCES = plugins/fixed_size/fixed_size_plugin.c \
	plugins/fixed_size/fixed_size_free_lists.c plugins/fixed_size/fixed_size_free_lists.h
plugins_fixed_size_crmm_fixed_size_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) $(SUPPORT_CPPFLAGS)
plugins_fixed_size_crmm_fixed_size_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_fixed_size_crmm_fixed_size_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
