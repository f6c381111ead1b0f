# support/: code that plugins, bench and tools share and that is no part of libcrmm's interface: the
# address-keyed hash map (ptr_map.h) and the JSON, XML and CSV text writers (text_escape.h). One
# convenience library; each user names -I$(top_srcdir)/support and links it.
noinst_LIBRARIES += support/libcrmmsupport.a
support_libcrmmsupport_a_SOURCES = \
	support/ptr_map.c support/ptr_map.h \
	support/text_escape.c support/text_escape.h
support_libcrmmsupport_a_CPPFLAGS = $(CORE_CPPFLAGS)
support_libcrmmsupport_a_CFLAGS = $(AM_CFLAGS) -fPIC
SUPPORT_CPPFLAGS = -I$(top_srcdir)/support
