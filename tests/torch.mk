# tests/torch.mk — the PyTorch allocator functions (crmm/torch.h) against a scripted CUDA: the
# program defines the device calls and exports them, so that libcrmm's calls land there (CPU).
check_PROGRAMS += tests/check_torch_allocator
tests_check_torch_allocator_SOURCES = tests/check_torch_allocator.c tests/fake_capture.c tests/fake_capture.h
tests_check_torch_allocator_CFLAGS = $(TEST_CFLAGS)
tests_check_torch_allocator_LDFLAGS = -export-dynamic
tests_check_torch_allocator_LDADD = $(TEST_LDADD)
TESTS += tests/check_torch_allocator
