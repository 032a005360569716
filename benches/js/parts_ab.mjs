// recall() latency with and without definition-level vectors, pair by pair (issue 36): two
// copies of one database the retrieval evaluation indexed and embedded
// (target/retrieval-eval/<language>/eval.db), with every row of code_chunk_parts deleted from
// the second (any SQLite shell: `DELETE FROM code_chunk_parts`). The queries of the named dev
// sets (from an EVAL_DUMP file) run through both, alternating which goes first; reports
// p50/p90/p99 of each and the median of the pairwise ratios. One run; machines are noisy.
//   node benches/js/parts_ab.mjs with.db without.db <repo root> <dump.jsonl> <set,set> [rounds]
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { hrtime } from 'node:process'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const [withDb, withoutDb, root, dump, sets, roundsArg] = process.argv.slice(2)
const wanted = new Set(sets.split(','))
const queries = readFileSync(dump, 'utf8').trim().split('\n').map(JSON.parse)
  .filter((q) => wanted.has(q.set)).map((q) => q.query)
const open = (path) => Engram.open({ path, projectRoot: root })
const handles = { with: await open(withDb), without: await open(withoutDb) }
const opts = { filters: { kinds: ['chunk'] }, limit: 10, stages: { packing: false }, trackAccess: false }
const times = { with: [], without: [] }
// Warm-up: load both vector indexes and caches.
for (const h of Object.values(handles)) for (const q of queries.slice(0, 20)) await h.recall(q, opts)
const rounds = Number(roundsArg ?? 2)
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < queries.length; i++) {
    const order = (i + r) % 2 === 0 ? ['with', 'without'] : ['without', 'with']
    for (const name of order) {
      const t = hrtime.bigint()
      await handles[name].recall(queries[i], opts)
      times[name].push(Number(hrtime.bigint() - t) / 1e6)
    }
  }
}
const pct = (xs, p) => { const s = [...xs].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(p * s.length))] }
for (const [name, xs] of Object.entries(times)) {
  console.log(`${name} parts: n=${xs.length} p50 ${pct(xs, 0.5).toFixed(2)} ms, p90 ${pct(xs, 0.9).toFixed(2)} ms, p99 ${pct(xs, 0.99).toFixed(2)} ms`)
}
const ratios = times.with.map((t, i) => t / times.without[i]).sort((x, y) => x - y)
console.log(`pairwise ratio with/without: median ${ratios[Math.floor(ratios.length / 2)].toFixed(3)}`)
for (const h of Object.values(handles)) await h.close()
