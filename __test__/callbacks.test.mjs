// A function the app passes to be told things (onProgress, onEvent, a sync listener) that
// throws, or returns a promise that rejects, must never take the host process down: an Electron
// main process dies of an uncaught exception. Each case runs in a child process, which must
// exit 0 after its work; an operation whose progress callback failed rejects with
// ENGRAM_CALLBACK naming it.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'

import { addon, tempDir } from './helpers.mjs'

const entry = join(import.meta.dirname, '..', 'index.js')

/** Runs `body` (an async function body with `engram`, `dir` in scope) in a child process. */
function child(dir, body) {
  const script = `
    const engram = require(${JSON.stringify(entry)})
    const dir = ${JSON.stringify(dir)}
    ;(async () => { ${body} })().then(
      (out) => { process.stdout.write(JSON.stringify(out ?? null)) },
      (err) => { console.error('unexpected:', err); process.exit(2) },
    )
  `
  const result = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(result.status, 0, `child died (status ${result.status}, signal ${result.signal}):\n${result.stderr}`)
  return JSON.parse(result.stdout)
}

const smallTree = `
  const fs = require('node:fs'), path = require('node:path')
  for (let i = 0; i < 120; i++) fs.writeFileSync(path.join(dir, 'm' + i + '.py'), 'def f' + i + '(x):\\n    return x\\n')
  const db = await engram.Engram.open({ path: path.join(dir, '.engram', 'm.db'), projectRoot: dir })
`

for (const [label, callback, expected] of [
  ['throws', `() => { throw new Error('boom') }`, /options\.onProgress threw: boom/],
  ['returns a rejected promise', `async () => { throw new Error('async boom') }`, /options\.onProgress rejected: async boom/],
]) {
  test(`index() whose onProgress ${label} rejects with ENGRAM_CALLBACK and the process lives on`, (t) => {
    const out = child(tempDir(t), `${smallTree}
      let error
      try { await db.index({ onProgress: ${callback} }) } catch (err) { error = { code: err.code, message: err.message } }
      // The engine is still usable, and a later run without the callback completes.
      const again = await db.index()
      await db.close()
      return { error, again: again.filesIndexed + again.filesUnchanged }
    `)
    assert.equal(out.error?.code, 'ENGRAM_CALLBACK', JSON.stringify(out))
    assert.match(out.error.message, expected)
    assert.equal(out.again, 120)
  })
}

test('watch() keeps calling an onEvent handler that threw', (t) => {
  const out = child(tempDir(t), `${smallTree}
    await db.index()
    let calls = 0
    await db.watch({ onEvent: () => { calls++; throw new Error('handler bug') } })
    const settle = (ms) => new Promise((r) => setTimeout(r, ms))
    for (let i = 0; i < 2; i++) {
      fs.writeFileSync(path.join(dir, 'm' + i + '.py'), 'def g' + i + '():\\n    return ' + i + '\\n')
      const before = calls
      for (let waited = 0; calls === before && waited < 10000; waited += 50) await settle(50)
    }
    db.unwatch()
    await db.close()
    return { calls }
  `)
  assert.ok(out.calls >= 2, JSON.stringify(out))
})

test('installModel() whose onProgress throws rejects with ENGRAM_CALLBACK', (t) => {
  const out = child(tempDir(t), `
    // A hub that trickles the first file a byte at a time: the first report, made before the
    // body, throws, and the download stops long before the file could end.
    const http = require('node:http')
    const server = http.createServer((req, res) => {
      res.writeHead(200, { 'Content-Length': 612 })
      const timer = setInterval(() => res.write(Buffer.alloc(1)), 20)
      res.on('close', () => clearInterval(timer))
    })
    await new Promise((r) => server.listen(0, '127.0.0.1', r))
    let error
    try {
      await engram.installModel({
        hubUrl: 'http://127.0.0.1:' + server.address().port,
        dest: require('node:path').join(dir, 'model'),
        onProgress: () => { throw new Error('progress bug') },
      })
    } catch (err) { error = { code: err.code, message: err.message } }
    server.closeAllConnections()
    server.close()
    return { error }
  `)
  assert.equal(out.error?.code, 'ENGRAM_CALLBACK', JSON.stringify(out))
  assert.match(out.error.message, /progress bug/)
})

test('embedPending() whose onProgress throws rejects with ENGRAM_CALLBACK', (t) => {
  const model = process.env.ENGRAM_MODEL_DIR || addon.defaultModelDir()
  if (!model || !existsSync(join(model, 'model.safetensors'))) {
    if (process.env.CI) throw new Error('CI must provide the model')
    return t.skip('no embedding model installed')
  }
  const out = child(tempDir(t), `${smallTree}
    await db.index()
    let error
    try { await db.embedPending({ onProgress: () => { throw new Error('embed bug') } }) } catch (err) { error = { code: err.code, message: err.message } }
    await db.close()
    return { error }
  `)
  assert.equal(out.error?.code, 'ENGRAM_CALLBACK', JSON.stringify(out))
  assert.match(out.error.message, /embed bug/)
})

test('a sync listener that throws does not take the process down', (t) => {
  const out = child(tempDir(t), `
    const db = await engram.Engram.open({ path: require('node:path').join(dir, 's.db'), sync: { url: 'http://127.0.0.1:9', intervalSecs: 3600 } })
    let calls = 0
    db.onSyncEvent(() => { calls++; throw new Error('listener bug') })
    for (let i = 0; i < 2; i++) await db.sync().catch(() => {})
    for (let waited = 0; calls < 2 && waited < 5000; waited += 50) await new Promise((r) => setTimeout(r, 50))
    await db.close()
    return { calls }
  `)
  assert.ok(out.calls >= 2, JSON.stringify(out))
})

// The last progress report of a short run reaches the JS thread after the run is done: the
// call must still hear that its callback threw (it resolved before the reporter waited for the
// reports in flight).
test('embedPending() of one memory whose onProgress throws still rejects with ENGRAM_CALLBACK', (t) => {
  const out = child(tempDir(t), `
    const embed = async (texts) => texts.map(() => [1, 0, 0, 0])
    const results = []
    for (let round = 0; round < 5; round++) {
      const db = await engram.Engram.open({ path: require('node:path').join(dir, 'r' + round + '.db'), embeddings: { model: 'tiny-v1', embed, autoEmbed: false } })
      await db.remember({ type: 'gotcha', content: 'the cache key includes the tenant id' })
      try { await db.embedPending({ onProgress: () => { throw new Error('progress bug') } }); results.push('resolved') } catch (err) { results.push(err.code) }
      await db.close()
    }
    return results
  `)
  assert.deepEqual(out, Array(5).fill('ENGRAM_CALLBACK'))
})
