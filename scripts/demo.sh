#!/usr/bin/env bash
# The main job on the embedded default: build the addon, load a set of memories into a fresh
# local libSQL file through the CLI (with progress), then search and show stats.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -d node_modules ] || npm ci --no-audit --no-fund
npx napi build --platform --release --no-const-enum

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db="$work/memory.db"
cli() { node bin/engram.js --db "$db" --root "$work" "$@"; }

echo "== remember (batch import)"
cli remember --file examples/memories.jsonl
echo "== remember (one, with a secret that gets redacted)"
cli remember --type gotcha --tags ci "CI needs GITHUB_TOKEN=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 to publish"
echo "== search: sqlite workers"
cli search sqlite workers
echo "== search: \"edge runtime\" jose*"
cli search '"edge runtime" jose*'
echo "== stats"
cli stats
echo "== index this repository's code (tree-sitter chunks, symbols, references)"
node bin/engram.js --db "$work/code.db" index .
echo "== search-code: chunk boundaries"
node bin/engram.js --db "$work/code.db" search-code "split oversized container signature" --limit 5
if node bin/engram.js --db "$work/dense.db" model status --json | grep -q '"state":"unavailable"'; then
  echo "== dense search skipped: no embedding model (see README: Embeddings)"
else
  echo "== embed the chunker's sources with the built-in model, then search by meaning"
  node bin/engram.js --db "$work/dense.db" index src/code
  node bin/engram.js --db "$work/dense.db" --root src/code embed
  node bin/engram.js --db "$work/dense.db" --root src/code dense "split text into chunks at blank lines" --limit 5
fi
