# tools/: the crmm command-line program (info, check-config, bench, replay).
bin_PROGRAMS += tools/crmm
tools_crmm_SOURCES = \
	tools/crmm_main.c \
	tools/commands.h \
	tools/build_tree.c \
	tools/cmd_info.c \
	tools/info.h \
	tools/info_settings.c \
	tools/info_json.c \
	tools/info_roff.c \
	tools/cmd_check_config.c \
	tools/cmd_bench.c \
	tools/cmd_replay.c \
	tools/replay.h \
	tools/replay_log.c $(PTR_MAP_SOURCES) \
	tools/replay_run.c \
	tools/replay_report.c \
	tools/replay_plot.c \
	tools/replay_torch_snapshot.c
# the uninstalled program finds the build tree's plugins (tools/build_tree.c)
tools_crmm_CPPFLAGS = $(AM_CPPFLAGS) -DCRMM_BUILD_DIR='"$(abs_top_builddir)"'
# `crmm bench` and `crmm replay` run the benchmark library of bench/
tools_crmm_LDADD = bench/libcrmmbench.la libcrmm.la $(CUDA_LIBS) -lm
# bash completion, installed where bash-completion finds it by the command's name
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = tools/completion/crmm
