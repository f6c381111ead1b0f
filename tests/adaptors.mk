# tests/adaptors.mk
