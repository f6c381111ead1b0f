# plugins/template is built by tests/plugins/local.mk (it is not installed as a plugin); its
# source is installed as the one to copy, in $(datadir)/crmm/template.
crmmtemplatedir = $(datadir)/crmm/template
dist_crmmtemplate_DATA = plugins/template/template_plugin.c
