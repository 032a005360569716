// The code index across the boundary: index() with progress and AbortSignal, chunksOf,
// searchCode, argument errors, indexing from a worker thread, indexPaths and watch().
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Worker } from 'node:worker_threads'

import { Engram, rejectsWithCode, tempDir } from './helpers.mjs'

const fixtures = new URL('../tests/fixtures/code/', import.meta.url)

function project(dir) {
  const root = join(dir, 'repo')
  mkdirSync(join(root, 'src/auth'), { recursive: true })
  mkdirSync(join(root, 'app'), { recursive: true })
  cpSync(new URL('sample.ts', fixtures), join(root, 'src/auth/tokens.ts'))
  cpSync(new URL('sample.py', fixtures), join(root, 'app/orders.py'))
  cpSync(new URL('notes.md', fixtures), join(root, 'README.md'))
  writeFileSync(join(root, 'app/blob.py'), Buffer.from([0, 1, 2, 0, 3]))
  return root
}

test('index reports progress, then chunksOf and searchCode read the index', async (t) => {
  const dir = tempDir(t)
  const root = project(dir)
  const memory = await Engram.open({ path: join(dir, 'e.db'), projectRoot: root })
  t.after(() => memory.close())
  const reports = []
  const summary = await memory.index({ onProgress: (p) => reports.push(p) })
  assert.equal(summary.filesSeen, 4)
  assert.equal(summary.filesIndexed, 3)
  assert.equal(summary.filesSkipped, 1)
  assert.deepEqual(summary.problems, [{ path: 'app/blob.py', issue: 'binary' }])
  assert.ok(summary.chunks >= 5 && summary.symbols >= 10 && summary.lines > 100, JSON.stringify(summary))
  // Reports are delivered asynchronously on the JS thread; let the queue drain.
  await new Promise((resolve) => setImmediate(resolve))
  assert.equal(reports[0].phase, 'scanning')
  assert.deepEqual(reports.at(-1), { phase: 'done', filesDone: 4, filesTotal: 4 })

  const chunks = await memory.chunksOf('app/orders.py')
  const service = chunks.find((c) => c.qualifiedName === 'OrderService')
  assert.ok(service, JSON.stringify(chunks.map((c) => c.qualifiedName)))
  assert.equal(service.kind, 'class')
  assert.equal(service.language, 'python')
  assert.ok(service.symbols.includes('OrderService.price'))
  assert.ok(service.content.startsWith('class OrderService(BaseService):'))
  assert.match(service.context, /^File: app\/orders\.py \| class: OrderService \| Lines: \d+-\d+$/)
  assert.deepEqual(await memory.chunksOf(join(root, 'app/orders.py')), chunks, 'absolute paths inside the root work')

  const hits = await memory.searchCode('sign token', { limit: 3 })
  assert.equal(hits[0].chunk.path, 'src/auth/tokens.ts')
  assert.ok(hits[0].score > 0)
  const again = await memory.index()
  assert.equal(again.filesUnchanged, 4)
  assert.equal(again.filesIndexed, 0)
})

test('an aborted signal rejects with ENGRAM_ABORTED, before or during the run', async (t) => {
  const dir = tempDir(t)
  const root = join(dir, 'repo')
  mkdirSync(join(root, 'src'), { recursive: true })
  for (let i = 0; i < 2000; i++) {
    writeFileSync(join(root, `src/m${i}.ts`), `export function f${i}(x: number) { return x * ${i} }\n`)
  }
  const memory = await Engram.open({ path: join(dir, 'e.db'), projectRoot: root })
  t.after(() => memory.close())
  await rejectsWithCode(assert, memory.index({ signal: AbortSignal.abort() }), 'ENGRAM_ABORTED')
  const controller = new AbortController()
  const run = memory.index({
    signal: controller.signal,
    threads: 1,
    onProgress: (p) => { if (p.phase === 'indexing' && p.filesDone > 0) controller.abort() },
  })
  await rejectsWithCode(assert, run, 'ENGRAM_ABORTED')
  const rest = await memory.index()
  assert.equal(rest.filesIndexed + rest.filesUnchanged, 2000)
  assert.ok(rest.filesIndexed < 2000, 'the aborted run kept its committed batches')
})

