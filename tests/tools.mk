# tests/tools.mk
