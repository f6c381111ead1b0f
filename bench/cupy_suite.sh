#!/bin/sh
# bench/cupy_suite.sh DIR [PYTEST_ARGS...] — run CuPy's own tests (the directory tests/ of a
# cupy/cupy checkout, or part of it; crmm does not ship them) with crmm as CuPy's allocator
# (bench/cupy_suite_allocator.py), against the crmm build tree in the current directory
# ($CRMM_BUILD_DIR to name another) and its default config ($CRMM_CONFIG to name another). Then,
# when any test failed, run the failed ones again with CuPy's own memory pool: a test that fails
# both ways fails on that machine whatever the allocator; one that fails only under crmm is
# crmm's. Prints pytest's summaries; exits with the status of the run under crmm.
#
#   git -C cupy archive v14.0.1 tests/conftest.py tests/cupy_tests | tar -x -C /tmp/cupy --strip-components=1
#   bench/cupy_suite.sh /tmp/cupy cupy_tests/creation_tests
#
# Needs a GPU, CuPy and pytest, as CuPy's tests do.
set -u
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 CUPY_TESTS_DIR [PYTEST_ARGS...]" >&2
  exit 2
fi
tests=$(cd "$1" && pwd)
shift
. "$(dirname "$0")/suite_env.sh"
CRMM_CONFIG=${CRMM_CONFIG:-$src/conf/crmm.ini}
export CRMM_CONFIG
cache=$(mktemp -d) || exit 2
trap 'rm -rf "$cache"' EXIT
cd "$tests" || exit 2
run() {
  PYTHONDONTWRITEBYTECODE=1 "$PYTHON" -m pytest -p cupy_suite_allocator -o cache_dir="$cache" -q --tb=line -rfE "$@"
}
echo "== CuPy's tests, crmm as CuPy's allocator"
CUPY_SUITE_ALLOCATOR=crmm run "$@"
rc=$?
[ $rc -eq 1 ] || exit $rc
echo "== the tests that failed, again with CuPy's own memory pool (one that passes here failed only under crmm)"
CUPY_SUITE_ALLOCATOR=cupy run --lf "$@"
exit 1
