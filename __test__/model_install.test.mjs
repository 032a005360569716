// installModel() and `engram model install` downloading the real built-in model from a local
// HTTP server laid out like the model hub (this machine cannot reach the hub): the pinned
// SHA-256 sums must match the real files, progress arrives, an aborted download resumes with a
// Range request, the CLI honours HTTPS_PROXY, and the installed model embeds.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createReadStream, existsSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { test } from 'node:test'

import { addon, Engram, tempDir, rejectsWithCode } from './helpers.mjs'

const { installModel, builtinModel, defaultModelDir } = addon
const cli = join(import.meta.dirname, '..', 'bin', 'engram.js')

/** The installed model's directory (the test script installs it under CI), or null. */
function modelSource() {
  const dir = process.env.ENGRAM_MODEL_DIR || defaultModelDir()
  if (dir && existsSync(join(dir, 'model.safetensors'))) return dir
  if (process.env.CI) throw new Error('CI must provide the model')
  return null
}

/**
 * A hub on a loopback port serving `source`'s files at `/<repo>/resolve/<revision>/<file>`,
 * with `Range` support; `seen` records each request's path and Range header.
 */
async function startHub(t, source, { throttle = false } = {}) {
  const { repo, revision } = builtinModel()
  const seen = []
  const server = createServer((req, res) => {
    seen.push({ path: req.url, range: req.headers.range })
    const prefix = `/${repo}/resolve/${revision}/`
    const name = req.url.startsWith(prefix) ? req.url.slice(prefix.length) : null
    const path = name && join(source, name)
    if (!path || !existsSync(path)) return res.writeHead(404).end()
    const size = statSync(path).size
    const start = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0)
    res.writeHead(start ? 206 : 200, { 'Content-Length': size - start, ...(start ? { 'Content-Range': `bytes ${start}-${size - 1}/${size}` } : {}) })
    // Throttled: slow enough that an abort lands mid-file.
    const stream = createReadStream(path, { start, highWaterMark: throttle ? 256 * 1024 : 64 * 1024 })
    if (!throttle) return stream.pipe(res)
    stream.on('data', (chunk) => {
      stream.pause()
      res.write(chunk, () => setTimeout(() => stream.resume(), 20))
    })
    stream.on('end', () => res.end())
    res.on('close', () => stream.destroy())
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) }))
  return { url: `http://127.0.0.1:${server.address().port}`, seen }
}

function run(args, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('close', (status) => resolve({ status, stdout, stderr }))
  })
}

test('installModel downloads the pinned files from a hub, checks them and the model embeds', async (t) => {
  const source = modelSource()
  if (!source) return t.skip('no installed model to serve')
  const hub = await startHub(t, source)
  const dest = join(tempDir(t), 'models', 'minilm')
  const reports = []
  const installed = await installModel({ hubUrl: hub.url, dest, onProgress: (p) => reports.push(p) })
  assert.equal(installed.dir, dest)
  const total = builtinModel().files.reduce((n, f) => n + f.bytes, 0)
  assert.equal(installed.downloadedBytes, total)
  assert.deepEqual(hub.seen.map((s) => s.path.split('/').pop()), ['config.json', 'tokenizer.json', 'model.safetensors'])
  // Progress is throttled and best effort, but a 91 MB download reports many times.
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(reports.length > 10, `${reports.length} reports`)
  assert.ok(reports.every((r) => r.total === total))
  const db = await Engram.open({ path: join(tempDir(t), 'm.db'), embeddings: { modelDir: dest } })
  t.after(() => db.close())
  const [v] = await db.embed(['open a database'])
  assert.equal(v.length, 384)
})

