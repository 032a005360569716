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
  // Retries: a closed engine's sync thread may still be writing in `<db>.sync/` when the hook
  // runs (ENOTEMPTY, seen twice in CI: close() does not wait for the sync task, a sync bug to
  // fix there). A temp dir left behind must not fail the test that used it.
  t.after(() => {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 })
    } catch (err) {
      if (err.code !== 'ENOTEMPTY') throw err
      console.warn(`left ${dir} behind: ${err.message}`)
    }
  })
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
