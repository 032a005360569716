// The seed's own stack, built as its spec describes it, for baselines measured in the same run
// as engram (`seed_eval.mjs`): web-tree-sitter with the `tree-sitter-wasms` grammars, chunks cut
// at function and class boundaries (a query's every match, nested ones too; a file without any
// falls back to 100-line chunks), the contextual text `File: … | function: name | Lines: a-b`
// before each chunk, a `@libsql/client` database with an FTS5 table (`porter unicode61`) over
// that text, and the seed's retrieval: FTS5 BM25 top 20 and dense top 30 fused by weighted RRF
// (k = 60; identifier queries FTS5 0.5 / dense 0.2, others dense 0.5 / FTS5 0.25; there is no
// graph path here, since these queries come with no recent files).
//
// The spec leaves the chunk queries and how user text reaches MATCH unwritten; here every
// definition kind of the language is captured and the query is an OR of its quoted words (an
// AND of a whole sentence almost never matches). Embeddings come from engram's own model
// (`Engram#embed`), so the dense path compares chunking and fusion, not models.

import { createHash } from 'node:crypto'
import { readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, relative, sep } from 'node:path'

import { createClient } from '@libsql/client'
import { Language, Parser, Query } from 'web-tree-sitter'

const require = createRequire(import.meta.url)
const GRAMMARS = join(require.resolve('tree-sitter-wasms/package.json'), '..', 'out')

/** Per language: file extensions, the grammar, and the definition nodes that start a chunk. */
const LANGUAGES = {
  rust: {
    extensions: ['.rs'],
    grammar: 'rust',
    query: `[(function_item) (function_signature_item) (struct_item) (enum_item) (trait_item)
             (union_item) (type_item) (macro_definition)] @chunk`,
  },
  python: {
    extensions: ['.py'],
    grammar: 'python',
    query: `[(function_definition) (class_definition)] @chunk`,
  },
  go: {
    extensions: ['.go'],
    grammar: 'go',
    query: `[(function_declaration) (method_declaration) (type_declaration)] @chunk`,
  },
  typescript: {
    extensions: ['.ts', '.mts', '.cts'],
    grammar: 'typescript',
    query: `[(function_declaration) (function_signature) (method_definition) (method_signature)
             (abstract_method_signature) (class_declaration) (abstract_class_declaration)
             (interface_declaration) (type_alias_declaration) (enum_declaration)
             (lexical_declaration (variable_declarator value: [(arrow_function) (function_expression)]))
            ] @chunk`,
  },
}

const CLASS_KINDS = /struct|enum|trait|union|class|interface|type_/
const FALLBACK_LINES = 100

/** The seed's `buildContextualText`: the prefix line, a blank line, the chunk. */
export function contextualText(chunk) {
  const prefix = [
    `File: ${chunk.filePath}`,
    chunk.chunkType !== 'module' ? `${chunk.chunkType}: ${chunk.name ?? 'unknown'}` : null,
    `Lines: ${chunk.startLine}-${chunk.endLine}`,
  ]
    .filter(Boolean)
    .join(' | ')
  return `${prefix}\n\n${chunk.content}`
}

/** The seed's `buildMemoryContextualText` (`relatedModules` are not in the eval's memories). */
export function memoryContextualText(memory) {
  const parts = [memory.files.length > 0 ? `Files: ${memory.files.join(', ')}` : null, `Type: ${memory.type}`]
    .filter(Boolean)
    .join(' | ')
  return `${parts}\n\n${memory.content}`
}

/** The seed's `detectQueryType`, without recent tool calls. */
export function queryType(query) {
  return /[a-z][A-Z]|_[a-z]/.test(query) || query.includes('/') ? 'identifier' : 'semantic'
}

/** An FTS5 MATCH expression from user text: its words, quoted, joined by OR. */
export function matchExpression(text) {
  const words = text.match(/[\p{L}\p{N}_]+/gu) ?? []
  return [...new Set(words)].map((w) => `"${w}"`).join(' OR ')
}

/** Files under `root` whose extension is one of `extensions`, as sorted relative paths. */
export function sourceFiles(root, extensions) {
  const out = []
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (extensions.some((e) => entry.name.endsWith(e))) out.push(path)
    }
  }
  walk(root)
  return out.sort().map((p) => relative(root, p).split(sep).join('/'))
}

/** The seed's `chunkFileByAST` for one language; `init()` loads the parser and grammar. */
export class SeedChunker {
  constructor(language) {
    this.spec = LANGUAGES[language]
    if (!this.spec) throw new Error(`seed stack: no grammar for ${language}`)
  }

  async init() {
    await Parser.init()
    const language = await Language.load(join(GRAMMARS, `tree-sitter-${this.spec.grammar}.wasm`))
    this.parser = new Parser()
    this.parser.setLanguage(language)
    this.query = new Query(language, this.spec.query)
    return this
  }

  /** The chunks of one file (`filePath` relative to the project root). */
  chunk(filePath, content) {
    const tree = this.parser.parse(content)
    const chunks = []
    for (const match of this.query.matches(tree.rootNode)) {
      const node = match.captures[0].node
      const named = node.type === 'lexical_declaration' ? node.namedChildren[0] : node
      const chunk = {
        content: node.text,
        filePath,
        chunkType: CLASS_KINDS.test(node.type) ? 'class' : 'function',
        startLine: node.startPosition.row + 1,
        endLine: node.endPosition.row + 1,
        name: named?.childForFieldName('name')?.text ?? firstTypeName(node),
      }
      chunks.push(chunk)
    }
    tree.delete()
    return chunks.length > 0 ? chunks : fallbackChunks(filePath, content)
  }

