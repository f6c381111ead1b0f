# The crmm command-line program.
bin_PROGRAMS += tools/crmm
tools_crmm_SOURCES = \
	tools/crmm_main.c \
	tools/commands.h \
	tools/cmd_info.c \
	tools/cmd_check_config.c \
	tools/cmd_bench.c \
	tools/cmd_replay.c \
	tools/replay_log.c \
	tools/replay_run.c \
	tools/replay_report.c \
	tools/replay_plot.c \
	tools/replay.h
tools_crmm_LDADD = libcrmm.la $(CUDA_LIBS) -lm
include tools/bench.mk
