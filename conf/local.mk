# The default config, installed as $(sysconfdir)/crmm/crmm.ini.
dist_crmmconf_DATA = conf/crmm.ini
