// Logging across the boundary: Engram.setLogger with levels, targets and filters, ENGRAM_LOG to
// stderr in a child process, redaction of secrets on both paths, a throwing logger, and a
// worker that sets a logger and exits.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { test } from 'node:test'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import { Engram, tempDir } from './helpers.mjs'

const INDEX_JS = fileURLToPath(new URL('../index.js', import.meta.url))
const GITHUB = 'ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'
const OPENAI = 'sk-proj-4fG7hJ9kL2mN5pQ8rS1tU3vW6xY0zA2bC4dE6fG8hJ0kL2mN'

/** A small project: two good files and one Python file with a syntax error. */
function project(dir, name = 'project') {
  const root = join(dir, name)
  mkdirSync(join(root, 'src'), { recursive: true })
  writeFileSync(join(root, 'src', 'a.ts'), 'export function alpha(x: number) { return x + 1 }\n')
  writeFileSync(join(root, 'src', 'b.ts'), "import { alpha } from './a'\nexport const beta = alpha(2)\n")
  writeFileSync(join(root, 'src', 'broken.py'), 'def broken(:\n    return )\n')
  return root
}

/** Resolves once `predicate()` holds (lines arrive asynchronously), or fails after `ms`. */
async function until(predicate, what, ms = 5000) {
  const end = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 100))

/** Runs `script` (an ES module body with `Engram` in scope) in a child Node process. */
function child(script, env = {}) {
  const source = `import { createRequire } from 'node:module'
const { Engram } = createRequire(import.meta.url)(${JSON.stringify(INDEX_JS)})
${script}`
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', source], {
    env: { ...process.env, ENGRAM_LOG: '', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  })
  return { code: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr }
}

test('setLogger receives migration, open and index lines with their level and target', async (t) => {
  const dir = tempDir(t)
  const lines = []
  Engram.setLogger((level, target, message, fields) => lines.push({ level, target, message, fields }), {
    level: 'debug',
  })
  t.after(() => Engram.setLogger(null))

  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: project(dir) })
  t.after(() => db.close())
  await until(() => lines.some((l) => l.target === 'engram::store::migrations' && l.level === 'info'), 'migrations')
  const migrated = lines.filter((l) => l.target === 'engram::store::migrations' && l.level === 'info')
  assert.deepEqual(
    migrated.map((l) => [l.fields.home, l.fields.from]),
    [
      ['main', 0],
      ['code', 0],
    ],
  )
  for (const l of migrated) {
    assert.ok(l.fields.to >= 7 && typeof l.fields.ms === 'number', JSON.stringify(l))
    assert.match(l.message, /^migrated schema home (main|code) from v0 to v\d+$/)
  }
  // Each step at debug, and the engine's open.
  assert.ok(lines.some((l) => l.target === 'engram::store::migrations' && l.level === 'debug' && l.fields.version === 1))
  await until(() => lines.some((l) => l.target === 'engram::engine::registry' && l.message === 'opened the engine'), 'open')
  const opened = lines.find((l) => l.message === 'opened the engine')
  assert.equal(opened.level, 'debug')
  assert.equal(opened.fields.mode, 'local')
  assert.ok(opened.fields.path.endsWith('memory.db'), opened.fields.path)

  const summary = await db.index()
  await until(() => lines.some((l) => l.message === 'index run finished'), 'the index run')
  const finished = lines.find((l) => l.message === 'index run finished')
  assert.equal(finished.level, 'info')
  assert.equal(finished.target, 'engram::code::indexer')
  assert.equal(finished.fields.files_seen, summary.filesSeen)
  assert.equal(finished.fields.files_changed, 3)
  assert.equal(typeof finished.fields.ms, 'number')
  const broken = lines.find((l) => l.message === 'file indexed with a problem')
  assert.ok(broken, 'the syntax error is logged at debug')
  assert.equal(broken.level, 'debug')
  assert.deepEqual([broken.fields.path, broken.fields.issue, broken.fields.skipped], ['src/broken.py', 'syntax_errors', false])
})

