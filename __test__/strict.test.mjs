// Strict arguments (issue 35, defect 7): what napi would take silently (a negative number
// wrapped to 4294967295, a fraction cut, an unknown key ignored, a string read as an empty
// object, a null element thrown as an uncoded TypeError) rejects with ENGRAM_INVALID_ARG and a
// message naming the value at fault.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { join } from 'node:path'

import { addon, Engram, tempDir } from './helpers.mjs'

/** Asserts `call` (a Promise or a function that throws) fails with ENGRAM_INVALID_ARG and a
 * message matching each of `patterns`. */
async function invalid(call, ...patterns) {
  const check = (err) => {
    assert.ok(err instanceof Error, `expected an Error, got ${err}`)
    assert.equal(err.code, 'ENGRAM_INVALID_ARG', `${err.code}: ${err.message}`)
    for (const p of patterns) assert.match(err.message, p)
    return true
  }
  if (typeof call === 'function') assert.throws(call, check)
  else await assert.rejects(call, check)
}

async function open(t, extra = {}) {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: dir, embeddings: { provider: 'none' }, ...extra })
  t.after(() => db.close())
  return { db, dir }
}

test('rememberMany names the bad element instead of throwing an uncoded TypeError', async (t) => {
  const { db } = await open(t)
  await invalid(db.rememberMany([null]), /inputs\[0\] must be a plain object, got null/)
  await invalid(db.rememberMany([{ type: 'gotcha', content: 'ok' }, 'text']), /inputs\[1\] must be a plain object/)
  await invalid(db.rememberMany([{ type: 'gotcha', content: 'ok' }, { type: 'gotcha' }]), /inputs\[1\]\.content is required/)
  await invalid(db.rememberMany('not a list'), /inputs must be an array/)
  assert.equal((await db.list()).length, 0, 'nothing stored')
})

test('open options: numbers are whole and in range, embeddings an object, unknown keys refused', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'memory.db')
  await invalid(Engram.open({ path, maxContentBytes: -1 }), /options\.maxContentBytes must be a whole number >= 0, got -1/)
  await invalid(Engram.open({ path, busyTimeoutMs: -1 }), /options\.busyTimeoutMs/)
  await invalid(Engram.open({ path, busyTimeoutMs: Number.NaN }), /options\.busyTimeoutMs .*NaN/)
  await invalid(Engram.open({ path, readConnections: 2.5 }), /options\.readConnections .*2\.5/)
  await invalid(Engram.open({ path, closureDepth: 2 ** 32 }), /options\.closureDepth must be at most 4294967295/)
  await invalid(Engram.open({ path, busyTimeoutMs: '10' }), /options\.busyTimeoutMs must be a whole number, got a string/)
  await invalid(Engram.open({ path, embeddings: 'x' }), /options\.embeddings must be a plain object, got a string/)
  await invalid(Engram.open({ path, embedder: 'none' }), /unknown key 'embedder'/, /embeddings/, /busyTimeoutMs/)
  await invalid(Engram.open({ path, embeddings: { provder: 'none' } }), /options\.embeddings has an unknown key 'provder' \(did you mean 'provider'\?\)/)
  await invalid(
    Engram.open({ path, embeddings: { provider: 'local', fallback: [{ provider: 'local', dims: 3 }] } }),
    /options\.embeddings\.fallback\[0\] has an unknown key 'dims'/,
  )
  await invalid(Engram.open({ path, embeddings: { provider: 'openai', model: 'm', timeoutMs: -5 } }), /options\.embeddings\.timeoutMs/)
  await invalid(Engram.open({ path, reranker: { model: 'm', url: 'http://localhost:1', maxDocumentBytes: 1e3 + 0.5 } }), /options\.reranker\.maxDocumentBytes/)
  await invalid(Engram.open({ path, sync: { url: 'http://localhost:1', interval: 5 } }), /options\.sync has an unknown key 'interval'/)
  assert.equal(addon.openEngineCount(), 0, 'no engine was opened')
  // What the typings allow still opens (an undefined value is an absent one).
  const db = await Engram.open({ path, busyTimeoutMs: undefined, maxContentBytes: 100, embeddings: { provider: 'none' }, reranker: undefined })
  await db.close()
})

