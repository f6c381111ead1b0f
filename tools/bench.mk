# `crmm bench`: the allocation benchmark lives in bench/ (bench/local.mk builds it).
tools_crmm_LDADD += bench/libcrmmbench.la libcrmm.la $(CUDA_LIBS)
