// recall() across the JS boundary: memories and code ranked together on a small real project
// (real parses, a real database file), the dense path through a JS embedding function, worker
// threads sharing the engine, the CLI, and coded errors for bad input.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { Worker } from 'node:worker_threads'

import { Engram, rejectsWithCode, tempDir } from './helpers.mjs'

const FILES = {
  'src/auth/password.ts': `export function checkPassword(stored: string, given: string): boolean {
  let diff = 0
  for (let i = 0; i < stored.length; i++) diff |= stored.charCodeAt(i) ^ given.charCodeAt(i)
  return diff === 0
}
`,
  'src/auth/login.ts': `import { checkPassword } from './password'
import { findUser } from '../db/users'

export async function login(name: string, password: string) {
  const user = await findUser(name)
  return user !== undefined && checkPassword(user.hash, password)
}
`,
  'src/db/users.ts': `export async function findUser(name: string) {
  return db.query('SELECT * FROM users WHERE name = ?', [name])[0]
}
`,
  'src/ui/button.ts': `export function renderButton(label: string): string {
  return '<button>' + label + '</button>'
}
`,
}

// The embedding function: words of one group share a dimension, so "credentials" is near
// "password" and the dense path's answers are known.
const CONCEPTS = [
  ['password', 'credentials', 'secret', 'verify', 'checkpassword'],
  ['button', 'render', 'renderbutton', 'widget'],
  ['user', 'users', 'finduser', 'account'],
  ['login', 'signin'],
]

function conceptVector(text) {
  const v = new Array(CONCEPTS.length + 1).fill(0)
  for (const word of text.toLowerCase().split(/[^a-z0-9]+/)) {
    const i = CONCEPTS.findIndex((group) => group.includes(word))
    if (i >= 0) v[i] += 1
  }
  v[CONCEPTS.length] = 0.05
  return v
}

async function project(t, options = {}) {
  const root = join(tempDir(t), 'repo')
  for (const [rel, text] of Object.entries(FILES)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true })
    writeFileSync(join(root, rel), text)
  }
  const path = join(root, '..', 'recall.db')
  const db = await Engram.open({
    path,
    projectRoot: root,
    embeddings: { model: 'concepts', embed: async (texts) => texts.map(conceptVector) },
    ...options,
  })
  t.after(() => db.close())
  await db.index()
  return { db, path, root }
}

