# install_dirs.mk — rebuild what bakes in an install directory when ./configure changes them.
#
# libtool links each library and plugin with -rpath of its install directory and `make install`
# refuses a .la built for another one, and libcrmm compiles in $(pkglibdir) and $(sysconfdir).
# A reconfigure to another prefix changes neither a source nor config.h, so without this make
# would keep the old objects and `make install` would fail for the plugins. The stamp's contents
# are the directories; it is rewritten (and so newer) only when they change, so an ordinary
# reconfigure rebuilds nothing.
install-dirs.stamp: config.status
	@echo '$(prefix) $(exec_prefix) $(libdir) $(pkglibdir) $(bindir) $(sysconfdir) $(datadir) $(mandir)' >$@-t; \
	if cmp -s $@-t $@; then rm -f $@-t; else mv -f $@-t $@; fi
$(libcrmm_la_OBJECTS) $(lib_LTLIBRARIES) $(pkglib_LTLIBRARIES) $(bin_PROGRAMS): install-dirs.stamp
DISTCLEANFILES = install-dirs.stamp
