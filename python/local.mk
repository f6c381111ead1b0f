# python/local.mk — the Python package `crmm` (Python over ctypes, and the optional C extension
# crmm._fastalloc for DeviceBuffer's allocate and free): installed into $(pythondir) with the path
# of the installed libcrmm, checked from the install prefix by `make installcheck`, and its pytest
# suite run by `make check` against the build tree.
CRMM_PY_TOP = python/crmm/__init__.py python/crmm/_alloc.py python/crmm/_errors.py python/crmm/_handles.py python/crmm/_host.py python/crmm/_lib.py python/crmm/_reinitialize.py \
	python/crmm/statistics.py python/crmm/_rmm_alias.py python/crmm/as_rmm.py python/crmm/_after_import.py python/crmm/_dask_serialize.py \
	python/crmm/__main__.py python/crmm/dask.py python/crmm/ipc.py python/crmm/rmm.py python/crmm/_version.py
CRMM_PY_PYLIBRMM = python/crmm/pylibrmm/__init__.py python/crmm/pylibrmm/cuda_stream_pool.py \
	python/crmm/pylibrmm/device_buffer.py python/crmm/pylibrmm/logger.py \
	python/crmm/pylibrmm/stream.py
CRMM_PY_MR = python/crmm/mr/__init__.py python/crmm/mr/experimental.py
CRMM_PY_MEMORY_RESOURCE = python/crmm/pylibrmm/memory_resource/__init__.py \
	python/crmm/pylibrmm/memory_resource/_memory_resource.py python/crmm/pylibrmm/memory_resource/_unowned.py \
	python/crmm/pylibrmm/memory_resource/experimental.py
CRMM_PY_ALLOCATORS = python/crmm/allocators/__init__.py python/crmm/allocators/cupy.py \
	python/crmm/allocators/numba.py python/crmm/allocators/torch.py
CRMM_PY_CUDA = python/crmm/_cuda/__init__.py python/crmm/_cuda/gpu.py
# modules of older RMM releases, for `import rmm` under an older rmm_version (crmm/_rmm_alias.py)
CRMM_PY_LEGACY = python/crmm/_legacy/__init__.py python/crmm/_legacy/cuda_stream.py
# first on $PYTHONPATH of the processes a `python3 -m crmm.as_rmm` program starts
CRMM_PY_AS_RMM_SITE = python/crmm/_as_rmm_site/__init__.py python/crmm/_as_rmm_site/sitecustomize.py
# Type stubs and the PEP 561 marker, installed beside the modules.
CRMM_PY_TOP_STUBS = python/crmm/__init__.pyi python/crmm/statistics.pyi python/crmm/rmm.pyi python/crmm/py.typed
CRMM_PY_MR_STUBS = python/crmm/mr/__init__.pyi python/crmm/mr/experimental.pyi
CRMM_PY_MEMORY_RESOURCE_STUBS = python/crmm/pylibrmm/memory_resource/__init__.pyi python/crmm/pylibrmm/memory_resource/experimental.pyi
CRMM_PY_PYLIBRMM_STUBS = python/crmm/pylibrmm/__init__.pyi python/crmm/pylibrmm/cuda_stream_pool.pyi \
	python/crmm/pylibrmm/device_buffer.pyi python/crmm/pylibrmm/logger.pyi \
	python/crmm/pylibrmm/stream.pyi
CRMM_PY_TESTS = python/tests/conftest.py python/tests/test_config.py python/tests/test_device_buffer_gpu.py \
	python/tests/test_doctests_gpu.py python/tests/test_frameworks_gpu.py python/tests/test_host_arguments.py \
	python/tests/test_host_resources.py python/tests/test_binning_bins.py python/tests/test_import.py python/tests/test_logging.py python/tests/test_handles.py \
	python/tests/test_handles_gpu.py python/tests/test_argument_gaps.py python/tests/test_reinitialize.py \
	python/tests/test_reinitialize_gpu.py python/tests/test_identity.py python/tests/test_identity_gpu.py python/tests/test_statistics.py \
	python/tests/test_statistics_gpu.py python/tests/test_resource_methods.py \
	python/tests/test_resource_methods_gpu.py python/tests/test_rmm_alias.py python/tests/test_rmm_alias_gpu.py python/tests/test_numba_pointer.py python/tests/test_stubs.py python/tests/test_released_objects.py python/tests/test_failure_callback.py \
	python/tests/test_no_device.py python/tests/test_streams.py python/tests/test_graphs_gpu.py python/tests/test_graph_capture_switch.py \
	python/tests/test_cuda_gpu.py python/tests/test_cuda_gpu_gpu.py python/tests/test_ipc.py python/tests/test_ipc_gpu.py
