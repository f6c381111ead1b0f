# libFuzzer targets (clang, not part of `make check`): `make fuzz` builds them in fuzz/, each with
# libcrmm's sources compiled in; `make fuzz-run` runs each for FUZZ_SECONDS on a copy of its seed
# corpus (fuzz/corpus/<target>) and prints how many inputs it ran. .ci/run does both.
FUZZ_CC = clang
FUZZ_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_CPPFLAGS = $(AM_CPPFLAGS) $(SUPPORT_CPPFLAGS) $(INIH_CFLAGS) -DCRMM_PLUGIN_DIR='"/nonexistent"' -DCRMM_SYSCONFDIR='"/nonexistent"'
FUZZ_LIBS = $(INIH_LIBS) $(CUDA_LIBS) -ldl -lm -pthread
FUZZ_SECONDS = 60
FUZZ_NAMES = config size params replay
FUZZ_TARGETS = fuzz/fuzz_config fuzz/fuzz_size fuzz/fuzz_params fuzz/fuzz_replay
EXTRA_DIST += fuzz/local.mk fuzz/fuzz_config.c fuzz/fuzz_size.c fuzz/fuzz_params.c fuzz/fuzz_replay.c fuzz/corpus
CLEANFILES += $(FUZZ_TARGETS)

fuzz: $(FUZZ_TARGETS)
fuzz/fuzz_config: $(srcdir)/fuzz/fuzz_config.c $(libcrmm_la_SOURCES) build_config.h
	$(AM_V_GEN)$(MKDIR_P) fuzz && $(FUZZ_BUILD)
fuzz/fuzz_size: $(srcdir)/fuzz/fuzz_size.c $(libcrmm_la_SOURCES) build_config.h
	$(AM_V_GEN)$(MKDIR_P) fuzz && $(FUZZ_BUILD)
fuzz/fuzz_params: $(srcdir)/fuzz/fuzz_params.c $(libcrmm_la_SOURCES) build_config.h
	$(AM_V_GEN)$(MKDIR_P) fuzz && $(FUZZ_BUILD)
fuzz/fuzz_replay: $(srcdir)/fuzz/fuzz_replay.c $(srcdir)/tools/replay_log.c $(srcdir)/support/ptr_map.c \
		$(libcrmm_la_SOURCES) build_config.h
	$(AM_V_GEN)$(MKDIR_P) fuzz && $(FUZZ_BUILD) $(srcdir)/tools/replay_log.c $(srcdir)/support/ptr_map.c
# the target's own source ($<), then libcrmm's .c files
FUZZ_BUILD = srcs=; for f in $(libcrmm_la_SOURCES); do case $$f in *.c) srcs="$$srcs $(srcdir)/$$f";; esac; done; \
	$(FUZZ_CC) -std=c11 $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -o $@ $< $$srcs $(FUZZ_LIBS)

fuzz-run: fuzz
	@for t in $(FUZZ_NAMES); do \
	  work=`mktemp -d`; \
	  ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 ./fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=2048 -max_len=65536 "$$work" $(srcdir)/fuzz/corpus/$$t >"$$work.log" 2>&1 \
	    || { tail -60 "$$work.log"; rm -rf "$$work" "$$work.log"; exit 1; }; \
	  echo "fuzz_$$t: `grep -o 'Done [0-9]* runs in [0-9]* second' "$$work.log"`"; \
	  rm -rf "$$work" "$$work.log"; \
	done
.PHONY: fuzz fuzz-run
