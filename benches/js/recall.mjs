// recall() across the JS boundary (the numbers an agent sees), at the scale: real code
// (default: a copy of the CPython standard library installed here and of crates in the cargo
// registry by name, ~1.15M lines, ~53,000 chunks; generated binding crates such as
// linux-raw-sys, 23k chunks of constants, are left out) indexed and embedded with the built-in
// model, plus 10,000 synthetic memories (benches/js/corpus.mjs)
// related to files of the tree and embedded too. Then recall() of a mix of queries (identifiers
// of the tree, descriptions, memory-like word lists), half of them with three recent files so
// the graph path runs, with every default stage (no reranker is configured). Reports p50/p99
// of the whole call and the median share of each stage. One run; machines are noisy.
// With ENGRAM_BENCH_QUERIES=dump.jsonl (written by the retrieval evaluation with EVAL_DUMP, see
// docs/BENCHMARK.md) the queries are instead up to 100 of each of its dev sets (doc sentences,
// name-blind sentences, questions over memories: the long ones make the tail), run twice, and
// p50/p90/p99 are reported per set too.
// Needs the model (`engram model install`). With ENGRAM_BENCH_DB=/some/dir/recall.db the
// database and the corpus are kept in /some/dir, so a second run skips copying, indexing and
// embedding. ENGRAM_BENCH_QUERY_PRECISION=int8|f16|f32 sets `embeddings.queryPrecision` (the
// weights queries run through), for comparing them on one database; ENGRAM_BENCH_ADDON=<dir>/index.js
// runs another build (a copy of index.js beside its .node file), for comparing two builds.
//   node benches/js/recall.mjs [root]
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { hrtime } from 'node:process'

import { memories, queries, rng, summary } from './corpus.mjs'
import { buildCorpus, DESCRIPTIONS, IDENTIFIERS, sourceFiles } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require(process.env.ENGRAM_BENCH_ADDON || '../../index.js')

const keep = process.env.ENGRAM_BENCH_DB
const dir = keep ? dirname(resolve(keep)) : mkdtempSync(join(tmpdir(), 'engram-recall-bench-'))
const path = keep ? resolve(keep) : join(dir, 'recall.db')
let root = process.argv[2] && resolve(process.argv[2])
if (!root) {
  root = join(dir, 'corpus')
  if (!existsSync(root)) console.log(`recall: corpus of ${buildCorpus(root, 1_150_000)} lines in ${root}`)
}
const MEMORIES = 10_000