test('an aborted download rejects with ENGRAM_ABORTED and the next call resumes with a Range request', async (t) => {
  const source = modelSource()
  if (!source) return t.skip('no installed model to serve')
  const hub = await startHub(t, source, { throttle: true })
  const dest = join(tempDir(t), 'model')
  const controller = new AbortController()
  const onProgress = (p) => {
    if (p.file === 'model.safetensors' && p.fileBytes > 4_000_000) controller.abort()
  }
  await rejectsWithCode(assert, installModel({ hubUrl: hub.url, dest, onProgress, signal: controller.signal }), 'ENGRAM_ABORTED')
  assert.ok(!existsSync(dest), 'nothing half-downloaded is installed')
  const reports = []
  const fast = await startHub(t, source)
  await installModel({ hubUrl: fast.url, dest, onProgress: (p) => reports.push(p) })
  assert.ok(existsSync(join(dest, 'model.safetensors')))
  const ranged = fast.seen.filter((s) => s.range)
  assert.equal(ranged.length, 1, JSON.stringify(fast.seen))
  assert.match(ranged[0].path, /model\.safetensors$/)
  assert.ok(!fast.seen.some((s) => s.path.endsWith('config.json')), 'finished files are not fetched again')
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(reports.at(-1).resumedBytes > 4_000_000, JSON.stringify(reports.at(-1)))
})

test('the CLI downloads with --hub-url and reports an unreachable hub by code', async (t) => {
  const source = modelSource()
  if (!source) return t.skip('no installed model to serve')
  const hub = await startHub(t, source)
  const dir = tempDir(t)
  const ok = await run(['model', 'install', '--hub-url', hub.url, '--dest', join(dir, 'model'), '--json'])
  assert.equal(ok.status, 0, ok.stderr)
  assert.equal(JSON.parse(ok.stdout).dir, join(dir, 'model'))
  const down = await run(['model', 'install', '--dest', join(dir, 'other')], { ENGRAM_HUB_URL: 'http://127.0.0.1:9' })
  assert.equal(down.status, 1)
  assert.match(down.stderr, /ENGRAM_DOWNLOAD/)
})

test('the download goes through HTTPS_PROXY', async (t) => {
  // A proxy that records the CONNECT it is asked for and refuses it: proof the hub's HTTPS
  // request was sent through it, with no network needed.
  const connects = []
  const proxy = createServer()
  proxy.on('connect', (req, socket) => {
    connects.push(req.url)
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n')
  })
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => proxy.close(resolve)))
  // ALL_PROXY would win over HTTPS_PROXY: cleared, so the test says what it means anywhere.
  const env = {
    HTTPS_PROXY: `http://127.0.0.1:${proxy.address().port}`,
    ALL_PROXY: '', all_proxy: '', https_proxy: '', NO_PROXY: '', no_proxy: '', ENGRAM_HUB_URL: '',
  }
  const result = await run(['model', 'install', '--dest', join(tempDir(t), 'model')], env)
  assert.equal(result.status, 1, result.stderr)
  assert.match(result.stderr, /ENGRAM_DOWNLOAD/)
  assert.deepEqual(connects, ['huggingface.co:443'])
})

test('installModel rejects bad arguments by code', async (t) => {
  await rejectsWithCode(assert, installModel(42), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, installModel({ hubUrl: 5 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, installModel({ onProgress: 'no', dest: join(tempDir(t), 'm') }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, installModel({ from: join(tempDir(t), 'missing.whl'), dest: join(tempDir(t), 'm') }), 'ENGRAM_INVALID_ARG')
  // dest belongs in the options object when there is one: a second argument is not ignored.
  await rejectsWithCode(assert, installModel({ hubUrl: 'http://127.0.0.1:9' }, join(tempDir(t), 'm')), 'ENGRAM_INVALID_ARG')
  // A destination that cannot take the model fails before anything is fetched.
  await rejectsWithCode(assert, installModel({ hubUrl: 'http://127.0.0.1:9', dest: '.' }), 'ENGRAM_INVALID_ARG')
  // An aborted signal is honoured on every path, a local copy included.
  const aborted = AbortSignal.abort()
  await rejectsWithCode(assert, installModel({ from: join(tempDir(t), 'x.whl'), dest: join(tempDir(t), 'm'), signal: aborted }), 'ENGRAM_ABORTED')
})
