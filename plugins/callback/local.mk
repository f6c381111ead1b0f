pkglib_LTLIBRARIES += plugins/callback/crmm_callback.la
plugins_callback_crmm_callback_la_SOURCES = plugins/callback/callback_plugin.c
plugins_callback_crmm_callback_la_CPPFLAGS = $(PLUGIN_CPPFLAGS) -I$(top_srcdir)/plugins/callback/include
plugins_callback_crmm_callback_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_callback_crmm_callback_la_LIBADD = $(PLUGIN_LIBADD)
# its public header (the callback types and crmm_callback_resource_create)
crmminclude_HEADERS += plugins/callback/include/crmm/callback.h
