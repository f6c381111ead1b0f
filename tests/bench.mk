# tests/bench.mk
