pkglib_LTLIBRARIES += plugins/sam_headroom/crmm_sam_headroom.la
plugins_sam_headroom_crmm_sam_headroom_la_SOURCES = plugins/sam_headroom/sam_headroom_plugin.c $(SYSTEM_RESOURCE_SOURCES)
plugins_sam_headroom_crmm_sam_headroom_la_CPPFLAGS = $(PLUGIN_CPPFLAGS)
plugins_sam_headroom_crmm_sam_headroom_la_LDFLAGS = $(PLUGIN_LDFLAGS)
plugins_sam_headroom_crmm_sam_headroom_la_LIBADD = $(PLUGIN_LIBADD)
