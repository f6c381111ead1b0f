#!/bin/sh
# Regenerates the build system (configure, Makefile.in). On Debian, run as root with a tool
# missing, it installs the missing packages with apt-get; otherwise it names what is missing.
# It does the same for what the Python suite needs (python3 with numpy and pytest, distributed
# for the Dask tests, venv + pip + setuptools + wheel for the pip-install test); without them it
# only warns, as the C library builds without Python.
set -e
cd "$(dirname "$0")"
need=""
command -v autoreconf >/dev/null 2>&1 || need="$need autoconf"
command -v automake   >/dev/null 2>&1 || need="$need automake"
command -v libtoolize >/dev/null 2>&1 || need="$need libtool"
command -v make       >/dev/null 2>&1 || need="$need make"
command -v cc         >/dev/null 2>&1 || need="$need gcc"
# without pkg-config, check and inih cannot be looked for: both are installed with it
if command -v pkg-config >/dev/null 2>&1; then
  pkg-config --exists check 2>/dev/null || need="$need check"
  pkg-config --exists inih  2>/dev/null || need="$need libinih-dev"
else
  need="$need pkg-config check libinih-dev"
fi
# The Python suite's Debian packages, checked with dpkg where there is one (a python3 elsewhere
# on PATH does not count: configure looks for a Python that has them).
py_need=""
if command -v dpkg >/dev/null 2>&1; then
  for p in python3 python3-dev python3-numpy python3-pytest python3-distributed python3-numba python3-venv python3-pip \
           python3-setuptools python3-wheel; do
    dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || py_need="$py_need $p"
  done
fi
root_apt=no
[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && root_apt=yes
if [ -n "$need" ] && [ $root_apt = no ]; then
  echo "autogen.sh: missing:$need (Debian: apt-get install$need)" >&2
  exit 1
fi
if [ -n "$py_need" ] && [ $root_apt = no ]; then
  echo "autogen.sh: the Python suite will skip without:$py_need (Debian: apt-get install$py_need)" >&2
  py_need=""
fi
install="$need${need:+ libsubunit-dev}$py_need"
if [ -n "$install" ]; then
  echo "autogen.sh: installing:$install"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $install >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $install >/dev/null; }
fi
mkdir -p m4
autoreconf -fi