  /** Every chunk of the language's files under `root`. */
  chunkTree(root) {
    const chunks = []
    for (const path of sourceFiles(root, this.spec.extensions)) {
      chunks.push(...this.chunk(path, readFileSync(join(root, path), 'utf8')))
    }
    return chunks
  }
}

/** A Go `type_declaration` holds its name in a `type_spec`. */
function firstTypeName(node) {
  return node.namedChildren.find((c) => c.type === 'type_spec')?.childForFieldName('name')?.text
}

function fallbackChunks(filePath, content) {
  const lines = content.split('\n')
  const chunks = []
  for (let start = 0; start < lines.length; start += FALLBACK_LINES) {
    const end = Math.min(lines.length, start + FALLBACK_LINES)
    chunks.push({
      content: lines.slice(start, end).join('\n'),
      filePath,
      chunkType: 'module',
      startLine: start + 1,
      endLine: end,
    })
  }
  return chunks
}

/**
 * A keyword table over texts in a libSQL file: `tokenize` is the FTS5 tokenizer (the seed's
 * `porter unicode61`, or FTS5's default `unicode61` for plain BM25).
 */
export class KeywordTable {
  constructor(path, tokenize) {
    this.db = createClient({ url: `file:${path}` })
    this.tokenize = tokenize
  }

  /** Replaces the table's rows with the `text` of each of `rows`; row i gets rowid i + 1. */
  async fill(rows) {
    await this.db.batch(
      ['DROP TABLE IF EXISTS texts_fts', `CREATE VIRTUAL TABLE texts_fts USING fts5(text, tokenize = '${this.tokenize}')`],
      'write',
    )
    for (let i = 0; i < rows.length; i += 500) {
      await this.db.batch(
        rows.slice(i, i + 500).map((r, n) => ({
          sql: 'INSERT INTO texts_fts (rowid, text) VALUES (?, ?)',
          args: [i + n + 1, r.text],
        })),
        'write',
      )
    }
  }

  /** Rowids ranked by BM25 for user text, best first. */
  async search(text, limit) {
    const match = matchExpression(text)
    if (!match) return []
    const result = await this.db.execute({
      sql: 'SELECT rowid FROM texts_fts WHERE texts_fts MATCH ? ORDER BY bm25(texts_fts) LIMIT ?',
      args: [match, limit],
    })
    return result.rows.map((r) => Number(r.rowid))
  }

  close() {
    this.db.close()
  }
}

/**
 * Vectors of texts by `embed` (a function of a string array to Float32Arrays), cached in the
 * same libSQL file under sha256 of `text:model` (the seed's key adds the width).
 */
export async function embedAll(db, texts, embed, model, onProgress = () => {}) {
  await db.execute(
    'CREATE TABLE IF NOT EXISTS embedding_cache (key TEXT PRIMARY KEY, embedding BLOB NOT NULL)',
  )
  const keys = texts.map((t) => createHash('sha256').update(`${t}:${model}`).digest('hex'))
  const vectors = new Array(texts.length)
  const cached = new Map()
  for (let i = 0; i < keys.length; i += 500) {
    const batch = keys.slice(i, i + 500)
    const rows = await db.execute({
      sql: `SELECT key, embedding FROM embedding_cache WHERE key IN (${batch.map(() => '?').join(',')})`,
      args: batch,
    })
    for (const r of rows.rows) {
      const bytes = new Uint8Array(r.embedding)
      cached.set(r.key, new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4))
    }
  }
  const missing = []
  keys.forEach((key, i) => (cached.has(key) ? (vectors[i] = cached.get(key)) : missing.push(i)))
  for (let i = 0; i < missing.length; i += 256) {
    const batch = missing.slice(i, i + 256)
    const embedded = await embed(batch.map((j) => texts[j]))
    await db.batch(
      batch.map((j, n) => ({
        sql: 'INSERT OR REPLACE INTO embedding_cache (key, embedding) VALUES (?, ?)',
        args: [keys[j], new Uint8Array(embedded[n].buffer, embedded[n].byteOffset, embedded[n].byteLength)],
      })),
      'write',
    )
    batch.forEach((j, n) => (vectors[j] = embedded[n]))
    onProgress(Math.min(i + 256, missing.length), missing.length)
  }
  return vectors
}

/** `v` scaled to unit length (cosine similarity becomes a dot product). */
export function unit(v) {
  let sum = 0
  for (let d = 0; d < v.length; d++) sum += v[d] * v[d]
  const norm = Math.sqrt(sum) || 1
  return Float32Array.from(v, (x) => x / norm)
}

/** Indices of the `limit` unit vectors nearest the unit vector `query`, best first. */
export function nearest(vectors, query, limit) {
  const scored = vectors.map((v, i) => {
    let dot = 0
    for (let d = 0; d < v.length; d++) dot += v[d] * query[d]
    return [dot, i]
  })
  scored.sort((a, b) => b[0] - a[0])
  return scored.slice(0, limit).map(([, i]) => i)
}

/** The seed's `weightedRRF` over lists of ids: fused ids, best first. */
export function weightedRrf(paths, k = 60) {
  const scores = new Map()
  for (const { results, weight } of paths) {
    results.forEach((id, rank) => scores.set(id, (scores.get(id) ?? 0) + weight / (k + rank + 1)))
  }
  return [...scores.entries()].sort((a, b) => b[1] - a[1]).map(([id]) => id)
}

/** The seed's path weights for a query (no graph path). */
export function seedWeights(query) {
  return queryType(query) === 'identifier' ? { fts: 0.5, dense: 0.2 } : { fts: 0.25, dense: 0.5 }
}
