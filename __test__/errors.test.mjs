// Every error code reachable from JS, and wrong argument types, asserted by code.
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { writeFileSync, readFileSync } from 'node:fs'
import { test } from 'node:test'
import { join } from 'node:path'

import { addon, Engram, tempDir, rejectsWithCode } from './helpers.mjs'

test('wrong argument types reject with ENGRAM_INVALID_ARG, never crash', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db') })
  t.after(() => db.close())
  const { memory } = await db.remember({ type: 'gotcha', content: 'valid' })
  const bad = [
    () => Engram.open(),
    () => Engram.open(42),
    () => Engram.open({ path: 7 }),
    () => Engram.open({ path: join(dir, 'x.db'), readConnections: 0 }),
    () => Engram.open({ path: join(dir, 'x.db'), projectRoot: join(dir, 'missing') }),
    () => Engram.open({ path: dir }),
    () => db.remember(),
    () => db.remember('just a string'),
    () => db.remember({ content: 'no type' }),
    () => db.remember({ type: 'not-a-type', content: 'x' }),
    () => db.remember({ type: 'gotcha', content: 42 }),
    () => db.remember({ type: 'gotcha', content: '' }),
    () => db.remember({ type: 'gotcha', content: '   \n\t ' }),
    () => db.remember({ type: 'gotcha', content: 'x'.repeat(16 * 1024 + 1) }),
    () => db.remember({ type: 'gotcha', content: 'x', confidence: 2 }),
    () => db.remember({ type: 'gotcha', content: 'x', confidence: Number.NaN }),
    () => db.remember({ type: 'gotcha', content: 'x', tags: 'not-an-array' }),
    () => db.remember({ type: 'gotcha', content: 'x', scope: 'galaxy' }),
    () => db.remember({ type: 'gotcha', content: 'x', relatedFiles: ['../../etc/passwd'] }),
    () => db.remember({ type: 'gotcha', content: 'x', citationText: 'c'.repeat(41) }),
    () => db.remember({ type: 'gotcha', content: 'x', metadata: [1, 2] }),
    () => db.rememberMany({ not: 'an array' }),
    () => db.rememberMany([{ type: 'gotcha', content: 'fine' }, { type: 'gotcha' }]),
    () => db.get(),
    () => db.get(42),
    () => db.get({}),
    () => db.update(memory.id),
    () => db.update(memory.id, {}),
    () => db.update(memory.id, { confidence: 'high' }),
    () => db.forget(memory.id, 5),
    () => db.rollback(memory.id, 'one'),
    () => db.list({ limit: 0 }),
    () => db.list({ limit: 'ten' }),
    () => db.list({ orderBy: 'random' }),
    () => db.list('types'),
    () => db.search('x', 'options'),
    () => db.remember(['gotcha', 'x']),
    () => db.search(),
    () => db.search(12),
    () => db.search('x', { limit: 1000 }),
    () => db.search('x', { mode: 'fuzzy' }),
    () => db.search('x', { minConfidence: -1 }),
  ]
  for (const [i, call] of bad.entries()) {
    await rejectsWithCode(assert, call(), 'ENGRAM_INVALID_ARG').catch((e) => {
      throw new Error(`case ${i} (${call}): ${e.message}`)
    })
  }
  // Nothing was written by the failed batch.
  assert.equal((await db.stats()).total, 1)
})

test('ENGRAM_NOT_FOUND and ENGRAM_CONFLICT', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db') })
  t.after(() => db.close())
  await rejectsWithCode(assert, db.get('no-such-id'), 'ENGRAM_NOT_FOUND')
  await rejectsWithCode(assert, db.update('no-such-id', { pinned: true }), 'ENGRAM_NOT_FOUND')
  await rejectsWithCode(assert, db.forget('no-such-id'), 'ENGRAM_NOT_FOUND')
  const a = await db.remember({ type: 'gotcha', content: 'first fact' })
  await db.remember({ type: 'gotcha', content: 'second fact' })
  await rejectsWithCode(assert, db.rollback(a.memory.id, 7), 'ENGRAM_NOT_FOUND')
  await rejectsWithCode(assert, db.update(a.memory.id, { content: 'Second  FACT' }), 'ENGRAM_CONFLICT')
  // Other projects in the same file are invisible.
  const other = await Engram.open({ path: join(dir, 'memory.db'), projectId: 'other' })
  await rejectsWithCode(assert, other.get(a.memory.id), 'ENGRAM_NOT_FOUND')
  other.close()
})

test('ENGRAM_CORRUPT for a file that is not a database, and the file is untouched', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'garbage.db')
  const garbage = Buffer.alloc(16384, 0x5a)
  writeFileSync(path, garbage)
  await rejectsWithCode(assert, Engram.open({ path }), 'ENGRAM_CORRUPT')
  assert.deepEqual(readFileSync(path), garbage)
})

