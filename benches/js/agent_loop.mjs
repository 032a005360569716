// The agent-loop builders across the JS boundary at issue 37's scale: a tree of real code
// (~1.15M lines, ~53,000 chunks; see source_tree.mjs) indexed, 10,000 synthetic memories on
// its files (corpus.mjs), and 400 observed sessions finalized over 20 of its modules (each
// reads 6-14 files of its module, drawn so that some files are read in most sessions). Then,
// one run, medians and p99s of:
// - prefetchPlan({ modules: [one module] }) (target p50 <= 10 ms);
// - sessionContext({ task, modules: [one module] }) (target p50 <= 20 ms);
// - augmentToolResult on a Read of a file not read before in the session (target p99 <= 5 ms);
// - search() of one misspelt word (typo fallback) against the same word spelt right.
// No embedder (the dense path is another bench's); machines are noisy.
// With ENGRAM_BENCH_DB=/some/dir/agent.db the database and corpus are kept for a second run.
//   node benches/js/agent_loop.mjs [root]
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { hrtime } from 'node:process'

import { memories, rng, summary } from './corpus.mjs'
import { buildCorpus, sourceFiles } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')

const keep = process.env.ENGRAM_BENCH_DB
const dir = keep ? dirname(resolve(keep)) : mkdtempSync(join(tmpdir(), 'engram-agent-bench-'))
const path = keep ? resolve(keep) : join(dir, 'agent.db')
let root = process.argv[2] && resolve(process.argv[2])
if (!root) {
  root = join(dir, 'corpus')
  if (!existsSync(root)) console.log(`agent: corpus of ${buildCorpus(root, 1_150_000)} lines in ${root}`)
}
const MEMORIES = 10_000
const SESSIONS = 400
const MODULES = 20

const ms = (ns) => (Number(ns) / 1e6).toFixed(2)
async function timed(label, n, call) {
  for (let i = 0; i < 5; i++) await call(i) // warm-up
  const samples = []
  for (let i = 0; i < n; i++) {
    const t0 = hrtime.bigint()
    await call(i)
    samples.push(hrtime.bigint() - t0)
  }
  const s = summary(samples)
  console.log(`| ${label} | ${n} | ${(s.p50_us / 1000).toFixed(2)} | ${(s.p99_us / 1000).toFixed(2)} |`)
  return s
}

