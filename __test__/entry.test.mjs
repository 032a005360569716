// The package entry (index.js) inside an Electron app's asar layout, laid out on disk: the
// model's npm package is used from app.asar.unpacked when it was unpacked, and a warning says
// how to unpack it when it was not (native code cannot read inside app.asar).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'

import { tempDir } from './helpers.mjs'

const repo = join(import.meta.dirname, '..')
const MODEL = 'engram-model-all-minilm-l6-v2'

/** `<app>/app.asar/node_modules/{engram, model package}`: real copies, as a packager makes. */
function asarApp(t) {
  const app = tempDir(t)
  const modules = join(app, 'app.asar', 'node_modules')
  const engram = join(modules, 'engram')
  mkdirSync(engram, { recursive: true })
  for (const f of ['index.js', 'binding.js', 'package.json', ...readdirSync(repo).filter((f) => f.endsWith('.node'))]) {
    copyFileSync(join(repo, f), join(engram, f))
  }
  mkdirSync(join(modules, MODEL))
  writeFileSync(join(modules, MODEL, 'package.json'), JSON.stringify({ name: MODEL, version: '0.1.0' }))
  return app
}

/** Requires engram from the app and reports the model directory an engine would use. */
function load(app) {
  const entry = join(app, 'app.asar', 'node_modules', 'engram')
  const result = spawnSync(process.execPath, ['-e', `
    const { Engram } = require(${JSON.stringify(entry)})
    Engram.open({ path: ${JSON.stringify(join(app, 'm.db'))} }).then(async (db) => {
      console.log(JSON.stringify(db.embeddingStatus()))
      await db.close()
    })
  `], { encoding: 'utf8', env: { ...process.env, ENGRAM_CACHE_DIR: join(app, 'empty-cache'), ENGRAM_MODEL_DIR: '' } })
  assert.equal(result.status, 0, result.stderr)
  return { status: JSON.parse(result.stdout), stderr: result.stderr }
}

test('a model package left inside app.asar is not used, and a warning says how to unpack it', (t) => {
  const { status, stderr } = load(asarApp(t))
  assert.equal(status.state, 'unavailable')
  assert.match(stderr, /ENGRAM_MODEL_IN_ASAR/)
  assert.match(stderr, /asarUnpack/)
})

test('an unpacked model package is used from app.asar.unpacked', (t) => {
  const app = asarApp(t)
  const unpacked = join(app, 'app.asar.unpacked', 'node_modules', MODEL)
  mkdirSync(unpacked, { recursive: true })
  for (const f of ['config.json', 'tokenizer.json', 'model.safetensors']) writeFileSync(join(unpacked, f), '{}')
  const { status, stderr } = load(app)
  assert.equal(status.modelDir, unpacked, JSON.stringify(status))
  assert.doesNotMatch(stderr, /ENGRAM_MODEL_IN_ASAR/)
})