test('relatedFiles and triggers refuse NUL bytes and empty entries; paths are checked lexically', async (t) => {
  const { db } = await open(t)
  await invalid(db.remember({ type: 'gotcha', content: 'x', relatedFiles: ['a\0b.ts'] }), /input\.relatedFiles\[0\] contains a NUL byte/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', relatedFiles: ['src/a.ts', ''] }), /input\.relatedFiles\[1\] is empty/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', relatedFiles: ['  '] }), /input\.relatedFiles\[0\] is empty/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', tags: ['ok', ''] }), /input\.tags\[1\] is empty/)
  await invalid(db.rememberMany([{ type: 'gotcha', content: 'x' }, { type: 'gotcha', content: 'y', triggers: [''] }]), /inputs\[1\]\.triggers\[0\] is empty/)
  await invalid(
    db.remember({ type: 'gotcha', content: 'x', relations: [{ relationType: 'validates', targetFilePath: 'a\0b.ts' }] }),
    /NUL byte/,
  )
  const { memory } = await db.remember({ type: 'gotcha', content: 'Seed with npm run seed', relatedFiles: ['src/seed.ts'] })
  await invalid(db.update(memory.id, { triggers: [''] }), /patch\.triggers\[0\] is empty/)
  await invalid(db.update(memory.id, { relatedFiles: ['a\0b'] }), /patch\.relatedFiles\[0\] contains a NUL byte/)
  await invalid(db.confirm(memory.id, { patch: { tags: [''] } }), /options\.patch\.tags\[0\] is empty/)
  assert.deepEqual((await db.get(memory.id)).relatedFiles, ['src/seed.ts'], 'unchanged')
  // Clearing a list is not an empty entry.
  assert.deepEqual((await db.update(memory.id, { triggers: [], relatedFiles: [] })).relatedFiles, [])
})

test('indexPaths and chunksOf refuse a path with a NUL byte', async (t) => {
  const { db } = await open(t)
  await invalid(db.indexPaths(['src/a.ts', 'a\0b.ts']), /paths\[1\]: path "a\\0b\.ts" contains a NUL byte/)
  await invalid(db.chunksOf('a\0b.ts'), /NUL byte/)
})

test('counts in options: negative, fractional, NaN, infinite and too large numbers are refused by name', async (t) => {
  const { db } = await open(t)
  await db.remember({ type: 'gotcha', content: 'Run migrations before seeding' })
  await invalid(db.search('migrations', { limit: 1.5 }), /options\.limit must be a whole number >= 0, got 1\.5/)
  await invalid(db.search('migrations', { limit: -1 }), /options\.limit .*-1/)
  await invalid(db.search('migrations', { limit: Number.POSITIVE_INFINITY }), /options\.limit .*Infinity/)
  await invalid(db.list({ offset: -1 }), /filter\.offset .*-1/)
  await invalid(db.list({ offset: Number.NaN }), /filter\.offset .*NaN/)
  await invalid(db.list({ limit: '5' }), /filter\.limit must be a whole number, got a string/)
  await invalid(db.impact('src/a.ts', { memoryLimit: -1 }), /options\.memoryLimit/)
  await invalid(db.impact('src/a.ts', { memoryLimit: 10_001 }), /memoryLimit must be between 0 and 10000/)
  await invalid(db.impact('src/a.ts', { layers: [99] }), /options\.layers\[0\] must be 1, 2 or 3, got 99/)
  await invalid(db.traverse('src/a.ts', { layers: [1, -1] }), /options\.layers\[1\]/)
  await invalid(db.recall('migrations', { limit: 2.5 }), /options\.limit/)
  await invalid(db.recall('migrations', { budgetTokens: -100 }), /options\.budgetTokens/)
  await invalid(db.reviewQueue({ offset: -1 }), /options\.offset/)
  await invalid(db.rollback('01900000-0000-7000-8000-000000000000', -1), /version must be a whole number >= 0, got -1/)
  await invalid(db.setTrustLevel(1.5), /level must be a whole number >= 0, got 1\.5/)
  await invalid(db.stepInjection(-1, { toolCalls: [] }), /step must be a whole number >= 0, got -1/)
  await invalid(db.injectGraph({ nodes: [{ key: 'concept:x', kind: 'concept', startLine: -3 }] }), /batch\.nodes\.startLine|startLine/)
  // Valid counts still work.
  assert.equal((await db.search('migrations', { limit: 5 })).length, 1)
  assert.equal((await db.list({ limit: 1, offset: 0 })).length, 1)
})

test('finite numbers and JSON-safe metadata', async (t) => {
  const { db } = await open(t)
  await invalid(db.remember({ type: 'gotcha', content: 'x', decayHalfLifeDays: 1e308 }), /decayHalfLifeDays .*got 1e308/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', confidence: Number.NaN }), /input\.confidence must be a finite number, got NaN/)
  await invalid(db.search('x', { minConfidence: Number.POSITIVE_INFINITY }), /options\.minConfidence must be a finite number/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', metadata: { id: 2n ** 64n } }), /input\.metadata\.id is a BigInt/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', metadata: { ids: [1, 12345678901234567890n] } }), /input\.metadata\.ids\[1\] is a BigInt/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', metadata: { ratio: Number.NaN } }), /input\.metadata\.ratio must be a finite number/)
  const { memory } = await db.remember({ type: 'gotcha', content: 'x', decayHalfLifeDays: 365, metadata: { ticket: 'ENG-1', n: 3 } })
  assert.deepEqual(memory.metadata, { ticket: 'ENG-1', n: 3 })
  await invalid(db.update(memory.id, { metadata: { n: 1n } }), /patch\.metadata\.n is a BigInt/)
})

