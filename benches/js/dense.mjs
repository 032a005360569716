// Dense search across the JS boundary (the numbers an agent sees): this repository's own code
// indexed and embedded with the built-in model, then denseSearch() of 12 natural-language
// queries, cycled. Reports embedPending() throughput end to end (read, embed, store) and query
// latency p50/p99 (query embedding + index refresh check + exact scan + hydration).
// Needs the model (`engram model install`).
//   node benches/js/dense.mjs [root]
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { hrtime } from 'node:process'

import { summary } from './corpus.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const root = resolve(process.argv[2] ?? join(import.meta.dirname, '..', '..', 'src'))
const dir = mkdtempSync(join(tmpdir(), 'engram-dense-bench-'))

const QUERIES = [
  'split text into chunks at blank lines',
  'resolve a relative import to a project file',
  'skip files listed in gitignore',
  'redact api keys before storing',
  'retry when the database is busy',
  'closure table update after removing an edge',
  'load model weights from safetensors',
  'quantise vectors to int8',
  'parse a file on a worker thread with a timeout',
  'migrate the schema to the newest version',
  'find memories attached to a graph node',
  'cancel a running index',
]

try {
  const db = await Engram.open({ path: join(dir, 'dense.db'), projectRoot: root })
  const indexed = await db.index()
  let started = hrtime.bigint()
  const report = await db.embedPending()
  const embedSecs = Number(hrtime.bigint() - started) / 1e9
  console.log(
    `dense: ${root}: ${indexed.chunks} chunks; embedPending ${report.chunks} chunks + ${report.parts} parts of grouped chunks (${report.textsEmbedded} texts) in ${embedSecs.toFixed(1)} s = ${(report.chunks / embedSecs).toFixed(1)} chunks/s, ${(report.textsEmbedded / embedSecs).toFixed(1)} texts/s`,
  )
  for (let i = 0; i < QUERIES.length; i++) await db.denseSearch(QUERIES[i], { limit: 10 }) // warm-up
  const samples = []
  for (let round = 0; round < 20; round++) {
    for (const q of QUERIES) {
      started = hrtime.bigint()
      const hits = await db.denseSearch(q, { limit: 10 })
      samples.push(hrtime.bigint() - started)
      if (hits.length !== 10) throw new Error(`expected 10 hits, got ${hits.length}`)
    }
  }
  const s = summary(samples)
  console.log(`dense: denseSearch top-10 over ${report.chunks} chunks: n=${s.n} p50 ${(s.p50_us / 1000).toFixed(2)} ms, p99 ${(s.p99_us / 1000).toFixed(2)} ms`)
  await db.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}
