// consolidate across the JS boundary: a dry run reports the group, the real run merges into
// the strongest memory, bad options and an aborted signal reject with codes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { join } from 'node:path'

import { Engram, tempDir, rejectsWithCode } from './helpers.mjs'

const WEBHOOK = 'The payments webhook retries for 72 hours, so every handler must be idempotent.'
const AGAIN = 'The payments webhook retries for 72 hours, so every handler must always be idempotent.'

test('near-duplicates merge into the strongest memory, after a dry run shows them', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db'), embeddings: { provider: 'none' } })
  t.after(() => db.close())
  const weak = await db.remember({ type: 'gotcha', content: WEBHOOK, confidence: 0.6, tags: ['payments'] })
  const strong = await db.remember({ type: 'gotcha', content: AGAIN, userVerified: true })
  await db.remember({ type: 'decision', content: 'We chose Postgres over MySQL for JSONB.' })

  const dry = await db.consolidate({ dryRun: true })
  assert.equal(dry.scanned, 3)
  assert.equal(dry.dryRun, true)
  assert.deepEqual(dry.groups.map((g) => [g.kept, g.merged, g.type, g.basis]), [
    [strong.memory.id, [weak.memory.id], 'gotcha', 'words'],
  ])
  assert.equal((await db.get(weak.memory.id)).forgotten, false)

  const done = await db.consolidate()
  assert.equal(done.merged, 1)
  const gone = await db.get(weak.memory.id)
  assert.equal(gone.forgotten, true)
  assert.equal(gone.forgottenReason, `merged into ${strong.memory.id}`)
  const kept = await db.get(strong.memory.id)
  assert.deepEqual(kept.tags, ['payments'])
  assert.ok(kept.relations.some((r) => r.relationType === 'derived_from' && r.targetMemoryId === weak.memory.id), JSON.stringify(kept.relations))

  await rejectsWithCode(assert, db.consolidate({ threshold: 2 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.consolidate({ wordThreshold: 'high' }), 'ENGRAM_INVALID_ARG')
  await db.remember({ type: 'gotcha', content: WEBHOOK })
  await rejectsWithCode(assert, db.consolidate({ signal: AbortSignal.abort() }), 'ENGRAM_ABORTED')
})