test('bad arguments reject with ENGRAM_INVALID_ARG', async (t) => {
  const dir = tempDir(t)
  const root = project(dir)
  const memory = await Engram.open({ path: join(dir, 'e.db'), projectRoot: root })
  t.after(() => memory.close())
  await rejectsWithCode(assert, memory.index({ threads: 0 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.index({ onProgress: 'yes' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.index({ signal: 42 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.index({ ignore: ['a/[z-a]'] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.chunksOf('../outside.ts'), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.chunksOf(42), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.searchCode('x', { limit: 0 }), 'ENGRAM_INVALID_ARG')
  const rootless = await Engram.open({ path: join(dir, 'e.db') })
  t.after(() => rootless.close())
  await rejectsWithCode(assert, rootless.index(), 'ENGRAM_INVALID_ARG')
})

test('a worker thread indexes through its own handle; the main thread reads the result', async (t) => {
  const dir = tempDir(t)
  const root = project(dir)
  const path = join(dir, 'e.db')
  const memory = await Engram.open({ path, projectRoot: root })
  t.after(() => memory.close())
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Engram } = require(workerData.addon)
    ;(async () => {
      const memory = await Engram.open({ path: workerData.path, projectRoot: workerData.root })
      let reports = 0
      const summary = await memory.index({ onProgress: () => { reports++ } })
      memory.close()
      parentPort.postMessage({ indexed: summary.filesIndexed, reports })
    })().catch((e) => parentPort.postMessage({ error: e.code + ' ' + e.message }))`
  const worker = new Worker(source, {
    eval: true,
    workerData: { addon: new URL('../index.js', import.meta.url).pathname, path, root },
  })
  const message = await new Promise((resolve, reject) => {
    worker.once('message', resolve)
    worker.once('error', reject)
  })
  await worker.terminate()
  assert.equal(message.error, undefined)
  assert.equal(message.indexed, 3)
  const chunks = await memory.chunksOf('src/auth/tokens.ts')
  assert.ok(chunks.some((c) => c.symbols.includes('TokenService.sign')))
})

test('indexPaths re-indexes what changed; watch() follows edits and deletes until unwatch()', async (t) => {
  const dir = tempDir(t)
  const root = project(dir)
  const memory = await Engram.open({ path: join(dir, 'e.db'), projectRoot: root })
  t.after(() => memory.close())
  await memory.index()

  writeFileSync(join(root, 'app/extra.py'), 'def added():\n    pass\n')
  const summary = await memory.indexPaths(['app/extra.py'])
  assert.deepEqual(summary.indexedPaths, ['app/extra.py'])
  assert.deepEqual((await memory.chunksOf('app/extra.py')).map((c) => c.qualifiedName), ['added'])
  await rejectsWithCode(assert, memory.indexPaths(['../escape.py']), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.indexPaths('app/extra.py'), 'ENGRAM_INVALID_ARG')

  const events = []
  let wake
  const onEvent = (e) => {
    events.push(e)
    wake?.()
  }
  await memory.watch({ debounceMs: 50, onEvent })
  await rejectsWithCode(assert, memory.watch(), 'ENGRAM_CONFLICT')
  writeFileSync(join(root, 'app/extra.py'), 'def renamed_function():\n    pass\n')
  rmSync(join(root, 'README.md'))
  const seen = () => {
    const paths = events.flatMap((e) => [...(e.summary?.indexedPaths ?? []), ...(e.summary?.removedPaths ?? [])])
    return paths.includes('app/extra.py') && paths.includes('README.md')
  }
  const deadline = Date.now() + 10_000
  while (!seen() && Date.now() < deadline) {
    await new Promise((resolve) => {
      wake = resolve
      setTimeout(resolve, 200)
    })
  }
  assert.ok(seen(), JSON.stringify(events))
  assert.ok(events.every((e) => e.type === 'updated'), JSON.stringify(events))
  assert.deepEqual((await memory.chunksOf('app/extra.py')).map((c) => c.qualifiedName), ['renamed_function'])
  assert.deepEqual(await memory.chunksOf('README.md'), [])

  assert.equal(memory.unwatch(), true)
  assert.equal(memory.unwatch(), false)
  const count = events.length
  writeFileSync(join(root, 'app/extra.py'), 'def after_unwatch():\n    pass\n')
  await new Promise((resolve) => setTimeout(resolve, 400))
  assert.equal(events.length, count, 'no events after unwatch()')
  assert.deepEqual((await memory.chunksOf('app/extra.py')).map((c) => c.qualifiedName), ['renamed_function'])

  // close() stops a running watch too.
  await memory.watch({ debounceMs: 50 })
  memory.close()
  await rejectsWithCode(assert, memory.watch(), 'ENGRAM_CLOSED')
})

test('index() lowers the confidence of memories whose files changed in git since their commit', async (t) => {
  const root = project(tempDir(t))
  // The test makes the repository with git; engram reads it in-process.
  const git = (...args) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', '-c', 'commit.gpgsign=false', ...args], {
      cwd: root,
      env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    }).toString().trim()
  git('init', '-q')
  git('add', '-A')
  git('commit', '-q', '-m', 'first')
  const first = git('rev-parse', 'HEAD')
  const memory = await Engram.open({ path: join(root, '..', 'git.db'), projectRoot: root })
  t.after(() => memory.close())
  const { memory: m } = await memory.remember({
    type: 'gotcha', content: 'orders are rounded half up', relatedFiles: ['app/orders.py'], commitSha: first, confidence: 0.8,
  })
  let summary = await memory.index()
  const { durationMs, ...found } = summary.git
  assert.deepEqual(found, { head: first, checked: 1, lowered: 0, flaggedForReview: 0, unknownCommits: 0 })
  assert.ok(durationMs >= 0)
  writeFileSync(join(root, 'app/orders.py'), 'def total():\n    return 2\n')
  git('commit', '-q', '-am', 'second')
  summary = await memory.index()
  assert.equal(summary.git.head, git('rev-parse', 'HEAD'))
  assert.equal(summary.git.lowered, 1)
  assert.equal(summary.git.flaggedForReview, 1)
  const after = await memory.get(m.id)
  assert.ok(Math.abs(after.confidence - 0.4) < 1e-9, String(after.confidence))
  assert.equal(after.needsReview, true)
  assert.equal((await memory.health()).changedInGit, 1)
})
