# libcrmm/adaptors.mk: library-wide logging switch and adaptor APIs
# (included from libcrmm/local.mk before crmminclude_HEADERS is set, so the headers go through
# pkginclude_HEADERS, which installs into the same $(includedir)/crmm)
libcrmm_la_SOURCES += libcrmm/logging_switch.c
pkginclude_HEADERS += include/crmm/logging_switch.h
