// The agent-loop builders through the binding: sessionContext() (what a session starts with)
// and ObserverSession.augmentToolResult() (pitfalls appended to a file tool's result), on a
// real database and project root, with the argument errors a JS caller can make.
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'

import { Engram, rejectsWithCode, tempDir } from './helpers.mjs'

async function project(t) {
  const dir = tempDir(t)
  const root = join(dir, 'project')
  mkdirSync(join(root, 'src', 'db'), { recursive: true })
  writeFileSync(join(root, 'src', 'db', 'pool.ts'), 'export function acquire(n: number) {\n  return Math.min(n, 10)\n}\n')
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: root })
  t.after(() => db.close())
  return { db, root }
}

/** An observed session in the `full` A/B group (the only one that gets augmentation). */
function fullSession(db, prefix) {
  for (let i = 0; ; i++) {
    const session = db.observe({ sessionId: `${prefix}-${i}` })
    if (session.snapshot().abGroup === 'full') return session
  }
}

test('sessionContext packs pinned and relevant memories with labels, ids and citations', async (t) => {
  const { db } = await project(t)
  const empty = await db.sessionContext()
  assert.deepEqual(empty, { text: '', tokens: 0, budgetTokens: 2000, memories: [], handoff: null, omitted: 0, files: [] })

  const pinned = await db.remember({ type: 'decision', content: 'Pool sizes come from config, never from code', pinned: true, confidence: 0.5 })
  const gotcha = await db.remember({ type: 'gotcha', content: 'acquire() caps the pool at ten connections', relatedFiles: ['src/db/pool.ts'], confidence: 0.95 })
  await db.remember({ type: 'gotcha', content: 'an unsure note about pools', relatedFiles: ['src/db/pool.ts'], confidence: 0.6 })
  const c = await db.sessionContext({ modules: ['src/db/'], sessionType: 'build', budgetTokens: 500 })
  assert.deepEqual(c.memories.map((m) => [m.section, m.label, m.memory.id]), [
    ['pinned', 1, pinned.memory.id],
    ['relevant', 2, gotcha.memory.id],
  ])
  assert.match(c.text, /^# Project memory \(engram\)/)
  assert.ok(c.text.includes(`[2] gotcha · confidence 0.95 · ${gotcha.memory.id} · src/db/pool.ts\nacquire() caps`), c.text)
  assert.ok(c.memories[1].citation.startsWith(`[Memory #${gotcha.memory.id}: acquire()`))
  assert.ok(c.tokens > 0 && c.tokens <= 500 && c.budgetTokens === 500)
  assert.equal(c.handoff, null)
})

test('sessionContext refuses bad options with ENGRAM_INVALID_ARG naming them', async (t) => {
  const { db } = await project(t)
  for (const [options, pattern] of [
    ['build', /options must be a plain object/],
    [{ budgetTokens: -1 }, /budgetTokens must be a whole number >= 1, got -1/],
    [{ budgetTokens: 1.5 }, /budgetTokens/],
    [{ budgetTokens: 500_000 }, /budgetTokens must be between 1 and 200000/],
    [{ sessionType: 'coding' }, /session type.*build.*pr_review/],
    [{ modules: ['../elsewhere/'] }, /modules: .*escapes the project root/],
    [{ modules: 'src/' }, /modules/],
    [{ task: 42 }, /task/],
  ]) {
    await assert.rejects(db.sessionContext(options), (err) => {
      assert.equal(err.code, 'ENGRAM_INVALID_ARG', `${JSON.stringify(options)}: ${err.code} ${err.message}`)
      assert.match(err.message, pattern)
      return true
    })
  }
})

test('augmentToolResult appends unseen pitfalls once, and never what the session context showed', async (t) => {
  const { db, root } = await project(t)
  const gotcha = await db.remember({ type: 'gotcha', content: 'acquire() caps the pool at ten connections', relatedFiles: ['src/db/pool.ts'], confidence: 0.95 })

  const reader = fullSession(db, 'reader')
  const output = 'export function acquire(n: number) {...}'
  const added = await reader.augmentToolResult('Read', { file_path: join(root, 'src/db/pool.ts') }, output)
  assert.deepEqual(added.memories.map((m) => m.id), [gotcha.memory.id])
  assert.match(added.content, /^MEMORY \(engram\): known pitfalls in this file/)
  assert.equal(added.result, `${output}\n\n${added.content}`)
  assert.equal(await reader.augmentToolResult('Read', { file_path: 'src/db/pool.ts' }, output), null, 'never twice')
  assert.equal(await reader.augmentToolResult('Bash', { command: 'cat src/db/pool.ts' }), null, 'not a file tool')

  const started = fullSession(db, 'started')
  const c = await db.sessionContext({ modules: ['src/db/'], sessionId: started.sessionId })
  assert.deepEqual(c.memories.map((m) => m.memory.id), [gotcha.memory.id])
  assert.equal(await started.augmentToolResult('Read', { path: 'src/db/pool.ts' }), null, 'shown at the start already')
  // The context counts as used by the session.
  assert.equal((await db.sessionSummary(started.sessionId)).used.length, 1)

  await rejectsWithCode(assert, reader.augmentToolResult('Read', 'src/db/pool.ts'), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, reader.augmentToolResult(undefined, {}), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, reader.augmentToolResult('Read', {}, 42), 'ENGRAM_INVALID_ARG')
})

/** `n` finalized observed sessions, the i-th reading `files(i)`. */
async function readSessions(db, prefix, n, files) {
  for (let i = 0; i < n; i++) {
    const s = db.observe({ sessionId: `${prefix}-${i}` })
    files(i).forEach((file, step) => s.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: file }, stepIndex: step + 1 }))
    await s.finalize('success')
  }
}

