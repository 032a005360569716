// The callback contract (issue 35), checked site by site: every function the app hands engram
// is called with four kinds of misbehaviour (it throws, its promise rejects, its promise never
// settles, it returns something of the wrong shape). A function whose answer the call needs
// ends that call with ENGRAM_CALLBACK naming the cause, within its timeout; a function that is
// only told things (progress, events, logs) is ignored when it misbehaves. Nothing reaches the
// process as an uncaught exception, and nothing hangs: each case runs in a child process that
// must exit 0, and reports 'hung' when its call has not settled after a few seconds.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { test } from 'node:test'

import { tempDir } from './helpers.mjs'

const entry = join(import.meta.dirname, '..', 'index.js')

const MISBEHAVIOURS = {
  throws: { fn: `() => { throw new Error('callback threw on purpose') }`, cause: /callback threw on purpose/ },
  rejects: { fn: `async () => { throw new Error('callback rejected on purpose') }`, cause: /callback rejected on purpose/ },
  'never settles': { fn: `() => new Promise(() => {})`, cause: /timed out after 300 ms|within 300 ms/ },
  'returns the wrong shape': { fn: `() => ({ surprise: [1, 2, 3] })`, cause: /./ },
}

/**
 * Runs `setup` then `call` (async function bodies with `engram`, `path`, `dir`, `CB` and, after
 * `setup`, whatever it declared in scope) in a child process; returns `{ resolved }` (the value
 * of `call`), `{ code, message }` of its rejection, or `{ hung: true }`.
 */
function settle(dir, callback, setup, call, patienceMs = 5000) {
  const script = `
    const engram = require(${JSON.stringify(entry)})
    const path = require('node:path'), fs = require('node:fs')
    const dir = ${JSON.stringify(dir)}
    const CB = ${callback}
    process.on('unhandledRejection', (err) => { console.error('unhandled rejection:', err); process.exit(3) })
    ;(async () => {
      ${setup}
      const run = (async () => { ${call} })().then(
        (value) => ({ resolved: value ?? null }),
        (err) => ({ code: err.code, message: err.message }),
      )
      const out = await Promise.race([run, new Promise((r) => setTimeout(() => r({ hung: true }), ${patienceMs}))])
      process.stdout.write(JSON.stringify(out))
      process.exit(0)
    })().catch((err) => { console.error('unexpected:', err); process.exit(2) })
  `
  const result = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: patienceMs + 30_000 })
  assert.equal(result.status, 0, `child died (status ${result.status}, signal ${result.signal}):\n${result.stderr}`)
  return JSON.parse(result.stdout)
}

const openDb = (extra = '{}') =>
  `const db = await engram.Engram.open({ path: path.join(dir, 'm.db'), projectRoot: dir, ...${extra} })`

const pyFile = `
  fs.mkdirSync(path.join(dir, 'src', 'billing'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'src', 'billing', 'pay.py'), 'def pay(x):\\n    return x\\n')
`

/** Sites whose answer the call needs: the call rejects with ENGRAM_CALLBACK and the cause. */
const ANSWERING = [
  {
    site: 'embeddings.embed',
    setup: openDb(`{ embeddings: { model: 'contract-v1', timeoutMs: 300, embed: CB } }`),
    call: `return db.embed(['hello'])`,
  },
  {
    site: 'deriveRelations',
    setup: `${pyFile}; ${openDb()}; await db.index()`,
    call: `return db.deriveRelations(CB, { timeoutMs: 300 })`,
  },
]

for (const { site, setup, call } of ANSWERING) {
  for (const [how, { fn, cause }] of Object.entries(MISBEHAVIOURS)) {
    test(`${site} that ${how} ends the call with ENGRAM_CALLBACK`, (t) => {
      const out = settle(tempDir(t), fn, setup, call)
      assert.equal(out.code, 'ENGRAM_CALLBACK', JSON.stringify(out))
      assert.match(out.message, cause)
    })
  }
}

/**
 * The app's LLM at the end of a session: the promotion is stored whatever it does, and the
 * failure is reported as `synthesis.error` with ENGRAM_CALLBACK.
 */
