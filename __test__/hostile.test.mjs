// Hostile inputs (issue 35, defect 2): a path or a function from the app must never hang a call
// or make the process grow without bound. Each case runs in a child process that gives the call
// a few seconds and reports 'hung' past them, so a regression fails the test instead of hanging
// the runner (or, for /dev/zero, filling the machine's memory).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'

import { tempDir } from './helpers.mjs'

const entry = join(import.meta.dirname, '..', 'index.js')

/**
 * Runs `call` (an expression awaiting one engram call, with `engram`, `db`, `dir` in scope) in
 * a child process; returns `{ code, message, ms }` of its rejection, `{ resolved }`, or
 * `{ hung: true }` when it had not settled after `patienceMs`.
 */
function settle(dir, call, { patienceMs = 5000, open = '{}' } = {}) {
  const script = `
    const engram = require(${JSON.stringify(entry)})
    const path = require('node:path')
    const dir = ${JSON.stringify(dir)}
    ;(async () => {
      const db = await engram.Engram.open({ path: path.join(dir, 'm.db'), ...${open} })
      const started = Date.now()
      const call = (async () => ${call})().then(
        (value) => ({ resolved: value ?? null }),
        (err) => ({ code: err.code, message: err.message, ms: Date.now() - started }),
      )
      const out = await Promise.race([call, new Promise((r) => setTimeout(() => r({ hung: true }), ${patienceMs}))])
      process.stdout.write(JSON.stringify(out))
      // A hung call may hold a thread that never returns: leave without waiting for it.
      process.exit(0)
    })().catch((err) => { console.error('unexpected:', err); process.exit(2) })
  `
  const result = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: patienceMs + 30_000 })
  assert.equal(result.status, 0, `child died (status ${result.status}, signal ${result.signal}):\n${result.stderr}`)
  return JSON.parse(result.stdout)
}

test('importMemories refuses /dev/zero at once, without reading it', { skip: process.platform === 'win32' }, (t) => {
  const out = settle(tempDir(t), `db.importMemories({ format: 'json', path: '/dev/zero' })`)
  assert.equal(out.code, 'ENGRAM_INVALID_ARG', JSON.stringify(out))
  assert.match(out.message, /\/dev\/zero is a device, not a regular file/)
  assert.ok(out.ms < 2000, `took ${out.ms} ms`)
})

test('importMemories refuses a FIFO without opening it (an open would block)', { skip: process.platform === 'win32' }, (t) => {
  const dir = tempDir(t)
  const fifo = join(dir, 'export.json')
  const made = spawnSync('mkfifo', [fifo])
  assert.equal(made.status, 0, String(made.stderr))
  const out = settle(dir, `db.importMemories({ format: 'json', path: ${JSON.stringify(fifo)} })`)
  assert.equal(out.code, 'ENGRAM_INVALID_ARG', JSON.stringify(out))
  assert.match(out.message, /is a FIFO, not a regular file/)
})

test('importMemories refuses a directory as ENGRAM_INVALID_ARG', (t) => {
  const dir = tempDir(t)
  const sub = join(dir, 'exports')
  mkdirSync(sub)
  const out = settle(dir, `db.importMemories({ format: 'markdown', path: ${JSON.stringify(sub)} })`)
  assert.equal(out.code, 'ENGRAM_INVALID_ARG', JSON.stringify(out))
  assert.match(out.message, /is a directory, not a regular file/)
})

test('an embed function that never settles makes embed() reject with ENGRAM_CALLBACK after timeoutMs', (t) => {
  const open = `{ embeddings: { model: 'never-v1', timeoutMs: 300, embed: () => new Promise(() => {}) } }`
  const out = settle(tempDir(t), `db.embed(['hello'])`, { open })
  assert.equal(out.code, 'ENGRAM_CALLBACK', JSON.stringify(out))
  assert.match(out.message, /timed out after 300 ms/)
  assert.ok(out.ms < 4000, `took ${out.ms} ms`)
})

test('a deriveRelations function that never settles rejects with ENGRAM_CALLBACK after timeoutMs', (t) => {
  const dir = tempDir(t)
  const call = `(async () => {
    const fs = require('node:fs')
    fs.mkdirSync(path.join(dir, 'src', 'billing'), { recursive: true })
    fs.writeFileSync(path.join(dir, 'src', 'billing', 'pay.py'), 'def pay(x):\\n    return x\\n')
    await db.index()
    return db.deriveRelations(() => new Promise(() => {}), { timeoutMs: 300 })
  })()`
  const out = settle(dir, call, { open: `{ projectRoot: dir }` })
  assert.equal(out.code, 'ENGRAM_CALLBACK', JSON.stringify(out))
  assert.match(out.message, /deriveRelations timed out after 300 ms/)
})
