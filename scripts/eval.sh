#!/usr/bin/env bash
# Rebuilds the retrieval dev sets and prints their table (benches/retrieval_eval.rs):
# fetches the Go standard library sources from the newest golang-*-src package Debian offers
# (1.19 on bookworm) and networkx's wheel from PyPI (pinned) into
# target/eval-corpora/ (the other corpora come with `npm ci` and the cargo registry),
# installs the model if needed, then runs the evaluation, and after it the baselines on the
# same queries (plain FTS5 BM25 and the seed's stack, benches/js/seed_eval.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
corpora=target/eval-corpora
if ! ls -d "$corpora"/usr/share/go-1.* >/dev/null 2>&1; then
  mkdir -p "$corpora"
  package=$(apt-cache search --names-only '^golang-1\.[0-9]+-src$' | sort -V | tail -1 | cut -d' ' -f1 || true)
  if [ -n "$package" ] && (cd "$corpora" && apt-get download "$package" >/dev/null 2>&1); then
    dpkg-deb -x "$corpora"/"$package"_*.deb "$corpora"
    rm -f "$corpora"/*.deb
  else
    echo "eval: no golang-*-src package could be fetched; the go sets are skipped" >&2
  fi
fi
networkx=networkx-3.4.2
if [ ! -d "$corpora/$networkx/networkx" ]; then
  mkdir -p "$corpora"
  if python3 -m pip download --no-deps --only-binary=:all: "${networkx/-/==}" -d "$corpora" >/dev/null 2>&1; then
    python3 -m zipfile -e "$corpora/$networkx"-py3-none-any.whl "$corpora/$networkx"
    rm -f "$corpora/$networkx"-py3-none-any.whl
  else
    echo "eval: networkx could not be downloaded from PyPI; the python sets are skipped" >&2
  fi
fi
node bin/engram.js model status --json | grep -q "\"state\":\"available\"" || node bin/engram.js model install
cargo bench --no-default-features --bench retrieval_eval "$@"
[ -n "${EVAL_SETS_ONLY:-}" ] || exec node benches/js/seed_eval.mjs
