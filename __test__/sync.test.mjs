// Sync through the binding: offline behaviour against a closed port (always), option errors,
// events, and against a real sqld when ENGRAM_SQLD_BIN names one (CI fetches it, see
// scripts/sqld.sh): two files converging, and auth-token refresh with a JWT-protected server.
import { spawn } from 'node:child_process'
import { generateKeyPairSync, sign } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import test from 'node:test'
import assert from 'node:assert/strict'

import { addon, Engram, rejectsWithCode, tempDir } from './helpers.mjs'

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

/** Starts a sqld on its own temp dir (killed, then the dir removed, after the test); `args` are
 * extra flags. */
async function startSqld(t, args = []) {
  const port = await freePort()
  const data = mkdtempSync(join(tmpdir(), 'engram-sqld-'))
  const child = spawn(SQLD, ['--db-path', join(data, 'server.sqld'), '--http-listen-addr', `127.0.0.1:${port}`,
    '--no-welcome', ...args], { stdio: 'ignore' })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.after(async () => {
    child.kill('SIGKILL')
    await exited
    rmSync(data, { recursive: true, force: true })
  })
  await waitForPort(port)
  return `http://127.0.0.1:${port}`
}

/** A server that accepts connections and never answers: a sync run hangs in it. */
async function blackHole(t) {
  const sockets = new Set()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const socket of sockets) socket.destroy()
    server.close()
  })
  return `http://127.0.0.1:${server.address().port}`
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Removes `dir` at once (no retries: nothing may hold or write it), and checks that nothing
 * writes it again. */
async function removeForGood(dir) {
  rmSync(dir, { recursive: true })
  await sleep(300)
  assert.equal(existsSync(dir), false, `something wrote into ${dir} after close`)
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

  // Once close() resolves the engine has let go of the file: a new one opens it at once.
  await memory.close()
  const reopened = await Engram.open({ path, sync })
  assert.equal((await reopened.syncStatus()).pending, 1000)
  assert.equal((await reopened.list({ limit: 1000 })).length, 1000)
  // Its loop's first sync may still be going: awaiting close() waits for it to let go.
  await reopened.close()
  await removeForGood(dir)
})

test('await close() releases the file and its replica, even while a sync hangs in the server', async (t) => {
  const url = await blackHole(t)
  const dir = mkdtempSync(join(tmpdir(), 'engram-close-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'm.db')
  const sync = { url, intervalSecs: 0.1 }
  const engines = addon.openEngineCount()
  const a = await Engram.open({ path, sync })
  const b = await Engram.open({ path, sync })
  assert.equal(addon.openEngineCount(), engines + 1)
  await a.remember({ type: 'gotcha', content: 'written while the server hangs' })
  // The loop's first run opened the replica and waits for the server.
  for (let i = 0; (await a.syncStatus()).state !== 'syncing' || !existsSync(join(dir, 'm.db.sync', 'replica.db')); i++) {
    assert.ok(i < 500, 'the loop never started a run')
    await sleep(10)
  }

  // Not the last handle: resolves at once, and the other handle (and its sync) go on.
  await a.close()
  assert.equal(addon.openEngineCount(), engines + 1)
  await b.remember({ type: 'gotcha', content: 'b still works' })
  assert.equal((await b.syncStatus()).state, 'syncing')

  // The last handle. Not awaited yet: closed at once, calls reject at once, as before.
  const closing = b.close()
  assert.equal(b.closed, true)
  await rejectsWithCode(assert, b.list(), 'ENGRAM_CLOSED')
  assert.equal(await closing, undefined)
  // The hanging run was dropped, the engine is gone and the replica closed.
  assert.equal(addon.openEngineCount(), engines)
  await b.close() // closing again resolves too
  await a.close()

  // Nothing was lost: both writes wait in the outbox.
  const c = await Engram.open({ path, sync })
  assert.equal((await c.list()).length, 2)
  assert.equal((await c.syncStatus()).pending, 2)
  await c.close()
  await removeForGood(dir)
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
  await plain.close()
  await rejectsWithCode(assert, plain.syncStatus(), 'ENGRAM_CLOSED')
})

test('a remote-only engine (no path) reads and writes the server a device syncs with', { skip: !SQLD && 'set ENGRAM_SQLD_BIN to run it' }, async (t) => {
  const dir = tempDir(t)
  const url = await startSqld(t)
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
  await device.close()
  await remote.close()
})

// sqld 0.24 now and then interrupts a statement while a fresh schema is being built: before
// open learned to ride it out, between one remote-only open in ten and one in thirty failed so
// (ENGRAM_DB, "interrupted"). Forty fresh servers in a row, each stopped after its round.
test('remote-only opens of fresh servers ride out the server interrupting a migration', { skip: !SQLD && 'set ENGRAM_SQLD_BIN to run it' }, async (t) => {
  for (let round = 0; round < 40; round++) {
    await t.test(`round ${round}`, async (t) => {
      const url = await startSqld(t)
      const remote = await Engram.open({ projectId: 'p', sync: { url } })
      assert.deepEqual(await remote.list(), [])
      await remote.close()
      const again = await Engram.open({ projectId: 'p', sync: { url } })
      assert.equal((await again.stats()).total, 0)
      await again.close()
    })
  }
})

test('two files converge through a real sqld, with events', { skip: !SQLD && 'set ENGRAM_SQLD_BIN to run it' }, async (t) => {
  const dir = tempDir(t)
  const url = await startSqld(t)
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
  await a.close()
  await b.close()
})

test('await close() while the loop pushes to a real sqld releases the replica; nothing is lost',
  { skip: !SQLD && 'set ENGRAM_SQLD_BIN to run it' }, async (t) => {
    const url = await startSqld(t)
    const dir = mkdtempSync(join(tmpdir(), 'engram-close-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const sync = { url, intervalSecs: 0.1 }
    const path = join(dir, 'a.db')
    const engines = addon.openEngineCount()
    const a = await Engram.open({ path, projectId: 'p', sync })
    await a.sync()
    await a.rememberMany(Array.from({ length: 600 }, (_, i) => ({ type: 'decision', content: `pushed or kept ${i}` })))
    // The loop pushes shortly after a write (600 changes take two batches): close meanwhile.
    await sleep(70)
    await a.close()
    assert.equal(addon.openEngineCount(), engines)
    await removeForGood(join(dir, 'a.db.sync'))

    // What was not pushed waited in the outbox: a fresh replica pushes the rest.
    const again = await Engram.open({ path, projectId: 'p', sync })
    for (let report = await again.sync(); report.pending > 0;) report = await again.sync()
    const b = await Engram.open({ path: join(dir, 'b.db'), projectId: 'p', sync })
    await b.sync()
    assert.equal((await b.list({ limit: 1000 })).length, 600)
    await again.close()
    await b.close()
    await removeForGood(dir)
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
    const url = await startSqld(t, ['--auth-jwt-key-file', join(dir, 'jwt.pem')])

    const fixed = await Engram.open({ path: join(dir, 'fixed.db'), sync: { url, authToken: 'not-a-jwt', intervalSecs: 3600 } })
    await fixed.remember({ type: 'gotcha', content: 'kept locally until the token is right' })
    await rejectsWithCode(assert, fixed.sync(), 'ENGRAM_SYNC_AUTH')
    const failed = await fixed.syncStatus()
    assert.equal(failed.lastError.code, 'ENGRAM_SYNC_AUTH')
    assert.ok(['error', 'syncing'].includes(failed.state), failed.state)
    assert.equal(failed.pending, 1)
    await fixed.close()

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
    await memory.close()
  })