# pip's build files, the typing marker and the tests of `pip install ./python`
CRMM_PY_PIP = python/pyproject.toml python/setup.py
CRMM_PY_TESTS += python/tests/test_pip_install.py python/tests/test_main.py
# DeviceBuffer's allocate and free through crmm._fastalloc and through ctypes
CRMM_PY_TESTS += python/tests/test_device_buffer_alloc.py python/tests/test_device_buffer_alloc_gpu.py
# crmm replay --torch-snapshot, read by pickle and (on a GPU machine with torch) by torch's viewer
CRMM_PY_TESTS += python/tests/test_replay_torch_snapshot.py python/tests/test_torch_snapshot_gpu.py
# public callables given arguments of the wrong kind
CRMM_PY_TESTS += python/tests/test_bad_arguments.py
# bench/synthetic_logs.py's logs, read back and replayed
CRMM_PY_TESTS += python/tests/test_synthetic_logs.py
# bench/torch_workloads.py's table and arguments (its runs need a GPU and torch)
CRMM_PY_TESTS += python/tests/test_torch_workloads_table.py
# bench/pytorch_expandable_model.py, PyTorch's expandable segments modelled over allocation logs
CRMM_PY_TESTS += python/tests/test_pytorch_expandable_model.py
# device arrays handed to DeviceBuffer.copy_from_device: their interface checked
CRMM_PY_TESTS += python/tests/test_device_array_interface.py
# the fast extension where Python runs in the middle of its work; RMM 26.08 behaviour
CRMM_PY_TESTS += python/tests/test_fastalloc_races.py python/tests/test_rmm_2608_gaps.py
# crmm.dask over a LocalCluster of processes
CRMM_PY_TESTS += python/tests/test_dask.py python/tests/test_dask_gpu.py python/tests/test_dask_serialize.py \
	python/tests/test_dask_serialize_gpu.py
# crmm.allocators.torch.memory_stats(), and torch.cuda's own memory functions answered by crmm: over host
# memory, and under PyTorch on a GPU
CRMM_PY_TESTS += python/tests/test_torch_memory_stats.py python/tests/test_torch_graph_hooks.py python/tests/test_torch_memory_stats_gpu.py \
	python/tests/test_torch_memory_routes.py
# tensor.record_stream passed on to crmm by its hooks for PyTorch, and an allocation that fails raised in
# PyTorch by them (out of memory, a memory fraction)
CRMM_PY_TESTS += python/tests/test_torch_record_stream_gpu.py python/tests/test_torch_out_of_memory_gpu.py
# RMM's callback, pool view, system memory and experimental resources
CRMM_PY_TESTS += python/tests/test_unowned_resources.py python/tests/test_unowned_resources_gpu.py python/tests/test_rmm_messages.py
# RMM's names and behaviours its own test suite does not check
CRMM_PY_TESTS += python/tests/test_rmm_api_gaps.py
# `python3 -m crmm.as_rmm`'s refusals: a missing program or module, an option it does not know
CRMM_PY_TESTS += python/tests/test_as_rmm_runner.py
# RMM's pylibrmm reference, read as a user switching from RMM reads it
CRMM_PY_TESTS += python/tests/test_rmm_reference.py
EXTRA_DIST += $(CRMM_PY_PIP) python/crmm/_fastalloc.c
EXTRA_DIST += $(CRMM_PY_MR) $(CRMM_PY_MEMORY_RESOURCE) $(CRMM_PY_MR_STUBS) $(CRMM_PY_MEMORY_RESOURCE_STUBS)
EXTRA_DIST += docs/python.md $(CRMM_PY_TOP_STUBS) $(CRMM_PY_PYLIBRMM_STUBS) $(CRMM_PY_TOP) $(CRMM_PY_PYLIBRMM) $(CRMM_PY_ALLOCATORS) $(CRMM_PY_CUDA) $(CRMM_PY_LEGACY) $(CRMM_PY_AS_RMM_SITE) $(CRMM_PY_TESTS) python/tests/run_pytest.sh

