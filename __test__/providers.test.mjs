// The embedding providers across the boundary: a JS `embed` callback (async and plain, typed
// arrays and number arrays, throws), an OpenAI-compatible server (a local node:http server
// speaking the documented /v1/embeddings wire format: the only kind of double allowed), an
// Ollama server that is down with a fallback, and option validation.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

import { Engram, rejectsWithCode, tempDir } from './helpers.mjs'

/** Hashed bag of lower-cased words: a small real model (shared words mean close vectors). */
function bagOfWords(text, dims) {
  const v = new Float32Array(dims)
  for (const word of text.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (word.length <= 2) continue
    let h = 2166136261
    for (const ch of word) h = Math.imul(h ^ ch.codePointAt(0), 16777619) >>> 0
    v[h % dims] += 3
  }
  v[0] += 0.01
  return v
}

const MEMORIES = [
  'The upload client retries flaky network requests three times with backoff',
  'Database migrations run inside one transaction and roll back on failure',
  'The login page stores the session token in an httpOnly cookie',
]

/** Remembers MEMORIES, embeds them, searches; returns [found first, expected]. */
async function rememberEmbedSearch(memory) {
  const ids = []
  for (const content of MEMORIES) ids.push((await memory.remember({ type: 'pattern', content })).memory.id)
  const report = await memory.embedPending()
  assert.equal(report.memories, 3)
  const hits = await memory.denseSearch('how are flaky upload requests retried')
  assert.equal(hits.length, 3)
  return [hits[0].memoryId, ids[0]]
}

const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0)

test('a JS embed callback embeds, searches and gets at most batchSize texts per call', async (t) => {
  const calls = []
  const memory = await Engram.open({
    path: join(tempDir(t), 'engram.db'),
    embeddings: {
      model: 'bow-48',
      batchSize: 2,
      embed: async (texts) => {
        calls.push(texts)
        await new Promise((resolve) => setTimeout(resolve, 1))
        return texts.map((text) => bagOfWords(text, 48))
      },
    },
  })
  t.after(() => memory.close())
  assert.equal(memory.embeddingStatus().provider, 'callback')
  assert.equal(memory.embeddingStatus().state, 'available')
  const [found, expected] = await rememberEmbedSearch(memory)
  assert.equal(found, expected)
  const status = memory.embeddingStatus()
  assert.equal(status.state, 'ready')
  assert.equal(status.model, 'callback:bow-48:48')
  assert.equal(status.dims, 48)
  assert.ok(calls.every((texts) => Array.isArray(texts) && texts.length <= 2 && texts.every((s) => typeof s === 'string')))
  // Probe, two batches of memories, the query.
  assert.equal(calls.length, 4)

  const [v] = await memory.embed(['alpha beta gamma'])
  const expectedVector = bagOfWords('alpha beta gamma', 48)
  const norm = Math.sqrt(dot(expectedVector, expectedVector))
  assert.ok(Math.abs(dot(v, expectedVector) / norm - 1) < 1e-5, 'normalised, same direction')
})

test('a plain embed callback may return number arrays; a throw is ENGRAM_CALLBACK', async (t) => {
  const memory = await Engram.open({
    path: join(tempDir(t), 'engram.db'),
    embeddings: {
      provider: 'callback',
      model: 'plain',
      embed: (texts) => {
        if (texts.some((text) => text.includes('boom'))) throw new Error('the model crashed')
        return texts.map((text) => Array.from(bagOfWords(text, 16)))
      },
    },
  })
  t.after(() => memory.close())
  const vectors = await memory.embed(['one two three', 'four five six'])
  assert.equal(vectors.length, 2)
  assert.ok(vectors[0] instanceof Float32Array && vectors[0].length === 16)
  await assert.rejects(memory.embed(['boom']), (err) => {
    assert.equal(err.code, 'ENGRAM_CALLBACK')
    assert.match(err.message, /the model crashed/)
    return true
  })
})

test('a callback answering the wrong shape is an error, never a silent bad vector', async (t) => {
  let answer = (texts) => texts.map(() => [1, 2, 3])
  const memory = await Engram.open({
    path: join(tempDir(t), 'engram.db'),
    embeddings: { model: 'shapes', embed: (texts) => answer(texts) },
  })
  t.after(() => memory.close())
  await memory.embed(['warm up'])
  answer = () => 'not vectors'
  await rejectsWithCode(assert, memory.embed(['a']), 'ENGRAM_CALLBACK')
  answer = (texts) => texts.map(() => [1, 2])
  await rejectsWithCode(assert, memory.embed(['a']), 'ENGRAM_EMBEDDING')
  answer = (texts) => texts.map(() => [0, 0, 0])
  await rejectsWithCode(assert, memory.embed(['a']), 'ENGRAM_EMBEDDING')
})

