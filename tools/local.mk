# tools/: the crmm command-line program (info, check-config, bench, replay, plan). `crmm replay`
# and `crmm plan` are a convenience library of their own, which their tests link as the program does.
TOOLS_CPPFLAGS = $(CORE_CPPFLAGS) -I$(top_srcdir)/bench -I$(top_srcdir)/plugins/pool/include $(SUPPORT_CPPFLAGS)

noinst_LTLIBRARIES += tools/libcrmmreplay.la
tools_libcrmmreplay_la_SOURCES = \
	tools/cmd_replay.c \
	tools/replay.h \
	tools/replay_log.c \
	tools/replay_run.c \
	tools/replay_report.c \
	tools/replay_plot.c \
	tools/replay_torch_snapshot.c \
	tools/cmd_plan.c \
	tools/plan.h \
	tools/plan_place.c
tools_libcrmmreplay_la_CPPFLAGS = $(TOOLS_CPPFLAGS)
# what a program that replays links (bench's runner and reference, support's map and writers)
REPLAY_LIBS = tools/libcrmmreplay.la $(BENCH_LIBS)

bin_PROGRAMS += tools/crmm
tools_crmm_SOURCES = \
	tools/crmm_main.c \
	tools/commands.h \
	tools/help_option.c \
	tools/build_tree.c \
	tools/cmd_info.c \
	tools/info.h \
	tools/info_files.c \
	tools/info_settings.c \
	tools/info_json.c \
	tools/info_roff.c \
	tools/info_markdown.c \
	tools/cmd_check_config.c \
	tools/cmd_bench.c
# the uninstalled program finds the build tree's plugins (tools/build_tree.c)
tools_crmm_CPPFLAGS = $(TOOLS_CPPFLAGS) -DCRMM_BUILD_DIR='"$(abs_top_builddir)"'
tools_crmm_LDADD = $(REPLAY_LIBS) libcrmm.la $(CUDA_LIBS) -lm
# bash completion, installed where bash-completion finds it by the command's name
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = tools/completion/crmm
