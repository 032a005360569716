import assert from 'node:assert/strict'
import { test } from 'node:test'
import { join } from 'node:path'

import { Engram, tempDir, rejectsWithCode } from './helpers.mjs'

test('open / remember / get / update / forget / list / search round trip', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: dir })
  t.after(() => db.close())
  assert.equal(db.projectId, 'default')

  const { memory, created } = await db.remember({
    type: 'gotcha',
    content: 'Run database migrations before seeding fixtures',
    tags: ['db', 'tests'],
    relatedFiles: [join(dir, 'src/db/seed.ts')],
    confidence: 0.7,
    metadata: { ticket: 'ENG-12' },
  })
  assert.equal(created, true)
  assert.deepEqual(memory.relatedFiles, ['src/db/seed.ts'])
  assert.equal(memory.version, 1)
  assert.deepEqual(memory.metadata, { ticket: 'ENG-12' })

  assert.deepEqual(await db.get(memory.id), memory)

  const updated = await db.update(memory.id, { confidence: 0.9, pinned: true })
  assert.equal(updated.version, 2)
  assert.equal(updated.pinned, true)

  const hits = await db.search('migrations seeding')
  assert.equal(hits.length, 1)
  assert.equal(hits[0].memory.id, memory.id)
  assert.equal(hits[0].matchedAll, true)

  assert.equal((await db.list()).length, 1)
  assert.equal((await db.list({ types: ['decision'] })).length, 0)
  assert.equal((await db.list({ tags: ['tests'] })).length, 1)

  const forgotten = await db.forget(memory.id, 'superseded by CI job')
  assert.equal(forgotten.forgotten, true)
  assert.equal(forgotten.forgottenReason, 'superseded by CI job')
  assert.equal((await db.list()).length, 0)
  assert.equal((await db.search('migrations')).length, 0)
  assert.equal((await db.list({ onlyForgotten: true })).length, 1)

  const history = await db.history(memory.id)
  assert.deepEqual(history.map((v) => [v.version, v.endedBy]), [[1, 'update'], [2, 'forget'], [3, 'current']])
  const restored = await db.rollback(memory.id, 2)
  assert.equal(restored.forgotten, false)
  assert.equal(restored.version, 4)

  const stats = await db.stats()
  assert.equal(stats.active, 1)
  assert.equal(stats.versions, 3)
  assert.equal(stats.byType.gotcha, 1)
})

test('duplicates reinforce; secrets never reach storage', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db') })
  t.after(() => db.close())
  const a = await db.remember({ type: 'decision', content: 'Use jose, not jsonwebtoken, on the Edge runtime', sessionId: 's1' })
  const b = await db.remember({ type: 'decision', content: 'use jose, NOT jsonwebtoken,  on the edge runtime', sessionId: 's2' })
  assert.equal(b.created, false)
  assert.equal(b.memory.id, a.memory.id)
  assert.equal(b.memory.reinforceCount, 1)
  assert.deepEqual(b.memory.provenanceSessionIds, ['s1', 's2'])

  const s = await db.remember({
    type: 'gotcha',
    content: 'The staging key is sk-proj-4fG7hJ9kL2mN5pQ8rS1tU3vW6xY0zA2bC4dE6fG8 and DB_PASSWORD=hunter2',
  })
  assert.equal(s.memory.redactions, 2)
  assert.ok(!s.memory.content.includes('hunter2'))
  assert.ok(!s.memory.content.includes('sk-proj'))
  assert.equal((await db.search('hunter2')).length, 0)
})

test('a misspelt search word is corrected to the indexed one, and the hit says so', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db') })
  t.after(() => db.close())
  await db.rememberMany([
    { type: 'gotcha', content: 'Docker networking: containers resolve each other by service name' },
    { type: 'pattern', content: 'Configuration is read from the XDG config directory' },
  ])
  const [hit, ...rest] = await db.search('dokcer networking')
  assert.match(hit.memory.content, /^Docker networking/)
  assert.equal(hit.correctedQuery, 'docker* networking')
  assert.equal(rest.length, 0)
  const [inflected] = await db.search('confgurations')
  assert.match(inflected.memory.content, /^Configuration/)
  assert.equal(inflected.correctedQuery, 'configur*')
  assert.deepEqual(await db.search('confgurations', { typo: false }), [])
  const [exact] = await db.search('docker')
  assert.equal(exact.correctedQuery, undefined)
})

test('hostile search text is always a valid query', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db') })
  t.after(() => db.close())
  await db.rememberMany([
    { type: 'pattern', content: 'Wrap route handlers in authMiddleware' },
    { type: 'gotcha', content: 'Docker networking: containers resolve each other by service name' },
  ])
  const hostile = ['"', '"open', '*', '-', 'NEAR(', 'a:b', '(((', ')))', 'AND', 'OR NOT', '^x', '🙂🎉', "'; DROP TABLE memories; --",
    'docker"', 'content:docker', '\\', '{}', '[', 'x'.repeat(5000), 'Ünïcödé façade', '\u0000docker']
  for (const q of hostile) {
    const hits = await db.search(q)
    assert.ok(Array.isArray(hits), q)
  }
  assert.equal((await db.search('\u0000docker')).length, 1)
  assert.equal((await db.search('dock*')).length, 1)
  assert.equal((await db.search('"service name"')).length, 1)
  assert.equal((await db.search('authMiddleware')).length, 1)
})

test('close() makes every later call fail with ENGRAM_CLOSED', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db') })
  const { memory } = await db.remember({ type: 'gotcha', content: 'x marks the spot' })
  const session = db.observe({ sessionId: 'closes-with-its-handle' })
  const inFlight = db.get(memory.id)
  db.close() // not awaited: closed at once all the same
  assert.equal((await inFlight).id, memory.id, 'a call started before close completes')
  assert.equal(db.closed, true)
  assert.equal(db.projectId, null)
  assert.equal(await db.close(), undefined) // idempotent, and resolves
  await rejectsWithCode(assert, session.finalize(), 'ENGRAM_CLOSED')
  for (const call of [
    () => db.remember({ type: 'gotcha', content: 'y' }),
    () => db.rememberMany([]),
    () => db.get(memory.id),
    () => db.update(memory.id, { pinned: true }),
    () => db.forget(memory.id),
    () => db.history(memory.id),
    () => db.rollback(memory.id, 1),
    () => db.list(),
    () => db.search('x'),
    () => db.stats(),
  ]) {
    await rejectsWithCode(assert, call(), 'ENGRAM_CLOSED')
  }
  // Another handle on the same file still works and sees the data.
  const again = await Engram.open({ path: join(dir, 'memory.db') })
  assert.equal((await again.get(memory.id)).content, 'x marks the spot')
  again.close()
})
