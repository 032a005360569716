// The Next.js example (examples/nextjs) as a user runs it: copied outside the repository, the
// packed tarballs and its pinned Next.js installed, `next build`, `next start`, then a memory
// stored and recalled over HTTP through its route handlers. Also checks that the build fails
// without `serverExternalPackages`, the one setting the example's README says is required.
import assert from 'node:assert/strict'
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'

import { repo, tarballs } from './tarballs.mjs'

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const example = join(repo, 'examples', 'nextjs')

let work // temp dir: the app and its data
let app

/**
 * The environment for npm and Next: no npm_* variables (under `npm test` they name the repository
 * as npm's prefix), no telemetry (nothing but the npm registry is reachable), and an empty model
 * cache so that recall does not depend on a model installed on this machine.
 */
function env(extra = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)))
  return { ...clean, NEXT_TELEMETRY_DISABLED: '1', ENGRAM_CACHE_DIR: join(work, 'empty-cache'), ENGRAM_MODEL_DIR: '', ...extra }
}

function nextBuild() {
  return spawnSync(process.execPath, [join(app, 'node_modules', 'next', 'dist', 'bin', 'next'), 'build'], {
    cwd: app,
    env: env(),
    encoding: 'utf8',
    timeout: 120_000,
  })
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

before(() => {
  work = realpathSync(mkdtempSync(join(tmpdir(), 'engram-nextjs-')))
  app = join(work, 'app')
  // What a user has: the example's sources, none of a local build or install.
  cpSync(example, app, {
    recursive: true,
    filter: (src) => !/[\\/](node_modules|\.next|\.engram)$/.test(src) && !src.endsWith('next-env.d.ts'),
  })
  const { root, platform } = tarballs()
  // Installs the example's pinned dependencies; the tarballs stand in for the registry's engram.
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--loglevel=error', root, platform], {
    cwd: app,
    env: env(),
    stdio: ['ignore', 'ignore', 'inherit'],
    timeout: 150_000,
  })
})

after(() => {
  if (work) rmSync(work, { recursive: true, force: true })
})

test('next build + next start: a memory stored over HTTP is recalled; bad input is a 400 with its code', async (t) => {
  const build = nextBuild()
  assert.equal(build.status, 0, `next build failed:\n${build.stdout}\n${build.stderr}`)

  const db = join(work, 'data', 'memory.db')
  const port = await freePort()
  const server = spawn(
    process.execPath,
    [join(app, 'node_modules', 'next', 'dist', 'bin', 'next'), 'start', '-p', String(port), '-H', '127.0.0.1'],
    { cwd: app, env: env({ ENGRAM_DB: db, ENGRAM_PROJECT_ROOT: app }), stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let log = ''
  server.stdout.on('data', (d) => (log += d))
  server.stderr.on('data', (d) => (log += d))
  const exited = new Promise((resolve) => server.once('exit', resolve))
  t.after(async () => {
    // By its pid; `next start` serves from this one process (no children to reap).
    if (server.exitCode === null && server.signalCode === null) {
      server.kill('SIGTERM')
      const timer = setTimeout(() => server.kill('SIGKILL'), 5_000)
      await exited
      clearTimeout(timer)
    }
  })

  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 30_000
  for (;;) {
    if (server.exitCode !== null) assert.fail(`next start exited with ${server.exitCode}:\n${log}`)
    try {
      if ((await fetch(base)).ok) break
    } catch {}
    if (Date.now() > deadline) assert.fail(`next start not ready in 30 s:\n${log}`)
    await new Promise((r) => setTimeout(r, 200))
  }

  const post = (body) =>
    fetch(`${base}/api/remember`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  const content = 'The billing webhook test needs STRIPE_WEBHOOK_SECRET set to a dummy value'

  let res = await post(JSON.stringify({ type: 'gotcha', content, tags: ['billing'] }))
  let body = await res.json()
  assert.equal(res.status, 201, JSON.stringify(body))
  assert.equal(body.created, true)
  assert.equal(body.memory.content, content)
  assert.ok(existsSync(db), `the database is at ENGRAM_DB (${db})`)

  // The same lesson again reinforces the stored memory: the route says so with a 200.
  res = await post(JSON.stringify({ type: 'gotcha', content }))
  body = await res.json()
  assert.equal(res.status, 200, JSON.stringify(body))
  assert.equal(body.created, false)

  res = await fetch(`${base}/api/recall?q=${encodeURIComponent('billing webhook secret')}`)
  body = await res.json()
  assert.equal(res.status, 200, JSON.stringify(body))
  const hit = body.items.find((i) => i.kind === 'memory')
  assert.ok(hit, JSON.stringify(body))
  assert.equal(hit.content, content)
  assert.equal(hit.type, 'gotcha')
  assert.ok(body.context.includes(content), body.context)

  // engram's own validation errors come back as 400s carrying engram's code.
  res = await post(JSON.stringify({ type: 'not-a-type', content: 'x' }))
  body = await res.json()
  assert.equal(res.status, 400, JSON.stringify(body))
  assert.equal(body.code, 'ENGRAM_INVALID_ARG')
  res = await fetch(`${base}/api/recall?q=billing&limit=0`)
  body = await res.json()
  assert.equal(res.status, 400, JSON.stringify(body))
  assert.equal(body.code, 'ENGRAM_INVALID_ARG')
  res = await post('not json')
  assert.equal(res.status, 400)
  assert.equal((await res.json()).code, 'INVALID_JSON')

  assert.equal(server.exitCode, null, `the server is still up:\n${log}`)
})

test('without serverExternalPackages, next build fails on the native binary', () => {
  const config = join(app, 'next.config.mjs')
  const original = readFileSync(config, 'utf8')
  const without = original.replace(/^\s*serverExternalPackages:.*$/m, '')
  assert.notEqual(without, original, 'next.config.mjs sets serverExternalPackages on one line')
  writeFileSync(config, without)
  try {
    const build = nextBuild()
    const output = `${build.stdout}\n${build.stderr}`
    assert.notEqual(build.status, 0, `next build succeeded without serverExternalPackages:\n${output}`)
    // The error names engram's binary, so a user can tell what to configure.
    assert.match(output, /engram\.[\w-]+\.node/, output)
  } finally {
    writeFileSync(config, original)
  }
})
