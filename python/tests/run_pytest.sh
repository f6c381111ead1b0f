#!/bin/sh
# Runs the Python package's pytest suite (python/tests) against the build tree's libcrmm and
# plugins; `make check` sets CRMM_LIBRARY, PYTHONPATH and CRMM_PLUGIN_PATH. Skips (77) when
# configure found no Python with numpy and pytest.
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
if [ "$PYTHON" = ":" ] || ! "$PYTHON" -c 'import numpy, pytest' >/dev/null 2>&1; then
  echo "SKIP: no Python with numpy and pytest (Debian: apt-get install python3-numpy python3-pytest)"
  exit 77
fi
# A libcrmm built with ThreadSanitizer cannot be loaded into a Python that was not started with
# its runtime (libtsan needs static TLS that dlopen cannot give): the suite skips, saying so.
if [ -n "$CRMM_LIBRARY" ] && ldd "$CRMM_LIBRARY" 2>/dev/null | grep -q libtsan; then
  echo "SKIP: $CRMM_LIBRARY is built with ThreadSanitizer, whose runtime cannot be loaded into python3 with dlopen"
  exit 77
fi
# A sanitized libcrmm loads into Python only after the sanitizer runtimes; Python's own
# allocations at exit are not ours to report.
if [ "$CRMM_TEST_SANITIZERS" = yes ]; then
  LD_PRELOAD="$(${CC:-gcc} -print-file-name=libasan.so) $(${CC:-gcc} -print-file-name=libubsan.so)"
  ASAN_OPTIONS="detect_leaks=0:protect_shadow_gap=0"
  export LD_PRELOAD ASAN_OPTIONS
fi
PYTHONDONTWRITEBYTECODE=1 exec "$PYTHON" -m pytest -p no:cacheprovider -q -rs "$here"