TESTS += python/tests/run_pytest.sh
AM_TESTS_ENVIRONMENT += \
	CRMM_LIBRARY='$(abs_top_builddir)/.libs/libcrmm.so'; export CRMM_LIBRARY; \
	PYTHONPATH='$(abs_top_srcdir)/python'; export PYTHONPATH; \
	PYTHON='$(PYTHON)'; export PYTHON; \
	CRMM_TEST_SANITIZERS='$(CRMM_PY_SANITIZERS)'; export CRMM_TEST_SANITIZERS; \
	CRMM_FASTALLOC='$(CRMM_PY_FASTALLOC)'; export CRMM_FASTALLOC; \
	CRMM_TORCH_HOOKS='$(CRMM_PY_TORCH_HOOKS)'; export CRMM_TORCH_HOOKS; \
	CRMM_FAKE_CUPY_MEMORY='$(CRMM_PY_FAKE_CUPY)'; export CRMM_FAKE_CUPY_MEMORY;
if SANITIZERS
CRMM_PY_SANITIZERS = yes
endif

# The tests load the build tree's extension by its path ($CRMM_FASTALLOC, see crmm/_alloc.py);
# "off" where it is not built, so that they never pick up another one. The same for the module
# of CuPy's memory layout that the CuPy allocator's tests use without CuPy.
if HAVE_PYTHON_DEV
CRMM_PY_FASTALLOC = $(abs_top_builddir)/python/crmm/.libs/_fastalloc.so
CRMM_PY_FAKE_CUPY = $(abs_top_builddir)/python/tests/.libs/_fake_cupy_memory.so
check_LTLIBRARIES += python/tests/_fake_cupy_memory.la
python_tests__fake_cupy_memory_la_SOURCES = python/tests/fake_cupy_memory.c
python_tests__fake_cupy_memory_la_CPPFLAGS = $(PYTHON_CPPFLAGS)
python_tests__fake_cupy_memory_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
else
CRMM_PY_FASTALLOC = off
CRMM_PY_FAKE_CUPY = off
endif

if HAVE_PYTHON
crmm_pydir = $(pythondir)/crmm
crmm_py_PYTHON = $(CRMM_PY_TOP)
crmm_pylibrmmdir = $(pythondir)/crmm/pylibrmm
crmm_pylibrmm_PYTHON = $(CRMM_PY_PYLIBRMM)
crmm_py_DATA = $(CRMM_PY_TOP_STUBS)
crmm_pylibrmm_DATA = $(CRMM_PY_PYLIBRMM_STUBS)
crmm_allocatorsdir = $(pythondir)/crmm/allocators
crmm_allocators_PYTHON = $(CRMM_PY_ALLOCATORS)
crmm_mrdir = $(pythondir)/crmm/mr
crmm_mr_PYTHON = $(CRMM_PY_MR)
crmm_mr_DATA = $(CRMM_PY_MR_STUBS)
crmm_memory_resourcedir = $(pythondir)/crmm/pylibrmm/memory_resource
crmm_memory_resource_PYTHON = $(CRMM_PY_MEMORY_RESOURCE)
crmm_memory_resource_DATA = $(CRMM_PY_MEMORY_RESOURCE_STUBS)
crmm_cudadir = $(pythondir)/crmm/_cuda
crmm_cuda_PYTHON = $(CRMM_PY_CUDA)
crmm_legacydir = $(pythondir)/crmm/_legacy
crmm_legacy_PYTHON = $(CRMM_PY_LEGACY)
crmm_as_rmm_sitedir = $(pythondir)/crmm/_as_rmm_site
crmm_as_rmm_site_PYTHON = $(CRMM_PY_AS_RMM_SITE)

