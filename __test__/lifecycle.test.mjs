// The memory lifecycle across the JS boundary: feedback, review, supersedes, contradictions,
// disputes, use tracking, share-scope filters, prune and optimize (decay is driven by a tiny custom
// half-life, since JS cannot move the engine's clock; the Rust tests simulate months).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

import { Engram, tempDir, rejectsWithCode } from './helpers.mjs'

async function open(t) {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: dir })
  t.after(() => db.close())
  return db
}

test('feedback moves confidence, a correction supersedes, events keep the words', async (t) => {
  const db = await open(t)
  const { memory } = await db.remember({ type: 'decision', content: 'Sessions live for 24 hours', relatedFiles: ['src/session.ts'] })
  const helpful = await db.feedback(memory.id, { kind: 'helpful', author: 'ana' })
  assert.equal(helpful.memory.helpfulCount, 1)
  assert.ok(Math.abs(helpful.memory.confidence - 0.85) < 1e-9)
  assert.equal(helpful.event.kind, 'helpful')
  const wrong = await db.feedback(memory.id, { kind: 'wrong', comment: 'outdated', sessionId: 's1' })
  assert.equal(wrong.memory.needsReview, true)
  assert.ok(Math.abs(wrong.memory.confidence - 0.75) < 1e-9)
  const fixed = await db.feedback(memory.id, { kind: 'correction', correction: 'Sessions live for 8 hours' })
  assert.equal(fixed.memory.forgotten, true)
  assert.equal(fixed.memory.supersededBy, fixed.correction.id)
  assert.equal(fixed.correction.userVerified, true)
  assert.deepEqual(fixed.correction.relations.map((r) => r.relationType), ['supersedes'])
  const events = await db.events(memory.id)
  assert.deepEqual(events.map((e) => e.kind), ['helpful', 'wrong', 'correction'])
  assert.equal(events[1].comment, 'outdated')
  assert.equal(events[1].sessionId, 's1')

  await rejectsWithCode(assert, db.feedback(memory.id, { kind: 'great' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.feedback(memory.id, { kind: 'correction' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.feedback(memory.id, 'helpful'), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.feedback('missing', { kind: 'helpful' }), 'ENGRAM_NOT_FOUND')
  await rejectsWithCode(assert, db.events('missing'), 'ENGRAM_NOT_FOUND')
})

test('review queue: confirm with an edit, reject with a reason', async (t) => {
  const db = await open(t)
  const a = (await db.remember({ type: 'gotcha', content: 'Auth tests hang without REDIS_URL', needsReview: true })).memory
  const b = (await db.remember({ type: 'gotcha', content: 'Use tabs everywhere', needsReview: true })).memory
  assert.deepEqual((await db.reviewQueue()).map((m) => m.id).sort(), [a.id, b.id].sort())
  const confirmed = await db.confirm(a.id, { patch: { content: 'Auth tests hang when REDIS_URL is unset' }, author: 'ana' })
  assert.equal(confirmed.userVerified, true)
  assert.equal(confirmed.needsReview, false)
  assert.equal(confirmed.content, 'Auth tests hang when REDIS_URL is unset')
  const rejected = await db.reject(b.id, { comment: 'not a gotcha' })
  assert.equal(rejected.forgotten, true)
  assert.equal(rejected.forgottenReason, 'rejected in review: not a gotcha')
  assert.deepEqual(await db.reviewQueue({ limit: 10 }), [])
})

test('contradictions are linked and flagged just after the write; supersede refuses cycles', async (t) => {
  const db = await open(t)
  const old = (await db.remember({ type: 'decision', content: 'The API server listens on port 3000 in development' })).memory
  const written = (await db.remember({ type: 'decision', content: 'The API server listens on port 8080 in development' })).memory
  assert.equal(written.needsReview, false, 'the scan runs just after the write')
  await db.settled()
  const now = await db.get(written.id)
  assert.equal(now.needsReview, true)
  assert.deepEqual(now.relations.map((r) => [r.relationType, r.targetMemoryId]), [['conflicts_with', old.id]])
  const oldNow = await db.get(old.id)
  assert.equal(oldNow.needsReview, true)
  assert.equal(oldNow.forgotten, false)

  const { older, newer } = await db.supersede(old.id, now.id)
  assert.equal(older.supersededBy, now.id)
  assert.ok(newer.relations.some((r) => r.relationType === 'supersedes' && r.targetMemoryId === old.id))
  await rejectsWithCode(assert, db.supersede(now.id, old.id), 'ENGRAM_CYCLE')
})

test('disputes: thread, x0.8 in use, resolution', async (t) => {
  const db = await open(t)
  const { memory } = await db.remember({ type: 'decision', content: 'All services log JSON to stdout', shareScope: 'team' })
  await rejectsWithCode(assert, db.dispute(memory.id, {}), 'ENGRAM_INVALID_ARG')
  const disputed = await db.dispute(memory.id, { comment: 'Batch jobs log to files', author: 'bo' })
  assert.equal(typeof disputed.memory.disputedAt, 'number')
  await db.comment(memory.id, { comment: 'They are being migrated', author: 'ana' })
  const resolved = await db.resolveDispute(memory.id, { comment: 'Kept' })
  assert.equal(resolved.memory.disputedAt, undefined)
  await rejectsWithCode(assert, db.resolveDispute(memory.id), 'ENGRAM_CONFLICT')
  assert.deepEqual((await db.events(memory.id)).map((e) => [e.kind, e.author ?? null]), [
    ['dispute', 'bo'],
    ['comment', 'ana'],
    ['resolve', null],
  ])
})

test('markUsed earns trust; share-scope filters apply to list, search and recall', async (t) => {
  const db = await open(t)
  const { memory } = await db.remember({ type: 'pattern', content: 'Wrap handlers in withTracing', needsReview: true, confidence: 0.6 })
  for (let i = 0; i < 10; i++) await db.markUsed([memory.id, 'unknown-id'])
  const used = await db.get(memory.id)
  assert.equal(used.accessCount, 10)
  assert.equal(used.uncorrectedUses, 10)
  assert.equal(used.needsReview, false)
  assert.ok(Math.abs(used.confidence - 0.7) < 1e-9, `two raises: ${used.confidence}`)
  await rejectsWithCode(assert, db.markUsed('nope'), 'ENGRAM_INVALID_ARG')

  await db.remember({ type: 'preference', content: 'I alias gst to git status', shareScope: 'personal' })
  await db.remember({ type: 'preference', content: 'The team squashes merges into main', shareScope: 'team' })
  assert.equal((await db.list({ shareScopes: ['personal'] })).length, 1)
  assert.equal((await db.search('git status', { shareScopes: ['team'] })).length, 0)
  assert.equal((await db.search('git status', { shareScopes: ['personal'] })).length, 1)
  const memoriesOf = async (shareScopes) =>
    (await db.recall('squashes merges', { filters: { shareScopes } })).items.filter((i) => i.kind === 'memory')
  assert.equal((await memoriesOf(['team'])).length, 1)
  assert.equal((await memoriesOf(['personal'])).length, 0)
  await rejectsWithCode(assert, db.list({ shareScopes: ['galaxy'] }), 'ENGRAM_INVALID_ARG')
})

test('prune expires idle memories, deletes after grace, honours dryRun and abort', async (t) => {
  const db = await open(t)
  // A half-life of 1e-6 days is 86 ms: three of them pass while the test sleeps.
  const idle = (await db.remember({ type: 'gotcha', content: 'Short-lived observation', decayHalfLifeDays: 1e-6 })).memory
  const verified = (await db.remember({ type: 'gotcha', content: 'Verified short-lived note', decayHalfLifeDays: 1e-6, userVerified: true })).memory
  const lasting = (await db.remember({ type: 'decision', content: 'We use Postgres', decayHalfLifeDays: 1e-6 })).memory
  await sleep(400)
  const dry = await db.prune({ dryRun: true })
  assert.equal(dry.dryRun, true)
  assert.equal(dry.expired, 2)
  assert.equal((await db.get(idle.id)).forgotten, false)

  const aborted = new AbortController()
  aborted.abort()
  await rejectsWithCode(assert, db.prune({ signal: aborted.signal }), 'ENGRAM_ABORTED')

  const first = await db.prune()
  assert.equal(first.expired, 2)
  assert.equal((await db.get(idle.id)).forgotten, true)
  assert.equal((await db.get(lasting.id)).forgotten, false, 'decisions never decay')
  const history = await db.history(idle.id)
  assert.equal(history[0].endedBy, 'expire')

  const second = await db.prune({ graceDays: 0 })
  assert.equal(second.deleted, 1)
  assert.equal(second.keptVerified, 1)
  assert.equal(second.compacted, true)
  await rejectsWithCode(assert, db.get(idle.id), 'ENGRAM_NOT_FOUND')
  assert.equal((await db.get(verified.id)).forgotten, true)
  await rejectsWithCode(assert, db.prune({ graceDays: -1 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.prune('soon'), 'ENGRAM_INVALID_ARG')
})

test('optimize merges a keyword index scattered by one-by-one remembers, keeps answers, honours abort', async (t) => {
  const db = await open(t)
  // One transaction each: every commit adds an FTS5 segment, automerge leaves several.
  for (let i = 0; i < 60; i++) {
    await db.remember({ type: 'gotcha', content: `Gotcha ${i}: the ${['build', 'query', 'asset'][i % 3]} cache needs a restart (ticket t${i})` })
  }
  const before = (await db.search('cache restart', { limit: 10 })).map((h) => h.memory.id)
  const aborted = new AbortController()
  aborted.abort()
  await rejectsWithCode(assert, db.optimize({ signal: aborted.signal }), 'ENGRAM_ABORTED')

  const report = await db.optimize()
  assert.deepEqual(report.keywordIndexes.map((i) => i.index), ['code', 'memories'])
  const memories = report.keywordIndexes[1]
  assert.ok(memories.segmentsBefore > 1, JSON.stringify(report))
  assert.equal(memories.segmentsAfter, 1)
  assert.equal(report.closureBuilt, false)
  assert.ok(report.durationMs >= 0)
  assert.deepEqual((await db.search('cache restart', { limit: 10 })).map((h) => h.memory.id), before)
  const again = await db.optimize({})
  assert.deepEqual(again.keywordIndexes.map((i) => [i.segmentsBefore, i.segmentsAfter]).at(1), [1, 1])
  await rejectsWithCode(assert, db.optimize('now'), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.optimize({ signal: aborted.signal, full: true }), 'ENGRAM_INVALID_ARG')
})

test('export -> deleteAll -> import restores everything; Markdown and files too', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: dir })
  t.after(() => db.close())
  const a = (await db.remember({ type: 'gotcha', content: 'Redis must run before the auth tests', tags: ['auth'], relatedFiles: ['src/auth.ts'] })).memory
  await db.update(a.id, { confidence: 0.9 })
  await db.feedback(a.id, { kind: 'helpful', comment: 'saved an hour' })
  const b = (await db.remember({ type: 'decision', content: 'We chose Postgres for JSONB' })).memory
  await db.forget(b.id, 'moved to ADR-3')
  const before = [await db.get(a.id), await db.get(b.id)]
  const historyBefore = await db.history(a.id)

  const json = await db.exportMemories({ format: 'json' })
  assert.equal(json.memories, 2)
  assert.equal(json.bytes, Buffer.byteLength(json.text))
  await rejectsWithCode(assert, db.deleteAll({ confirm: false }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.deleteAll(), 'ENGRAM_INVALID_ARG')
  assert.equal(await db.deleteAll({ confirm: true }), 2)
  assert.equal((await db.stats()).total, 0)

  const report = await db.importMemories({ format: 'json', text: json.text })
  assert.deepEqual(report, { imported: 2, updated: 0, skipped: 0, duplicates: 0, versions: 2, events: 1 })
  assert.deepEqual([await db.get(a.id), await db.get(b.id)], before)
  assert.deepEqual(await db.history(a.id), historyBefore)
  assert.equal((await db.events(a.id))[0].comment, 'saved an hour')

  // Through files, and Markdown for people.
  const file = join(dir, 'memories.md')
  const md = await db.exportMemories({ format: 'markdown', path: file })
  assert.equal(md.text, undefined)
  assert.equal(md.path, file)
  assert.equal(md.memories, 1, 'forgotten memories stay out of Markdown by default')
  const { readFileSync, writeFileSync } = await import('node:fs')
  writeFileSync(file, readFileSync(file, 'utf8').replace('> Redis must run before the auth tests', '> Redis must run before any auth test'))
  const mdReport = await db.importMemories({ format: 'markdown', path: file })
  assert.equal(mdReport.updated, 1)
  assert.equal((await db.get(a.id)).content, 'Redis must run before any auth test')

  await rejectsWithCode(assert, db.importMemories({ format: 'json', text: '{"format":"nope"}' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.importMemories({ format: 'yaml', text: '' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.importMemories({ format: 'json' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.importMemories({ format: 'json', path: join(dir, 'missing.json') }), 'ENGRAM_IO')
  await rejectsWithCode(assert, db.exportMemories({ format: 'pdf' }), 'ENGRAM_INVALID_ARG')
})