test('recall() ranks code and memories together and packs a cited context', async (t) => {
  const { db } = await project(t)
  const gotcha = await db.remember({
    type: 'gotcha',
    content: 'checkPassword must stay constant-time: never return early',
    relatedFiles: ['src/auth/password.ts'],
  })
  await db.embedPending()

  const byName = await db.recall('checkPassword')
  assert.equal(byName.queryKind, 'identifier')
  assert.deepEqual(byName.skipped, [])
  const top2 = byName.items.slice(0, 2)
  assert.ok(top2.some((i) => i.kind === 'chunk' && i.path === 'src/auth/password.ts'), JSON.stringify(top2))
  assert.ok(top2.some((i) => i.kind === 'memory' && i.id === gotcha.memory.id))
  const chunk = byName.items.find((i) => i.path === 'src/auth/password.ts')
  assert.equal(chunk.symbol, 'checkPassword')
  assert.equal(chunk.citation, 'src/auth/password.ts:1-5')
  assert.equal(chunk.ranks.keyword, 1)
  assert.equal(chunk.chunk.content, FILES['src/auth/password.ts'].trimEnd())
  const memory = byName.items.find((i) => i.kind === 'memory')
  assert.equal(memory.memoryType, 'gotcha')
  assert.equal(memory.memory.content, gotcha.memory.content)
  assert.match(byName.context, /## Memories[\s\S]*never return early[\s\S]*## Code[\s\S]*### src\/auth\/password\.ts/)
  assert.ok(byName.usedTokens > 0 && byName.usedTokens <= byName.budgetTokens)
  assert.ok(byName.timings.totalMs > 0 && byName.timings.totalMs >= byName.timings.candidatesMs)
  // The weights were read for this query: its word names the definition the keyword path found.
  assert.equal(byName.evidence.named, 'checkPassword')
  assert.ok(byName.weights.chunks.keyword > byName.weights.chunks.dense, JSON.stringify(byName.weights))
  assert.ok(byName.weights.memories.dense > byName.weights.memories.keyword)

  // Words miss it, meaning finds it.
  const byMeaning = await db.recall('verify the secret credentials', { filters: { kinds: ['chunk'] } })
  assert.equal(byMeaning.items[0].path, 'src/auth/password.ts')
  assert.equal(byMeaning.items[0].ranks.keyword, undefined)
  assert.equal(byMeaning.items[0].ranks.dense, 1)
  assert.ok(byMeaning.timings.embedMs > 0)
  assert.equal(byMeaning.evidence.named, undefined)
  assert.ok(byMeaning.evidence.denseTop > 0.5)
  assert.ok(byMeaning.weights.chunks.dense > byMeaning.weights.chunks.keyword)
  const noDense = await db.recall('verify the secret credentials', {
    filters: { kinds: ['chunk'] },
    stages: { dense: false },
  })
  assert.ok(!noDense.items.some((i) => i.path === 'src/auth/password.ts'))
})

test('recentFiles bring the memories of the files next to them; phase and budget apply', async (t) => {
  const { db, root } = await project(t, { embeddings: { provider: 'none' } })
  const users = await db.remember({
    type: 'gotcha',
    content: 'rows are soft-deleted: filter on deletedAt',
    relatedFiles: ['src/db/users.ts'],
  })
  const plain = await db.recall('how does sign-in work')
  assert.ok(!plain.items.some((i) => i.id === users.memory.id))
  assert.ok(plain.skipped[0].startsWith('dense: ENGRAM_MODEL_UNAVAILABLE'), plain.skipped[0])
  const near = await db.recall('how does sign-in work', {
    recentFiles: [join(root, 'src/auth/login.ts')],
    phase: 'refine',
    trackAccess: true,
  })
  const found = near.items.find((i) => i.id === users.memory.id)
  assert.ok(found, JSON.stringify(near.items.map((i) => i.citation)))
  assert.equal(found.ranks.graph, 1)
  assert.equal(near.budgetTokens, 2000)
  assert.equal((await db.get(users.memory.id)).accessCount, 1)

  const small = await db.recall('login user password', { budgetTokens: 40, stages: { graph: false } })
  assert.ok(small.usedTokens <= 40)
  assert.ok(small.items.some((i) => i.pack === 'budget'))
})

test('stepInjection() shows pitfalls of files just read once, then short-circuits known searches', async (t) => {
  const { db, root } = await project(t, { embeddings: { provider: 'none' } })
  const pitfall = await db.remember({
    type: 'gotcha',
    content: 'compare password hashes in constant time',
    relatedFiles: ['src/auth/password.ts'],
  })
  const known = await db.remember({ type: 'pattern', content: 'users are looked up by findUser in src/db/users.ts' })
  const toolCalls = [
    { tool: 'Grep', pattern: 'findUser\\(' },
    { tool: 'Read', filePath: join(root, 'src/auth/password.ts') },
  ]
  assert.equal(await db.stepInjection(3, { toolCalls }), null)
  assert.equal(await db.stepInjection(5, { toolCalls }), null, 'a new project injects above 0.80 only')
  assert.equal((await db.setTrustLevel(2)).injectionThreshold, 0.65)
  const first = await db.stepInjection(5, { toolCalls })
  assert.equal(first.type, 'gotcha_injection')
  assert.deepEqual(first.memories.map((m) => m.id), [pitfall.memory.id])
  assert.match(first.content, /^MEMORY: known pitfalls[\s\S]*constant time/)
  const second = await db.stepInjection(6, { toolCalls, injectedIds: [pitfall.memory.id] })
  assert.equal(second.type, 'search_short_circuit')
  assert.equal(second.memories[0].id, known.memory.id)
  assert.equal(second.content, `MEMORY CONTEXT: ${known.memory.content}`)
  assert.equal((await db.get(known.memory.id)).accessCount, 1)
  assert.equal(await db.stepInjection(7, { toolCalls, injectedIds: [pitfall.memory.id, known.memory.id] }), null)
  await rejectsWithCode(assert, db.stepInjection(5, { toolCalls: 'Read' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.stepInjection(-1, { toolCalls }), 'ENGRAM_INVALID_ARG')
})

test('a worker thread recalls from the engine the main thread fills', async (t) => {
  const { db, path, root } = await project(t, { embeddings: { provider: 'none' } })
  const { memory } = await db.remember({ type: 'decision', content: 'Buttons are rendered server-side' })
  const addonPath = new URL('../index.js', import.meta.url).pathname
  const theirs = await new Promise((resolve, reject) => {
    const w = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads')
       const { Engram } = require(workerData.addonPath)
       Engram.open({ path: workerData.path, projectRoot: workerData.root }).then(async (db) => {
         const r = await db.recall('rendered buttons')
         db.close()
         parentPort.postMessage(r.items.map((i) => i.kind + ':' + (i.path ?? i.id)))
       }, (e) => parentPort.postMessage({ error: e.message }))`,
      { eval: true, workerData: { addonPath, path, root } },
    )
    w.once('message', resolve)
    w.once('error', reject)
  })
  assert.ok(theirs.includes(`memory:${memory.id}`), JSON.stringify(theirs))
  assert.ok(theirs.includes('chunk:src/ui/button.ts'), JSON.stringify(theirs))
})

test('bad recall input rejects with ENGRAM_INVALID_ARG, a closed handle with ENGRAM_CLOSED', async (t) => {
  const { db } = await project(t, { embeddings: { provider: 'none' } })
  const bad = [
    [42],
    ['x'.repeat(9000)],
    ['q', 'not an object'],
    ['q', { phase: 'coding' }],
    ['q', { filters: { kinds: ['file'] } }],
    ['q', { filters: { types: ['nope'] } }],
    ['q', { filters: { minConfidence: 2 } }],
    ['q', { budgetTokens: 0 }],
    ['q', { limit: 1000 }],
    ['q', { recentFiles: ['../../etc/passwd'] }],
    ['q', { stages: { dense: 'yes' } }],
  ]
  for (const args of bad) await rejectsWithCode(assert, db.recall(...args), 'ENGRAM_INVALID_ARG')
  // FTS5 syntax in user text is just text.
  for (const q of ['NEAR(login', '"unbalanced', 'login OR', '*', 'col:login']) await db.recall(q)
  db.close()
  await rejectsWithCode(assert, db.recall('login'), 'ENGRAM_CLOSED')
})

test('engram recall prints ranked items, the context, or JSON', async (t) => {
  const { root } = await project(t, { embeddings: { provider: 'none' } })
  const cli = new URL('../bin/engram.js', import.meta.url).pathname
  const run = async (...args) =>
    (await promisify(execFile)(process.execPath, [cli, '--root', root, '--provider', 'none', ...args])).stdout
  await run('index')
  await run('remember', 'login throttles after five failures', '--type', 'gotcha')
  const listed = await run('recall', 'login')
  assert.match(listed, /^ {2}1\. /m)
  assert.match(listed, /src\/auth\/login\.ts:1-7 {2}\(keyword #1; packed\)/)
  assert.match(listed, /memory {2}gotcha: login throttles/)
  assert.match(listed, /semantic query; \d+\/2500 tokens packed; [\d.]+ ms\nskipped dense: ENGRAM_MODEL_UNAVAILABLE/)
  const context = await run('recall', 'login', '--context', '--phase', 'implement')
  assert.match(context, /^## Memories/)
  const json = JSON.parse(await run('recall', 'login', '--json', '--kind', 'memory'))
  assert.deepEqual(json.items.map((i) => i.kind), ['memory'])
  await assert.rejects(run('recall'), (e) => e.code === 2)
})

test('a JS rerank function reorders the top of the list; its failures only skip the stage', async (t) => {
  const calls = []
  let fail = false
  const { db } = await project(t, {
    reranker: {
      model: 'count-name',
      rerank: async (query, documents) => {
        calls.push({ query, documents })
        if (fail) throw new Error('model offline')
        return documents.map((d) => d.split('name').length - 1)
      },
    },
  })
  await db.embedPending()
  const plain = await db.recall('password user', { stages: { rerank: false } })
  assert.equal(calls.length, 0)
  assert.ok(plain.items.every((i) => i.ranks.rerank === undefined && i.rerankScore === undefined))

  const reranked = await db.recall('password user', { rerankDepth: 3 })
  assert.deepEqual(reranked.skipped, [])
  assert.equal(calls.length, 1)
  assert.equal(calls[0].query, 'password user')
  assert.equal(calls[0].documents.length, Math.min(3, plain.items.length))
  const scores = reranked.items.slice(0, 3).map((i) => i.rerankScore)
  assert.deepEqual(scores, [...scores].sort((a, b) => b - a), 'best score first')
  assert.deepEqual(
    reranked.items.slice(0, 3).map((i) => i.ranks.rerank),
    [1, 2, 3],
  )
  // Past the depth the fused order stands.
  assert.deepEqual(
    reranked.items.slice(3).map((i) => i.id),
    plain.items.slice(3).map((i) => i.id),
  )
  assert.ok(reranked.timings.rerankMs > 0)

  fail = true
  const failed = await db.recall('password user')
  assert.equal(failed.skipped.length, 1)
  assert.match(failed.skipped[0], /^rerank: ENGRAM_RERANK: .*model offline/)
  assert.deepEqual(failed.items.map((i) => i.id), plain.items.map((i) => i.id))
})

test('bad reranker options reject at open with ENGRAM_INVALID_ARG', async (t) => {
  const dir = tempDir(t)
  const open = (reranker) => Engram.open({ path: join(dir, 'bad.db'), reranker })
  await rejectsWithCode(assert, open({ model: 'm' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, open({ model: '', url: 'http://localhost:1/rerank' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, open({ model: 'm', url: 'ftp://x/rerank' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, open({ model: 'm', url: 'http://u:p@x/rerank' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, 
    open({ model: 'm', url: 'http://x/rerank', rerank: async () => [] }),
    'ENGRAM_INVALID_ARG',
  )
  await rejectsWithCode(assert, open({ model: 'm', rerank: 'not a function' }), 'ENGRAM_INVALID_ARG')
  const db = await Engram.open({ path: join(dir, 'ok.db') })
  t.after(() => db.close())
  await rejectsWithCode(assert, db.recall('x', { rerankDepth: 0 }), 'ENGRAM_INVALID_ARG')
})

test('a misspelt query is corrected to indexed terms when exact search finds too little', async (t) => {
  const { db } = await project(t)
  const { memory } = await db.remember({ type: 'gotcha', content: 'docker compose needs the .env file' })
  const fixed = await db.recall('dokcer', { stages: { dense: false } })
  assert.equal(fixed.correctedQuery, 'docker*')
  assert.ok(fixed.items.some((i) => i.id === memory.id && i.ranks.keyword === 1), JSON.stringify(fixed.items))
  const off = await db.recall('dokcer', { stages: { dense: false, typo: false } })
  assert.equal(off.correctedQuery, undefined)
  assert.ok(!off.items.some((i) => i.id === memory.id))
})

test('hyde: when nothing is close to the query, the model\'s answer searches too; its failures only skip', async (t) => {
  const { db } = await project(t)
  const { memory } = await db.remember({ type: 'gotcha', content: 'verify the password against the secret salted hash' })
  await db.embedPending()
  const query = 'how do we compare what people type at sign in'
  const asked = []
  const generate = (request) => {
    asked.push(request)
    return 'We verify the password against the stored secret.'
  }
  const plain = await db.recall(query, { filters: { kinds: ['memory'] } })
  assert.equal(plain.hypothetical, undefined)
  assert.ok(plain.items.every((i) => i.similarity === undefined || i.similarity < 0.5), JSON.stringify(plain.items))

  const found = await db.recall(query, { filters: { kinds: ['memory'] }, hyde: { generate } })
  assert.equal(found.hypothetical, 'We verify the password against the stored secret.')
  assert.equal(asked.length, 1)
  assert.equal(asked[0].query, query)
  assert.match(asked[0].prompt, /^Write a 2-sentence memory that would perfectly answer: "how do we compare/)
  const item = found.items.find((i) => i.id === memory.id)
  assert.equal(item.ranks.dense, 1)
  assert.equal(typeof item.similarity, 'number')

  // A query close to enough items: the model is not asked.
  const close = await db.recall('verify password', { hyde: { generate, minResults: 1 } })
  assert.equal(asked.length, 1)
  assert.equal(close.hypothetical, undefined)

  // Failures are named in skipped; the first result stands.
  const threw = await db.recall(query, { hyde: { generate: () => { throw new Error('model down') } } })
  assert.ok(threw.skipped.some((s) => /^hyde: ENGRAM_CALLBACK: .*hyde\.generate threw.*model down/.test(s)), threw.skipped.join('; '))
  const slow = await db.recall(query, { hyde: { generate: () => new Promise(() => {}), timeoutMs: 50 } })
  assert.ok(slow.skipped.some((s) => /hyde\.generate timed out after 50 ms/.test(s)), slow.skipped.join('; '))
  const wrong = await db.recall(query, { hyde: { generate: async () => 42 } })
  assert.ok(wrong.skipped.some((s) => /hyde\.generate rejected or resolved to something else than text/.test(s)), wrong.skipped.join('; '))
  assert.deepEqual(threw.items.map((i) => i.id), (await db.recall(query)).items.map((i) => i.id))

  await rejectsWithCode(assert, db.recall(query, { hyde: { generate: 'no' } }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.recall(query, { hyde: {} }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.recall(query, { hyde: { generate, minSimilarity: 2 } }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.recall(query, { hyde: { generate, minResults: 0 } }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.recall(query, { hyde: { generate, timeout: 5 } }), 'ENGRAM_INVALID_ARG')
})

test('the cascade stage walks from the top hits to the memories they relate to', async (t) => {
  const { db } = await project(t, { embeddings: { provider: 'none' } })
  const { memory: idle } = await db.remember({ type: 'decision', content: 'Sessions expire after 30 minutes of idle time' })
  const { memory: login } = await db.remember({
    type: 'gotcha', content: 'login compares the password before it opens a session',
    relations: [{ targetMemoryId: idle.id, relationType: 'required_with', confidence: 0.9 }],
  })
  const plain = await db.recall('login compares the password')
  assert.ok(plain.items.some((i) => i.id === login.id))
  assert.ok(!plain.items.some((i) => i.id === idle.id))
  const walked = await db.recall('login compares the password', { stages: { cascade: true } })
  const found = walked.items.find((i) => i.id === idle.id)
  assert.ok(found, JSON.stringify(walked.items.map((i) => [i.citation, i.ranks])))
  assert.equal(typeof found.ranks.cascade, 'number')
  assert.equal(found.ranks.keyword, undefined)
})

test('a memory whose trigger is in the query or a recent file comes first', async (t) => {
  const { db, root } = await project(t)
  const { memory } = await db.remember({
    type: 'gotcha',
    content: 'never commit secrets files; the deploy reads them from the vault',
    triggers: ['.ENV'],
  })
  assert.deepEqual(memory.triggers, ['.env'])
  const byQuery = await db.recall('should I commit config.env for login', { stages: { dense: false } })
  assert.equal(byQuery.items[0].id, memory.id)
  assert.equal(byQuery.items[0].triggeredBy, '.env')
  writeFileSync(join(root, 'local.env'), 'X=1\n')
  const byFile = await db.recall('checkPassword', { recentFiles: ['local.env'], stages: { dense: false } })
  assert.equal(byFile.items[0].triggeredBy, '.env')
  const without = await db.recall('checkPassword', { stages: { dense: false } })
  assert.ok(without.items.every((i) => i.triggeredBy === undefined))
  await assert.rejects(db.remember({ type: 'gotcha', content: 'x', triggers: ['a'] }), { code: 'ENGRAM_INVALID_ARG' })
})

test('a recalled chunk that groups small functions names the one that matched', async (t) => {
  const root = join(tempDir(t), 'repo')
  mkdirSync(join(root, 'src'), { recursive: true })
  writeFileSync(
    join(root, 'src/small.ts'),
    `export function toFahrenheit(celsius: number): number {
  return (celsius * 9) / 5 + 32
}

export function slugify(title: string): string {
  return title.toLowerCase().split(' ').join('-')
}

export function dealCards(deck: string[], hands: number): string[][] {
  return Array.from({ length: hands }, (_, i) => deck.filter((_, j) => j % hands === i))
}
`,
  )
  // One dimension per topic: each function's own text is about one, the whole chunk about all.
  const topics = [
    ['temperature', 'celsius', 'fahrenheit', 'tofahrenheit'],
    ['url', 'slug', 'slugify', 'title'],
    ['cards', 'deck', 'dealcards', 'hands'],
  ]
  const embed = (text) => {
    const v = topics.map((words) => text.toLowerCase().split(/[^a-z]+/).filter((w) => words.includes(w)).length)
    return [...v, 0.05]
  }
  const db = await Engram.open({
    path: join(root, '..', 'parts.db'),
    projectRoot: root,
    embeddings: { model: 'topics', embed: async (texts) => texts.map(embed) },
  })
  t.after(() => db.close())
  await db.index()
  const [chunk] = await db.chunksOf('src/small.ts')
  assert.equal(chunk.kind, 'block', 'the fixture must group its functions')
  const report = await db.embedPending()
  assert.equal(report.parts, 3)

  for (const [query, symbol] of [
    ['temperature', 'toFahrenheit'],
    ['url', 'slugify'],
    ['cards', 'dealCards'],
  ]) {
    const denseOnly = await db.recall(query, { filters: { kinds: ['chunk'] }, stages: { keyword: false } })
    assert.equal(denseOnly.items[0].path, 'src/small.ts')
    assert.equal(denseOnly.items[0].symbol, symbol, query)
    assert.equal(denseOnly.items.length, 1, 'the chunk is listed once, however many parts matched')
    const hits = await db.denseSearch(query, { kinds: ['chunk'] })
    assert.equal(hits[0].symbol, symbol, query)
    assert.equal(new Set(hits.map((h) => h.chunkId)).size, hits.length, 'a chunk is one hit, not one per part')
  }
  // Found by words alone, a grouped chunk names no one definition.
  const keywordOnly = await db.recall('celsius', { filters: { kinds: ['chunk'] }, stages: { dense: false } })
  assert.equal(keywordOnly.items[0].path, 'src/small.ts')
  assert.equal(keywordOnly.items[0].symbol, undefined)
})
