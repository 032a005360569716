// Results reach JS as JSON (see src/node/json.rs). This checks that every object the API
// returns has exactly the shape `index.d.ts` declares: no undeclared keys, every required key
// present, and every optional key we set present with its value.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'

import { Engram, tempDir } from './helpers.mjs'

/** Field names of `export interface <name>` in index.d.ts: { required: Set, optional: Set }. */
function declared(name) {
  const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  const body = dts.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))
  assert.ok(body, `interface ${name} not found in index.d.ts`)
  const required = new Set()
  const optional = new Set()
  for (const m of body[1].matchAll(/^ {2}(\w+)(\??):/gm)) (m[2] ? optional : required).add(m[1])
  return { required, optional }
}

function assertShape(name, value, { set = [] } = {}) {
  const { required, optional } = declared(name)
  for (const key of Object.keys(value)) {
    assert.ok(required.has(key) || optional.has(key), `${name}.${key} is not declared in index.d.ts`)
  }
  for (const key of required) assert.ok(key in value, `${name}.${key} is required but missing`)
  for (const key of set) assert.notEqual(value[key], undefined, `${name}.${key} was set but is missing`)
}

const MEMORY_OPTIONALS = [
  'sessionId', 'commitSha', 'workUnitRef', 'methodology', 'targetNodeId',
  'decayHalfLifeDays', 'citationText', 'forgottenAt', 'forgottenReason',
]

test('every returned object has the declared shape', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: dir })
  t.after(() => db.close())
  const other = await db.remember({ type: 'decision', content: 'Use pnpm workspaces' })
  assertShape('RememberResult', other)
  const { memory } = await db.remember({
    type: 'gotcha',
    content: 'The cache must be warmed before the load test',
    tags: ['cache'],
    relatedFiles: ['src/cache.ts'],
    relatedModules: ['cache'],
    scope: 'module',
    shareScope: 'team',
    source: 'user_taught',
    sessionId: 'session-1',
    commitSha: 'abc123',
    workUnitRef: { methodology: 'native', hierarchy: ['spec_1'], label: 'Spec 1' },
    methodology: 'native',
    targetNodeId: 'node-1',
    impactedNodeIds: ['node-2'],
    relations: [
      { targetMemoryId: other.memory.id, relationType: 'required_with', confidence: 0.5, autoExtracted: true },
      { targetFilePath: 'src/load.ts', relationType: 'conflicts_with' },
    ],
    decayHalfLifeDays: 30,
    needsReview: true,
    userVerified: true,
    citationText: 'cache warm-up',
    pinned: true,
    metadata: { ticket: 'ENG-1', nested: { n: 1 } },
  })
  const forgotten = await db.forget(memory.id, 'replaced')
  assertShape('Memory', forgotten, { set: MEMORY_OPTIONALS })
  assertShape('WorkUnitRef', forgotten.workUnitRef)
  assert.equal(forgotten.relations.length, 2)
  assertShape('MemoryRelation', forgotten.relations[0], { set: ['targetMemoryId', 'confidence', 'autoExtracted'] })
  assertShape('MemoryRelation', forgotten.relations[1], { set: ['targetFilePath'] })
  assert.deepEqual(forgotten.metadata, { ticket: 'ENG-1', nested: { n: 1 } })
  assert.equal(forgotten.type, 'gotcha')
  assert.equal(forgotten.shareScope, 'team')
  assert.equal(typeof forgotten.createdAt, 'number')

  // A memory with nothing optional set has no optional keys at all (as napi objects had).
  const plain = (await db.get(other.memory.id))
  assertShape('Memory', plain)
  for (const key of MEMORY_OPTIONALS) assert.ok(!(key in plain), `unset ${key} should be absent`)

  const history = await db.history(memory.id)
  for (const v of history) {
    assertShape('MemoryVersion', v)
    assertShape('Memory', v.memory)
  }
  const restored = await db.rollback(memory.id, 1)
  assertShape('Memory', restored)
  const [hit] = await db.search('pnpm')
  assertShape('SearchHit', hit)
  assertShape('Memory', hit.memory)
  for (const m of await db.list({ includeForgotten: true })) assertShape('Memory', m)
  for (const r of await db.rememberMany([{ type: 'pattern', content: 'Batch one' }])) assertShape('RememberResult', r)
  assertShape('Memory', await db.update(other.memory.id, { tags: ['tooling'] }))
})

