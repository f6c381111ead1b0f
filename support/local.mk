# support/: code that plugins, bench and tools share and that is no part of libcrmm's interface: the
# address-keyed hash map (ptr_map.h), the JSON, XML and CSV text writers (text_escape.h) and the
# split of "--name=value" on command lines (long_option.h). One convenience library; each user
# names -I$(top_srcdir)/support and links it.
noinst_LIBRARIES += support/libcrmmsupport.a
support_libcrmmsupport_a_SOURCES = \
	support/ptr_map.c support/ptr_map.h \
	support/text_escape.c support/text_escape.h \
	support/long_option.c support/long_option.h
support_libcrmmsupport_a_CPPFLAGS = $(CORE_CPPFLAGS)
support_libcrmmsupport_a_CFLAGS = $(AM_CFLAGS) -fPIC
SUPPORT_CPPFLAGS = -I$(top_srcdir)/support