for (const [how, { fn, cause }] of Object.entries(MISBEHAVIOURS)) {
  test(`finalize({ synthesize }) whose function ${how} reports ENGRAM_CALLBACK and keeps the promotion`, (t) => {
    const setup = `${openDb()}
      const s = db.observe({ sessionId: 's-1' })
      s.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/q/worker.ts' }, stepIndex: 1 })
      s.observe({ type: 'memory:reasoning', text: 'Correction: the worker drains its queue on SIGTERM, not on exit.', stepIndex: 2 })`
    const call = `const done = await s.finalize('success', { synthesize: CB, timeoutMs: 300 })
      return { promoted: done.promoted.length, error: done.synthesis?.error ?? null }`
    const out = settle(tempDir(t), fn, setup, call)
    assert.equal(out.resolved?.promoted, 1, JSON.stringify(out))
    assert.match(out.resolved.error, /ENGRAM_CALLBACK/)
    assert.match(out.resolved.error, cause)
  })
}

/** A reranker never fails a recall: the stage is skipped, named with its cause. */
for (const [how, { fn, cause }] of Object.entries(MISBEHAVIOURS)) {
  test(`reranker.rerank that ${how} skips the rerank stage with the cause, and recall answers`, (t) => {
    const setup = `${openDb(`{ reranker: { model: 'contract-rerank', rerank: CB, timeoutMs: 300 } }`)}
      await db.rememberMany([
        { type: 'gotcha', content: 'the billing worker retries card charges three times' },
        { type: 'decision', content: 'billing amounts are stored in cents as integers' },
      ])`
    const call = `const r = await db.recall('billing charges', { stages: { dense: false } })
      return { items: r.items.length, skipped: r.skipped }`
    const out = settle(tempDir(t), fn, setup, call)
    assert.ok(out.resolved?.items > 0, JSON.stringify(out))
    const rerank = out.resolved.skipped.find((s) => s.startsWith('rerank'))
    assert.ok(rerank, JSON.stringify(out))
    assert.match(rerank, /ENGRAM_RERANK/)
    assert.match(rerank, cause)
  })
}

/** A sync token function: the sync run fails with ENGRAM_CALLBACK and the cause. */
for (const [how, { fn, cause }] of Object.entries(MISBEHAVIOURS)) {
  test(`sync.getAuthToken that ${how} fails the sync run with ENGRAM_CALLBACK`, (t) => {
    const setup = openDb(`{ sync: { url: 'http://127.0.0.1:9', intervalSecs: 3600, getAuthToken: CB, tokenTimeoutMs: 300 } }`)
    const out = settle(tempDir(t), fn, setup, `return db.sync()`)
    assert.equal(out.code, 'ENGRAM_CALLBACK', JSON.stringify(out))
    assert.match(out.message, cause)
  })
}

/** Functions that are only told things: their misbehaviour is ignored, the call completes. */
const LISTENING = [
  {
    site: 'index({ onProgress })',
    setup: `${pyFile}; ${openDb()}`,
    call: `const r = await db.index({ onProgress: CB }); return r.filesIndexed`,
    // A throwing or rejecting onProgress ends the run (callbacks.test.mjs): only the rest here.
    only: ['never settles', 'returns the wrong shape'],
    expect: (out) => assert.equal(out.resolved, 1, JSON.stringify(out)),
  },
  {
    site: 'Engram.setLogger',
    setup: `engram.Engram.setLogger(CB, { level: 'debug' }); ${pyFile}; ${openDb()}`,
    call: `const r = await db.index(); await db.remember({ type: 'gotcha', content: 'logs flow to a broken logger' }); engram.Engram.setLogger(null); return r.filesIndexed`,
    expect: (out) => assert.equal(out.resolved, 1, JSON.stringify(out)),
  },
  {
    site: 'onSyncEvent listener',
    setup: `${openDb(`{ sync: { url: 'http://127.0.0.1:9', intervalSecs: 3600 } }`)}; let calls = 0; db.onSyncEvent((e) => { calls++; return CB(e) })`,
    call: `await db.sync().catch(() => {}); await db.sync().catch(() => {})
      for (let waited = 0; calls < 2 && waited < 3000; waited += 50) await new Promise((r) => setTimeout(r, 50))
      return calls`,
    expect: (out) => assert.ok(out.resolved >= 2, JSON.stringify(out)),
  },
]

for (const { site, setup, call, only, expect } of LISTENING) {
  for (const [how, { fn }] of Object.entries(MISBEHAVIOURS)) {
    if (only && !only.includes(how)) continue
    test(`${site} that ${how} is ignored and the call completes`, (t) => {
      expect(settle(tempDir(t), fn, setup, call))
    })
  }
}
