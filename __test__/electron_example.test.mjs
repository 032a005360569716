// The Electron example (examples/electron): its main-process code and its agent worker run under
// plain Node (no Electron binary can be fetched here) against the built addon, and its
// packaging configs are checked against engram's real package names, so that renaming a
// package or a file without updating the example fails here.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import path, { join } from 'node:path'
import { after, before, test } from 'node:test'
import { pathToFileURL } from 'node:url'

import { repo } from './tarballs.mjs'

const require = createRequire(import.meta.url)
const example = join(repo, 'examples', 'electron')

let work
let app

before(() => {
  work = realpathSync(mkdtempSync(join(tmpdir(), 'engram-electron-')))
  app = join(work, 'app')
  cpSync(example, app, { recursive: true, filter: (src) => !/[\\/](node_modules|\.userData|dist)$/.test(src) })
  // `require('engram')` from the example (main thread and worker) resolves to the built addon.
  mkdirSync(join(app, 'node_modules'))
  symlinkSync(repo, join(app, 'node_modules', 'engram'), 'dir')
})

after(() => {
  if (work) rmSync(work, { recursive: true, force: true })
})

/** `node main.js <userData> <projectRoot>` as the example's README runs it; its JSON summary. */
function runMain(userData, projectRoot) {
  const result = spawnSync(process.execPath, [join(app, 'main.js'), userData, projectRoot], {
    cwd: app,
    encoding: 'utf8',
    timeout: 60_000,
    // An empty model cache: the run must not depend on a model installed on this machine.
    env: { ...process.env, ENGRAM_CACHE_DIR: join(work, 'empty-cache'), ENGRAM_MODEL_DIR: '' },
  })
  assert.equal(result.status, 0, `main.js failed (${result.signal ?? result.status}):\n${result.stdout}\n${result.stderr}`)
  const lines = result.stdout.trim().split('\n')
  return JSON.parse(lines[lines.length - 1])
}

test('main process + agent worker under Node: observer messages reach the session, memories land under userData', () => {
  const userData = join(work, 'userData')
  const project = join(work, 'project')
  mkdirSync(project)

  const first = runMain(userData, project)
  const db = join(userData, 'engram', 'memory.db')
  assert.equal(first.dbPath, db)
  assert.ok(existsSync(db), 'the database file is under userData')
  assert.deepEqual(readdirSync(project), [], 'nothing is written into the project')
  assert.ok(!readdirSync(app).some((f) => f.endsWith('.db')), 'nothing is written beside the app')

  // Every message the worker posted went through the main thread into the session: 5 tool
  // calls (call + result + step-complete each), 1 reasoning, 1 record, 1 session-complete.
  assert.equal(first.crash, null)
  assert.equal(first.rejected, 0)
  assert.equal(first.events, 18)
  assert.equal(first.toolCalls, 5)
  assert.equal(first.outcome, 'success', 'the outcome of the memory:session-complete message')
  assert.ok(
    first.promoted.some((m) => m.source === 'agent_explicit' && m.content.includes('docker compose up -d db')),
    `the memory:record entry is promoted: ${JSON.stringify(first.promoted)}`,
  )
  assert.ok(
    first.promoted.some((m) => m.source === 'observer_inferred' && m.content.startsWith('I was wrong about the test database')),
    `the self-correction in memory:reasoning is promoted: ${JSON.stringify(first)}`,
  )
  assert.deepEqual(first.recalledByWorker, [], 'a fresh database has nothing to recall')

  // A second launch (a new process): the worker's own handle recalls what the first session
  // promoted, from the same file.
  const second = runMain(userData, project)
  assert.equal(second.dbPath, db)
  assert.ok(
    second.recalledByWorker.some((c) => c.includes('docker compose up -d db')),
    `the worker recalls the first session's memory: ${JSON.stringify(second.recalledByWorker)}`,
  )
})

// ---- packaging configs -------------------------------------------------------------------

