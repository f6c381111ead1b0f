# Man pages: crmm(1) and crmm-plugin(7) are written by hand; crmm.ini(5) is generated from
# doc/crmm.ini.5.in and the PLUGINS section the built tool prints from the plugins' own tables.
dist_man_MANS = doc/crmm.1 doc/crmm-plugin.7
nodist_man_MANS = doc/crmm.ini.5
EXTRA_DIST += doc/crmm.ini.5.in
CLEANFILES += doc/crmm.ini.5
doc/crmm.ini.5: $(srcdir)/doc/crmm.ini.5.in tools/crmm$(EXEEXT) $(pkglib_LTLIBRARIES)
	$(AM_V_GEN)$(MKDIR_P) doc && \
	files=$$(for la in $(pkglib_LTLIBRARIES); do echo "$(abs_builddir)/$$(dirname $$la)/.libs/$$(basename $$la .la).so"; done) && \
	./tools/crmm info --roff $$files >$@.plugins && \
	sed -e '/^@PLUGINS@$$/r $@.plugins' -e '/^@PLUGINS@$$/d' $(srcdir)/doc/crmm.ini.5.in >$@-t && \
	rm -f $@.plugins && mv -f $@-t $@