test('setLogger(null) stops the lines; the default level is info', async (t) => {
  const dir = tempDir(t)
  const lines = []
  Engram.setLogger((level, target, message) => lines.push({ level, target, message }))
  t.after(() => Engram.setLogger(null))

  const db = await Engram.open({ path: join(dir, 'a.db'), projectRoot: project(dir) })
  t.after(() => db.close())
  await db.index()
  await until(() => lines.some((l) => l.message === 'index run finished'), 'the index run')
  await settle()
  assert.deepEqual(
    lines.filter((l) => l.level === 'debug' || l.level === 'trace'),
    [],
    'nothing finer than info by default',
  )

  Engram.setLogger(null)
  await settle()
  const before = lines.length
  const other = await Engram.open({ path: join(dir, 'b.db'), projectRoot: project(dir, 'other') })
  t.after(() => other.close())
  await other.index()
  await settle()
  assert.equal(lines.length, before, `lines after setLogger(null): ${JSON.stringify(lines.slice(before))}`)
})

test('a filter picks targets; bad arguments throw ENGRAM_INVALID_ARG', async (t) => {
  const dir = tempDir(t)
  const lines = []
  Engram.setLogger((level, target, message) => lines.push({ level, target, message }), {
    filter: 'warn,engram::store::migrations=debug',
  })
  t.after(() => Engram.setLogger(null))
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: project(dir) })
  t.after(() => db.close())
  await db.index()
  await until(() => lines.some((l) => l.level === 'debug'), 'migration steps')
  await settle()
  assert.deepEqual([...new Set(lines.map((l) => l.target))], ['engram::store::migrations'])

  const invalid = (fn) =>
    assert.throws(fn, (err) => {
      assert.equal(err.code, 'ENGRAM_INVALID_ARG', err.message)
      return true
    })
  invalid(() => Engram.setLogger('console.log'))
  invalid(() => Engram.setLogger(() => {}, { level: 'loud' }))
  invalid(() => Engram.setLogger(() => {}, { filter: 'engram=[[' }))
  invalid(() => Engram.setLogger(() => {}, 'debug'))
})

test('a full queue drops lines and a later warn line says how many', async (t) => {
  const dir = tempDir(t)
  const root = join(dir, 'many')
  mkdirSync(root)
  // One debug line per file (a syntax error each): more than the queue holds.
  for (let i = 0; i < 3000; i++) writeFileSync(join(root, `f${i}.py`), 'def f(:\n')
  const lines = []
  Engram.setLogger((level, target, message, fields) => lines.push({ level, target, message, fields }), {
    filter: 'engram=debug',
  })
  t.after(() => Engram.setLogger(null))
  const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: root })
  t.after(() => db.close())
  const run = db.index()
  // Keep the JS thread busy while the run logs: nothing is delivered, the queue fills.
  const end = Date.now() + 4000
  while (Date.now() < end);
  const summary = await run
  assert.equal(summary.filesIndexed, 3000)
  await settle()
  const problems = lines.filter((l) => l.message === 'file indexed with a problem').length
  assert.ok(problems < 3000, `${problems} problem lines arrived: the queue never filled`)
  // The next line finds room and reports the drops first.
  await (await Engram.open({ path: join(dir, 'other.db') })).close()
  await until(() => lines.some((l) => l.target === 'engram::log'), 'the drop report')
  const reports = lines.filter((l) => l.target === 'engram::log')
  for (const report of reports) {
    assert.equal(report.level, 'warn')
    assert.match(report.message, /^\d+ log lines were dropped: the logger's queue was full$/)
  }
  const dropped = reports.reduce((sum, r) => sum + r.fields.dropped, 0)
  assert.ok(dropped >= 3000 - problems, `${dropped} dropped, ${problems} of 3000 delivered`)
})

test('ENGRAM_LOG writes redacted lines to stderr, at debug and at trace', () => {
  for (const level of ['debug', 'trace']) {
    const { code, stdout, stderr } = child(
      `import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
const dir = mkdtempSync(join(tmpdir(), 'engram-log-'))
// The secrets are in what is remembered, in the database's path, the project root and a file
// name (so they are in log fields, one glued to a name by '_'), and in the file's content.
const root = join(dir, 'checkout-${OPENAI}')
mkdirSync(join(root, 'src'), { recursive: true })
writeFileSync(join(root, 'src', 'token_${GITHUB}.py'), 'def f(:\\n  token = "${GITHUB}"\\n')
const db = await Engram.open({ path: join(dir, 'memory-${GITHUB}.db'), projectRoot: root })
await db.remember({ type: 'gotcha', content: 'the CI token is ${GITHUB} and the key ${OPENAI}' })
await db.index()
await db.search('token')
await db.close()
rmSync(dir, { recursive: true, force: true })
console.log('done')`,
      { ENGRAM_LOG: level },
    )
    assert.equal(code, 0, stderr)
    assert.equal(stdout.trim(), 'done')
    assert.match(stderr, /INFO engram::store::migrations: migrated schema home main from v0 to v\d+ home=main from=0/)
    assert.match(stderr, /INFO engram::code::indexer: index run finished .*files_changed=1/)
    assert.match(stderr, /DEBUG engram::code::indexer: file indexed with a problem path=src\/token_\[REDACTED\]\.py/)
    assert.match(stderr, /DEBUG engram::engine::registry: opened the engine path=\S*memory-\[REDACTED\]\.db mode=local/)
    for (const secret of [GITHUB, OPENAI, 'ghp_', 'sk-proj']) {
      assert.ok(!stderr.includes(secret), `${secret} reached stderr at ${level}:\n${stderr}`)
    }
  }
})

