// Dense search across the boundary with the real all-MiniLM-L6-v2 model: embedPending() over an
// indexed project (progress, AbortSignal, resumable), denseSearch() over chunks and memories
// with filters, a worker thread seeing the same vectors, and coded errors.
// Without the model the tests skip, except under CI (see embed.test.mjs).
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'

import { addon, Engram, rejectsWithCode, tempDir } from './helpers.mjs'

function modelDir() {
  const candidates = [process.env.ENGRAM_MODEL_DIR, addon.defaultModelDir()].filter(Boolean)
  const found = candidates.find((d) => existsSync(join(d, 'model.safetensors')))
  if (!found && process.env.CI) throw new Error(`CI must provide the model (looked in ${candidates})`)
  return found
}

const FILES = {
  'src/auth/password.ts': `import { createHash, timingSafeEqual } from 'crypto'

export function verifyPassword(plain: string, salt: string, stored: string): boolean {
  const candidate = createHash('sha256').update(salt + plain).digest()
  return timingSafeEqual(candidate, Buffer.from(stored, 'hex'))
}
`,
  'src/jobs/queue.py': `import heapq


class DelayedQueue:
    """Runs each job once its scheduled time has come."""

    def __init__(self):
        self._heap = []

    def schedule(self, run_at, job):
        heapq.heappush(self._heap, (run_at, job))

    def due(self, now):
        while self._heap and self._heap[0][0] <= now:
            yield heapq.heappop(self._heap)[1]
`,
  'src/geo/distance.go': `package geo

import "math"

// Haversine returns the great-circle distance in kilometres between two points on Earth.
func Haversine(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6371.0
	dLat := (lat2 - lat1) * math.Pi / 180
	dLon := (lon2 - lon1) * math.Pi / 180
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*math.Pi/180)*math.Cos(lat2*math.Pi/180)*math.Sin(dLon/2)*math.Sin(dLon/2)
	return 2 * r * math.Asin(math.Sqrt(a))
}
`,
}

async function project(t, dir) {
  const root = join(tempDir(t), 'repo')
  for (const [rel, text] of Object.entries(FILES)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true })
    writeFileSync(join(root, rel), text)
  }
  const path = join(root, '..', 'e.db')
  const db = await Engram.open({ path, projectRoot: root, embeddings: { modelDir: dir } })
  t.after(() => db.close())
  await db.index()
  return { db, path, root }
}

test('embedPending() embeds an indexed project and denseSearch() finds code and memories by meaning', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const { db } = await project(t, dir)
  const memory = await db.remember({
    type: 'gotcha',
    content: 'The staging database refuses connections from outside the VPN',
  })
  const steps = []
  const report = await db.embedPending({ onProgress: (p) => steps.push(p) })
  assert.equal(report.model, 'local:all-minilm-l6-v2@128:384')
  assert.ok(report.chunks >= 3, JSON.stringify(report))
  assert.equal(report.memories, 1)
  // Grouped chunks give each definition they hold a vector too (parts).
  assert.ok(report.textsEmbedded >= 4 && report.textsEmbedded <= report.chunks + report.parts + 1)
  // Progress callbacks are delivered asynchronously; let them land; chunks count their parts.
  await new Promise((resolve) => setImmediate(resolve))
  const items = report.chunks + report.parts
  assert.ok(steps.some((p) => p.kind === 'chunk' && p.done === items && p.total === items))

  const [top] = await db.denseSearch('distance between two coordinates on the globe', { limit: 1 })
  assert.equal(top.kind, 'chunk')
  assert.equal(top.path, 'src/geo/distance.go')
  assert.ok(top.startLine >= 1 && top.endLine >= top.startLine)
  assert.ok(top.score > 0.3 && top.score <= 1, String(top.score))

  const jobs = await db.denseSearch('run tasks when their time comes', { kinds: ['chunk'], limit: 1 })
  assert.equal(jobs[0].path, 'src/jobs/queue.py')

  const [mem] = await db.denseSearch('cannot reach the staging db', { kinds: ['memory'] })
  assert.equal(mem.memoryId, memory.memory.id)
  assert.equal(mem.memoryType, 'gotcha')
  assert.equal(mem.chunkId ?? null, null)

  const scoped = await db.denseSearch('check a password', { kinds: ['chunk'], paths: ['src/geo'] })
  assert.ok(scoped.length > 0 && scoped.every((h) => h.path === 'src/geo/distance.go'))
  assert.deepEqual(await db.denseSearch('x', { memoryTypes: ['decision'], kinds: ['memory'] }), [])

  const again = await db.embedPending()
  assert.deepEqual([again.chunks, again.parts, again.memories, again.textsEmbedded], [0, 0, 0, 0])
})

