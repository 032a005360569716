// Sync across the JS boundary, against a real sqld this script starts:
// 1. local latency of remember / get / search on a file that syncs, with the server up and
//    with it unreachable, against a plain file (the target: p99 within 2x);
// 2. how long a write on one replica takes to be visible on another, both syncing every 1 s.
// One run; configurations alternate in rounds so that machine noise hits all of them alike.
//   ENGRAM_SQLD_BIN=$(bash scripts/sqld.sh) node benches/js/sync.mjs
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { hrtime } from 'node:process'

import { queries, summary, zipfMemories } from './corpus.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')

const SQLD = process.env.ENGRAM_SQLD_BIN
if (!SQLD) {
  console.error('set ENGRAM_SQLD_BIN (bash scripts/sqld.sh prints one)')
  process.exit(2)
}
const dir = mkdtempSync(join(tmpdir(), 'engram-sync-bench-'))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function freePort() {
  const server = createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

const port = await freePort()
const sqld = spawn(SQLD, ['--db-path', join(dir, 'server.sqld'), '--http-listen-addr', `127.0.0.1:${port}`, '--no-welcome'],
  { stdio: 'ignore' })
for (;;) {
  const up = await new Promise((resolve) => {
    const s = connect(port, '127.0.0.1')
    s.once('connect', () => { s.destroy(); resolve(true) })
    s.once('error', () => resolve(false))
  })
  if (up) break
  await sleep(50)
}
const url = `http://127.0.0.1:${port}`
const downUrl = `http://127.0.0.1:${await freePort()}`

const PRELOAD = 2000
const ROUNDS = 16
const OPS_PER_ROUND = 250
// Between one configuration's round and the next: the synced file's loop pushes the round's
// last writes ~a quarter second after its previous run, and that work must not land in (and
// be measured against) another configuration's round. A round (~0.4 s) is long enough to
// hold the synced file's own runs in steady state.
const QUIET_MS = 600
const configs = [
  { name: 'plain file', open: { path: join(dir, 'plain.db') } },
  { name: 'sync, server up', open: { path: join(dir, 'up.db'), sync: { url, intervalSecs: 1 } } },
  { name: 'sync, server unreachable', open: { path: join(dir, 'down.db'), sync: { url: downUrl, intervalSecs: 1 } } },
]
const corpus = zipfMemories(PRELOAD + ROUNDS * OPS_PER_ROUND * configs.length)
const searches = queries(OPS_PER_ROUND)
let next = PRELOAD
for (const c of configs) {
  c.memory = await Engram.open(c.open)
  c.ids = (await c.memory.rememberMany(corpus.slice(0, PRELOAD))).map((r) => r.memory.id)
  c.times = { remember: [], get: [], search: [] }
}
// The synced file's first push (2,000 memories) goes before the measurement.
await configs[1].memory.sync()

const timed = async (list, fn) => {
  const t0 = hrtime.bigint()
  await fn()
  list.push(Number(hrtime.bigint() - t0))
}
for (let round = 0; round < ROUNDS; round++) {
  for (const c of configs) {
    for (let i = 0; i < OPS_PER_ROUND; i++) {
      const input = corpus[next++]
      await timed(c.times.remember, async () => c.ids.push((await c.memory.remember(input)).memory.id))
      const id = c.ids[(i * 7919) % c.ids.length]
      await timed(c.times.get, () => c.memory.get(id))
      await timed(c.times.search, () => c.memory.search(searches[i]))
    }
    await sleep(QUIET_MS)
  }
}
console.log(`local latency, ${ROUNDS * OPS_PER_ROUND} of each op per configuration, ${PRELOAD}+ memories (us):`)
const plain = configs[0].times
for (const c of configs) {
  for (const op of ['remember', 'get', 'search']) {
    const s = summary(c.times[op])
    const p = summary(plain[op])
    console.log(`  ${c.name.padEnd(26)} ${op.padEnd(8)} p50 ${s.p50_us.toFixed(0).padStart(5)}, ` +
      `p99 ${s.p99_us.toFixed(0).padStart(6)}  (p50 ${(s.p50_us / p.p50_us).toFixed(2)}x, p99 ${(s.p99_us / p.p99_us).toFixed(2)}x plain)`)
  }
}
const up = await configs[1].memory.syncStatus()
const down = await configs[2].memory.syncStatus()
console.log(`  server up: ${up.totals.syncs} syncs, ${up.totals.pushed} changes pushed, pending ${up.pending}; ` +
  `server unreachable: state ${down.state}, ${down.totals.failures} failed syncs, pending ${down.pending}`)
await Promise.all(configs.map((c) => c.memory.close()))

// Visibility: A writes, B (its own file, its own loop) polls its local file until it sees it.
const a = await Engram.open({ path: join(dir, 'a.db'), projectId: 'v', sync: { url, intervalSecs: 1 } })
const b = await Engram.open({ path: join(dir, 'b.db'), projectId: 'v', sync: { url, intervalSecs: 1 } })
await a.sync()
await b.sync()
const visible = []
for (let i = 0; i < 60; i++) {
  await sleep(Math.floor(Math.random() * 400)) // decorrelate from the loops' 1 s phase
  const t0 = hrtime.bigint()
  const { memory } = await a.remember({ type: 'gotcha', content: `visibility probe ${i} ${Date.now()}` })
  for (;;) {
    try {
      await b.get(memory.id)
      break
    } catch (err) {
      if (err.code !== 'ENGRAM_NOT_FOUND') throw err
      await sleep(5)
    }
  }
  visible.push(Number(hrtime.bigint() - t0))
}
const v = summary(visible)
const ms = (us) => (us / 1000).toFixed(0)
console.log(`write on A visible on B (both every 1 s, loopback), ms: p50 ${ms(v.p50_us)}, p99 ${ms(v.p99_us)}, ` +
  `max ${ms(v.max_us)} (n=${v.n})`)
await a.close()
await b.close()
sqld.kill('SIGKILL')
await sleep(200)
rmSync(dir, { recursive: true, force: true })
