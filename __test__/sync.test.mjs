// Sync through the binding: offline behaviour against a closed port (always), option errors,
// events, and against a real sqld when ENGRAM_SQLD_BIN names one (CI fetches it, see
// scripts/sqld.sh): two files converging, and auth-token refresh with a JWT-protected server.
import { spawn } from 'node:child_process'
import { generateKeyPairSync, sign } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { join } from 'node:path'
import test from 'node:test'
import assert from 'node:assert/strict'

import { Engram, rejectsWithCode, tempDir } from './helpers.mjs'

const SQLD = process.env.ENGRAM_SQLD_BIN

async function freePort() {
  const server = createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

async function waitForPort(port, deadline = Date.now() + 20_000) {
  for (;;) {
    const up = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => { socket.destroy(); resolve(true) })
      socket.once('error', () => resolve(false))
    })
    if (up) return
    if (Date.now() > deadline) throw new Error(`nothing listens on ${port}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Starts a sqld in a temp dir (killed after the test); `args` are extra flags. */
async function startSqld(t, dir, args = []) {
  const port = await freePort()
  const child = spawn(SQLD, ['--db-path', join(dir, 'server.sqld'), '--http-listen-addr', `127.0.0.1:${port}`,
    '--no-welcome', ...args], { stdio: 'ignore' })
  t.after(() => child.kill('SIGKILL'))
  await waitForPort(port)
  return `http://127.0.0.1:${port}`
}

const closedUrl = async () => `http://127.0.0.1:${await freePort()}`

test('an unreachable server never fails local work; changes wait and survive a restart', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'm.db')
  const sync = { url: await closedUrl(), intervalSecs: 3600 }
  const memory = await Engram.open({ path, sync })
  const events = []
  const id = memory.onSyncEvent((event) => events.push(event))
  assert.equal(typeof id, 'number')

  const ids = []
  for (let i = 0; i < 1000; i++) {
    const { memory: m } = await memory.remember({ type: 'gotcha', content: `offline lesson ${i} about retries` })
    ids.push(m.id)
    if (i % 50 === 0) {
      assert.equal((await memory.get(ids[i >> 1])).id, ids[i >> 1])
      assert.ok((await memory.search(`lesson ${i}`)).length > 0)
    }
  }
  await rejectsWithCode(assert, memory.sync(), 'ENGRAM_SYNC_UNREACHABLE')
  const status = await memory.syncStatus()
  // The loop may already be trying again: 'syncing' is as right as 'offline' here.
  assert.ok(['offline', 'syncing'].includes(status.state), status.state)
  assert.equal(status.pending, 1000)
  assert.equal(status.lastError.code, 'ENGRAM_SYNC_UNREACHABLE')
  assert.ok(status.consecutiveFailures >= 1)
  assert.ok(status.nextAttemptAt > status.lastAttemptAt)
  assert.match(status.deviceId, /^[0-9a-f-]{36}$/)

  // Listener calls arrive on this thread shortly after the sync.
  for (let i = 0; i < 100 && !events.some((e) => e.type === 'failed'); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const failed = events.find((e) => e.type === 'failed')
  assert.ok(failed, 'a failed event arrived')
  assert.equal(failed.error.code, 'ENGRAM_SYNC_UNREACHABLE')
  assert.ok(failed.retryInMs > 0)
  assert.equal(memory.offSyncEvent(id), true)
  assert.equal(memory.offSyncEvent(id), false)

  memory.close()
  // The engine lets go of the file shortly after its last handle closes.
  let reopened
  for (let i = 0; i < 100; i++) {
    reopened = await Engram.open({ path, sync })
    if ((await reopened.syncStatus()).state !== 'syncing') break
  }
  assert.equal((await reopened.syncStatus()).pending, 1000)
  assert.equal((await reopened.list({ limit: 1000 })).length, 1000)
  reopened.close()
})