test('definitionVectors: false embeds chunks only; switched back on, the definitions follow', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const { db, path, root } = await project(t, dir)
  const chunks = await countChunks(db)
  await db.close()
  const open = (embeddings) => Engram.open({ path, projectRoot: root, embeddings: { modelDir: dir, ...embeddings } })
  await rejectsWithCode(assert, open({ definitionVectors: 'no' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(
    assert,
    open({ provider: 'ollama', model: 'm', fallback: [{ provider: 'local', definitionVectors: false }] }),
    'ENGRAM_INVALID_ARG',
  )

  const off = await open({ definitionVectors: false })
  const first = await off.embedPending()
  assert.deepEqual([first.chunks, first.parts, first.textsEmbedded], [chunks, 0, chunks])
  assert.equal((await off.embedPending()).chunks, 0)
  const [jobs] = await off.denseSearch('run tasks when their time comes', { kinds: ['chunk'], limit: 1 })
  assert.equal(jobs.path, 'src/jobs/queue.py')
  await off.close()

  // The class's methods get their vectors at the next run, without a re-index.
  const on = await open({})
  t.after(() => on.close())
  const second = await on.embedPending()
  assert.equal(second.chunks, 0)
  assert.ok(second.parts >= 2, JSON.stringify(second))
})

/** The project's chunk count, from the files' chunk lists. */
async function countChunks(db) {
  let n = 0
  for (const rel of Object.keys(FILES)) n += (await db.chunksOf(rel)).length
  return n
}

test('a worker thread searches the vectors the main thread stored', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const { db, path, root } = await project(t, dir)
  await db.embedPending()
  const addonPath = new URL('../index.js', import.meta.url).pathname
  const theirs = await new Promise((resolve, reject) => {
    const w = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads')
       const { Engram } = require(workerData.addonPath)
       Engram.open({ path: workerData.path, projectRoot: workerData.root }).then(async (db) => {
         const hits = await db.denseSearch('verify a user password', { kinds: ['chunk'], limit: 1 })
         db.close()
         parentPort.postMessage(hits.map((h) => h.path))
       }, (e) => parentPort.postMessage({ error: e.message }))`,
      { eval: true, workerData: { addonPath, path, root } },
    )
    w.once('message', resolve)
    w.once('error', reject)
  })
  assert.deepEqual(theirs, ['src/auth/password.ts'])
})

test('an aborted signal stops embedPending() and bad input is coded', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const { db } = await project(t, dir)
  await rejectsWithCode(assert, db.embedPending({ signal: AbortSignal.abort() }), 'ENGRAM_ABORTED')
  // The aborted run stored nothing; the next one does it all.
  assert.ok((await db.embedPending()).chunks >= 3)
  await rejectsWithCode(assert, db.denseSearch(42), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.denseSearch('   '), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.denseSearch('x', { kinds: ['file'] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.denseSearch('x', { limit: 0 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.denseSearch('x', { memoryTypes: ['nope'] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.embedPending({ onProgress: 'no' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.embedPending(7), 'ENGRAM_INVALID_ARG')
})

test('without a model the dense path says so and everything else works', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'n.db'), embeddings: { provider: 'none' } })
  t.after(() => db.close())
  await db.remember({ type: 'decision', content: 'We use libSQL for storage' })
  await rejectsWithCode(assert, db.embedPending(), 'ENGRAM_MODEL_UNAVAILABLE')
  await rejectsWithCode(assert, db.denseSearch('storage'), 'ENGRAM_MODEL_UNAVAILABLE')
  assert.equal((await db.search('libSQL')).length, 1)
})

test('autoEmbed embeds in the background after index() and reports it in embeddingStatus()', async (t) => {
  const dir = modelDir()
  if (!dir) return t.skip('no embedding model installed')
  const root = join(tempDir(t), 'repo')
  mkdirSync(join(root, 'src'), { recursive: true })
  writeFileSync(join(root, 'src/distance.go'), FILES['src/geo/distance.go'])
  const db = await Engram.open({
    path: join(root, '..', 'auto.db'),
    projectRoot: root,
    embeddings: { modelDir: dir, autoEmbed: true },
  })
  t.after(() => db.close())
  assert.equal(typeof db.embeddingStatus().background.running, 'boolean')
  await db.index()
  assert.equal(db.embeddingStatus().background.running, true)
  const deadline = Date.now() + 120_000
  while (db.embeddingStatus().background.running) {
    assert.ok(Date.now() < deadline, 'the background run never ended')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.equal(db.embeddingStatus().background.lastError ?? null, null)
  const [top] = await db.denseSearch('great-circle distance between two points', { limit: 1 })
  assert.equal(top.path, 'src/distance.go')
  assert.equal((await db.embedPending()).chunks, 0)
})
