# Benchmark workloads shared by `crmm bench` and the performance notes.
EXTRA_DIST += bench/RESULTS.md
