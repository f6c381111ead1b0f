# tests/arena.mk