try {
  const db = await Engram.open({ path, projectRoot: root, embeddings: { provider: 'none' } })
  let started = hrtime.bigint()
  const indexed = await db.index()
  console.log(`agent: ${indexed.filesIndexed} files indexed, ${indexed.chunks} chunks (${ms(hrtime.bigint() - started)} ms)`)
  const files = sourceFiles(root)
  const byModule = new Map()
  for (const f of files) {
    const module = f.includes('/') ? f.slice(0, f.lastIndexOf('/') + 1) : null
    if (module) byModule.set(module, [...(byModule.get(module) ?? []), f])
  }
  const modules = [...byModule.entries()].filter(([, fs]) => fs.length >= 15).map(([m]) => m).slice(0, MODULES)
  const stats = await db.stats()
  if (stats.total < MEMORIES) {
    const pick = rng(11)
    const batch = memories(MEMORIES - stats.total, 5).map((m) => ({ ...m, relatedFiles: [files[Math.floor(pick() * files.length)]] }))
    for (let i = 0; i < batch.length; i += 1000) await db.rememberMany(batch.slice(i, i + 1000))
  }
  // The observer's counts are the only trace a finalized session leaves that a plan reads.
  const recorded = (await db.prefetchPlan({ maxFiles: 1 })).files.length > 0
  const sessions = recorded ? SESSIONS : 0
  if (!recorded) {
    started = hrtime.bigint()
    const pick = rng(5)
    for (let i = sessions; i < SESSIONS; i++) {
      const module = modules[i % modules.length]
      const pool = byModule.get(module)
      const reads = 6 + Math.floor(pick() * 9)
      const s = db.observe({ sessionId: `bench-${i}` })
      for (let step = 1; step <= reads; step++) {
        // Skewed: the first files of a module are read in most of its sessions.
        const file = pool[Math.floor(pool.length * pick() ** 3)]
        s.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: file }, stepIndex: step })
      }
      await s.finalize('success')
    }
    console.log(`agent: ${SESSIONS - sessions} sessions finalized over ${modules.length} modules (${ms(hrtime.bigint() - started)} ms)`)
  }

  const plan = await db.prefetchPlan({ modules: [modules[0]] })
  console.log(`agent: prefetchPlan(${modules[0]}): ${plan.files.length} files (${plan.files.filter((f) => f.tier === 'always').length} always), ${plan.usedTokens} tokens, ${plan.omitted.length} omitted`)
  console.log('| call | n | p50 ms | p99 ms |\n| --- | --- | --- | --- |')
  await timed('prefetchPlan({ modules: [one] })', 200, (i) => db.prefetchPlan({ modules: [modules[i % modules.length]] }))
  await timed('prefetchPlan() whole project', 100, () => db.prefetchPlan())
  const tasks = ['fix the retry loop when the connection drops', 'add a parser option for strict mode', 'speed up the cache lookup']
  await timed('sessionContext({ task, modules: [one] })', 100, (i) =>
    db.sessionContext({ task: tasks[i % tasks.length], modules: [modules[i % modules.length]] }),
  )
  // A Read of a file returns its pitfalls once per session: each call reads another file,
  // 300 files with a confident gotcha (written once, kept with ENGRAM_BENCH_DB) and others.
  const pitfallFiles = files.filter((_, i) => i % 11 === 3).slice(0, 300)
  if ((await db.list({ tags: ['bench-pitfall-300'], limit: 1 })).length === 0) {
    await db.rememberMany(pitfallFiles.map((f, i) => ({
      type: 'gotcha', content: `calling into ${f} twice in a row deadlocks the pool (${i})`,
      relatedFiles: [f], confidence: 0.9, tags: ['bench-pitfall-300'] })))
  }
  for (const [label, pool] of [['a file with a gotcha', pitfallFiles], ['another file', files.filter((_, i) => i % 11 !== 3)]]) {
    const session = db.observe({ sessionId: `bench-augment-${label.length}` })
    let next = 0
    let shown = 0
    await timed(`augmentToolResult(Read of ${label}), each file once`, 290, async () => {
      if (await session.augmentToolResult('Read', { file_path: pool[next++ % pool.length] }, 'file text')) shown++
    })
    console.log(`agent: ${shown} of ${next} Reads of ${label} answered with pitfalls`)
  }
  // Words of the memories (corpus.mjs), each misspelt by a swap of two different neighbours.
  const words = ['connection', 'timeout', 'transaction', 'middleware', 'deadlock', 'embedding', 'serialize', 'container']
  const swap = (w) => {
    const i = [...w].findIndex((c, k) => k >= 2 && k + 1 < w.length && c !== w[k + 1])
    return w.slice(0, i) + w[i + 1] + w[i] + w.slice(i + 2)
  }
  const misspelt = words.map(swap)
  await timed('search(word) spelt right', 200, (i) => db.search(words[i % words.length]))
  await timed('search(word) misspelt, corrected', 200, (i) => db.search(misspelt[i % misspelt.length]))
  const corrected = await Promise.all(misspelt.map((w) => db.search(w)))
  console.log(`agent: misspelt searches found through a correction: ${corrected.filter((h) => h[0]?.correctedQuery).length} of ${misspelt.length} (${misspelt.map((w, i) => `${w} -> ${corrected[i][0]?.correctedQuery ?? '-'}`).join(', ')})`)
  await db.close()
} finally {
  if (!keep) rmSync(dir, { recursive: true, force: true })
}
