// Shared helpers for the JS tests: a fresh temp dir per test and the built addon.
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
export const addon = require('../index.js')
export const { Engram } = addon

export function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'engram-test-'))
  // Retries: a closed engine's sync thread may still be finishing a write in `<db>.sync/`
  // when the hook runs (seen once as ENOTEMPTY in CI).
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }))
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