/** A local server speaking OpenAI's /v1/embeddings; records what it was sent. */
async function openAiServer(t) {
  const seen = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk) => (body += chunk))
    req.on('end', () => {
      const request = JSON.parse(body)
      seen.push({ url: req.url, auth: req.headers.authorization, body: request })
      res.setHeader('content-type', 'application/json')
      if (req.headers.authorization !== 'Bearer sk-local') {
        res.statusCode = 401
        res.end(JSON.stringify({ error: { message: 'Incorrect API key provided', code: 'invalid_api_key' } }))
        return
      }
      const dims = request.dimensions ?? 64
      const data = request.input.map((text, index) => ({
        object: 'embedding',
        index,
        embedding: Array.from(bagOfWords(text, dims)),
      }))
      res.end(JSON.stringify({ object: 'list', data: data.reverse(), model: request.model }))
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  return { url: `http://127.0.0.1:${server.address().port}/v1`, seen }
}

test('an OpenAI-compatible server embeds and searches, with the key and dimensions sent', async (t) => {
  const server = await openAiServer(t)
  const memory = await Engram.open({
    path: join(tempDir(t), 'engram.db'),
    embeddings: { provider: 'openai', model: 'text-embedding-3-small', baseUrl: server.url, apiKey: 'sk-local', dimensions: 96 },
  })
  t.after(() => memory.close())
  const [found, expected] = await rememberEmbedSearch(memory)
  assert.equal(found, expected)
  assert.equal(memory.embeddingStatus().model, 'openai:text-embedding-3-small:96')
  assert.ok(server.seen.length >= 3)
  for (const request of server.seen) {
    assert.equal(request.url, '/v1/embeddings')
    assert.equal(request.auth, 'Bearer sk-local')
    assert.equal(request.body.dimensions, 96)
  }

  // A wrong key: the dense path is unavailable, the key is not in the message.
  const other = await Engram.open({
    path: join(tempDir(t), 'other.db'),
    embeddings: { provider: 'openai', model: 'm', baseUrl: server.url, apiKey: 'sk-wrong-789' },
  })
  t.after(() => other.close())
  await assert.rejects(other.embed(['x']), (err) => {
    assert.equal(err.code, 'ENGRAM_MODEL_UNAVAILABLE')
    assert.match(err.message, /Incorrect API key provided/)
    assert.doesNotMatch(err.message, /sk-wrong-789/)
    return true
  })
})

test('an Ollama server that is down falls back to the next provider', async (t) => {
  // A port nothing listens on: bind, read the port, close.
  const probe = createServer()
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const deadUrl = `http://127.0.0.1:${probe.address().port}`
  await new Promise((resolve) => probe.close(resolve))

  const down = await Engram.open({
    path: join(tempDir(t), 'down.db'),
    embeddings: { provider: 'ollama', model: 'nomic-embed-text', baseUrl: deadUrl },
  })
  t.after(() => down.close())
  await rejectsWithCode(assert, down.denseSearch('anything'), 'ENGRAM_MODEL_UNAVAILABLE')
  // Everything else still works.
  const saved = await down.remember({ type: 'gotcha', content: 'Ollama may be down' })
  assert.equal((await down.get(saved.memory.id)).content, 'Ollama may be down')

  const memory = await Engram.open({
    path: join(tempDir(t), 'engram.db'),
    embeddings: {
      provider: 'ollama',
      model: 'nomic-embed-text',
      baseUrl: deadUrl,
      fallback: [{ model: 'bow-64', embed: (texts) => texts.map((text) => bagOfWords(text, 64)) }],
    },
  })
  t.after(() => memory.close())
  assert.equal(memory.embeddingStatus().provider, 'ollama,callback')
  const [found, expected] = await rememberEmbedSearch(memory)
  assert.equal(found, expected)
  assert.equal(memory.embeddingStatus().provider, 'callback')
})

test('query and document prefixes go before what is searched and what is stored', async (t) => {
  const sent = []
  const memory = await Engram.open({
    path: join(tempDir(t), 'engram.db'),
    embeddings: {
      model: 'bow-48',
      queryPrefix: 'query: ',
      documentPrefix: 'passage: ',
      embed: (texts) => {
        sent.push(...texts)
        return texts.map((text) => bagOfWords(text, 48))
      },
    },
  })
  t.after(() => memory.close())
  const [found, expected] = await rememberEmbedSearch(memory)
  assert.equal(found, expected)
  // The document prefix is part of the model's identity; the query prefix is not.
  assert.match(memory.embeddingStatus().model, /^callback:bow-48\+d[0-9a-f]{8}:48$/)
  for (const content of MEMORIES) assert.ok(sent.some((text) => text.startsWith('passage: ') && text.endsWith(content)), content)
  assert.ok(sent.includes('query: how are flaky upload requests retried'))

  await memory.embed(['red green'], { kind: 'query' })
  await memory.embed(['blue yellow'], { kind: 'document' })
  await memory.embed(['grey'])
  assert.deepEqual(sent.slice(-3), ['query: red green', 'passage: blue yellow', 'passage: grey'])
  for (const options of [{ kind: 'passage' }, { kinds: 'query' }, 'query']) {
    await rejectsWithCode(assert, memory.embed(['x'], options), 'ENGRAM_INVALID_ARG')
  }
})

test('bad embeddings options are ENGRAM_INVALID_ARG at open', async (t) => {
  const dir = tempDir(t)
  const bad = [
    { provider: 'ollama' },
    { provider: 'openai', model: 'm', baseUrl: 'ftp://example.com' },
    { provider: 'callback', model: 'm' },
    { provider: 'local', embed: () => [] },
    { model: 'm', embed: 'not a function' },
    { provider: 'ollama', model: 'm', batchSize: 0 },
    { provider: 'ollama', model: 'm', maxRetries: 11 },
    { provider: 'ollama', model: 'm', fallback: [{ provider: 'local', fallback: [] }] },
    { provider: 'none', fallback: [{ provider: 'local' }] },
    { provider: 'word2vec' },
    { provider: 'local', maxTokens: 1 },
    { provider: 'local', queryPrecision: 'bf16' },
    { provider: 'local', queryPrefix: 'query: ' },
    { provider: 'none', documentPrefix: 'passage: ' },
    { provider: 'ollama', model: 'm', documentPrefix: 'x'.repeat(2000) },
    { provider: 'ollama', model: 'm', queryPrefix: 42 },
    { provider: 'openai', model: 'm', baseUrl: 'http://localhost:1/v1', queryPrefix: '   ' },
  ]
  for (const [i, embeddings] of bad.entries()) {
    await rejectsWithCode(assert, Engram.open({ path: join(dir, `bad-${i}.db`), embeddings }), 'ENGRAM_INVALID_ARG')
  }
})

test('the CLI embeds and searches through a server chosen by flags and environment', async (t) => {
  const server = await openAiServer(t)
  const dir = tempDir(t)
  const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'engram.js')
  // Asynchronous: the server answers on this process's event loop.
  const run = (...args) =>
    promisify(execFile)(process.execPath, [cli, '--db', join(dir, 'cli.db'), '--root', dir, '--provider', 'openai', '--model', 'bow', ...args], {
      env: { ...process.env, ENGRAM_EMBED_URL: server.url, ENGRAM_EMBED_API_KEY: 'sk-local', ENGRAM_EMBED_DOCUMENT_PREFIX: 'passage: ' },
    })
  for (const content of MEMORIES) await run('remember', content, '--type', 'pattern')
  const embedded = JSON.parse((await run('embed', '--json')).stdout)
  assert.equal(embedded.memories, 3)
  assert.match(embedded.model, /^openai:bow\+d[0-9a-f]{8}:64$/)
  const hits = JSON.parse((await run('dense', 'how are flaky upload requests retried', '--query-prefix', 'query: ', '--json')).stdout)
  assert.match(hits[0].memoryType, /pattern/)
  const first = JSON.parse((await run('get', hits[0].memoryId, '--json')).stdout)
  assert.equal(first.content, MEMORIES[0])
  assert.ok(server.seen.every((r) => r.auth === 'Bearer sk-local'))
  const inputs = server.seen.flatMap((r) => r.body.input)
  assert.ok(inputs.some((text) => text.startsWith('passage: ') && text.endsWith(MEMORIES[0])))
  assert.ok(inputs.includes('query: how are flaky upload requests retried'))
})

