#!/bin/sh
# Regenerates the build system (configure, Makefile.in). On Debian, run as root with a tool
# missing, it installs the missing packages with apt-get; otherwise it names what is missing.
set -e
cd "$(dirname "$0")"
need=""
command -v autoreconf >/dev/null 2>&1 || need="$need autoconf"
command -v automake   >/dev/null 2>&1 || need="$need automake"
command -v libtoolize >/dev/null 2>&1 || need="$need libtool"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
if command -v pkg-config >/dev/null 2>&1; then
  pkg-config --exists check 2>/dev/null || need="$need check"
  pkg-config --exists inih  2>/dev/null || need="$need libinih-dev"
fi
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "autogen.sh: installing:$need"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need libsubunit-dev >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need libsubunit-dev >/dev/null; }
  else
    echo "autogen.sh: missing:$need (Debian: apt-get install$need)" >&2
    exit 1
  fi
fi
mkdir -p m4
autoreconf -fi
