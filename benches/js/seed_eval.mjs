// Baselines on the retrieval dev sets, run after `benches/retrieval_eval.rs` on the same
// queries (it writes them to target/retrieval-eval/sets.json), printing rows in its table's
// format:
//
// - plain FTS5 BM25: engram's own chunks (read from the eval's database) or the memories, their
//   text only, FTS5's default tokenizer and an OR of the query's words, so that what engram's
//   keyword path adds (identifier splitting, names and context, stemming, the name rule) shows;
// - the seed's stack (`seed_stack.mjs`): web-tree-sitter chunks with contextual text (memories
//   with their content, tags and files) in a `@libsql/client` FTS5 table, keyword only, dense
//   only (engram's model over the seed's texts) and the seed's weighted RRF of the two.
//
// Run by `npm run eval`; alone: node benches/js/seed_eval.mjs [target/retrieval-eval]
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { hrtime } from 'node:process'

import { createClient } from '@libsql/client'

import {
  contextualText,
  embedAll,
  KeywordTable,
  memoryContextualText,
  nearest,
  SeedChunker,
  seedWeights,
  unit,
  weightedRrf,
} from './seed_stack.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const work = resolve(process.argv[2] ?? join(import.meta.dirname, '..', '..', 'target', 'retrieval-eval'))
const sets = JSON.parse(readFileSync(join(work, 'sets.json'), 'utf8'))

/** Recall@1, Recall@10, MRR@10 of the first right item and all@10, as the eval's cells. */
class Score {
  n = 0
  at1 = 0
  at10 = 0
  all10 = 0
  reciprocal = 0
  /** `ranked`: item indices, best first; `right(i)`; `needed`: right items the query has. */
  add(ranked, right, needed) {
    this.n += 1
    const top = ranked.slice(0, 10)
    const first = top.findIndex(right)
    if (first >= 0) {
      this.at1 += first === 0 ? 1 : 0
      this.at10 += 1
      this.reciprocal += 1 / (first + 1)
    }
    this.all10 += top.filter(right).length >= needed ? 1 : 0
  }
  cells() {
    const f = (x) => (x / Math.max(this.n, 1)).toFixed(3)
    return `${f(this.at1)} | ${f(this.at10)} | ${f(this.reciprocal)} | ${f(this.all10)}`
  }
}

const scratch = mkdtempSync(join(tmpdir(), 'engram-seed-eval-'))
const engine = await Engram.open({ path: join(scratch, 'embed.db') })
const dense = ['ready', 'available'].includes(engine.embeddingStatus().state)
if (dense) await engine.embed(['load the model'])
const model = engine.embeddingStatus().model
const table = []

/**
 * Runs one corpus's sets through the baselines. `plainRows` and `seedRows` are keyword rows
 * (`{ text }`, row i is item i of its list); `seedTexts` what the seed embeds; `right(query)`
 * tells a query's right items by (list, index).
 */
