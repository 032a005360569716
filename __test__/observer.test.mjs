// The MemoryObserver through the binding: the recorded sessions of tests/fixtures/observer/
// replayed as a JS agent loop would send them, a worker thread feeding the same session as the
// main thread, and the errors of bad messages.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'

import { Engram, tempDir } from './helpers.mjs'

const FIXTURES = new URL('../tests/fixtures/observer/', import.meta.url).pathname
/** The fixtures' clock origin; their timestamps are shifted to now. */
const T0 = 1_767_225_600_000

function signalOf(result, memory) {
  return result.candidates.find((c) => c.memoryId === memory.id)?.signal
}

function matches(result, memory, m) {
  return (m.type === undefined || memory.type === m.type)
    && (m.source === undefined || memory.source === m.source)
    && (m.signal === undefined || (memory.source === 'observer_inferred' && signalOf(result, memory) === m.signal))
    && (m.needsReview === undefined || memory.needsReview === m.needsReview)
    && (m.contains ?? []).every((part) => memory.content.includes(part))
    && (m.tags ?? []).every((tag) => memory.tags.includes(tag))
}

function describe(result) {
  return result.candidates.map((c) => `\n  ${c.decision} ${c.signal} [${c.type}] ${c.content}`).join('')
}

function check(name, spec, result) {
  for (const m of spec.expectPromoted ?? []) {
    assert.ok(result.promoted.some((memory) => matches(result, memory, m)),
      `${name}/${result.sessionId}: expected a promoted memory like ${JSON.stringify(m)}${describe(result)}`)
  }
  for (const m of spec.expectNotPromoted ?? []) {
    const wrong = result.promoted.find((memory) => matches(result, memory, m))
    assert.equal(wrong, undefined, `${name}/${result.sessionId}: ${wrong?.content} promoted against ${JSON.stringify(m)}`)
  }
  for (const c of spec.expectCount ?? []) {
    const n = result.promoted.filter((memory) => matches(result, memory, c)).length
    assert.equal(n, c.count, `${name}/${result.sessionId}: ${JSON.stringify(c)}`)
  }
  for (const d of spec.expectDecisions ?? []) {
    assert.ok(result.candidates.some((c) => c.signal === d.signal && c.decision === d.decision
      && (d.contains ?? []).every((part) => c.content.includes(part))),
    `${name}/${result.sessionId}: expected ${JSON.stringify(d)}${describe(result)}`)
  }
}

for (const file of readdirSync(FIXTURES).filter((f) => f.endsWith('.json')).sort()) {
  test(`recorded session ${file} promotes what it must`, async (t) => {
    const doc = JSON.parse(readFileSync(join(FIXTURES, file), 'utf8'))
    const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
    t.after(() => db.close())
    const base = Date.now() - 30 * 86_400_000
    const feed = (spec) => {
      const session = db.observe(spec.session)
      for (const message of spec.messages) {
        session.observe(message.timestamp === undefined ? message : { ...message, timestamp: message.timestamp - T0 + base })
      }
      return session
    }
    for (const spec of doc.sessions) {
      const session = spec.parallel
        ? (spec.parallel.forEach(feed), db.mergeSessions(spec.parallel.map((a) => a.session.sessionId), spec.merged))
        : feed(spec)
      const result = await session.finalize(spec.outcome)
      check(file, spec, result)
      assert.equal(result.metrics.memoriesPromoted, result.promoted.length)
    }
  })
}

