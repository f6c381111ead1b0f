# The crmm command-line program.
bin_PROGRAMS += tools/crmm
tools_crmm_SOURCES = \
	tools/crmm_main.c \
	tools/commands.h \
	tools/cmd_info.c \
	tools/cmd_check_config.c \
	tools/cmd_bench.c \
	tools/cmd_replay.c \
	tools/replay_log.c $(PTR_MAP_SOURCES) \
	tools/replay_run.c \
	tools/replay_report.c \
	tools/replay_plot.c \
	tools/replay_torch_snapshot.c \
	tools/replay.h
tools_crmm_LDADD = libcrmm.la $(CUDA_LIBS) -lm
include tools/bench.mk
# The uninstalled program finds the build tree's plugins (tools/build_tree.c).
tools_crmm_SOURCES += tools/build_tree.c
# `crmm info`'s settings part (tools/info_settings.c).
tools_crmm_SOURCES += tools/info.h tools/info_settings.c tools/info_json.c tools/info_roff.c tools/info_markdown.c
tools_crmm_CPPFLAGS = $(AM_CPPFLAGS) -DCRMM_BUILD_DIR='"$(abs_top_builddir)"'
# bash completion, installed where bash-completion finds it by the command's name.
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = tools/completion/crmm
