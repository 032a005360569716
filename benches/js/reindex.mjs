// Re-index of one edited file through the API, the way a watcher or an agent's hook does it:
// a copy of a real tree is indexed once, then one of its files is written with and without an
// appended function, alternately, and `indexPaths([file])` is timed after each write.
// Defaults: `os.py` of the CPython standard library installed here.
//   node benches/js/reindex.mjs                                   # CPython os.py, 40 edits
//   ROOT=~/.cargo/registry/src/*/tokio-1.x FILE=src/sync/mutex.rs node benches/js/reindex.mjs
//   ENGRAM_BENCH_ADDON=/path/to/other.node node benches/js/reindex.mjs  # another build, same run
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { extname, join } from 'node:path'
import { hrtime } from 'node:process'

import { summary } from './corpus.mjs'
import { pythonStdlib } from './source_tree.mjs'

const require = createRequire(import.meta.url)
// An addon given by path (a build kept for comparison) or this repository's build.
const { Engram } = process.env.ENGRAM_BENCH_ADDON
  ? require(process.env.ENGRAM_BENCH_ADDON)
  : require('../../index.js')

const source = process.env.ROOT || pythonStdlib()
if (!source) throw new Error('no CPython standard library under /usr/lib: set ROOT and FILE')
const rel = process.env.FILE || 'os.py'
const edits = Number(process.env.N || 40)

/** A small function in the file's language, numbered so every edit changes the file. */
function appended(i) {
  switch (extname(rel)) {
    case '.rs':
      return `\npub fn added_${i}(x: &[u8]) -> usize {\n    x.len() + ${i}\n}\n`
    case '.go':
      return `\nfunc added${i}(x []byte) int {\n\treturn len(x) + ${i}\n}\n`
    case '.ts':
    case '.tsx':
    case '.js':
      return `\nexport function added${i}(x: string): number {\n  return x.length + ${i}\n}\n`
    default:
      return `\ndef added_${i}(x):\n    return len(x) + ${i}\n`
  }
}

const dir = mkdtempSync(join(tmpdir(), 'engram-reindex-bench-'))
try {
  const root = join(dir, 'tree')
  cpSync(source, root, { recursive: true, filter: (p) => !p.includes('__pycache__') })
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: root })
  let start = hrtime.bigint()
  const indexed = await db.index()
  const coldSeconds = Number(hrtime.bigint() - start) / 1e9
  const file = join(root, rel)
  const original = readFileSync(file, 'utf8')
  const latencies = []
  for (let i = 0; i < edits; i++) {
    writeFileSync(file, i % 2 === 0 ? original + appended(i) : original)
    start = hrtime.bigint()
    await db.indexPaths([rel])
    latencies.push(hrtime.bigint() - start)
  }
  await db.close()
  console.log(
    JSON.stringify(
      { root: source, file: rel, files: indexed.filesIndexed, cold_index_s: coldSeconds, reindex: summary(latencies) },
      null,
      2,
    ),
  )
} finally {
  rmSync(dir, { recursive: true, force: true })
}
