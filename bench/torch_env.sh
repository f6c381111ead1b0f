# bench/torch_env.sh — sourced by the bench scripts that run PyTorch processes over a crmm build
# tree (the current directory): points them at its libcrmm and plugins, at the repository's Python
# package and default config, and at a python3 that imports torch ($PYTHON, else python3).
# Sets here (bench/), top (the repository), build and PY; exits when something is missing.
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
build=$PWD
lib=$(find "$build" -name libcrmm.so -path "*/.libs/*" | head -n 1)
[ -n "$lib" ] || { echo "no .libs/libcrmm.so under $build: run from a crmm build tree" >&2; exit 1; }
export CRMM_LIBRARY=$lib
export PYTHONPATH=$top/python:$here${PYTHONPATH:+:$PYTHONPATH}
export CRMM_PLUGIN_PATH=${CRMM_PLUGIN_PATH:-$build/plugins/built}
export CRMM_CONFIG=${CRMM_CONFIG:-$top/conf/crmm.ini}
PY=${PYTHON:-python3}
$PY -c 'import torch.cuda' 2>/dev/null || { echo "$PY cannot import torch: set PYTHON to a python that can" >&2; exit 1; }
