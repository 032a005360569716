// A closure rebuild by two or more builds of the addon, rounds alternating: a tree is indexed
// once (closure depth 4), then each run reopens a fresh copy of that database with
// `closureDepth: 5` and times the open, and the open plus a `graphStats()` (which reads the
// closure from the tables, so it waits for the rebuild: since 2026-12-02 the open leaves the
// closure pending and the rebuild runs after it). Each run is a process of its own (two builds
// linking mimalloc cannot share one). What the closure rebuild row of docs/PERFORMANCE.md's
// "Knowledge graph and impact" comes from.
//   ADDONS=/tmp/base/index.js,/tmp/new/index.js node benches/js/closure_rebuild.mjs
//   ROOT=<tree> N=8 ADDONS=... node benches/js/closure_rebuild.mjs   # default: the CPython stdlib
// (An addon directory's index.js is `module.exports = require('./engram.node')`, the .node a
// copy of target/<triple>/release/libengram.so.)
import { execFileSync } from 'node:child_process'
import { copyFileSync, cpSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { pythonStdlib } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

const [mode, addon, root, db] = process.argv.slice(2)
if (mode === '--index') {
  const { Engram } = require(addon)
  const memory = await Engram.open({ path: db, projectRoot: root, closureDepth: 4 })
  await memory.index()
  process.stdout.write(JSON.stringify(await memory.graphStats()))
  await memory.close()
} else if (mode === '--reopen') {
  const { Engram } = require(addon)
  const start = process.hrtime.bigint()
  const memory = await Engram.open({ path: db, projectRoot: root, closureDepth: 5 })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  const stats = await memory.graphStats()
  const readyMs = Number(process.hrtime.bigint() - start) / 1e6
  await memory.close()
  process.stdout.write(
    JSON.stringify({ ms, readyMs, rows: stats.closureRows, depth: stats.closureDepth }),
  )
} else {
  const addons = (process.env.ADDONS || join(import.meta.dirname, '../../index.js')).split(',')
  const rounds = Number(process.env.N || 8)
  const source = process.env.ROOT || pythonStdlib()
  if (!source) throw new Error('no CPython standard library under /usr/lib: set ROOT')
  const work = mkdtempSync(join(tmpdir(), 'engram-closure-'))
  const run = (...args) =>
    JSON.parse(execFileSync(process.execPath, [import.meta.filename, ...args], { encoding: 'utf8' }))
  try {
    const tree = join(work, 'tree')
    cpSync(source, tree, { recursive: true, filter: (p) => !p.includes('__pycache__') })
    const base = join(work, 'base.db')
    const graph = run('--index', addons[0], tree, base)
    const sum = (xs) => xs.reduce((a, b) => a + b, 0)
    console.log(
      `indexed: ${sum(graph.nodesByLayer)} nodes, ${sum(graph.edgesByLayer)} edges, ` +
        `${graph.closureRows} closure rows at depth ${graph.closureDepth}`,
    )
    const times = addons.map(() => [])
    const ready = addons.map(() => [])
    for (let round = 0; round < rounds; round++) {
      for (const [i, addon] of addons.entries()) {
        const copy = join(work, 'copy.db')
        rmSync(copy, { force: true })
        copyFileSync(base, copy)
        const { ms, readyMs, rows, depth } = run('--reopen', addon, tree, copy)
        times[i].push(ms)
        ready[i].push(readyMs)
        console.log(
          `${addon}: open with a rebuild to depth ${depth} (${rows} rows) ${ms.toFixed(0)} ms, ` +
            `+ graphStats ${readyMs.toFixed(0)} ms`,
        )
      }
    }
    for (const [i, addon] of addons.entries()) {
      const pairwise = times[i].map((t, round) => t / times[0][round])
      console.log(
        `${addon}: open median ${median(times[i]).toFixed(0)} ms, + graphStats ` +
          `${median(ready[i]).toFixed(0)} ms; open / first build, pairwise median ${median(pairwise).toFixed(3)}`,
      )
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}