async function evaluate({ name, dir, plainRows, seedRows, seedTexts, setList, right, needed }) {
  mkdirSync(dir, { recursive: true })
  const plain = new KeywordTable(join(dir, 'plain.db'), 'unicode61')
  await plain.fill(plainRows)
  const seed = new KeywordTable(join(dir, 'seed.db'), 'porter unicode61')
  await seed.fill(seedRows)
  let vectors = []
  if (dense) {
    const started = hrtime.bigint()
    vectors = (await embedAll(seed.db, seedTexts, (t) => engine.embed(t), model)).map(unit)
    const secs = Number(hrtime.bigint() - started) / 1e9
    console.log(`seed: ${name}: ${seedTexts.length} vectors ready in ${secs.toFixed(1)} s`)
  }
  for (const set of setList) {
    const scores = { plain: new Score(), fts: new Score(), dense: new Score(), fused: new Score() }
    const queryVectors = dense ? (await engine.embed(set.queries.map((q) => q.text), { kind: 'query' })).map(unit) : []
    for (const [n, query] of set.queries.entries()) {
      const ids = async (table, limit) => (await table.search(query.text, limit)).map((id) => id - 1)
      const isRight = right(query)
      scores.plain.add(await ids(plain, 10), (i) => isRight('plain', i), needed(query))
      const ftsIds = await ids(seed, 20)
      scores.fts.add(ftsIds, (i) => isRight('seed', i), needed(query))
      if (!dense) continue
      const denseIds = nearest(vectors, queryVectors[n], 30)
      scores.dense.add(denseIds, (i) => isRight('seed', i), needed(query))
      const weights = seedWeights(query.text)
      const fused = weightedRrf([
        { results: ftsIds, weight: weights.fts },
        { results: denseIds, weight: weights.dense },
      ])
      scores.fused.add(fused, (i) => isRight('seed', i), needed(query))
    }
    const row = (label, score) => table.push(`| ${set.name} | ${label} | ${score.n} | ${score.cells()} |`)
    row(`plain FTS5 BM25 over engram's ${name === 'memory' ? 'memories' : 'chunks'}`, scores.plain)
    row('seed stack: FTS5 only', scores.fts)
    if (dense) {
      row('seed stack: dense only', scores.dense)
      row('seed stack: weighted RRF', scores.fused)
    }
  }
  plain.close()
  seed.close()
}

/** Engram's chunks in the eval's database, in id order. */
async function engramChunks(path) {
  const db = createClient({ url: `file:${path}` })
  const rows = await db.execute(`SELECT f.path, c.start_line, c.end_line, c.content
    FROM code_chunks c JOIN code_files f ON f.id = c.file_id ORDER BY c.id`)
  db.close()
  return rows.rows.map((r) => ({
    text: r.content,
    path: r.path,
    startLine: Number(r.start_line),
    endLine: Number(r.end_line),
  }))
}

const holds = (chunk, query) =>
  chunk.path === query.path && chunk.startLine <= query.line && query.line <= chunk.endLine

try {
  for (const language of sets.languages) {
    const engramRows = await engramChunks(language.db)
    const started = hrtime.bigint()
    const chunker = await new SeedChunker(language.language).init()
    const chunks = chunker.chunkTree(language.repo)
    const secs = Number(hrtime.bigint() - started) / 1e9
    console.log(
      `seed: ${language.language}: ${chunks.length} chunks from web-tree-sitter in ${secs.toFixed(1)} s (engram: ${engramRows.length})`,
    )
    const seedTexts = chunks.map(contextualText)
    const seedRows = chunks.map((c, i) => ({ text: seedTexts[i], path: c.filePath, startLine: c.startLine, endLine: c.endLine }))
    await evaluate({
      name: language.language,
      dir: dirname(language.db),
      plainRows: engramRows,
      seedRows,
      seedTexts,
      setList: language.sets,
      right: (query) => (list, i) => holds((list === 'plain' ? engramRows : seedRows)[i] ?? {}, query),
      needed: () => 1,
    })
  }
  if (sets.memory) {
    const memories = [...new Map(sets.memory.memories.map((m) => [m.id, m])).values()]
    const seedTexts = memories.map(memoryContextualText)
    const position = new Map(memories.map((m, i) => [m.id, i]))
    await evaluate({
      name: 'memory',
      dir: join(work, 'memory-baselines'),
      plainRows: memories.map((m) => ({ text: m.content })),
      seedRows: memories.map((m) => ({ text: [m.content, m.tags.join(' '), m.files.join(' ')].join('\n') })),
      seedTexts,
      setList: sets.memory.sets,
      right: (query) => {
        const wanted = new Set(query.evidence.map((id) => position.get(id)))
        return (_, i) => wanted.has(i)
      },
      needed: (query) => query.evidence.length,
    })
  }
} finally {
  await engine.close()
  rmSync(scratch, { recursive: true, force: true })
}
if (!dense) console.log('seed: the model is not installed; the dense rows are skipped')
console.log('\n| set | baseline | queries | Recall@1 | Recall@10 | MRR@10 | all@10 |')
console.log('| --- | --- | --- | --- | --- | --- | --- |')
console.log(table.join('\n'))