test('ENGRAM_SCHEMA_TOO_NEW for a file from a newer engram', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'memory.db')
  const db = await Engram.open({ path })
  db.close()
  // Another SQLite (Python's) bumps the recorded schema version, as a newer engram would.
  execFileSync('python3', ['-c', `import sqlite3; c = sqlite3.connect(${JSON.stringify(path)}); c.execute("UPDATE engram_schema SET version = 99 WHERE home = 'main'"); c.commit()`])
  await rejectsWithCode(assert, Engram.open({ path }), 'ENGRAM_SCHEMA_TOO_NEW')
})

test('ENGRAM_SQLITE_BUSY when another process holds the write lock', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'memory.db')
  const db = await Engram.open({ path, busyTimeoutMs: 100 })
  t.after(() => db.close())
  await db.remember({ type: 'gotcha', content: 'before the lock' })
  const holder = spawn('python3', ['-c', `
import sqlite3, sys, time
c = sqlite3.connect(${JSON.stringify(path)}, isolation_level=None)
c.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
c.execute("ROLLBACK")
`], { stdio: ['pipe', 'pipe', 'inherit'] })
  await new Promise((resolve) => holder.stdout.once('data', resolve))
  try {
    await rejectsWithCode(assert, db.remember({ type: 'gotcha', content: 'while locked' }), 'ENGRAM_SQLITE_BUSY')
    // Reads are not blocked by a writer in WAL mode.
    assert.equal((await db.list()).length, 1)
  } finally {
    holder.stdin.end('\n')
    await new Promise((resolve) => holder.once('exit', resolve))
  }
  await db.remember({ type: 'gotcha', content: 'after the lock' })
  assert.equal((await db.list()).length, 2)
})

test('ENGRAM_IO when the file cannot be opened', async (t) => {
  const dir = tempDir(t)
  // A path whose parent is a regular file cannot be created.
  writeFileSync(join(dir, 'file'), 'x')
  await rejectsWithCode(assert, Engram.open({ path: join(dir, 'file', 'memory.db') }), 'ENGRAM_IO')
})

test('a panic inside the engine becomes ENGRAM_INTERNAL and the process lives on', async () => {
  await rejectsWithCode(assert, addon.__panicForTests(), 'ENGRAM_INTERNAL')
  assert.equal(typeof addon.openEngineCount(), 'number')
})

test('errors carry a cause from the underlying layer', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'garbage.db')
  writeFileSync(path, Buffer.alloc(8192, 1))
  await assert.rejects(Engram.open({ path }), (err) => {
    assert.equal(err.code, 'ENGRAM_CORRUPT')
    assert.ok(err.cause instanceof Error, 'cause is an Error')
    assert.match(err.cause.message, /not a database|file is not|SQLite/i)
    return true
  })
})

test('every ErrorCode is exported at runtime', () => {
  assert.deepEqual(Object.values(addon.ErrorCode).sort(), [
    'ENGRAM_ABORTED', 'ENGRAM_CALLBACK', 'ENGRAM_CLOSED', 'ENGRAM_CONFLICT', 'ENGRAM_CORRUPT', 'ENGRAM_CYCLE', 'ENGRAM_DB', 'ENGRAM_DOWNLOAD', 'ENGRAM_EMBEDDING',
    'ENGRAM_INTERNAL', 'ENGRAM_INVALID_ARG', 'ENGRAM_IO', 'ENGRAM_MODEL_UNAVAILABLE', 'ENGRAM_NOT_FOUND', 'ENGRAM_RERANK',
    'ENGRAM_SCHEMA_TOO_NEW', 'ENGRAM_SQLITE_BUSY', 'ENGRAM_SYNC', 'ENGRAM_SYNC_AUTH', 'ENGRAM_SYNC_CONFIG',
    'ENGRAM_SYNC_UNREACHABLE', 'ENGRAM_SYNC_UNSUPPORTED',
  ])
})

test('the ErrorCode value declared in index.d.ts is the object the addon exports', () => {
  // The declaration is hand-written (scripts/dts-header.d.ts) because napi-rs types a string
  // enum as a union only: this keeps it from drifting from the Rust enum.
  const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  const block = dts.match(/export declare const ErrorCode: \{([^}]*)\}/)
  assert.ok(block, 'index.d.ts declares ErrorCode as a value')
  const declared = Object.fromEntries([...block[1].matchAll(/readonly (\w+): '(\w+)'/g)].map((m) => [m[1], m[2]]))
  assert.deepEqual(declared, { ...addon.ErrorCode })
})

test('internal hooks stay off the public surface', () => {
  const names = Object.keys(addon)
  assert.ok(!names.some((n) => n.startsWith('__') && n !== '__napiBindingTarget'), names.join(', '))
  assert.equal(typeof addon.__panicForTests, 'function', 'still reachable for engram\'s own tests')
})
