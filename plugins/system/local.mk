SYSTEM_RESOURCE_SOURCES = plugins/common/system_resource.c plugins/common/system_resource.h
pkglib_LTLIBRARIES += plugins/system/crmm_system.la
plugins_system_crmm_system_la_SOURCES = plugins/system/system_plugin.c $(SYSTEM_RESOURCE_SOURCES)
plugins_system_crmm_system_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_system_crmm_system_la_LIBADD = $(PLUGIN_LIBADD)
