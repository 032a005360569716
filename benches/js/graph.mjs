// impact() across the JS boundary (the numbers an agent sees) on the same shape of synthetic
// graph as benches/graph.rs: 5,000 files x 9 symbols (50,000 nodes), imports to nearby and
// earlier files, calls along imports and within files, 5,000 memories attached. One run;
// medians and tails of file and symbol targets, plus neighbours(), ancestors() and
// descendants() of a file, and for each the slowest 1% of calls taken apart (answer size,
// garbage collections, a re-run). Everything is timed once the engine's graph index has
// loaded (the first impact() starts that load).
//   node benches/js/graph.mjs
//   ENGRAM_BENCH_ADDON=/path/to/other.node node benches/js/graph.mjs  # another build
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PerformanceObserver, performance } from 'node:perf_hooks'
import { hrtime } from 'node:process'

import { splitmix as rng, summary } from './corpus.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require(process.env.ENGRAM_BENCH_ADDON ?? '../../index.js')
const dir = mkdtempSync(join(tmpdir(), 'engram-graph-bench-'))

const FILES = 5000
const SYMBOLS = 9


const file = (f) => `m${Math.floor(f / 50)}/f${f}.ts`
const symbol = (f, s) => `${file(f)}:S${s}`
const edge = (from, to, kind) => ({ from, to, kind, layer: 1 })

try {
  const db = await Engram.open({ path: join(dir, 'graph.db') })
  const below = rng(42)
  const nodes = []
  const edges = []
  for (let f = 0; f < FILES; f++) {
    nodes.push({ key: file(f), kind: 'file', layer: 1 })
    for (let s = 0; s < SYMBOLS; s++) {
      nodes.push({ key: symbol(f, s), kind: 'function', layer: 1 })
      edges.push(edge(file(f), symbol(f, s), 'contains'))
    }
    const imported = []
    for (let i = 0; i < Math.min(3, f); i++) {
      const g = below(10) < 7 ? f - 1 - below(Math.min(f, 200)) : below(f)
      if (!imported.includes(g)) {
        imported.push(g)
        edges.push(edge(file(f), file(g), 'imports'))
      }
    }
    for (let s = 0; s < SYMBOLS; s++) {
      if (imported.length && below(10) < 8) {
        edges.push(edge(symbol(f, s), symbol(imported[below(imported.length)], below(SYMBOLS)), 'calls'))
      }
      if (s > 0 && below(10) < 3) edges.push(edge(symbol(f, s), symbol(f, below(s)), 'calls'))
    }
  }
  let t = hrtime.bigint()
  for (let i = 0; i < nodes.length; i += 10000) await db.injectGraph({ nodes: nodes.slice(i, i + 10000) })
  for (let i = 0; i < edges.length; i += 50000) await db.injectGraph({ edges: edges.slice(i, i + 50000) })
  const built = Number(hrtime.bigint() - t) / 1e9
  const memories = []
  for (let m = 0; m < 5000; m++) {
    const [f, s] = [below(FILES), below(SYMBOLS)]
    memories.push({
      type: 'gotcha',
      content: `S${s} of f${f} must be called after its setup (${m})`,
      targetNodeId: symbol(f, s),
      relatedFiles: [file(f)],
      impactedNodeIds: m % 3 === 0 ? [symbol(below(FILES), below(SYMBOLS)), symbol(below(FILES), below(SYMBOLS))] : [],
    })
  }
  for (let i = 0; i < memories.length; i += 1000) await db.rememberMany(memories.slice(i, i + 1000))

  const results = { nodes: nodes.length, edges: edges.length, build_s: built, stats: await db.graphStats() }
  // Garbage collections, by when they ran, to tell a slow call that waited on one.
  const collections = []
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) collections.push([e.startTime, e.startTime + e.duration])
  })
  gc.observe({ entryTypes: ['gc'] })
  const time = async (label, targets, call) => {
    const lat = []
    const calls = []
    let items = 0
    for (const target of targets) {
      const at = performance.now()
      const start = hrtime.bigint()
      const n = await call(target)
      const ns = hrtime.bigint() - start
      items += n
      lat.push(ns)
      calls.push({ target, n, ms: Number(ns) / 1e6, at, end: performance.now() })
    }
    results[label] = { ...summary(lat.slice(200)), mean_items: items / targets.length }
    results[`${label}_tail`] = await tail(calls.slice(200), call)
  }
  // Where the slowest 1% of calls come from: how big their answers are against the median
  // call's, how many overlapped a garbage collection, and whether the same targets are slow
  // again when re-run alone (the answer's size) or not (the machine, the collector).
  const tail = async (calls, call) => {
    await new Promise((resolve) => setTimeout(resolve, 50)) // let the gc entries land
    const byTime = [...calls].sort((a, b) => a.ms - b.ms)
    const slow = byTime.slice(Math.floor(byTime.length * 0.99))
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
    const overlapsGc = (c) => collections.some(([from, to]) => from < c.end && to > c.at)
    const again = []
    for (const c of slow) {
      const start = hrtime.bigint()
      await call(c.target)
      again.push(Number(hrtime.bigint() - start) / 1e6)
    }
    return {
      slow_calls: slow.length,
      slow_median_ms: median(slow.map((c) => c.ms)),
      slow_median_items: median(slow.map((c) => c.n)),
      all_median_items: median(calls.map((c) => c.n)),
      slow_overlapping_gc: slow.filter(overlapsGc).length,
      all_overlapping_gc_share: calls.filter(overlapsGc).length / calls.length,
      slow_rerun_median_ms: median(again),
    }
  }
  const pick = rng(7)
  const files = Array.from({ length: 2200 }, () => file(pick(FILES)))
  const symbols = Array.from({ length: 2200 }, () => symbol(pick(FILES), pick(SYMBOLS)))
  // The first impact() answers from the graph tables and starts loading the engine's
  // in-process graph index in the background; the timed calls below come after that load.
  let t0 = hrtime.bigint()
  await db.impact(files[0])
  results.first_impact_ms = Number(hrtime.bigint() - t0) / 1e6
  await new Promise((resolve) => setTimeout(resolve, 5000))
  await time('impact_file', files, async (k) => {
    const r = await db.impact(k)
    return r.affected.length + r.memories.length
  })
  // The defaults before 2026-11-29 (500 affected, 100 memories): what a caller that asks for
  // large answers pays.
  await time('impact_file_500_100', files, async (k) => {
    const r = await db.impact(k, { limit: 500, memoryLimit: 100 })
    return r.affected.length + r.memories.length
  })
  await time('impact_symbol', symbols, async (k) => {
    const r = await db.impact(k)
    return r.affected.length + r.memories.length
  })
  await time('neighbours_file', files, async (k) => (await db.neighbours([k], { limit: 50 })).length)
  await time('ancestors_file', files, async (k) => (await db.ancestors(k)).nodes.length)
  await time('descendants_file', files, async (k) => (await db.descendants(k)).nodes.length)
  gc.disconnect()
  console.log(JSON.stringify(results, null, 2))
  await db.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}