# crmm._fastalloc: a Python extension module over the stable ABI; it links neither libpython (the
# interpreter provides its symbols) nor libcrmm (crmm/_alloc.py gives it libcrmm's functions).
if HAVE_PYTHON_DEV
crmm_pyextdir = $(pythondir)/crmm
crmm_pyext_LTLIBRARIES = python/crmm/_fastalloc.la
python_crmm__fastalloc_la_SOURCES = python/crmm/_fastalloc.c
python_crmm__fastalloc_la_CPPFLAGS = $(PYTHON_CPPFLAGS)
python_crmm__fastalloc_la_LDFLAGS = -module -avoid-version -shared $(AM_LDFLAGS)
# linked with -rpath of its install directory, as the plugins (the top Makefile.am says why, at install-dirs.stamp)
$(crmm_pyext_LTLIBRARIES): install-dirs.stamp
endif

# crmm/_torch_graph_hooks.so: PyTorch's graph-pool and record_stream hooks, C++ over torch's headers (configure
# finds them through $PYTHON). It links no libcrmm: crmm/allocators/torch.py gives it libcrmm's
# functions. Installed beside the package's modules.
if HAVE_TORCH_HOOKS
crmm_torch_hooksdir = $(pythondir)/crmm
crmm_torch_hooks_DATA = python/crmm/_torch_graph_hooks.so
CRMM_PY_TORCH_HOOKS = $(abs_top_builddir)/python/crmm/_torch_graph_hooks.so
python/crmm/_torch_graph_hooks.so: python/crmm/_torch_graph_hooks.cpp include/crmm/graph_owner.h include/crmm/torch.h
	$(AM_V_GEN)$(MKDIR_P) python/crmm && \
	$(TORCH_CXX) -std=c++20 -O2 -fPIC -shared -Wall -Wextra $(TORCH_CPPFLAGS) $(CUDA_CPPFLAGS) \
	  -I$(top_srcdir)/include -o $@ $(top_srcdir)/python/crmm/_torch_graph_hooks.cpp \
	  -L$(TORCH_LIBDIR) -Wl,-rpath,$(TORCH_LIBDIR) -ltorch_cuda -lc10_cuda -lc10
CLEANFILES += python/crmm/_torch_graph_hooks.so
else
CRMM_PY_TORCH_HOOKS = off
endif
EXTRA_DIST += python/crmm/_torch_graph_hooks.cpp

# _paths.py tells the installed package where the installed libcrmm is (see _lib.py).
install-data-hook: install-crmm-py-paths
install-crmm-py-paths:
	dlname=`sed -n "s/^dlname='\(.*\)'/\1/p" libcrmm.la`; \
	commit=`git -C "$(abs_top_srcdir)" rev-parse HEAD 2>/dev/null || true`; \
	printf '"""Where `make install` put libcrmm and the crmm tool, and the commit it was built from (written at install)."""\n\nLIBDIR = %s\nLIBRARY = %s\nBINDIR = %s\nGIT_COMMIT = %s\n' \
	  "'$(libdir)'" "'$$dlname'" "'$(bindir)'" "'$$commit'" >"$(DESTDIR)$(crmm_pydir)/_paths.py"
uninstall-hook:
	rm -f "$(DESTDIR)$(crmm_pydir)/_paths.py"

# The package imports from the install prefix alone (no build tree, no CRMM_LIBRARY), with the
# installed extension where it was built.
if HAVE_PYTHON_DEV
CRMM_PY_OPS = extension
else
CRMM_PY_OPS = ctypes
endif
installcheck-local:
	cd / && env -u CRMM_LIBRARY -u CRMM_FASTALLOC -u CRMM_TORCH_HOOKS PYTHONPATH='$(DESTDIR)$(pythondir)' PYTHONDONTWRITEBYTECODE=1 \
	  $(PYTHON) -c 'import crmm, crmm.mr, crmm._alloc; assert crmm.library_path.startswith("$(libdir)/"), crmm.library_path; \
	    assert crmm._alloc.ops.name == "$(CRMM_PY_OPS)", crmm._alloc.ops.name; \
	    crmm.mr.HostMemoryResource().deallocate(crmm.mr.HostMemoryResource().allocate(0), 0); print("crmm", crmm.__version__, "imports from", crmm.__file__)'
endif