try {
  const queryPrecision = process.env.ENGRAM_BENCH_QUERY_PRECISION
  const db = await Engram.open({ path, projectRoot: root, ...(queryPrecision && { embeddings: { queryPrecision } }) })
  let started = hrtime.bigint()
  const secs = () => (Number(hrtime.bigint() - started) / 1e9).toFixed(1)
  const indexed = await db.index()
  console.log(`recall: ${root}: ${indexed.filesIndexed} files indexed, ${indexed.chunks} chunks (${secs()} s)`)
  const files = sourceFiles(root)
  const stats = await db.stats()
  if (stats.total < MEMORIES) {
    const pick = rng(11)
    const batch = memories(MEMORIES - stats.total, 5).map((m) => ({
      ...m,
      relatedFiles: [files[Math.floor(pick() * files.length)]],
    }))
    for (let i = 0; i < batch.length; i += 1000) await db.rememberMany(batch.slice(i, i + 1000))
  }
  started = hrtime.bigint()
  const embedded = await db.embedPending()
  console.log(
    `recall: ${MEMORIES} memories; embedPending: ${embedded.chunks} chunks, ${embedded.memories} memories (${secs()} s)`,
  )
  const pick = rng(3)
  const devSets = process.env.ENGRAM_BENCH_QUERIES && devSetQueries(process.env.ENGRAM_BENCH_QUERIES)
  const mixed = devSets
    ? devSets
    : [...IDENTIFIERS, ...DESCRIPTIONS, ...queries(16, 17)].map((query) => ({ query, set: 'mixed' }))
  const rounds = devSets ? 2 : 8
  const requests = mixed.map(({ query, set }, i) => ({
    query,
    set,
    options:
      i % 2 === 0
        ? { recentFiles: [0, 1, 2].map(() => files[Math.floor(pick() * files.length)]) }
        : {},
  }))
  for (const r of requests) await db.recall(r.query, r.options) // warm-up: model, caches
  const samples = []
  const stages = { keywordMs: [], denseMs: [], embedMs: [], graphMs: [], candidatesMs: [], fusionMs: [], packingMs: [], totalMs: [] }
  const counts = []
  const words = []
  const bySet = new Map()
  for (let round = 0; round < rounds; round++) {
    for (const r of requests) {
      const t0 = hrtime.bigint()
      const result = await db.recall(r.query, r.options)
      const took = hrtime.bigint() - t0
      samples.push(took)
      if (!bySet.has(r.set)) bySet.set(r.set, [])
      bySet.get(r.set).push(took)
      if (result.skipped.length) throw new Error(`a path was skipped: ${result.skipped}`)
      for (const key of Object.keys(stages)) stages[key].push(result.timings[key])
      counts.push(result.items.length)
      words.push(r.query.split(/\s+/).filter(Boolean).length)
    }
  }
  const s = summary(samples)
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  console.log(
    `recall: ${s.n} recalls (${requests.length} queries x ${rounds}; half with 3 recent files): ` +
      `p50 ${(s.p50_us / 1000).toFixed(2)} ms, p99 ${(s.p99_us / 1000).toFixed(2)} ms across the boundary; ` +
      `median ${median(counts)} items`,
  )
  if (devSets) {
    console.log('| dev set | recalls | p50 ms | p90 ms | p99 ms |\n| --- | --- | --- | --- | --- |')
    for (const [set, times] of bySet) {
      const sorted = times.map((t) => Number(t) / 1e6).sort((a, b) => a - b)
      const at = (p) => sorted[Math.round((sorted.length - 1) * p)].toFixed(2)
      console.log(`| ${set} | ${sorted.length} | ${at(0.5)} | ${at(0.9)} | ${at(0.99)} |`)
    }
  }
  const total = median(stages.totalMs)
  // The tail's own medians say what makes it: the slowest 2% of the calls, stage by stage.
  const slowest = samples
    .map((t, i) => [t, i])
    .sort((a, b) => (a[0] < b[0] ? 1 : a[0] > b[0] ? -1 : 0))
    .slice(0, Math.max(1, Math.round(samples.length / 50)))
    .map(([, i]) => i)
  const inTail = (xs) => median(slowest.map((i) => xs[i]))
  console.log(
    '| stage (inside the engine) | median ms | share of the median total | median ms, slowest 2% |\n| --- | --- | --- | --- |',
  )
  for (const [key, values] of Object.entries(stages)) {
    const m = median(values)
    console.log(
      `| ${key.replace('Ms', '')} | ${m.toFixed(2)} | ${((100 * m) / total).toFixed(0)} % | ${inTail(values).toFixed(2)} |`,
    )
  }
  console.log(`| query words | ${median(words)} | | ${inTail(words)} |`)
  await db.close()
} finally {
  if (!keep) rmSync(dir, { recursive: true, force: true })
}

/** Up to 100 queries of each dev set in an EVAL_DUMP file, evenly spread. */
function devSetQueries(file) {
  const bySet = new Map()
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue
    const { set, query } = JSON.parse(line)
    if (!bySet.has(set)) bySet.set(set, [])
    bySet.get(set).push(query)
  }
  const out = []
  for (const [set, all] of bySet) {
    const step = Math.max(1, all.length / 100)
    for (let i = 0; i < all.length; i += step) out.push({ query: all[Math.floor(i)], set })
  }
  return out
}
