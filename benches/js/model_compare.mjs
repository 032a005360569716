// The built-in model's half of benches/eval/model_compare.py: reads a sample file (chunks and
// queries) and writes their vectors, chunks then queries, as little-endian f32 next to it.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')

const path = process.argv[2]
const sample = JSON.parse(readFileSync(path, 'utf8'))
const dir = mkdtempSync(join(tmpdir(), 'engram-model-compare-'))
try {
  const db = await Engram.open({ path: join(dir, 'compare.db') })
  const embed = async (texts, kind) => {
    const out = []
    for (let i = 0; i < texts.length; i += 512) out.push(...(await db.embed(texts.slice(i, i + 512), { kind })))
    return out
  }
  const vectors = [
    ...(await embed(sample.chunks.map((c) => c.text), 'document')),
    ...(await embed(sample.queries.map((q) => q.text), 'query')),
  ]
  const flat = new Float32Array(vectors.length * vectors[0].length)
  vectors.forEach((v, i) => flat.set(v, i * v.length))
  writeFileSync(`${path}.minilm`, Buffer.from(flat.buffer))
  await db.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}
