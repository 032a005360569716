// A cold `index()` of one tree by two or more builds of the addon, rounds alternating, each run
// in a process of its own (two builds linking mimalloc cannot share one: static TLS): wall
// time, lines/s, the graph sync's share, CPU use and peak RSS per run, then per build the
// medians and the pairwise median ratio against the first. What the A/B rows of
// docs/PERFORMANCE.md's "Where cold indexing goes" come from.
//   ADDONS=/tmp/base/index.js,/tmp/new/index.js node benches/js/cold_ab.mjs
//   ROOT=<tree> N=12 ADDONS=... node benches/js/cold_ab.mjs   # default: the CPython stdlib
// (An addon directory's index.js is `module.exports = require('./engram.node')`, the .node a
// copy of target/<triple>/release/libengram.so.)
import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { pythonStdlib } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** One cold index of `root` by `addon` in this process; prints its figures as JSON. */
async function runOnce(addon, root, work) {
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
  const run = {
    wall,
    lines: summary.lines,
    files: summary.filesIndexed,
    graphMs: summary.graph.durationMs,
    cpu: (used.user + used.system) / 1e6 / wall,
    peakMb: process.resourceUsage().maxRSS / 1024,
  }
  process.stdout.write(JSON.stringify(run))
}

if (process.argv[2] === '--run') {
  await runOnce(process.argv[3], process.argv[4], process.argv[5])
} else {
  const addons = (process.env.ADDONS || join(import.meta.dirname, '../../index.js')).split(',')
  const rounds = Number(process.env.N || 5)
  const source = process.env.ROOT || pythonStdlib()
  if (!source) throw new Error('no CPython standard library under /usr/lib: set ROOT')
  const work = mkdtempSync(join(tmpdir(), 'engram-cold-ab-'))
  try {
    // One copy of the tree without bytecode caches, read by every run.
    const root = join(work, 'tree')
    cpSync(source, root, { recursive: true, filter: (p) => !p.includes('__pycache__') })
    const runs = addons.map(() => [])
    for (let round = 0; round < rounds; round++) {
      for (const [i, addon] of addons.entries()) {
        const out = execFileSync(process.execPath, [import.meta.filename, '--run', addon, root, work], {
          encoding: 'utf8',
          maxBuffer: 1 << 20,
        })
        const run = JSON.parse(out)
        runs[i].push(run)
        console.log(
          `${addon}: ${run.wall.toFixed(2)} s, ${Math.round(run.lines / run.wall)} lines/s, graph sync ` +
            `${run.graphMs.toFixed(0)} ms, CPU ${(run.cpu * 100).toFixed(0)}%, peak RSS ` +
            `${run.peakMb.toFixed(0)} MB, ${run.files} files`,
        )
      }
    }
    for (const [i, addon] of addons.entries()) {
      const pairwise = runs[i].map((r, round) => r.wall / runs[0][round].wall)
      console.log(
        `${addon}: median ${median(runs[i].map((r) => r.wall)).toFixed(2)} s, graph sync ` +
          `${median(runs[i].map((r) => r.graphMs)).toFixed(0)} ms, peak RSS ` +
          `${median(runs[i].map((r) => r.peakMb)).toFixed(0)} MB; wall / first build, pairwise median ` +
          `${median(pairwise).toFixed(3)}`,
      )
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}
