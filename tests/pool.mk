# tests/pool.mk