test('sync options are checked; a file without sync says so', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'c.db')
  await rejectsWithCode(assert, Engram.open({ path, sync: 5 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, Engram.open({ path, sync: {} }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, Engram.open({ path, sync: { url: 'ftp://x' } }), 'ENGRAM_SYNC_CONFIG')
  await rejectsWithCode(assert, Engram.open({ path, sync: { url: 'https://u:p@x.io' } }), 'ENGRAM_SYNC_CONFIG')
  await rejectsWithCode(assert, Engram.open({ path, sync: { url: 'http://127.0.0.1:9', intervalSecs: -1 } }),
    'ENGRAM_SYNC_CONFIG')
  await rejectsWithCode(assert, Engram.open({ path, sync: { url: 'http://127.0.0.1:9', getAuthToken: 'x' } }),
    'ENGRAM_INVALID_ARG')

  const plain = await Engram.open({ path })
  assert.equal((await plain.syncStatus()).state, 'disabled')
  await rejectsWithCode(assert, plain.sync(), 'ENGRAM_SYNC_CONFIG')
  assert.throws(() => plain.onSyncEvent(() => {}), (err) => err.code === 'ENGRAM_SYNC_CONFIG')
  // The live engine has no sync: a handle asking for sync on it is refused.
  await rejectsWithCode(assert, Engram.open({ path, sync: { url: 'http://127.0.0.1:9' } }), 'ENGRAM_SYNC_CONFIG')
  plain.close()
  await rejectsWithCode(assert, plain.syncStatus(), 'ENGRAM_CLOSED')
})

test('a remote-only engine (no path) reads and writes the server a device syncs with', { skip: !SQLD && 'set ENGRAM_SQLD_BIN to run it' }, async (t) => {
  const dir = tempDir(t)
  const url = await startSqld(t, dir)
  await rejectsWithCode(assert, Engram.open({ projectId: 'p' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, Engram.open({ path: '', sync: { url } }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, Engram.open({ sync: { url: await closedUrl() } }), 'ENGRAM_SYNC_UNREACHABLE')

  const remote = await Engram.open({ projectId: 'p', sync: { url } })
  assert.equal(remote.path, `remote:${url}`)
  const status = await remote.syncStatus()
  assert.equal(status.state, 'remote')
  assert.equal(status.mode, 'remote')
  await rejectsWithCode(assert, remote.sync(), 'ENGRAM_SYNC_CONFIG')
  const { memory: decision } = await remote.remember({ type: 'decision', content: 'API routes validate input with zod' })
  assert.equal((await remote.search('zod'))[0].memory.id, decision.id)

  const device = await Engram.open({ path: join(dir, 'laptop.db'), projectId: 'p', sync: { url, intervalSecs: 3600 } })
  await device.sync()
  assert.equal((await device.get(decision.id)).content, decision.content)
  const { memory: gotcha } = await device.remember({ type: 'gotcha', content: 'the staging queue drops messages over 256 KiB' })
  await device.sync()
  assert.equal((await remote.get(gotcha.id)).content, gotcha.content)
  device.close()
  remote.close()
})

test('two files converge through a real sqld, with events', { skip: !SQLD && 'set ENGRAM_SQLD_BIN to run it' }, async (t) => {
  const dir = tempDir(t)
  const url = await startSqld(t, dir)
  const sync = { url, intervalSecs: 1 }
  const a = await Engram.open({ path: join(dir, 'a.db'), projectId: 'p', sync })
  const b = await Engram.open({ path: join(dir, 'b.db'), projectId: 'p', sync })
  const events = []
  b.onSyncEvent((event) => events.push(event))

  await a.rememberMany(Array.from({ length: 40 }, (_, i) => ({ type: 'decision', content: `A decided thing ${i}` })))
  await b.remember({ type: 'gotcha', content: 'B found a trap in the build' })
  await b.remember({ type: 'gotcha', content: 'B keeps this to itself', shareScope: 'personal' })

  // The loops (1 s interval, and a push shortly after each write) converge on their own.
  const deadline = Date.now() + 15_000
  let inA, inB
  for (;;) {
    inA = (await a.list({ limit: 1000 })).map((m) => m.content).sort()
    inB = (await b.list({ limit: 1000 })).map((m) => m.content).sort()
    if (inA.length === 41 && inB.length === 42) break
    assert.ok(Date.now() < deadline, `no convergence: A ${inA.length}, B ${inB.length}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.ok(!inA.includes('B keeps this to itself'))
  assert.deepEqual(inB.filter((c) => c !== 'B keeps this to itself'), inA)
  const report = await a.sync()
  assert.equal(report.pending, 0)
  assert.equal(typeof report.durationMs, 'number')
  assert.ok(events.some((e) => e.type === 'synced' && e.report.pulled > 0), JSON.stringify(events))
  const status = await b.syncStatus()
  assert.equal(status.state, 'idle')
  assert.ok(status.totals.syncs >= 1)
  assert.equal(status.url, url)
  a.close()
  b.close()
})

test('an expired token is refreshed through getAuthToken; a wrong fixed token is ENGRAM_SYNC_AUTH',
  { skip: !SQLD && 'set ENGRAM_SQLD_BIN to run it' }, async (t) => {
    const dir = tempDir(t)
    const { publicKey, privateKey } = generateKeyPairSync('ed25519')
    writeFileSync(join(dir, 'jwt.pem'), publicKey.export({ type: 'spki', format: 'pem' }))
    const part = (o) => Buffer.from(JSON.stringify(o)).toString('base64url')
    const head = part({ alg: 'EdDSA', typ: 'JWT' })
    const body = part({ a: 'rw' })
    const token = `${head}.${body}.${sign(null, Buffer.from(`${head}.${body}`), privateKey).toString('base64url')}`
    const url = await startSqld(t, dir, ['--auth-jwt-key-file', join(dir, 'jwt.pem')])

    const fixed = await Engram.open({ path: join(dir, 'fixed.db'), sync: { url, authToken: 'not-a-jwt', intervalSecs: 3600 } })
    await fixed.remember({ type: 'gotcha', content: 'kept locally until the token is right' })
    await rejectsWithCode(assert, fixed.sync(), 'ENGRAM_SYNC_AUTH')
    const failed = await fixed.syncStatus()
    assert.equal(failed.lastError.code, 'ENGRAM_SYNC_AUTH')
    assert.ok(['error', 'syncing'].includes(failed.state), failed.state)
    assert.equal(failed.pending, 1)
    fixed.close()

    const calls = []
    const memory = await Engram.open({
      path: join(dir, 'refresh.db'),
      sync: {
        url,
        intervalSecs: 3600,
        // The first token has "expired"; asked again with refresh = true, the app fetches one.
        getAuthToken: async (refresh) => { calls.push(refresh); return refresh ? token : 'expired' },
      },
    })
    await memory.remember({ type: 'gotcha', content: 'pushed after a token refresh' })
    const report = await memory.sync()
    assert.equal(report.pending, 0)
    assert.equal(calls[0], false)
    assert.ok(calls.includes(true), JSON.stringify(calls))
    memory.close()
  })
