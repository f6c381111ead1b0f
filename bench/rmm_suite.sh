#!/bin/sh
# bench/rmm_suite.sh DIR [PYTEST_ARGS...] — run RMM's own Python tests (the directory
# python/rmm/rmm/tests of a rapidsai/rmm checkout; crmm does not ship them) with `import rmm`
# resolved to crmm (python3 -m crmm.as_rmm), against the crmm build tree in the current
# directory ($CRMM_BUILD_DIR to name another), and print pytest's summary: one line per failure
# or error with its reason, one per skip, then the counts. Exits with pytest's status.
#
#   git -C rmm archive v25.10.00 python/rmm/rmm/tests | tar -x -C /tmp/rmm-25.10 --strip-components=4
#   RMM_VERSION=25.10 bench/rmm_suite.sh /tmp/rmm-25.10
#
# $RMM_VERSION (YY.MM) names the release the tests come from: crmm then behaves as that release
# where RMM changed (python3 -m crmm.as_rmm --rmm-version; docs/python.md). Unset: the newest.
#
# RMM's tests need what RMM's need: a GPU, numpy, pytest and cuda-python (cuda.bindings); CuPy,
# Numba and PyTorch tests skip without them.
set -u
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 RMM_TESTS_DIR [PYTEST_ARGS...]" >&2
  exit 2
fi
tests=$(cd "$1" && pwd)
shift
. "$(dirname "$0")/suite_env.sh"
# RMM's tests write nothing beside themselves (no cache, no bytecode); pytest runs in their
# directory so that their conftest.py and test_helpers.py are found as RMM's CI finds them.
cd "$tests" || exit 2
PYTHONDONTWRITEBYTECODE=1 exec "$PYTHON" -m crmm.as_rmm ${RMM_VERSION:+--rmm-version "$RMM_VERSION"} -m pytest -p no:cacheprovider -q --tb=no -rfEs "$@" .
