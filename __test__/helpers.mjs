// Shared helpers for the JS tests: a fresh temp dir per test and the built addon.
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
export const addon = require('../index.js')
export const { Engram } = addon

/**
 * A fresh temp dir, removed after the test. After-hooks run in the order they were added, so
 * this removal runs before a `t.after(() => db.close())` added later: a handle that syncs is
 * closed with `await db.close()` in the test itself, which returns once nothing writes the dir.
 */
export function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'engram-test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Awaits `promise` and asserts it rejects with an Error carrying `code`. */
export async function rejectsWithCode(assert, promise, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof Error, `expected an Error, got ${err}`)
    assert.equal(err.code, code, `expected ${code}, got ${err.code}: ${err.message}`)
    return true
  })
}
