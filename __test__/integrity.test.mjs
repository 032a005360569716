// Damaged database files from JS and the CLI: a file cut short is refused at open with
// ENGRAM_CORRUPT; a damaged page found by checkIntegrity() makes writes reject; `engram doctor`
// reports without writing and `--salvage` copies the readable memories into a new file.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { openSync, closeSync, ftruncateSync, readFileSync, statSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

import { Engram, rejectsWithCode, tempDir } from './helpers.mjs'
import { checkDatabase, salvageDatabase } from '../index.js'

const bin = fileURLToPath(new URL('../bin/engram.js', import.meta.url))
const MEMORIES = 400

async function database(t) {
  const dir = tempDir(t)
  const path = join(dir, 'memory.db')
  const db = await Engram.open({ path })
  const inputs = Array.from({ length: MEMORIES }, (_, i) => ({
    type: 'gotcha',
    content: `Memory ${i}: the retry budget of worker ${i % 29} must be reset after a deploy, or jobs stall`,
  }))
  await db.rememberMany(inputs)
  await db.close()
  return { dir, path }
}

function doctor(args) {
  const r = spawnSync(process.execPath, [bin, 'doctor', ...args], { encoding: 'utf8', timeout: 60_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

test('a file cut short: open rejects with ENGRAM_CORRUPT, doctor says so, --salvage copies the memories', async (t) => {
  const { dir, path } = await database(t)
  const fd = openSync(path, 'r+')
  ftruncateSync(fd, statSync(path).size - 1000)
  closeSync(fd)
  const before = readFileSync(path)
  await assert.rejects(Engram.open({ path }), (err) => {
    assert.equal(err.code, 'ENGRAM_CORRUPT')
    assert.match(err.message, /cut short/)
    assert.match(err.message, /engram doctor/)
    return true
  })
  const check = await checkDatabase(path)
  assert.equal(check.ok, false)
  assert.match(check.header, /not a whole number of 4096-byte pages/)

  const report = doctor(['--db', path])
  assert.equal(report.code, 1, report.stderr)
  assert.match(report.stdout, /DAMAGED/)
  assert.match(report.stdout, /engram doctor --salvage <new file>/)
  assert.deepEqual(readFileSync(path), before, 'doctor writes nothing')

  const to = join(dir, 'salvaged.db')
  const r = doctor(['--db', path, '--salvage', to, '--json'])
  assert.equal(r.code, 0, r.stderr)
  const { salvage } = JSON.parse(r.stdout)
  assert.ok(salvage.memories >= MEMORIES - 20, JSON.stringify(salvage))
  const db = await Engram.open({ path: to })
  t.after(() => db.close())
  assert.equal((await db.stats()).total, salvage.memories)
  await rejectsWithCode(assert, salvageDatabase(path, to), 'ENGRAM_INVALID_ARG')
})

test('a damaged page: checkIntegrity finds it, then writes reject with ENGRAM_CORRUPT', async (t) => {
  const { path } = await database(t)
  const size = statSync(path).size
  const fd = openSync(path, 'r+')
  const page = Buffer.alloc(4096, 0xa5)
  writeSync(fd, page, 0, page.length, Math.floor(size / 4096 / 2) * 4096)
  closeSync(fd)
  const db = await Engram.open({ path })
  t.after(() => db.close())
  const problems = await db.checkIntegrity()
  assert.ok(problems.length > 0, 'the damage is found')
  await assert.rejects(db.remember({ type: 'gotcha', content: 'written into a damaged file' }), (err) => {
    assert.equal(err.code, 'ENGRAM_CORRUPT')
    assert.match(err.message, /writes are refused/)
    return true
  })
  assert.equal((await checkDatabase(path)).ok, false)
})

test('a sound file: doctor says so and exits 0', async (t) => {
  const { path } = await database(t)
  const r = doctor(['--db', path])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /sound/)
  assert.match(r.stdout, new RegExp(`memories: ${MEMORIES} readable, 0 unreadable`))
  await rejectsWithCode(assert, checkDatabase(join(path, 'missing.db')), 'ENGRAM_IO')
})