test('a bad ENGRAM_LOG is a warning on stderr, not a crash; the valid directives stay', () => {
  const { code, stdout, stderr } = child(
    `import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
const dir = mkdtempSync(join(tmpdir(), 'engram-log-'))
const db = await Engram.open({ path: join(dir, 'memory.db') })
await db.close()
rmSync(dir, { recursive: true, force: true })
console.log('done')`,
    { ENGRAM_LOG: 'info,engram::sync=loud' },
  )
  assert.equal(code, 0, stderr)
  assert.equal(stdout.trim(), 'done')
  assert.match(stderr, /engram: ENGRAM_LOG="info,engram::sync=loud": ignoring `engram::sync=loud`/)
  assert.match(stderr, /INFO engram::store::migrations/)

  const none = child(`console.log('loaded')`, { ENGRAM_LOG: '[[,==' })
  assert.equal(none.code, 0, none.stderr)
  assert.match(none.stderr, /has no valid directive; logging to stderr is off/)
})

test('a logger that throws never crashes the process', () => {
  const { code, signal, stdout, stderr } = child(
    `import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
let calls = 0
// Every third call is async and rejects: an unhandled rejection would end the process too.
Engram.setLogger((level) => {
  calls++
  if (calls % 3 === 0) return Promise.reject(new Error('the async logger broke'))
  if (calls % 3 === 1) throw new Error('the logger broke')
  throw 'a string thrown by the logger'
}, { level: 'trace' })
const dir = mkdtempSync(join(tmpdir(), 'engram-log-'))
mkdirSync(join(dir, 'p'))
writeFileSync(join(dir, 'p', 'a.py'), 'def f(:\\n')
const db = await Engram.open({ path: join(dir, 'memory.db'), projectRoot: join(dir, 'p') })
await db.index()
await db.remember({ type: 'pattern', content: 'still works after the logger threw' })
await new Promise((resolve) => setTimeout(resolve, 200))
await db.close()
rmSync(dir, { recursive: true, force: true })
console.log('finished after ' + (calls > 5 ? 'many' : calls) + ' calls')`,
  )
  assert.equal(signal, null, stderr)
  assert.equal(code, 0, stderr)
  assert.equal(stdout.trim(), 'finished after many calls')
  assert.ok(!stderr.includes('the logger broke'), stderr)
  assert.ok(!stderr.includes('the async logger broke'), stderr)
})

test('a worker that sets a logger and exits leaves the process well', { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t)
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads')
const { Engram } = require(workerData.index)
let received = 0
Engram.setLogger(() => { received++ }, { level: 'debug' })
Engram.open({ path: workerData.path }).then(async (db) => {
  await db.remember({ type: 'pattern', content: 'from a worker' })
  await new Promise((resolve) => setTimeout(resolve, 100))
  parentPort.postMessage(received)
  // Exits with the logger still set and the handle open.
})`,
    { eval: true, workerData: { index: INDEX_JS, path: join(dir, 'worker.db') } },
  )
  const [received] = await Promise.all([
    new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    }),
    new Promise((resolve) => worker.once('exit', resolve)).then((code) => assert.equal(code, 0)),
  ])
  assert.ok(received > 0, 'the worker received lines')

  // Events after the worker's env is gone go nowhere (its cleanup hook removed the sink), and
  // a logger set here works.
  const db = await Engram.open({ path: join(dir, 'main.db') })
  t.after(() => db.close())
  const lines = []
  Engram.setLogger((level, target, message) => lines.push(message), { level: 'debug' })
  t.after(() => Engram.setLogger(null))
  const again = await Engram.open({ path: join(dir, 'main2.db') })
  t.after(() => again.close())
  await until(() => lines.includes('opened the engine'), 'a line on the main thread')
})
