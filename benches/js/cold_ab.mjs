// A cold `index()` of one tree by two or more builds of the addon, rounds alternating, in one
// process: wall time, lines/s, the graph sync's share and CPU use per run, then per build the
// medians and the pairwise median ratio against the first. What the A/B rows of
// docs/PERFORMANCE.md's "Where cold indexing goes" come from.
//   ADDONS=/tmp/base/index.js,/tmp/new/index.js node benches/js/cold_ab.mjs
//   ROOT=<tree> N=12 ADDONS=... node benches/js/cold_ab.mjs   # default: the CPython stdlib
// (An addon directory's index.js is `module.exports = require('./engram.node')`, the .node a
// copy of target/<triple>/release/libengram.so.)
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { pythonStdlib } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const addons = (process.env.ADDONS || join(import.meta.dirname, '../../index.js')).split(',')
const rounds = Number(process.env.N || 5)
const source = process.env.ROOT || pythonStdlib()
if (!source) throw new Error('no CPython standard library under /usr/lib: set ROOT')

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

const work = mkdtempSync(join(tmpdir(), 'engram-cold-ab-'))
try {
  // One copy of the tree without bytecode caches, read by every run.
  const root = join(work, 'tree')
  cpSync(source, root, { recursive: true, filter: (p) => !p.includes('__pycache__') })
  const runs = addons.map(() => [])
  for (let round = 0; round < rounds; round++) {
    for (const [i, addon] of addons.entries()) {
      const { Engram } = require(addon)
      const dir = mkdtempSync(join(work, 'db-'))
      const memory = await Engram.open({ path: join(dir, 'm.db'), projectRoot: root })
      const cpu = process.cpuUsage()
      const start = process.hrtime.bigint()
      const summary = await memory.index()
      const wall = Number(process.hrtime.bigint() - start) / 1e9
      const used = process.cpuUsage(cpu)
      await memory.close()
      rmSync(dir, { recursive: true, force: true })
      const run = { wall, graphMs: summary.graph.durationMs, cpu: (used.user + used.system) / 1e6 / wall }
      runs[i].push(run)
      console.log(
        `${addon}: ${wall.toFixed(2)} s, ${Math.round(summary.lines / wall)} lines/s, graph sync ` +
          `${run.graphMs.toFixed(0)} ms, CPU ${(run.cpu * 100).toFixed(0)}%, ${summary.filesIndexed} files`,
      )
    }
  }
  for (const [i, addon] of addons.entries()) {
    const pairwise = runs[i].map((r, round) => r.wall / runs[0][round].wall)
    console.log(
      `${addon}: median ${median(runs[i].map((r) => r.wall)).toFixed(2)} s, graph sync ` +
        `${median(runs[i].map((r) => r.graphMs)).toFixed(0)} ms; wall / first build, pairwise median ` +
        `${median(pairwise).toFixed(3)}`,
    )
  }
} finally {
  rmSync(work, { recursive: true, force: true })
}
