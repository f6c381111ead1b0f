# plugins/: one folder per plugin (its local.mk builds crmm_<name>.so), and plugins/common, the
# code several plugins share, as one convenience library.
#
# A plugin compiles with the core's headers (PLUGIN_CPPFLAGS) plus the folders it names itself:
# its own public header folder (plugins/<name>/include), and support/ when it uses ptr_map.h.
# A plugin that uses plugins/common links PLUGIN_COMMON_LIBADD. plugins/common is a static archive
# of position-independent objects, not a libtool convenience library: libtool would put the whole
# of a convenience library into each plugin (--whole-archive), where the linker takes from an
# archive only the objects a plugin calls. That keeps each plugin small, and keeps thread-local
# variables out of plugins that do not use them: every plugin with one costs the dynamic loader a
# TLS module at dlopen, and past its spare slots an allocation that glibc aborts on when it fails.
PLUGIN_CPPFLAGS = $(CORE_CPPFLAGS)

noinst_LIBRARIES += plugins/common/libplugincommon.a
plugins_common_libplugincommon_a_SOURCES = \
	plugins/common/adaptor.h \
	plugins/common/capture_check.c plugins/common/capture_check.h \
	plugins/common/counted_source.h \
	plugins/common/device_check.c plugins/common/device_check.h \
	plugins/common/device_default.c plugins/common/device_default.h \
	plugins/common/direct_resource.c plugins/common/direct_resource.h \
	plugins/common/fork_guards.c plugins/common/fork_guards.h \
	plugins/common/graph_hold.c plugins/common/graph_hold.h \
	plugins/common/graph_park.c plugins/common/graph_park.h \
	plugins/common/plugin_descriptor.h \
	plugins/common/ptr_set.h \
	plugins/common/pool_view.c plugins/common/pool_view.h \
	plugins/common/resource_label.c plugins/common/resource_label.h \
	plugins/common/spin_lock.c plugins/common/spin_lock.h \
	plugins/common/system_resource.c plugins/common/system_resource.h \
	plugins/common/thread_serial.c plugins/common/thread_serial.h
plugins_common_libplugincommon_a_CPPFLAGS = $(PLUGIN_CPPFLAGS) $(SUPPORT_CPPFLAGS)
plugins_common_libplugincommon_a_CFLAGS = $(AM_CFLAGS) -fPIC
PLUGIN_COMMON_LIBADD = plugins/common/libplugincommon.a support/libcrmmsupport.a $(PLUGIN_LIBADD)

# Every plugin's public header folder: what the tests and bench see as the installed
# $(includedir)/crmm, where the core's and the plugins' public headers sit together.
PLUGIN_PUBLIC_CPPFLAGS = \
	-I$(top_srcdir)/plugins/arena/include \
	-I$(top_srcdir)/plugins/async/include \
	-I$(top_srcdir)/plugins/async_managed/include \
	-I$(top_srcdir)/plugins/binning/include \
	-I$(top_srcdir)/plugins/callback/include \
	-I$(top_srcdir)/plugins/cuda_async_view/include \
	-I$(top_srcdir)/plugins/failure_callback/include \
	-I$(top_srcdir)/plugins/logging/include \
	-I$(top_srcdir)/plugins/pool/include \
	-I$(top_srcdir)/plugins/statistics/include \
	-I$(top_srcdir)/plugins/tracking/include

include plugins/cuda/local.mk
include plugins/host/local.mk
include plugins/managed/local.mk
include plugins/pinned/local.mk
include plugins/template/local.mk
include plugins/pool/local.mk
include plugins/arena/local.mk
include plugins/async/local.mk
include plugins/logging/local.mk
include plugins/statistics/local.mk
include plugins/tracking/local.mk
include plugins/limiting/local.mk
include plugins/binning/local.mk
include plugins/fixed_size/local.mk
include plugins/aligned/local.mk
include plugins/failure_callback/local.mk
include plugins/prefetch/local.mk
include plugins/callback/local.mk
include plugins/cuda_async_view/local.mk
include plugins/async_managed/local.mk
include plugins/system/local.mk
include plugins/sam_headroom/local.mk