/** engram's package names and the binary of each platform package, from the repository. */
function engramPackages() {
  const packages = [{ name: JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')).name, file: 'index.js' }]
  for (const dir of readdirSync(join(repo, 'npm'))) {
    const manifest = JSON.parse(readFileSync(join(repo, 'npm', dir, 'package.json'), 'utf8'))
    packages.push({ name: manifest.name, file: manifest.main ?? 'package.json' })
  }
  return packages
}

/**
 * The items of a top-level block sequence (`key:` followed by `  - item` lines) of a YAML file.
 * Enough for the example's electron-builder.yml; a rewrite in another YAML style fails loudly.
 */
function yamlList(text, key) {
  const lines = text.split('\n')
  const start = lines.findIndex((l) => l.trimEnd() === `${key}:`)
  assert.notEqual(start, -1, `${key}: not found`)
  const items = []
  for (const line of lines.slice(start + 1)) {
    const item = /^\s+-\s+(.+?)\s*$/.exec(line)
    if (item) items.push(item[1].replace(/^(['"])(.*)\1$/, '$2'))
    else if (/^\S/.test(line)) break
  }
  return items
}

const matches = (file, globs) => globs.some((g) => path.matchesGlob(file, g))

test('packaging configs unpack every engram package and keep it external to bundlers', async () => {
  assert.equal(typeof path.matchesGlob, 'function', 'Node >= 20.17 (path.matchesGlob)')
  const packages = engramPackages()
  const names = packages.map((p) => p.name)
  for (const expected of ['engram', 'engram-linux-x64-gnu']) assert.ok(names.includes(expected), `${expected} in ${names}`)

  // electron-builder: asarUnpack globs are relative to the app directory.
  const builder = readFileSync(join(app, 'electron-builder.yml'), 'utf8')
  const unpack = yamlList(builder, 'asarUnpack')
  for (const { name, file } of packages) {
    assert.ok(matches(`node_modules/${name}/${file}`, unpack), `electron-builder unpacks ${name}/${file}: ${unpack}`)
  }
  assert.ok(!matches('node_modules/react/index.js', unpack), 'and not everything')
  const files = yamlList(builder, 'files')
  for (const file of ['main.js', 'agent-worker.js', 'paths.js', 'package.json']) {
    assert.ok(files.includes(file) && existsSync(join(app, file)), `electron-builder ships ${file}`)
  }

  // Forge: asar.unpack is matched against absolute paths; the plugin adds every .node file.
  const forge = require(join(app, 'forge.config.js'))
  assert.ok(
    forge.plugins.some((p) => (p.name ?? p) === '@electron-forge/plugin-auto-unpack-natives'),
    'Forge uses plugin-auto-unpack-natives',
  )
  assert.ok(forge.packagerConfig.asar, 'asar is on (the plugin requires it)')
  for (const { name, file } of packages) {
    const abs = `/build/out/app-linux-x64/resources/app/node_modules/${name}/${file}`
    assert.ok(matches(abs, [forge.packagerConfig.asar.unpack]), `Forge unpacks ${name}/${file}`)
  }

  // webpack: engram and its packages stay require()s.
  const webpack = require(join(app, 'webpack.main.config.js'))
  assert.ok(webpack.entry['agent-worker'], 'the worker is its own entry')
  const external = (request) =>
    new Promise((resolve, reject) =>
      webpack.externals[0]({ request, context: app }, (err, result) => (err ? reject(err) : resolve(result))),
    )
  for (const name of names) assert.equal(await external(name), `commonjs ${name}`)
  assert.equal(await external('react'), undefined)

  // Vite / Rollup: external entries are strings or RegExps.
  const vite = (await import(pathToFileURL(join(app, 'vite.main.config.mjs')).href)).default
  const rollupExternal = vite.build.rollupOptions.external
  const isExternal = (id) => rollupExternal.some((e) => (e instanceof RegExp ? e.test(id) : e === id))
  for (const name of names) assert.ok(isExternal(name), `Vite keeps ${name} external`)
  assert.ok(!isExternal('react'))
  assert.ok(vite.optimizeDeps.exclude.includes('engram'), 'the dev server does not pre-bundle engram')
})