test('recall() results have the declared shape', async (t) => {
  const dir = tempDir(t)
  const { mkdirSync, writeFileSync } = await import('node:fs')
  mkdirSync(join(dir, 'src'))
  writeFileSync(join(dir, 'src', 'cache.ts'), 'export function warmCache(keys: string[]) {\n  return keys.length\n}\n')
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: dir, embeddings: { provider: 'none' } })
  t.after(() => db.close())
  await db.index()
  await db.remember({ type: 'gotcha', content: 'warm the cache before the load test', relatedFiles: ['src/cache.ts'] })
  const result = await db.recall('warm cache', { recentFiles: ['src/cache.ts'] })
  assertShape('RecallResult', result)
  assertShape('RecallTimings', result.timings)
  const chunk = result.items.find((i) => i.kind === 'chunk')
  assertShape('RecallItem', chunk, { set: ['path', 'symbol', 'startLine', 'endLine', 'chunk'] })
  assertShape('RecallRanks', chunk.ranks, { set: ['keyword', 'graph'] })
  assertShape('CodeChunk', chunk.chunk)
  const memory = result.items.find((i) => i.kind === 'memory')
  assertShape('RecallItem', memory, { set: ['memoryType', 'memory'] })
  assertShape('Memory', memory.memory)
  for (const key of ['path', 'chunk', 'startLine']) assert.ok(!(key in memory), `a memory item has no ${key}`)
})

test('observer snapshots and finalize results have the declared shape', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
  t.after(() => db.close())
  const session = db.observe({ sessionId: 'shape-1', sessionType: 'build', plannedSteps: 4 })
  session.observe({ type: 'memory:tool-call', toolName: 'WebFetch', args: { url: 'https://docs.rs/libsql' }, stepIndex: 1 })
  session.observe({ type: 'memory:tool-result', toolName: 'WebFetch', result: 'docs', stepIndex: 1 })
  session.observe({ type: 'memory:reasoning', text: 'Correction: the replica syncs on open, not lazily.', stepIndex: 2 })
  const snapshot = session.snapshot()
  assertShape('SessionSnapshot', snapshot, { set: ['externalStep'] })
  assertShape('EarlyTrigger', snapshot.earlyTriggers[0])
  const result = await session.finalize('success')
  assertShape('FinalizeResult', result)
  assertShape('SessionMetrics', result.metrics)
  const promoted = result.candidates.find((c) => c.decision === 'promoted')
  assertShape('ObserverCandidate', promoted, { set: ['memoryId'] })
  assertShape('Memory', result.promoted[0], { set: ['sessionId'] })
})

test('synthesis results have the declared shape', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
  t.after(() => db.close())
  const session = db.observe({ sessionId: 'shape-syn' })
  session.observe({ type: 'memory:reasoning', text: 'Correction: tokens expire after 15 minutes, not an hour.', stepIndex: 1 })
  const result = await session.finalize('success', {
    synthesize: (request) => {
      assertShape('SynthesisRequest', request)
      assertShape('SynthesisSignal', request.signals[0])
      return [{ type: 'gotcha', content: 'Access tokens live 15 minutes; refresh before long jobs.' }]
    },
  })
  assertShape('FinalizeResult', result, { set: ['synthesis'] })
  assertShape('SynthesisResult', result.synthesis)
  assert.ok(!('error' in result.synthesis), 'no error key when the call succeeded')
  assert.ok(!('module' in result), 'no module key when no file was touched')
  assertShape('Memory', result.synthesis.memories[0])
})
