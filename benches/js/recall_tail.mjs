// Where recall()'s latency tail goes: the code sets of the retrieval evaluation (their queries
// in target/retrieval-eval/sets.json, their databases beside it; run `npm run eval` first) through
// recall() across the JS boundary, each query twice after a warm-up, chunks only, packing off.
// Prints p50/p90/p99 of the whole call and, per stage (RecallTimings), the mean over the
// middle 10% of recalls and over the slowest 2%, then the slowest queries.
//   node benches/js/recall_tail.mjs [rust|typescript|go]
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { hrtime } from 'node:process'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const language = process.argv[2] ?? 'typescript'
const work = join(import.meta.dirname, '..', '..', 'target', 'retrieval-eval')
const sets = JSON.parse(readFileSync(join(work, 'sets.json'), 'utf8'))
const corpus = sets.languages.find((l) => l.language === language)
if (!corpus) throw new Error(`no ${language} sets in ${work}/sets.json: run npm run eval first`)

const engine = await Engram.open({ path: corpus.db, projectRoot: corpus.repo })
const options = { filters: { kinds: ['chunk'] }, limit: 10, trackAccess: false, stages: { packing: false } }
const texts = corpus.sets.flatMap((set) => set.queries.map((q) => q.text))
for (const text of texts.slice(0, 50)) await engine.recall(text, options)
const rows = []
for (let round = 0; round < 2; round++) {
  for (const text of texts) {
    const started = hrtime.bigint()
    const result = await engine.recall(text, options)
    rows.push({ text, wallMs: Number(hrtime.bigint() - started) / 1e6, ...result.timings })
  }
}
await engine.close()

rows.sort((a, b) => a.wallMs - b.wallMs)
const at = (p) => rows[Math.round((rows.length - 1) * p)].wallMs.toFixed(2)
console.log(`${language}: ${rows.length} recalls, p50 ${at(0.5)} ms, p90 ${at(0.9)} ms, p99 ${at(0.99)} ms`)
const middle = rows.slice(Math.floor(rows.length * 0.45), Math.floor(rows.length * 0.55))
const tail = rows.slice(Math.floor(rows.length * 0.98))
const mean = (band, key) => (band.reduce((sum, r) => sum + r[key], 0) / band.length).toFixed(2)
for (const key of ['keywordMs', 'denseMs', 'embedMs', 'graphMs', 'fusionMs', 'totalMs']) {
  console.log(`${key.padEnd(10)} middle 10% ${mean(middle, key).padStart(6)} ms, slowest 2% ${mean(tail, key).padStart(6)} ms`)
}
for (const r of tail.slice(-5)) console.log(`${r.wallMs.toFixed(1)} ms: ${JSON.stringify(r.text.slice(0, 100))}`)
