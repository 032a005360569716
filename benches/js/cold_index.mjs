// A cold index through the API against the seed's own stack on the same files, in one run:
// engram's `index()` into a fresh database (parse on every core, chunk, extract, write rows,
// FTS5, references, the knowledge graph and its closure) against the seed's `chunkFileByAST`
// (`seed_stack.mjs`: web-tree-sitter with the `tree-sitter-wasms` grammar, one thread, chunks
// cut at definition boundaries, each with its contextual text). The peer writes nothing, so
// the ratio flatters it. Rounds alternate the two; medians and the pairwise ratio are printed.
//   node benches/js/cold_index.mjs                          # CPython stdlib, Python
//   ROOT=~/.cargo/registry/src/*/tokio-1.x LANGUAGE=rust node benches/js/cold_index.mjs
//   ENGRAM_BENCH_ADDON=/path/to/other.node node benches/js/cold_index.mjs  # another build
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { cpuUsage, hrtime } from 'node:process'

import { contextualText, SeedChunker, sourceFiles } from './seed_stack.mjs'
import { lineCount, pythonStdlib } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const { Engram } = process.env.ENGRAM_BENCH_ADDON
  ? require(process.env.ENGRAM_BENCH_ADDON)
  : require('../../index.js')

const source = process.env.ROOT || pythonStdlib()
if (!source) throw new Error('no CPython standard library under /usr/lib: set ROOT and LANGUAGE')
const language = process.env.LANGUAGE || 'python'
const rounds = Number(process.env.N || 5)

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** Seconds of wall and CPU (all threads of this process) that `work` takes. */
async function timed(work) {
  const cpu = cpuUsage()
  const start = hrtime.bigint()
  const result = await work()
  const wall = Number(hrtime.bigint() - start) / 1e9
  const used = cpuUsage(cpu)
  return { wall, cpu: (used.user + used.system) / 1e6, result }
}

const dir = mkdtempSync(join(tmpdir(), 'engram-cold-bench-'))
try {
  // Only the language's files, so both sides read the same tree.
  const chunker = await new SeedChunker(language).init()
  const tree = join(dir, 'tree')
  const files = sourceFiles(source, chunker.spec.extensions).filter((rel) => !rel.includes('__pycache__'))
  let lines = 0
  for (const rel of files) {
    mkdirSync(dirname(join(tree, rel)), { recursive: true })
    copyFileSync(join(source, rel), join(tree, rel))
    lines += lineCount(join(tree, rel))
  }
  console.error(`${files.length} ${language} files, ${lines} lines, ${cpus().length} cores; ${rounds} rounds`)

  const engram = []
  const seed = []
  for (let round = 0; round < rounds; round++) {
    const db = await Engram.open({ path: join(dir, `round${round}.db`), projectRoot: tree })
    const run = await timed(() => db.index())
    await db.close()
    rmSync(join(dir, `round${round}.db`), { force: true })
    engram.push({ ...run, files: run.result.filesIndexed, graphMs: run.result.graph.durationMs })

    const peer = await timed(async () => {
      let texts = 0
      for (const rel of files) {
        for (const chunk of chunker.chunk(rel, readFileSync(join(tree, rel), 'utf8'))) {
          texts += contextualText(chunk).length
        }
      }
      return texts
    })
    seed.push(peer)
    console.error(
      `round ${round + 1}: engram ${run.wall.toFixed(2)} s (graph ${(run.result.graph.durationMs / 1000).toFixed(2)} s), ` +
        `seed ${peer.wall.toFixed(2)} s`,
    )
  }
  const summary = (runs) => ({
    wall_s: median(runs.map((r) => r.wall)),
    cpu_s: median(runs.map((r) => r.cpu)),
    lines_per_s: Math.round(lines / median(runs.map((r) => r.wall))),
  })
  console.log(
    JSON.stringify(
      {
        root: source,
        language,
        files: files.length,
        lines,
        engram: { ...summary(engram), graph_s: median(engram.map((r) => r.graphMs / 1000)) },
        seed: summary(seed),
        // Per round, the seed's wall time over engram's: how many times faster engram is.
        speedup: median(engram.map((r, i) => seed[i].wall / r.wall)),
      },
      null,
      2,
    ),
  )
} finally {
  rmSync(dir, { recursive: true, force: true })
}
