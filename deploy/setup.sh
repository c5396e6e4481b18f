#!/bin/sh
# Installs what clgemma needs from Debian and the test virtualenv from PyPI.
# Idempotent and quiet when everything is already there.
set -e
cd "$(dirname "$0")/.."
PKGS="build-essential ocl-icd-opencl-dev opencl-headers libclblast-dev pocl-opencl-icd clinfo
      libjson-c-dev libpcre2-dev libfcgi-dev libhttp-parser-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libgif-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev libssl-dev libcurl4-openssl-dev nginx spawn-fcgi python3-venv clang libclang-rt-14-dev curl openssl"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null; }
fi
# test/tool virtualenv (PyPI packages for tests and tools only; the product is C)
REQ=tools/requirements.txt
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.req-stamp
if [ ! -f "$stamp" ] || ! cmp -s "$REQ" "$stamp"; then
  echo "setup: installing Python test requirements"
  .venv/bin/pip install -q --disable-pip-version-check -r "$REQ"
  cp "$REQ" "$stamp"
fi
