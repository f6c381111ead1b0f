# Benchmark workloads shared by `crmm bench` and the performance notes: a convenience library
# linked into tools/crmm and the bench tests, through BENCH_LIBS.
noinst_LTLIBRARIES += bench/libcrmmbench.la
bench_libcrmmbench_la_SOURCES = \
	bench/bench_workload.c bench/bench_workload.h \
	bench/bench_runner.c bench/bench_runner.h \
	bench/bench_reference.c bench/bench_reference.h \
	bench/bench_config.c bench/bench_config.h \
	bench/bench_report.c bench/bench_report.h \
	bench/bench_overhead.c bench/bench_overhead.h \
	bench/bench_cli.c bench/bench_cli.h \
	bench/bench_copy.c bench/bench_copy.h
# the logging plugin's public header: bench_overhead reads the log file of the adaptor it times
bench_libcrmmbench_la_CPPFLAGS = $(CORE_CPPFLAGS) -I$(top_srcdir)/plugins/logging/include $(SUPPORT_CPPFLAGS)
bench_libcrmmbench_la_LIBADD = libcrmm.la $(CUDA_LIBS)
# what a program that runs the benchmark links (its reports write through support's writers)
BENCH_LIBS = bench/libcrmmbench.la support/libcrmmsupport.a
EXTRA_DIST += bench/RESULTS.md
# real PyTorch workloads under native, expandable_segments and crmm (run on a GPU machine)
EXTRA_DIST += bench/torch_workloads.py bench/torch_workloads.sh bench/torch_env.sh
# a captured decoder step replayed under native or crmm (run on a GPU machine)
EXTRA_DIST += bench/decoder_graph.py bench/decoder_graph.sh
# what a Python user pays per DeviceBuffer / CuPy / Numba allocation (python3 bench/python_alloc.py)
EXTRA_DIST += bench/python_alloc.py
# the same kernels over cudaMalloc'd and page-mapped memory (python3 bench/vmm_kernels.py)
EXTRA_DIST += bench/vmm_kernels.py
# what the driver's virtual memory calls cost and whether they wait (python3 bench/vmm_call_costs.py)
EXTRA_DIST += bench/vmm_call_costs.py
# allocation logs of patterns the recorded ones lack (python3 bench/synthetic_logs.py)
EXTRA_DIST += bench/synthetic_logs.py
# what PyTorch's expandable segments would hold over an allocation log (python3 bench/pytorch_expandable_model.py)
EXTRA_DIST += bench/pytorch_expandable_model.py
# the recorded PyTorch allocation logs: tests/check_pool_expandable_logs.sh replays them
EXTRA_DIST += bench/logs/bert_train.csv.gz bench/logs/gpt2_generate.csv.gz bench/logs/gpt2_train.csv.gz \
	bench/logs/resnet_train.csv.gz bench/logs/moe_train.csv.gz bench/logs/vit_train.csv.gz \
	bench/logs/dyn_train.csv.gz bench/logs/serving.csv.gz
EXTRA_DIST += bench/rmm_suite.sh
# CuPy's own tests with crmm as CuPy's allocator (run on a GPU machine)
EXTRA_DIST += bench/cupy_suite.sh bench/cupy_suite_allocator.py bench/suite_env.sh
# the C cost of a device buffer and its pieces (make bench/device_buffer_calls; needs a GPU to run)
EXTRA_PROGRAMS = bench/device_buffer_calls
bench_device_buffer_calls_SOURCES = bench/device_buffer_calls.c
bench_device_buffer_calls_CPPFLAGS = $(CORE_CPPFLAGS)
bench_device_buffer_calls_LDADD = libcrmm.la $(CUDA_LIBS)
# the recording, replay and in-process PyTorch harness of bench/RESULTS.md (bench/torch/run_h200.sh)
EXTRA_DIST += bench/torch/bar.py bench/torch/crmm_shim.py bench/torch/record.py bench/torch/replay.ini \
	bench/torch/replay_torch.py bench/torch/run_h200.sh bench/torch/workloads.py
