# tests/loader.mk
