# shellcheck shell=sh
# bench/suite_env.sh — sourced by rmm_suite.sh and cupy_suite.sh, which run another project's
# Python tests over a crmm build tree: $CRMM_BUILD_DIR, else the current directory. Points
# Python at that tree's libcrmm, plugins and C extension (where the build made it) and at the
# repository's Python package and bench/ (for the pytest plugins there); the config is the
# caller's ($CRMM_CONFIG, else crmm's own search). Sets src (the repository), build and PYTHON;
# exits 2 when the tree is not built.
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${CRMM_BUILD_DIR:-.}" && pwd)
PYTHON=${PYTHON:-python3}
if [ ! -e "$build/.libs/libcrmm.so" ] || [ ! -d "$build/plugins/built" ]; then
  echo "$0: $build is not a built crmm tree (no .libs/libcrmm.so or plugins/built); run make there or set CRMM_BUILD_DIR" >&2
  exit 2
fi
CRMM_LIBRARY="$build/.libs/libcrmm.so"
CRMM_PLUGIN_PATH="$build/plugins/built"
PYTHONPATH="$src/python:$src/bench${PYTHONPATH:+:$PYTHONPATH}"
export CRMM_LIBRARY CRMM_PLUGIN_PATH PYTHONPATH
if [ -z "${CRMM_FASTALLOC:-}" ] && [ -e "$build/python/crmm/.libs/_fastalloc.so" ]; then
  CRMM_FASTALLOC="$build/python/crmm/.libs/_fastalloc.so"
  export CRMM_FASTALLOC
fi
# wide enough that each failure line keeps its reason
COLUMNS=${COLUMNS:-240}; export COLUMNS
