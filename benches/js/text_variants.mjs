// Which text of a chunk to embed (issue 36, item 3): engram's dense path over its own chunks
// and definition parts, re-run in JS on the retrieval evaluation's databases with the text of
// every vector composed another way, on the same doc and name-blind queries:
//
// - `prefix + body`: what engram embeds (`embedding_text`: the contextual prefix without its
//   line numbers, a blank line, the code), read from the database's stored vectors;
// - `body`: the code alone;
// - `prefix`: the prefix alone (path, kind, names: no code);
// - `prefix + signature`: the prefix and the definition's first line of code (its signature).
//
// Each unit (a chunk, or a definition part of one) gets one vector; a query ranks chunks by
// their best unit, as engram's dense path does. The dev trees have their docs stripped (the
// doc sentences are the queries), so a doc variant cannot be measured on them.
// New texts are embedded once with engram's model and cached next to each eval database
// (`text-variants.db`, keyed by sha256 of text and model). Run `npm run eval` first.
//   node benches/js/text_variants.mjs [target/retrieval-eval]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { hrtime } from 'node:process'

import { createClient } from '@libsql/client'

import { embedAll, unit } from './seed_stack.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const work = resolve(process.argv[2] ?? join(import.meta.dirname, '..', '..', 'target', 'retrieval-eval'))
const sets = JSON.parse(readFileSync(join(work, 'sets.json'), 'utf8'))

/** The prefix engram embeds: the stored context without its `Lines:` field. */
const prefixOf = (context) =>
  context
    .split(' | ')
    .filter((part) => !part.startsWith('Lines: '))
    .join(' | ')

/** The first line of code that is not blank, a comment or an attribute. */
function signature(body) {
  for (const line of body.split('\n')) {
    const t = line.trim()
    if (!t || t.startsWith('//') || t.startsWith('#') || t.startsWith('/*') || t.startsWith('*') || t.startsWith('@')) continue
    return t
  }
  return ''
}

const VARIANTS = {
  'prefix + body': null, // stored by engram
  body: (u) => u.body,
  prefix: (u) => u.prefix,
  'prefix + signature': (u) => `${u.prefix}\n\n${signature(u.body)}`,
}

/** Every unit engram's dense index holds for the corpus: chunks and their parts, with stored vectors. */
async function units(path, model) {
  const db = createClient({ url: `file:${path}` })
  const chunks = await db.execute({
    sql: `SELECT c.id, f.path, c.start_line, c.end_line, c.context, c.content, v.vector
      FROM code_chunks c JOIN code_files f ON f.id = c.file_id
      LEFT JOIN code_vectors v ON v.embedder = ? AND v.text_hash = c.embed_hash ORDER BY c.id`,
    args: [model],
  })
  const parts = await db.execute({
    sql: `SELECT p.chunk_id, p.context, p.start_off, p.end_off, v.vector FROM code_chunk_parts p
      LEFT JOIN code_vectors v ON v.embedder = ? AND v.text_hash = p.embed_hash ORDER BY p.chunk_id, p.ordinal`,
    args: [model],
  })
  db.close()
  const stored = (blob) => (blob ? unit(new Float32Array(new Uint8Array(blob).slice().buffer)) : null)
  const byId = new Map()
  const out = []
  for (const r of chunks.rows) {
    const chunk = { path: r.path, startLine: Number(r.start_line), endLine: Number(r.end_line) }
    byId.set(Number(r.id), { chunk, content: r.content })
    out.push({ chunk, prefix: prefixOf(r.context), body: r.content, vector: stored(r.vector) })
  }
  for (const r of parts.rows) {
    const owner = byId.get(Number(r.chunk_id))
    if (!owner) continue
    // Offsets are bytes of the chunk's UTF-8 content.
    const bytes = Buffer.from(owner.content, 'utf8')
    const body = bytes.subarray(Number(r.start_off), Number(r.end_off)).toString('utf8')
    out.push({ chunk: owner.chunk, prefix: prefixOf(r.context), body, vector: stored(r.vector) })
  }
  return out
}

/** Chunks ranked by their best unit's cosine with `query` (top `limit` chunks). */
function rankChunks(list, vectors, query, limit) {
  const best = new Map()
  for (let i = 0; i < vectors.length; i++) {
    const v = vectors[i]
    if (!v) continue
    let dot = 0
    for (let d = 0; d < v.length; d++) dot += v[d] * query[d]
    const chunk = list[i].chunk
    if (!(best.get(chunk) >= dot)) best.set(chunk, dot)
  }
  return [...best.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([chunk]) => chunk)
}

const holds = (chunk, query) =>
  chunk.path === query.path && chunk.startLine <= query.line && query.line <= chunk.endLine

const scratch = mkdtempSync(join(tmpdir(), 'engram-text-variants-'))
const engine = await Engram.open({ path: join(scratch, 'embed.db') })
await engine.embed(['load the model'])
const model = engine.embeddingStatus().model
const rows = []
try {
  for (const language of sets.languages) {
    const list = await units(language.db, model)
    const cache = createClient({ url: `file:${join(dirname(language.db), 'text-variants.db')}` })
    const queries = language.sets.map((set) => set.queries)
    const queryVectors = []
    for (const q of queries) queryVectors.push((await engine.embed(q.map((x) => x.text), { kind: 'query' })).map(unit))
    for (const [variant, compose] of Object.entries(VARIANTS)) {
      let vectors = list.map((u) => u.vector)
      if (compose) {
        const started = hrtime.bigint()
        vectors = (await embedAll(cache, list.map(compose), (t) => engine.embed(t), model)).map(unit)
        const secs = (Number(hrtime.bigint() - started) / 1e9).toFixed(1)
        console.log(`variants: ${language.language}: ${variant}: ${list.length} texts ready in ${secs} s`)
      }
      for (const [s, set] of language.sets.entries()) {
        let at1 = 0
        let at10 = 0
        let reciprocal = 0
        for (const [n, query] of set.queries.entries()) {
          const ranked = rankChunks(list, vectors, queryVectors[s][n], 10)
          const first = ranked.findIndex((c) => holds(c, query))
          if (first >= 0) {
            at1 += first === 0 ? 1 : 0
            at10 += 1
            reciprocal += 1 / (first + 1)
          }
        }
        const f = (x) => (x / set.queries.length).toFixed(3)
        rows.push(`| ${set.name} | ${variant} | ${set.queries.length} | ${f(at1)} | ${f(at10)} | ${f(reciprocal)} |`)
      }
    }
    cache.close()
  }
} finally {
  await engine.close()
  rmSync(scratch, { recursive: true, force: true })
}
console.log(`\nDense only over engram's chunks and parts, ${model}; text embedded per unit:`)
console.log('\n| set | text | queries | Recall@1 | Recall@10 | MRR@10 |')
console.log('| --- | --- | --- | --- | --- | --- |')
console.log(rows.join('\n'))
