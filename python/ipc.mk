# python/ipc.mk — crmm.ipc (sharing memory with another process) and its tests.
EXTRA_DIST += python/crmm/ipc.py python/tests/test_ipc.py python/tests/test_ipc_gpu.py
if HAVE_PYTHON
crmm_py_PYTHON += python/crmm/ipc.py
endif
