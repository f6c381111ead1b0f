# tests/seed_api.mk