test('a worker thread and the main thread feed one session', async (t) => {
  const path = join(tempDir(t), 'memory.db')
  const db = await Engram.open({ path })
  t.after(() => db.close())
  const session = db.observe({ sessionId: 'shared-1', sessionType: 'build' })
  const addonPath = new URL('../index.js', import.meta.url).pathname
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Engram } = require(workerData.addonPath)
    ;(async () => {
      const db = await Engram.open({ path: workerData.path })
      const s = db.observe({ sessionId: 'shared-1' })
      for (let step = 1; step <= 50; step++) {
        s.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/w/' + (step % 5) + '.ts' }, stepIndex: step })
        s.observe({ type: 'memory:tool-result', toolName: 'Read', result: 'x'.repeat(step), isError: false, stepIndex: step })
      }
      s.observe({ type: 'memory:reasoning', text: 'Correction: the worker pool is sized by the CPU count, not fixed.', stepIndex: 51 })
      parentPort.postMessage(s.snapshot().events)
      db.close()
    })().catch((e) => parentPort.postMessage('error: ' + e.code + ' ' + e.message))
  `
  const workerEvents = await new Promise((resolve, reject) => {
    const w = new Worker(source, { eval: true, workerData: { addonPath, path } })
    w.once('message', resolve)
    w.once('error', reject)
  })
  assert.ok(workerEvents >= 101, String(workerEvents))
  session.observe({ type: 'memory:tool-call', toolName: 'Edit', args: { file_path: 'src/w/1.ts', old_string: 'a', new_string: 'b' }, stepIndex: 52 })
  const snapshot = session.snapshot()
  assert.equal(snapshot.events, 102)
  assert.equal(snapshot.filesTouched, 5)
  assert.equal(snapshot.selfCorrections, 1)
  assert.deepEqual(snapshot.earlyTriggers.map((e) => e.signal), ['self_correction'])
  const result = await session.finalize()
  assert.ok(result.promoted.some((m) => m.content.includes('sized by the CPU count')))
  assert.equal(result.metrics.toolCalls, 51)
})

test('long outputs are measured without being copied whole', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
  t.after(() => db.close())
  const session = db.observe({ sessionId: 'big' })
  const huge = 'y'.repeat(1 << 20)
  for (let step = 1; step <= 9; step++) {
    session.observe({ type: 'memory:tool-call', toolName: 'Bash', args: { command: `echo ${step}` }, stepIndex: step })
    session.observe({ type: 'memory:tool-result', toolName: 'Bash', result: 'ok', stepIndex: step })
  }
  session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'data/dump.json' }, stepIndex: 10 })
  session.observe({ type: 'memory:tool-result', toolName: 'Read', result: huge, stepIndex: 10 })
  assert.ok(session.snapshot().bytes < 64 * 1024, 'the 1 MiB output is not kept')
  const { candidates } = await session.finalize()
  const spike = candidates.find((c) => c.signal === 'context_token_spike')
  assert.ok(spike, JSON.stringify(candidates))
  assert.match(spike.content, /read `data\/dump\.json` costs about 262144 tokens/)
})

test('bad messages and options throw coded errors; nothing observed is lost', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
  const code = (fn, expected) => assert.throws(fn, (e) => e instanceof Error && e.code === expected, expected)
  code(() => db.observe({}), 'ENGRAM_INVALID_ARG')
  code(() => db.observe('s'), 'ENGRAM_INVALID_ARG')
  code(() => db.observe({ sessionId: 's', sessionType: 'nap' }), 'ENGRAM_INVALID_ARG')
  code(() => db.observe({ sessionId: 's', plannedSteps: -3 }), 'ENGRAM_INVALID_ARG')
  const s = db.observe({ sessionId: 's' })
  code(() => s.observe(42), 'ENGRAM_INVALID_ARG')
  code(() => s.observe({ type: 'memory:nap' }), 'ENGRAM_INVALID_ARG')
  code(() => s.observe({ type: 'memory:tool-call', stepIndex: 1 }), 'ENGRAM_INVALID_ARG')
  code(() => s.observe({ type: 'memory:tool-call', toolName: 'Read', stepIndex: -1 }), 'ENGRAM_INVALID_ARG')
  code(() => s.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 7 }, stepIndex: 1 }), 'ENGRAM_INVALID_ARG')
  code(() => s.observe({ type: 'memory:session-complete', outcome: 'meh', stepsExecuted: 1 }), 'ENGRAM_INVALID_ARG')
  code(() => s.observe({ type: 'memory:record', entry: { type: 'nope', content: 'x' } }), 'ENGRAM_INVALID_ARG')
  code(() => s.observeMany([{ type: 'memory:reasoning', text: 'ok', stepIndex: 1 }, null]), 'ENGRAM_INVALID_ARG')
  // Valid messages still count, and invalid UTF-16 in text is replaced, not fatal.
  s.observe({ type: 'memory:reasoning', text: 'Correction: lone \ud800 surrogate is fine.', stepIndex: 1 })
  s.observeMany([{ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'a.ts' }, stepIndex: 2 }])
  assert.equal(s.snapshot().events, 2)
  await assert.rejects(s.finalize('later'), (e) => e.code === 'ENGRAM_INVALID_ARG')
  assert.equal(s.snapshot().events, 2)
  await s.finalize()
  code(() => s.observe({ type: 'memory:reasoning', text: 'late', stepIndex: 3 }), 'ENGRAM_CONFLICT')
  await assert.rejects(s.finalize(), (e) => e.code === 'ENGRAM_CONFLICT')
  db.close()
  code(() => db.observe({ sessionId: 'after-close' }), 'ENGRAM_CLOSED')
})

test('an observed session feeds step injection and step limits', async (t) => {
  const dir = tempDir(t)
  const db = await Engram.open({ path: join(dir, 'memory.db') })
  t.after(() => db.close())
  await db.remember({ type: 'gotcha', content: 'Re-sign the session cookie after rotation', relatedFiles: ['src/auth/cookie.ts'], confidence: 0.9 })
  // A session id in the `full` A/B group (the assignment is deterministic).
  let id
  for (let i = 0; ; i++) {
    const probe = db.observe({ sessionId: `probe-${i}` })
    if (probe.snapshot().abGroup === 'full') { id = `probe-${i}`; break }
  }
  const session = db.observe({ sessionId: id })
  session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/auth/cookie.ts' }, stepIndex: 4 })
  assert.equal(await session.stepInjection(4), null, 'nothing before step 5')
  const gotcha = await session.stepInjection(5)
  assert.equal(gotcha.type, 'gotcha_injection')
  assert.match(gotcha.content, /Re-sign the session cookie/)
  assert.equal(await session.stepInjection(6), null, 'never the same memory twice')
  session.observe({ type: 'memory:record', entry: { content: 'rotation lives in the middleware' }, stepIndex: 6 })
  const note = await session.stepInjection(7)
  assert.equal(note.type, 'scratchpad_reflection')
  assert.match(note.content, /rotation lives in the middleware/)
  await assert.rejects(session.stepInjection(-1), (e) => e.code === 'ENGRAM_INVALID_ARG')

  const limit = await db.stepLimit(40, { module: 'src/auth/' })
  assert.deepEqual(limit, { limit: 40, factor: 1, sessions: 0 })
  await assert.rejects(db.stepLimit(2.5), (e) => e.code === 'ENGRAM_INVALID_ARG')
})

test('mergeSessions errors are coded and change nothing', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
  t.after(() => db.close())
  db.observe({ sessionId: 'a' })
  db.observe({ sessionId: 'b' })
  const code = (fn, expected) => assert.throws(fn, (e) => e.code === expected, expected)
  code(() => db.mergeSessions(['a'], { sessionId: 'm' }), 'ENGRAM_INVALID_ARG')
  code(() => db.mergeSessions('a,b', { sessionId: 'm' }), 'ENGRAM_INVALID_ARG')
  code(() => db.mergeSessions(['a', 'nope'], { sessionId: 'm' }), 'ENGRAM_NOT_FOUND')
  code(() => db.mergeSessions(['a', 'b'], { sessionId: 'b' }), 'ENGRAM_CONFLICT')
  const merged = db.mergeSessions(['a', 'b'], { sessionId: 'm' })
  assert.equal(merged.sessionId, 'm')
  const result = await merged.finalize()
  assert.equal(result.sessionId, 'm')
})

test('a checkpointed session survives its process dying', async (t) => {
  const { spawnSync } = await import('node:child_process')
  const path = join(tempDir(t), 'memory.db')
  const addonPath = new URL('../index.js', import.meta.url).pathname
  const script = `
    const { Engram } = require(${JSON.stringify(addonPath)})
    ;(async () => {
      const db = await Engram.open({ path: ${JSON.stringify(path)} })
      const s = db.observe({ sessionId: 'crashy', sessionType: 'build' })
      s.observe({ type: 'memory:reasoning', text: 'Correction: the migration lock is per database, not per table.', stepIndex: 1 })
      for (let i = 2; i < 30; i++) s.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/db/f' + (i % 4) + '.ts' }, stepIndex: i })
      const saved = await s.checkpoint()
      console.log(JSON.stringify(saved))
      process.kill(process.pid, 'SIGKILL')
    })()
  `
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
  assert.equal(child.signal, 'SIGKILL', child.stderr)
  const saved = JSON.parse(child.stdout)
  assert.equal(saved.sessionId, 'crashy')
  assert.equal(saved.step, 29)

  const db = await Engram.open({ path })
  t.after(() => db.close())
  assert.equal(await db.resumeSession('other'), null)
  const session = await db.resumeSession('crashy')
  assert.equal(session.sessionId, 'crashy')
  assert.equal(session.snapshot().selfCorrections, 1)
  assert.equal(session.snapshot().filesTouched, 4)
  const result = await session.finalize('success')
  assert.ok(result.promoted.some((m) => m.content.includes('per database, not per table')))
  assert.equal(await db.resumeSession('crashy'), null, 'finalize removed the checkpoint')
})

const FACTS = [
  'the worker drains its queue on SIGTERM, not on exit.',
  'retries back off exponentially from 200 ms, not linearly.',
  'the dead-letter topic is per tenant, not global.',
  'jobs are acknowledged after the handler returns, not before.',
  'the scheduler wakes every 5 seconds, not every minute.',
  'payloads over 256 KB go to blob storage instead of the queue.',
]

test('finalize and synthesize call the app\'s LLM function and store its answers for review', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
  t.after(() => db.close())
  const requests = []
  const llm = async (request) => {
    requests.push(request)
    await new Promise((r) => setTimeout(r, 5))
    return [
      { type: 'gotcha', content: `Synthesized for ${request.subject}: the queue drains on SIGTERM.`, relatedFiles: ['src/q/worker.ts'], confidence: 0.8 },
      { type: 'gotcha', content: '' },
    ]
  }
  const session = (id) => {
    const s = db.observe({ sessionId: id })
    s.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/q/worker.ts' }, stepIndex: 1 })
    s.observe({ type: 'memory:reasoning', text: `Correction: ${FACTS[Number(id.slice(2))]}`, stepIndex: 2 })
    return s
  }
  const done = await session('s-0').finalize('success', { synthesize: llm })
  assert.equal(requests.length, 1)
  assert.equal(requests[0].mode, 'session')
  assert.match(requests[0].prompt, /drains its queue on SIGTERM/)
  assert.equal(done.synthesis.mode, 'session')
  assert.equal(done.synthesis.memories.length, 1)
  assert.equal(done.synthesis.dropped, 1)
  assert.equal(done.synthesis.memories[0].needsReview, true)
  assert.ok(done.synthesis.memories[0].tags.includes('synthesized'))

  const broken = await session('s-1').finalize('success', { synthesize: () => { throw new Error('no model') } })
  assert.match(broken.synthesis.error, /ENGRAM_CALLBACK.*no model/)
  assert.equal(broken.promoted.length, 1, 'the promotion itself is stored')
  await assert.rejects(session('s-2').finalize('success', { synthesize: 'gpt' }), (e) => e.code === 'ENGRAM_INVALID_ARG')

  for (let i = 3; i < 6; i++) await session(`s-${i}`).finalize()
  const calls = await db.synthesize({ mode: 'threshold', synthesize: llm })
  assert.deepEqual(calls.map((c) => [c.mode, c.subject, c.sessions]), [['threshold', 'src/q/', 5]])
  assert.match(requests.at(-1).prompt, /You are analyzing 5 agent sessions on the "src\/q\/" module/)
  assert.deepEqual(await db.synthesize({ mode: 'threshold', synthesize: llm }), [])
  await assert.rejects(db.synthesize({ mode: 'weekly', synthesize: llm }), (e) => e.code === 'ENGRAM_INVALID_ARG')
})
