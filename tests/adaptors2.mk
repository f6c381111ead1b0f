# tests/adaptors2.mk
