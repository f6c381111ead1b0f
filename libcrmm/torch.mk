# libcrmm/torch.mk: the functions PyTorch's CUDAPluggableAllocator loads (crmm/torch.h).
libcrmm_la_SOURCES += libcrmm/torch_allocator.c
crmminclude_HEADERS += include/crmm/torch.h
