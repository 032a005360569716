// The main thread and four worker threads open the same file at once and hammer it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'

import { addon, Engram, tempDir } from './helpers.mjs'

const OPS_PER_THREAD = 1000

// Runs in each thread: 1,000 mixed operations, returning the ids of acknowledged writes.
const WORKLOAD = `
async function workload(Engram, path, name, ops) {
  const db = await Engram.open({ path })
  const acked = []
  const errors = []
  for (let i = 0; i < ops; i++) {
    try {
      switch (i % 5) {
        case 0:
        case 1: {
          const r = await db.remember({ type: 'pattern', content: name + ' wrote item ' + i, tags: [name] })
          acked.push(r.memory.id)
          break
        }
        case 2:
          if (acked.length) await db.get(acked[acked.length - 1])
          break
        case 3:
          await db.search('item ' + (i - 3))
          break
        case 4:
          if (acked.length) await db.update(acked[acked.length - 1], { confidence: 0.5 + (i % 50) / 100 })
          await db.list({ tags: [name], limit: 5 })
          break
      }
    } catch (err) {
      errors.push(String(err.code) + ': ' + err.message)
    }
  }
  db.close()
  return { acked, errors }
}
`

test('main thread + 4 workers: 1,000 mixed ops each, zero errors, nothing lost', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'shared.db')
  const addonPath = new URL('../index.js', import.meta.url).pathname
  const workerSource = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Engram } = require(workerData.addonPath)
    ${WORKLOAD}
    workload(Engram, workerData.path, workerData.name, workerData.ops)
      .then((r) => parentPort.postMessage(r), (e) => parentPort.postMessage({ fatal: String(e) }))
  `
  const workers = [1, 2, 3, 4].map(
    (n) => new Promise((resolve, reject) => {
      const w = new Worker(workerSource, {
        eval: true,
        workerData: { addonPath, path, name: 'worker' + n, ops: OPS_PER_THREAD },
      })
      w.once('message', resolve)
      w.once('error', reject)
    }),
  )
  // eslint-disable-next-line no-new-func
  const workload = new Function(`${WORKLOAD}; return workload`)()
  const results = await Promise.all([workload(Engram, path, 'main', OPS_PER_THREAD), ...workers])

  for (const r of results) {
    assert.equal(r.fatal, undefined, r.fatal)
    assert.deepEqual(r.errors, [])
  }
  const acked = results.flatMap((r) => r.acked)
  assert.equal(acked.length, 5 * OPS_PER_THREAD * 2 / 5)

  // Every acknowledged write is there, read back through a fresh handle.
  const db = await Engram.open({ path })
  t.after(() => db.close())
  const stats = await db.stats()
  assert.equal(stats.active, acked.length)
  for (const id of acked) {
    await db.get(id)
  }
})

test('handles from several threads share one engine per file', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'one.db')
  const before = addon.openEngineCount()
  const a = await Engram.open({ path })
  const b = await Engram.open({ path: join(dir, '.', 'one.db') })
  assert.equal(addon.openEngineCount(), before + 1)
  const addonPath = new URL('../index.js', import.meta.url).pathname
  const count = await new Promise((resolve, reject) => {
    const w = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads')
       const addon = require(workerData.addonPath)
       addon.Engram.open({ path: workerData.path }).then((db) => {
         parentPort.postMessage(addon.openEngineCount()); db.close()
       }, reject => parentPort.postMessage(String(reject)))`,
      { eval: true, workerData: { addonPath, path } },
    )
    w.once('message', resolve)
    w.once('error', reject)
  })
  assert.equal(count, before + 1, 'the worker joined the existing engine')
  a.close()
  b.close()
})