test('prefetchPlan tiers the files past sessions read, with contents, and sessionContext lists them', async (t) => {
  const { db, root } = await project(t)
  writeFileSync(join(root, 'src', 'db', 'schema.ts'), 'export const tables = ["users"]\n')
  writeFileSync(join(root, 'src', 'db', 'seed.ts'), 'export const rows = 3\n')
  await db.index()
  // pool.ts in 4 of 4 sessions, schema.ts in 3 (75%: second tier), seed.ts in 2 (too few).
  await readSessions(db, 'db', 4, (i) => ['src/db/pool.ts', ...(i < 3 ? ['src/db/schema.ts'] : []), ...(i < 2 ? ['src/db/seed.ts'] : [])])

  const plan = await db.prefetchPlan({ modules: ['src/db'], withContent: true })
  assert.deepEqual(plan.files.map((f) => [f.path, f.tier, f.sessions, f.moduleSessions]), [
    ['src/db/pool.ts', 'always', 4, 4],
    ['src/db/schema.ts', 'usually', 3, 4],
  ])
  assert.equal(plan.files[1].content, 'export const tables = ["users"]\n')
  assert.equal(plan.files[1].share, 0.75)
  assert.equal(plan.usedTokens, plan.files[0].tokens + plan.files[1].tokens)
  assert.deepEqual(plan.omitted, [])
  assert.equal(plan.budgetTokens, 32000)

  const one = await db.prefetchPlan({ maxFiles: 1 })
  assert.deepEqual(one.omitted, [{ path: 'src/db/schema.ts', tier: 'usually', reason: 'max_files' }])
  assert.equal(one.files[0].content, undefined)

  const c = await db.sessionContext({ modules: ['src/db/'] })
  assert.deepEqual(c.files.map((f) => f.path), ['src/db/pool.ts', 'src/db/schema.ts'])
  assert.match(c.text, /## Files usually read first in these modules\n- `src\/db\/pool.ts` \(read in 4 of 4 sessions in `src\/db\/`\)/)

  for (const [options, pattern] of [
    [{ budgetTokens: 0 }, /budgetTokens must be between 1 and 1000000/],
    [{ maxFiles: -1 }, /maxFiles/],
    [{ maxFile: 3 }, /maxFile/],
    [{ modules: ['../x/'] }, /modules: .*escapes the project root/],
    [{ withContent: 'yes' }, /withContent/],
  ]) {
    await assert.rejects(db.prefetchPlan(options), (err) => {
      assert.equal(err.code, 'ENGRAM_INVALID_ARG', `${JSON.stringify(options)}: ${err.code} ${err.message}`)
      assert.match(err.message, pattern)
      return true
    })
  }
})

test('plannerContext returns the transformations as data; qaContext puts requirements first', async (t) => {
  const { db } = await project(t)
  const deadEnd = await db.remember({ type: 'dead_end', content: 'A global lock around acquire() deadlocked the workers', relatedFiles: ['src/db/pool.ts'], confidence: 0.9 })
  const coupling = await db.remember({ type: 'causal_dependency', content: 'pool.ts and config/db.ts change together', relatedFiles: ['src/db/pool.ts', 'config/db.ts'], confidence: 0.9 })
  const p = await db.plannerContext('resize the pool under load', { modules: ['src/db/'] })
  assert.equal(p.calibration, null)
  assert.deepEqual(p.constraints, [{ text: 'Do not repeat: A global lock around acquire() deadlocked the workers', memoryId: deadEnd.memory.id }])
  assert.deepEqual(p.scopeFiles, [{ path: 'config/db.ts', memoryIds: [coupling.memory.id] }])
  assert.deepEqual(p.memories.map((m) => m.section), ['dead_ends', 'dependencies'])
  assert.match(p.text, /## Apply to the plan\n- Constraint: Do not repeat: A global lock/)
  assert.ok(p.tokens <= p.budgetTokens && p.budgetTokens === 3000)

  const requirement = await db.remember({ type: 'requirement', content: 'acquire() never waits more than 5 s', relatedFiles: ['src/db/pool.ts'], confidence: 0.95 })
  const error = await db.remember({ type: 'error_pattern', content: '`PoolTimeout` after deploys means the old pool was not drained', relatedFiles: ['src/db/pool.ts'], confidence: 0.9 })
  const qa = await db.qaContext({ modules: ['src/db/'], budgetTokens: 1000 })
  assert.deepEqual(qa.memories.map((m) => [m.section, m.memory.id]), [['requirements', requirement.memory.id], ['error_patterns', error.memory.id]])
  assert.equal(qa.budgetTokens, 1000)

  for (const [call, pattern] of [
    [() => db.plannerContext(''), /task must be 1 to/],
    [() => db.plannerContext(42), /task/],
    [() => db.plannerContext('x', { budget: 5 }), /budget/],
    [() => db.qaContext({ budgetTokens: 0 }), /budgetTokens must be between 1 and 200000/],
    [() => db.qaContext({ modules: ['../up'] }), /modules: .*escapes the project root/],
  ]) {
    await assert.rejects(call(), (err) => {
      assert.equal(err.code, 'ENGRAM_INVALID_ARG', `${call}: ${err.code} ${err.message}`)
      assert.match(err.message, pattern)
      return true
    })
  }
})

test('observeE2E stores what the app model says about a browser result, for review; failures are reported', async (t) => {
  const { db } = await project(t)
  const session = db.observe({ sessionId: 'qa-run' })
  const asked = []
  const model = (reply) => (request) => {
    asked.push(request)
    return reply
  }
  const seen = await session.observeE2E('mcp__chrome-devtools__take_screenshot', 'Checkout page: the Pay button is disabled (grey) while the card frame loads', model('B: The Pay button is enabled about 2 s after the card frame loads'))
  assert.equal(seen.category, 'timing')
  assert.equal(seen.skipped, null)
  assert.equal(seen.memory.type, 'e2e_observation')
  assert.equal(seen.memory.content, 'The Pay button is enabled about 2 s after the card frame loads')
  assert.deepEqual([seen.memory.source, seen.memory.needsReview, seen.memory.confidence, seen.memory.tags], ['mcp_auto', true, 0.75, ['timing']])
  assert.equal(seen.memory.sessionId, 'qa-run')
  assert.equal(asked[0].toolName, 'mcp__chrome-devtools__take_screenshot')
  assert.match(asked[0].prompt, /^Classify this MCP observation\. .*F=not_worth_remembering\nTool=mcp__chrome-devtools__take_screenshot, Result=Checkout page/s)

  // Not an observation tool: the model is not asked.
  assert.deepEqual(await session.observeE2E('Read', 'file text', model('A: x')), { memory: null, category: null, skipped: 'not_an_observation_tool', error: null })
  assert.equal(asked.length, 1)
  assert.equal((await session.observeE2E('browser_snapshot', 'x', model('C: the menu opens on hover'), { tools: ['browser_snapshot'] })).category, 'ui_behavior')
  for (const reply of ['F: nothing new', null, '', 'no idea']) {
    assert.equal((await session.observeE2E('eval', 'ok', model(reply))).skipped, 'not_worth_remembering', String(reply))
  }
  // The model's failures come back as data; the session goes on.
  const failures = [
    () => { throw new Error('model down') },
    () => Promise.reject(new Error('quota')),
    () => 42,
    () => new Promise(() => {}),
  ]
  for (const classify of failures) {
    const r = await session.observeE2E('eval', 'ok', classify, { timeoutMs: 200 })
    assert.equal(r.skipped, 'error')
    assert.match(r.error, /^ENGRAM_CALLBACK: classify (threw|rejected|timed out)/, r.error)
  }
  await assert.rejects(session.observeE2E('eval', 'ok', 'not a function'), (err) => err.code === 'ENGRAM_INVALID_ARG' && /classify/.test(err.message))

  // In review it stays out of QA sessions; confirmed by a person, it reaches them.
  assert.equal((await db.qaContext()).memories.length, 0, 'under review')
  await db.confirm(seen.memory.id)
  const qa = await db.qaContext()
  assert.deepEqual(qa.memories.map((m) => [m.section, m.memory.id]), [['observations', seen.memory.id]])
})
