# tests/config.mk
