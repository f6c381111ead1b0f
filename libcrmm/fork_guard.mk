# libcrmm/fork_guard.mk: the process-wide list of the plugins' fork guards
# (included from libcrmm/local.mk before crmminclude_HEADERS is set, so the header goes through
# pkginclude_HEADERS, which installs into the same $(includedir)/crmm)
libcrmm_la_SOURCES += libcrmm/fork_guard.c
pkginclude_HEADERS += include/crmm/fork_guard.h
