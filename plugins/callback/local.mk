pkglib_LTLIBRARIES += plugins/callback/crmm_callback.la
plugins_callback_crmm_callback_la_SOURCES = plugins/callback/callback_plugin.c
plugins_callback_crmm_callback_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_callback_crmm_callback_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_callback_crmm_callback_la_LIBADD = $(PLUGIN_COMMON_LIBADD)
