// Benchmarks across the JS boundary (the numbers users see), one run, medians and tails.
//   node benches/js/remember_search.mjs [--large]
// --large also builds a ~100 MB database to time re-opening it (takes a minute).
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { hrtime } from 'node:process'

import { memories, queries, summary, zipfMemories, zipfQueries } from './corpus.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const large = process.argv.includes('--large')
const dir = mkdtempSync(join(tmpdir(), 'engram-bench-'))
const results = {}

try {
  const rssBefore = process.memoryUsage().rss
  const db = await Engram.open({ path: join(dir, 'bench.db') })
  await db.stats()
  results.idle_engine_rss_mb = (process.memoryUsage().rss - rssBefore) / 2 ** 20

  // remember, one at a time (await each: the latency an agent sees).
  const singles = memories(3000, 1)
  const lat = []
  for (const m of singles) {
    const t = hrtime.bigint()
    await db.remember(m)
    lat.push(hrtime.bigint() - t)
  }
  results.remember_single = summary(lat.slice(500)) // skip warm-up

  // rememberMany: 20,000 memories in batches of 1,000.
  const batch = memories(20000, 2)
  let t = hrtime.bigint()
  for (let i = 0; i < batch.length; i += 1000) await db.rememberMany(batch.slice(i, i + 1000))
  let secs = Number(hrtime.bigint() - t) / 1e9
  results.remember_many_per_s = Math.round(batch.length / secs)

  // The contradiction scans of the 3,000 single writes run after them, when the writer is
  // idle (batches of 1,000 skip the scan): wait for them, and report how long that took, so
  // that they neither hide nor land in the search figures below.
  t = hrtime.bigint()
  await db.settled()
  results.deferred_scans_settled_ms = Number(hrtime.bigint() - t) / 1e6

  // search over exactly 10,000 memories, each set in its own file (one memory per project,
  // the usual layout): the realistic Zipf corpus (the target), and the uniform 130-word corpus
  // as a stress case (every word in ~15% of memories). Then the Zipf set as a second project
  // in the file that already holds the 23,000 memories above (one FTS index shared by both).
  const zipf = zipfMemories(10000, 3)
  const zipfQs = zipfQueries(zipf, 2000)
  results.search_10k = await searchBench('zipf.db', 'default', zipf, zipfQs)
  results.search_10k_uniform_stress = await searchBench('uniform.db', 'default', memories(10000, 3), queries(2000))
  results.search_10k_shared_file = await searchBench('bench.db', 'ten-k', zipf, zipfQs)
  await db.close()

  if (large) {
    const path = join(dir, 'large.db')
    const big = await Engram.open({ path })
    const chunk = memories(5000, 4).map((m) => ({ ...m, content: m.content + ' ' + m.content + ' ' + m.content }))
    let i = 0
    while (statSync(path).size + (statSync(path + '-wal', { throwIfNoEntry: false })?.size ?? 0) < 100 * 2 ** 20) {
      await big.rememberMany(chunk.map((m) => ({ ...m, content: `${m.content} [${i}]` })))
      i++
    }
    await big.close()
    // Let the engine go away, then time a cold open of the existing file.
    await new Promise((r) => setTimeout(r, 200))
    const opens = []
    for (let k = 0; k < 5; k++) {
      const t0 = hrtime.bigint()
      const h = await Engram.open({ path })
      await h.search('auth token')
      opens.push(hrtime.bigint() - t0)
      await h.close()
      await new Promise((r) => setTimeout(r, 100))
    }
    results.open_100mb_and_first_search = { file_mb: statSync(path).size / 2 ** 20, ...summary(opens) }
  }
  console.log(JSON.stringify(results, null, 2))

  async function searchBench(file, projectId, corpus, qs) {
    const handle = await Engram.open({ path: join(dir, file), projectId })
    for (let i = 0; i < corpus.length; i += 1000) await handle.rememberMany(corpus.slice(i, i + 1000))
    for (const q of qs.slice(0, 200)) await handle.search(q) // warm-up
    const all = []
    const byWords = {}
    let hits = 0
    for (const q of qs) {
      const t0 = hrtime.bigint()
      hits += (await handle.search(q)).length
      const ns = hrtime.bigint() - t0
      all.push(ns)
      ;(byWords[q.split(' ').length] ??= []).push(ns)
    }
    await handle.close()
    const out = { all: summary(all), mean_hits: hits / qs.length }
    for (const [words, l] of Object.entries(byWords)) out[`${words}_words`] = summary(l)
    return out
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
