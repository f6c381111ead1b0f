# tests/gpu_basic.mk
