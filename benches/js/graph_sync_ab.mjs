// A whole-project graph sync by two or more builds of the addon, rounds alternating, each run in
// a process of its own: the first build indexes ROOT once; the `sqlite3` shell then clears the
// graph of that file and records a pending run, so that every later `index()` on a copy (no file
// changed) re-resolves every reference and syncs the whole graph from nothing. Prints the sync's
// duration per run, then per build the median and the pairwise median ratio against the first.
// What the graph-sync rows of docs/PERFORMANCE.md's "Peak RSS of an index run" come from.
//   ROOT=<tree> N=4 node benches/js/graph_sync_ab.mjs /tmp/a/index.js /tmp/b/index.js
// (needs the sqlite3 shell; an addon directory as in cold_ab.mjs)
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { pythonStdlib } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** Opens `db` over `root` with `addon`, runs `index()` and prints the graph sync's figures. */
async function runOnce(addon, db, root) {
  const { Engram } = require(addon)
  const memory = await Engram.open({ path: db, projectRoot: root })
  const { graph } = await memory.index()
  await memory.close()
  process.stdout.write(JSON.stringify(graph))
}

if (process.argv[2] === '--run') {
  await runOnce(process.argv[3], process.argv[4], process.argv[5])
} else {
  const addons = process.argv.slice(2)
  if (addons.length === 0) throw new Error('usage: graph_sync_ab.mjs <addon index.js>...')
  const root = process.env.ROOT || pythonStdlib()
  if (!root) throw new Error('no CPython standard library under /usr/lib: set ROOT')
  const rounds = Number(process.env.N || 4)
  const work = mkdtempSync(join(tmpdir(), 'engram-graph-sync-ab-'))
  const run = (addon, db) =>
    JSON.parse(
      execFileSync(process.execPath, [import.meta.filename, '--run', addon, db, root], { encoding: 'utf8' }),
    )
  try {
    const base = join(work, 'base.db')
    run(addons[0], base)
    execFileSync('sqlite3', [
      base,
      `DELETE FROM graph_closure; DELETE FROM graph_edges; DELETE FROM graph_nodes;
       INSERT INTO code_index_pending (project_id, run_id, since)
         SELECT DISTINCT project_id, 'bench', 0 FROM code_files;`,
    ])
    const times = addons.map(() => [])
    for (let round = 0; round < rounds; round++) {
      for (const [i, addon] of addons.entries()) {
        const db = join(work, 'run.db')
        copyFileSync(base, db)
        const graph = run(addon, db)
        for (const suffix of ['', '-wal', '-shm']) rmSync(db + suffix, { force: true })
        times[i].push(graph.durationMs)
        console.log(
          `${addon}: graph sync ${graph.durationMs.toFixed(0)} ms, ${graph.nodesWritten} nodes, ` +
            `${graph.edgesWritten} edges`,
        )
      }
    }
    for (const [i, addon] of addons.entries()) {
      const pairwise = times[i].map((t, round) => t / times[0][round])
      console.log(
        `${addon}: median ${median(times[i]).toFixed(0)} ms; / first build, pairwise median ` +
          `${median(pairwise).toFixed(3)}`,
      )
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}