test('unwatch() and close() return while a background run waits on a JS embed callback', async (t) => {
  // Background runs are spawned on the engine's runtime, never on the watcher thread's (whose
  // drop in unwatch() would wait for a callback that waits for the JS thread).
  const dir = tempDir(t)
  const root = join(dir, 'repo')
  mkdirSync(root)
  writeFileSync(join(root, 'a.py'), 'def first():\n    return 1\n')
  let entered
  const inCallback = new Promise((resolve) => (entered = resolve))
  let release
  const released = new Promise((resolve) => (release = resolve))
  const memory = await Engram.open({
    path: join(dir, 'e.db'),
    projectRoot: root,
    embeddings: {
      model: 'slow',
      autoEmbed: true,
      embed: async (texts) => {
        if (texts.some((text) => text.includes('second'))) {
          entered()
          await released
        }
        return texts.map((text) => bagOfWords(text, 16))
      },
    },
  })
  // The callback's threadsafe function is weak (it never keeps a process alive by itself):
  // hold the loop open as an app's own work would.
  const keepAlive = setInterval(() => {}, 1000)
  t.after(() => clearInterval(keepAlive))
  await memory.index()
  // No run going, so that the watch update starts the next one itself.
  while (memory.embeddingStatus().background.running) await new Promise((resolve) => setTimeout(resolve, 10))
  await memory.watch({ debounceMs: 20 })
  writeFileSync(join(root, 'b.py'), 'def second():\n    return 2\n')
  await inCallback
  // The callback is mid-call on a background run started by the watch update.
  assert.equal(memory.unwatch(), true)
  memory.close()
  release()
})