test('options objects: a mistyped key is refused naming it and the keys that exist, nested ones too', async (t) => {
  const { db } = await open(t)
  await invalid(db.search('x', { limt: 5 }), /options has an unknown key 'limt' \(did you mean 'limit'\?\)/, /limit, mode/)
  await invalid(db.list({ onlyForgoten: true }), /filter has an unknown key 'onlyForgoten'/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', confidenc: 0.5 }), /input has an unknown key 'confidenc'/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', workUnitRef: { methodology: 'tdd', hierarchy: [], label: 'x', lable: 'y' } }), /input\.workUnitRef has an unknown key 'lable'/)
  await invalid(db.recall('x', { filters: 'x' }), /options\.filters must be a plain object, got a string/)
  await invalid(db.recall('x', { stages: 'x' }), /options\.stages must be a plain object, got a string/)
  await invalid(db.recall('x', { filters: { kind: ['chunk'] } }), /options\.filters has an unknown key 'kind' \(did you mean 'kinds'\?\)/)
  await invalid(db.recall('x', { stages: { rerankk: false } }), /options\.stages has an unknown key 'rerankk'/)
  await invalid(db.stepInjection(5, { toolCalls: [{ tool: 'Read', path: 'a.ts' }] }), /context\.toolCalls\[0\] has an unknown key 'path'/)
  await invalid(db.injectGraph({ nodes: [{ key: 'concept:x', kind: 'concept', lyer: 3 }] }), /batch\.nodes\[0\] has an unknown key 'lyer'/)
  await invalid(db.exportMemories({ format: 'json', includeForgoten: true }), /options has an unknown key 'includeForgoten'/)
  await invalid(db.embedPending({ onprogress: () => {} }), /options has an unknown key 'onprogress' \(did you mean 'onProgress'\?\)/)
  await invalid(db.index({ onProgres: () => {} }), /options has an unknown key 'onProgres'/, /onProgress, signal, deriveRelations/)
  await invalid(db.watch({ onEvnt: () => {} }), /options has an unknown key 'onEvnt'/)
  await invalid(() => db.observe({ sessionId: 's', sesionType: 'build' }), /options has an unknown key 'sesionType'/)
  // A key whose value is undefined carries nothing and passes (spread optional values).
  await db.search('x', { limit: 3, limt: undefined })
  // Keys a method reads itself still pass.
  const summary = await db.index({ onProgress: () => {}, signal: new AbortController().signal, ignore: [] })
  assert.equal(summary.filesIndexed, 0)
  // null is no "absent" for a field (napi threw an uncoded TypeError for an object field).
  await invalid(db.search('x', { types: null }), /options\.types must not be null/)
  await invalid(db.recall('x', { filters: null }), /options\.filters must not be null/)
  await invalid(db.remember({ type: 'gotcha', content: 'x', workUnitRef: null }), /input\.workUnitRef must not be null/)
})

test('a blank recall query finds nothing, like a blank search', async (t) => {
  const { db } = await open(t)
  await db.remember({ type: 'gotcha', content: 'Run migrations before seeding' })
  assert.deepEqual(await db.search('   '), [])
  for (const blank of ['', '   ', '\n\t']) {
    const found = await db.recall(blank)
    assert.deepEqual([found.items, found.context, found.usedTokens], [[], '', 0], JSON.stringify(blank))
  }
  // Its options are still checked.
  await invalid(db.recall('  ', { limit: 0 }), /limit must be between 1 and/)
})

test('observer messages: a timestamp must be a finite number', async (t) => {
  const { db } = await open(t)
  const session = db.observe({ sessionId: 'strict-1' })
  for (const timestamp of [Number.NaN, Number.POSITIVE_INFINITY]) {
    await invalid(
      () => session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'a.ts' }, stepIndex: 1, timestamp }),
      /timestamp must be a finite number/,
    )
  }
  await invalid(() => session.observe({ type: 'memory:tool-call', toolName: 'Read', args: {}, stepIndex: -1 }), /stepIndex must be a whole number >= 0, got -1/)
  session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'a.ts' }, stepIndex: 1, timestamp: Date.now() })
  await invalid(() => db.observe({ sessionId: 's2', plannedSteps: Number.NaN }), /options\.plannedSteps must be a finite number/)
})

test('every options object takes exactly the keys index.d.ts declares for it', () => {
  const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  const fields = addon.__strictFieldsForTests()
  assert.ok(Object.keys(fields).length >= 40, Object.keys(fields).join(', '))
  for (const [name, keys] of Object.entries(fields)) {
    const body = dts.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))
    assert.ok(body, `interface ${name} not found in index.d.ts`)
    const declared = [...body[1].matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1])
    assert.deepEqual(keys, declared, name)
  }
})

test('redactSecrets filters like every stored text, and refuses a non-string with a code', () => {
  const token = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'
  const r = addon.redactSecrets(`export GITHUB_TOKEN=${token}`)
  assert.equal(r.redactions, 1)
  assert.ok(!r.text.includes(token) && r.text.includes('[REDACTED]'), r.text)
  assert.deepEqual(addon.redactSecrets('nothing secret here'), { text: 'nothing secret here', redactions: 0 })
  for (const bad of [42, undefined, null, {}]) {
    assert.throws(() => addon.redactSecrets(bad), (err) => err.code === 'ENGRAM_INVALID_ARG' && /text/.test(err.message))
  }
})
