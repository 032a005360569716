// The memory panel's data across the JS boundary: session summaries with citations, trust
// progression and its offer to step down, trust-gated recall, health, module coverage and
// memory gaps. (Simulated months of sessions run in the Rust tests, with a manual clock.)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

import { Engram, tempDir, rejectsWithCode } from './helpers.mjs'

async function open(t) {
  const root = join(tempDir(t), 'repo')
  for (const [rel, text] of Object.entries({
    'src/auth/session.ts': 'export function refresh(token: string) {\n  return token.trim()\n}\n',
    'src/db/pool.py': 'def acquire():\n    return None\n',
  })) {
    mkdirSync(dirname(join(root, rel)), { recursive: true })
    writeFileSync(join(root, rel), text)
  }
  const db = await Engram.open({ path: join(root, '..', 'memory.db'), projectRoot: root, embeddings: { provider: 'none' } })
  t.after(() => db.close())
  await db.index()
  return db
}

test('a session summary lists what was used and learned, with citations, and ending it counts', async (t) => {
  const db = await open(t)
  const known = await db.remember({ type: 'gotcha', content: 'Token refresh fails silently when Redis is down', relatedFiles: ['src/auth/session.ts'] })
  const recall = await db.recall('redis token refresh', { trackAccess: true, sessionId: 's1' })
  assert.ok(recall.items.some((i) => i.memory?.id === known.memory.id))
  const learned = await db.remember({ type: 'error_pattern', content: 'Auth tests hang without REDIS_URL', sessionId: 's1', needsReview: true })

  const summary = await db.sessionSummary('s1')
  assert.deepEqual(summary.used.map((u) => [u.memory.id, u.uses]), [[known.memory.id, 1]])
  assert.equal(summary.used[0].citation, `[Memory #${known.memory.id}: Token refresh fails silently when Redis…]`)
  assert.deepEqual(summary.learned.map((l) => l.memory.id), [learned.memory.id])
  assert.equal(summary.needsReview, 1)
  assert.equal(summary.awaitingConfirmation, 1)
  assert.equal(summary.tokensSavedEstimate, 1500, 'one gotcha used')
  assert.equal(summary.trustLevel, 1)
  assert.equal(summary.mode, 'full')
  assert.equal(summary.endedAt, undefined)

  await db.confirm(learned.memory.id)
  const ended = await db.endSession('s1')
  assert.equal(typeof ended.endedAt, 'number')
  assert.equal(ended.awaitingConfirmation, 0)
  assert.equal((await db.trust()).sessions, 1)
  assert.equal((await db.health({ sessionId: 's1' })).tokensSavedThisSession, 1500)
  await rejectsWithCode(assert, db.sessionSummary(''), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.sessionSummary(42), 'ENGRAM_INVALID_ARG')
})

test('trust: cautious by default, gated recall, offers a step down after three wrongs, never forces it', async (t) => {
  const db = await open(t)
  const start = await db.trust()
  assert.equal(start.level, 1)
  assert.equal(start.levelName, 'cautious')
  assert.equal(start.injectionThreshold, 0.8)
  assert.equal(start.newMemoriesNeedReview, true)

  const low = await db.remember({ type: 'decision', content: 'Workers drain queues on SIGTERM', confidence: 0.7 })
  const high = await db.remember({ type: 'decision', content: 'Workers drain queues within ten seconds', confidence: 0.95 })
  const gated = await db.recall('workers drain queues', { applyTrust: true })
  assert.deepEqual(gated.items.filter((i) => i.memory).map((i) => i.memory.id), [high.memory.id])
  const open_ = await db.recall('workers drain queues')
  assert.equal(open_.items.filter((i) => i.memory).length, 2)

  const confident = await db.setTrustLevel(3)
  assert.equal(confident.levelName, 'confident')
  assert.equal(confident.summaryMode, 'review_only')
  const ids = []
  for (const n of [1, 2, 3]) ids.push((await db.remember({ type: 'gotcha', content: `doubtful claim number ${n}` })).memory.id)
  assert.equal((await db.feedback(ids[0], { kind: 'wrong', sessionId: 'bad' })).trustOffer, undefined)
  assert.equal((await db.feedback(ids[1], { kind: 'wrong', sessionId: 'bad' })).trustOffer, undefined)
  const third = await db.feedback(ids[2], { kind: 'correction', correction: 'the claim holds only on Linux', sessionId: 'bad' })
  assert.equal(third.trustOffer.level, 2)
  assert.equal(third.trustOffer.sessionId, 'bad')
  assert.equal((await db.trust()).level, 3, 'offered, not applied')
  assert.equal((await db.dismissTrustOffer()).offer, undefined)
  assert.equal((await db.setTrustLevel(2)).level, 2)
  await rejectsWithCode(assert, db.setTrustLevel(5), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.setTrustLevel('high'), 'ENGRAM_INVALID_ARG')
})

test('health, module coverage and memory gaps', async (t) => {
  const db = await open(t)
  const empty = await db.health()
  assert.equal(empty.score, 0)
  await db.remember({ type: 'gotcha', content: 'refresh trims the token', relatedFiles: ['src/auth/session.ts'] })
  const doubtful = await db.remember({ type: 'pattern', content: 'pools are created lazily', needsReview: true })
  const h = await db.health()
  assert.deepEqual([h.total, h.active, h.needsReview, h.activeLast30Days], [2, 2, 1, 0])
  // 100 × (0.30 × 1/2 + 0.25 × 1 + 0.25 × 0 + 0.20 × 1) = 60
  assert.equal(h.score, 60)
  assert.deepEqual(h.parts, { reviewed: 0.5, fresh: 1, used: 0, agreed: 1 })
  await db.confirm(doubtful.memory.id)
  assert.equal((await db.health()).score, 75)

  const coverage = await db.moduleCoverage()
  assert.deepEqual(coverage.map((c) => [c.module, c.files, c.coveredFiles, c.coverage]), [
    ['src/db/', 1, 0, 0],
    ['src/auth/', 1, 1, 1],
  ])

  const gapQuery = { trackAccess: true, sessionId: 'g', filters: { kinds: ['memory'] } }
  await db.recall('How is Kafka partitioned', gapQuery)
  await db.recall('how is kafka   partitioned', gapQuery)
  const gaps = await db.memoryGaps()
  assert.equal(gaps.length, 1)
  assert.equal(gaps[0].query, 'how is kafka partitioned')
  assert.equal(gaps[0].hits, 2)
  await db.resolveGap(gaps[0].id)
  assert.deepEqual(await db.memoryGaps(), [])
  assert.equal((await db.memoryGaps({ includeResolved: true })).length, 1)
  await rejectsWithCode(assert, db.resolveGap('missing'), 'ENGRAM_NOT_FOUND')
  await rejectsWithCode(assert, db.memoryGaps({ limit: 0 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.markUsed([doubtful.memory.id], { sessionId: 7 }), 'ENGRAM_INVALID_ARG')
})
