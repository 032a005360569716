// The CLI end to end: `node bin/engram.js ...` as child processes on real files in temp dirs
// (a small TypeScript and Python tree), checking stdout (JSON with --json, text where it
// matters), stderr, exit codes and what lands on disk.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { addon, Engram, tempDir } from './helpers.mjs'

const bin = fileURLToPath(new URL('../bin/engram.js', import.meta.url))
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
const memoryTypes = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  .match(/export type MemoryType = (.*)/)[1]
  .match(/'(\w+)'/g)
  .map((t) => t.slice(1, -1))

/** Runs the CLI in `cwd`; returns { code, stdout, stderr }. No sync, no embedder, no log. */
function run(cwd, args, env = {}) {
  const base = { ...process.env, ENGRAM_EMBED_PROVIDER: 'none' }
  for (const k of ['ENGRAM_SYNC_URL', 'ENGRAM_SYNC_TOKEN', 'ENGRAM_LOG']) delete base[k]
  const r = spawnSync(process.execPath, [bin, ...args], { cwd, env: { ...base, ...env }, encoding: 'utf8', timeout: 60_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** Runs with --json, asserts exit 0 and one JSON document on stdout, returns it. */
function runJson(cwd, args, env) {
  const r = run(cwd, [...args, '--json'], env)
  assert.equal(r.code, 0, `engram ${args.join(' ')} --json: exit ${r.code}\n${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** A small project: TypeScript with an import, Python with an import. */
function project(t) {
  const root = join(tempDir(t), 'proj')
  mkdirSync(join(root, 'src'), { recursive: true })
  mkdirSync(join(root, 'py'), { recursive: true })
  writeFileSync(join(root, 'src', 'auth.ts'), 'export function verifyToken(token: string): boolean {\n  return token.length > 10\n}\n')
  writeFileSync(
    join(root, 'src', 'login.ts'),
    "import { verifyToken } from './auth'\n\nexport class Auth {\n  login(user: string, token: string): boolean {\n" +
      '    return verifyToken(token) && user.length > 0\n  }\n}\n',
  )
  writeFileSync(join(root, 'py', 'util.py'), 'def parse_config(path):\n    with open(path) as f:\n        return f.read()\n')
  writeFileSync(join(root, 'py', 'app.py'), 'from util import parse_config\n\n\ndef main():\n    return parse_config("app.toml")\n')
  return root
}

test('--version is package.json version; help and bad commands exit as documented', (t) => {
  const cwd = tempDir(t)
  assert.equal(run(cwd, ['--version']).stdout.trim(), pkg.version)
  assert.deepEqual(runJson(cwd, ['--version']), { version: pkg.version })
  const help = run(cwd, ['--help'])
  assert.equal(help.code, 0)
  for (const cmd of ['impact', 'export', 'import', 'prune', 'agent-files import', 'agent-files export', 'sync status', 'sync now', 'health', 'sessions']) {
    assert.match(help.stdout, new RegExp(`\\n  engram ${cmd}\\b`), `help lists ${cmd}`)
  }
  assert.match(help.stdout, /\n  engram hook <event>/)
  assert.equal(run(cwd, []).code, 2)
  const unknown = run(cwd, ['frobnicate'])
  assert.equal(unknown.code, 2)
  assert.match(unknown.stderr, /unknown command "frobnicate"/)
  assert.equal(run(cwd, ['sync', 'later']).code, 2)
  assert.equal(run(cwd, ['agent-files', 'merge']).code, 2)
  assert.equal(run(cwd, ['--bogus-flag']).code, 2)
  // Prefixes are for the server providers; without one they say so.
  const local = run(cwd, ['dense', 'q', '--provider', 'local', '--query-prefix', 'query: '])
  assert.equal(local.code, 2)
  assert.match(local.stderr, /--query-prefix needs --provider ollama or openai/)
  assert.equal(run(cwd, ['dense', 'q', '--document-prefix', 'passage: ']).code, 2)
  assert.ok(!existsSync(join(cwd, '.engram')), 'usage errors create no database')
})

test('invalid enum values are usage errors that list the valid values', (t) => {
  const cwd = tempDir(t)
  const cases = [
    [['list', '--type', 'bogus'], 'type', memoryTypes],
    [['remember', 'x', '--type', 'bogus'], 'type', memoryTypes],
    [['recall', 'q', '--phase', 'x'], 'phase', ['define', 'implement', 'validate', 'refine', 'explore', 'reflect']],
    [['dense', 'q', '--kind', 'x'], 'kind', ['chunk', 'memory']],
    [['recall', 'q', '--kind', 'x'], 'kind', ['chunk', 'memory']],
    [['export', '--format', 'xml'], 'format', ['json', 'markdown']],
    [['import', 'a.json', '--on-conflict', 'merge'], 'on-conflict', ['skip', 'replace']],
  ]
  for (const [args, flag, valid] of cases) {
    const r = run(cwd, args)
    assert.equal(r.code, 2, `${args.join(' ')}: exit ${r.code} ${r.stderr}`)
    assert.ok(r.stderr.includes(`--${flag} must be one of: ${valid.join(', ')}`), `${args.join(' ')}: ${r.stderr}`)
    assert.equal(r.stdout, '')
  }
  assert.ok(memoryTypes.length >= 16 && memoryTypes.includes('workflow_recipe'))
  assert.ok(!existsSync(join(cwd, '.engram')))
})

test('index DIR puts the database in DIR/.engram and adds .engram/ to .gitignore once', (t) => {
  const root = project(t)
  const elsewhere = join(root, '..')
  const first = run(elsewhere, ['index', 'proj'])
  assert.equal(first.code, 0, first.stderr)
  assert.ok(existsSync(join(root, '.engram', 'memory.db')))
  assert.ok(!existsSync(join(elsewhere, '.engram')))
  assert.equal(readFileSync(join(root, '.gitignore'), 'utf8'), '.engram/\n')
  assert.equal(first.stderr.match(/added \.engram\/ to .*\.gitignore/g)?.length, 1, first.stderr)
  assert.match(first.stdout, /4 files indexed/)

  const second = runJson(elsewhere, ['index', 'proj'])
  assert.equal(second.filesUnchanged, 4)
  const again = run(elsewhere, ['index', 'proj'])
  assert.ok(!again.stderr.includes('.gitignore'), again.stderr)
  assert.equal(readFileSync(join(root, '.gitignore'), 'utf8'), '.engram/\n')

  // An existing .gitignore without a final newline: appended on a line of its own, once.
  writeFileSync(join(root, '.gitignore'), 'node_modules\ndist')
  run(root, ['index', '.'])
  run(root, ['index', '.'])
  assert.equal(readFileSync(join(root, '.gitignore'), 'utf8'), 'node_modules\ndist\n.engram/\n')
  // Already there in another spelling: left alone.
  writeFileSync(join(root, '.gitignore'), '/.engram\n')
  assert.ok(!run(root, ['index', '.']).stderr.includes('.gitignore'))
  assert.equal(readFileSync(join(root, '.gitignore'), 'utf8'), '/.engram\n')

  // A database outside the tree: .gitignore is not touched.
  const other = project(t)
  const outside = run(other, ['index', '.', '--db', join(other, '..', 'out.db')])
  assert.equal(outside.code, 0, outside.stderr)
  assert.ok(existsSync(join(other, '..', 'out.db')))
  assert.ok(!existsSync(join(other, '.gitignore')))
})

test('search-code and recall say so when nothing is indexed, and find code once it is', (t) => {
  const root = project(t)
  const nothing = `no code indexed under ${root}: run \`engram index\``
  const sc = run(root, ['search-code', 'verify', 'token'])
  assert.equal(sc.code, 0)
  assert.equal(sc.stdout, '')
  assert.ok(sc.stderr.includes(nothing), sc.stderr)
  const scJson = run(root, ['search-code', 'verify', '--json'])
  assert.deepEqual(JSON.parse(scJson.stdout), [])
  assert.ok(scJson.stderr.includes(nothing))
  const rc = run(root, ['recall', 'verify token', '--json'])
  assert.equal(rc.code, 0)
  assert.deepEqual(JSON.parse(rc.stdout).items, [])
  assert.ok(rc.stderr.includes(nothing), rc.stderr)

  assert.equal(run(root, ['index']).code, 0)
  const hits = runJson(root, ['search-code', 'verify', 'token'])
  assert.equal(hits[0].chunk.path, 'src/auth.ts')
  const human = run(root, ['search-code', 'parse', 'config'])
  assert.match(human.stdout, /^py\/util\.py:1-3  function parse_config/m)
  assert.ok(!human.stderr.includes('no code indexed'))
  const missing = run(root, ['search-code', 'zzqqxx'])
  assert.ok(!missing.stderr.includes('no code indexed'), 'an index with no match is not "nothing indexed"')
  const recalled = run(root, ['recall', 'verify token'])
  assert.match(recalled.stdout, /src\/auth\.ts:1-3/)
  assert.ok(!recalled.stderr.includes('no code indexed'))
})

test('embed --no-definition-vectors embeds chunks only; a later embed adds the definitions', (t) => {
  const modelDir = [process.env.ENGRAM_MODEL_DIR, addon.defaultModelDir()].find((d) => d && existsSync(join(d, 'model.safetensors')))
  if (!modelDir && process.env.CI) throw new Error('CI must provide the model')
  if (!modelDir) return t.skip('no embedding model installed')
  const root = project(t)
  writeFileSync(join(root, 'py', 'helpers.py'), 'def double(x):\n    return 2 * x\n\n\ndef halve(x):\n    return x / 2\n')
  assert.equal(run(root, ['index']).code, 0)
  const local = { ENGRAM_EMBED_PROVIDER: 'local', ENGRAM_MODEL_DIR: modelDir }
  const off = runJson(root, ['embed', '--no-definition-vectors'], local)
  assert.ok(off.chunks >= 4, JSON.stringify(off))
  assert.equal(off.parts, 0)
  const on = runJson(root, ['embed'], local)
  assert.deepEqual([on.chunks, on.memories], [0, 0])
  assert.ok(on.parts >= 2, JSON.stringify(on))
  // The environment variable does the same as the flag.
  writeFileSync(join(root, 'py', 'more.py'), 'def square(x):\n    return x * x\n\n\ndef cube(x):\n    return x * x * x\n')
  assert.equal(run(root, ['index']).code, 0)
  const env = runJson(root, ['embed'], { ...local, ENGRAM_DEFINITION_VECTORS: '0' })
  assert.deepEqual([env.chunks, env.parts], [1, 0])
})

test('index leaves the code keyword index in one segment: a one-shot process does the upkeep before it exits', async (t) => {
  const root = join(tempDir(t), 'many')
  // 1,300 files: six index batches of 256, six commits, so FTS5 keeps several segments.
  for (let d = 0; d < 13; d++) {
    mkdirSync(join(root, `m${d}`), { recursive: true })
    for (let f = 0; f < 100; f++) {
      writeFileSync(join(root, `m${d}`, `f${f}.py`), `def handler_${d}_${f}(request):\n    return request.get("k${f}")\n`)
    }
  }
  const summary = runJson(root, ['index'])
  assert.equal(summary.filesIndexed, 1300)
  // (Not segmentsBefore: on a slow machine the engine's own background merge may start first.)
  const code = summary.optimized.keywordIndexes.find((i) => i.index === 'code')
  assert.equal(code.segmentsAfter, 1, JSON.stringify(summary.optimized))
  // What is on disk once the process has gone (6 segments without the upkeep).
  const { createClient } = await import('@libsql/client')
  const client = createClient({ url: `file:${join(root, '.engram', 'memory.db')}` })
  t.after(() => client.close())
  const { rows } = await client.execute('SELECT count(DISTINCT segid) AS n FROM code_chunks_fts_idx')
  assert.equal(Number(rows[0].n), 1)
  const human = run(root, ['index'])
  assert.equal(human.code, 0)
  assert.ok(!human.stdout.includes('optimized:'), `nothing left to do: ${human.stdout}`)
})

test('impact lists dependents and the memories attached', (t) => {
  const root = project(t)
  run(root, ['index'])
  const { memory } = runJson(root, ['remember', 'verifyToken rejects tokens of 10 characters or fewer', '--files', 'src/auth.ts'])
  const impact = runJson(root, ['impact', 'src/auth.ts'])
  assert.equal(impact.target.key, 'src/auth.ts')
  assert.ok(impact.affected.some((a) => a.node.key === 'src/login.ts'), JSON.stringify(impact.affected))
  assert.deepEqual(impact.memories.map((m) => [m.memory.id, m.role, m.nodeKey]), [[memory.id, 'file', 'src/auth.ts']])
  const symbol = runJson(root, ['impact', 'src/auth.ts:verifyToken'])
  assert.deepEqual(symbol.affected.map((a) => a.node.key), ['src/login.ts:Auth.login'])
  const human = run(root, ['impact', 'src/auth.ts'])
  assert.match(human.stdout, /^file src\/auth\.ts$/m)
  assert.match(human.stdout, /1 memories attached, nearest first:/)
  assert.ok(human.stdout.includes('verifyToken rejects tokens of 10 characters or fewer'))
  const cut = runJson(root, ['impact', 'src/auth.ts', '--memory-limit', '0'])
  assert.deepEqual([cut.memories.length, cut.memoriesTruncated], [0, true])
  const py = runJson(root, ['impact', 'py/util.py'])
  assert.ok(py.affected.some((a) => a.node.key.startsWith('py/app.py')), JSON.stringify(py.affected))
  const missing = run(root, ['impact', 'src/nope.ts'])
  assert.equal(missing.code, 1)
  assert.match(missing.stderr, /^engram: ENGRAM_NOT_FOUND: /)
  assert.equal(run(root, ['impact']).code, 2)
})

test('export then import into a fresh database round-trips the memories', (t) => {
  const root = project(t)
  const texts = [
    ['gotcha', 'Run migrations before seeding fixtures'],
    ['decision', 'Sessions last 24 hours'],
    ['preference', 'Use pnpm, not npm'],
  ]
  for (const [type, text] of texts) run(root, ['remember', text, '--type', type, '--tags', 'cli,test'])
  const before = runJson(root, ['list'])
  assert.equal(before.length, 3)

  const toStdout = run(root, ['export'])
  assert.equal(toStdout.code, 0)
  const doc = JSON.parse(toStdout.stdout)
  assert.equal(doc.memories.length, 3)
  const file = join(root, '..', 'memories.json')
  const written = runJson(root, ['export', '--out', file])
  assert.equal(written.memories, 3)
  assert.equal(written.path, file)
  assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')).memories.map((m) => m.id).sort(), before.map((m) => m.id).sort())

  const fresh = join(root, '..', 'fresh.db')
  const report = runJson(root, ['import', file, '--db', fresh])
  assert.equal(report.imported, 3)
  const after = runJson(root, ['list', '--db', fresh])
  const shape = (ms) => ms.map((m) => [m.id, m.type, m.content, m.tags, m.confidence]).sort()
  assert.deepEqual(shape(after), shape(before))
  assert.equal(runJson(root, ['import', file, '--db', fresh]).skipped, 3)
  assert.equal(runJson(root, ['import', file, '--db', fresh, '--on-conflict', 'replace']).updated, 3)

  const md = join(root, '..', 'memories.md')
  assert.match(run(root, ['export', '--format', 'markdown', '--out', md]).stdout, /^exported 3 memories \(\d+ bytes\) to /)
  assert.ok(readFileSync(md, 'utf8').includes('Use pnpm, not npm'))
  const fromMd = runJson(root, ['import', md, '--db', join(root, '..', 'md.db')])
  assert.equal(fromMd.imported + fromMd.updated, 3)
  const bad = run(root, ['import', join(root, 'missing.json')])
  assert.equal(bad.code, 1)
  assert.match(bad.stderr, /^engram: ENGRAM_\w+: /)
})

test('prune --dry-run counts without changing; prune deletes', (t) => {
  const root = project(t)
  run(root, ['remember', 'keep me'])
  const { memory } = runJson(root, ['remember', 'temporary note'])
  run(root, ['forget', memory.id])
  const dry = runJson(root, ['prune', '--dry-run', '--grace-days', '0'])
  assert.equal(dry.dryRun, true)
  assert.equal(dry.deleted, 1)
  assert.equal(runJson(root, ['stats']).total, 2)
  assert.match(run(root, ['prune', '--dry-run', '--grace-days', '0']).stdout, /^dry run \(nothing changed\): would have 0 expired, 1 deleted/)
  const real = runJson(root, ['prune', '--grace-days', '0'])
  assert.equal(real.dryRun, false)
  assert.equal(real.deleted, 1)
  assert.equal(runJson(root, ['stats']).total, 1)
  assert.equal(run(root, ['prune', '--grace-days', 'soon']).code, 2)
})

test('agent-files import reads CLAUDE.md; export writes the generated section', (t) => {
  const root = project(t)
  writeFileSync(join(root, 'CLAUDE.md'), '# Project rules\n\n- Always run `npm test` before pushing.\n- Never commit the .env file.\n')
  const imported = runJson(root, ['agent-files', 'import'])
  const claude = imported.files.find((f) => f.path === 'CLAUDE.md')
  assert.equal(claude.found, true)
  assert.equal(claude.created.length, 2)
  const rules = runJson(root, ['list', '--limit', '50'])
  assert.ok(rules.some((m) => m.content.includes('Never commit the .env file') && m.pinned))
  assert.match(run(root, ['agent-files', 'import']).stdout, /^CLAUDE\.md: 2 rules, 0 new, 2 unchanged/m)

  const { memory } = runJson(root, ['remember', 'Token checks live in src/auth.ts', '--confidence', '0.95'])
  const preview = run(root, ['agent-files', 'export', '--file', 'AGENTS.md', '--dry-run'])
  assert.ok(preview.stdout.includes('Token checks live in src/auth.ts'))
  assert.ok(!existsSync(join(root, 'AGENTS.md')), '--dry-run writes nothing')
  const out = runJson(root, ['agent-files', 'export', '--file', 'AGENTS.md'])
  assert.equal(out.written, true)
  assert.ok(out.memoryIds.includes(memory.id))
  const text = readFileSync(join(root, 'AGENTS.md'), 'utf8')
  assert.ok(text.includes('<!-- engram:begin') && text.includes('Token checks live in src/auth.ts'))
  assert.match(run(root, ['agent-files', 'export', '--file', 'AGENTS.md']).stdout, /^AGENTS\.md is up to date/)
})

test('sync status and now: disabled without ENGRAM_SYNC_URL, the server from the environment', async (t) => {
  const root = project(t)
  const status = runJson(root, ['sync', 'status'])
  assert.equal(status.state, 'disabled')
  assert.match(run(root, ['sync', 'status']).stdout, /^sync: disabled \(.*ENGRAM_SYNC_URL/)
  const now = run(root, ['sync', 'now'])
  assert.equal(now.code, 1)
  assert.match(now.stderr, /^engram: ENGRAM_SYNC_CONFIG: .*ENGRAM_SYNC_URL/)

  // A port nobody listens on: the status names it, a sync fails with the code.
  const port = await new Promise((done) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => done(port))
    })
  })
  const env = { ENGRAM_SYNC_URL: `http://127.0.0.1:${port}`, ENGRAM_SYNC_TOKEN: 'test-token' }
  const db = join(root, '..', 'synced.db')
  const remote = runJson(root, ['sync', 'status', '--db', db], env)
  assert.notEqual(remote.state, 'disabled')
  assert.equal(remote.url, `http://127.0.0.1:${port}`)
  const failed = run(root, ['sync', 'now', '--db', db], env)
  assert.equal(failed.code, 1)
  assert.match(failed.stderr, /^engram: ENGRAM_SYNC_UNREACHABLE: /)
})

test('health and sessions', async (t) => {
  const root = project(t)
  const empty = runJson(root, ['health'])
  assert.equal(empty.active, 0)
  assert.equal(empty.score, 0)
  run(root, ['remember', 'Run migrations before seeding'])
  run(root, ['remember', 'Sessions last 24 hours', '--type', 'decision'])
  const health = runJson(root, ['health'])
  assert.equal(health.active, 2)
  assert.ok(health.score > 0 && health.score <= 100)
  assert.match(run(root, ['health']).stdout, new RegExp(`^health ${health.score}/100: reviewed `))

  assert.deepEqual(runJson(root, ['sessions']).sessions, [])
  assert.match(run(root, ['sessions']).stdout, /no sessions recorded yet/)
  // A session recorded through the API, as an agent integration would.
  const db = await Engram.open({ path: join(root, '.engram', 'memory.db'), projectRoot: root, embeddings: { provider: 'none' } })
  await db.remember({ type: 'gotcha', content: 'The auth tests need a fake clock', sessionId: 'sess-a' })
  await db.endSession('sess-a')
  await db.close()
  const { trust, sessions } = runJson(root, ['sessions'])
  assert.equal(trust.sessions, 1)
  assert.deepEqual(sessions.map((s) => [s.sessionId, s.learned.length]), [['sess-a', 1]])
  assert.ok(sessions[0].endedAt > 0)
  const one = run(root, ['sessions', 'sess-a'])
  assert.match(one.stdout, /^sess-a {2}ended .*: 1 learned, 0 used/)
  assert.ok(one.stdout.includes('learned [Memory #'))
})

test('search says what it searched for when it corrected a misspelt word', (t) => {
  const root = project(t)
  runJson(root, ['remember', 'Run migrations before seeding the database', '--tags', 'db'])
  const r = run(root, ['search', 'migratons', 'seeding'])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /\(also searched for: migrat\* seeding\)/)
  assert.match(r.stdout, /\(corrected\)[^]*Run migrations before seeding/)
  const [hit] = runJson(root, ['search', 'migratons', 'seeding'])
  assert.equal(hit.correctedQuery, 'migrat* seeding')
})

test('--json gives one JSON document on stdout for every command', (t) => {
  const root = project(t)
  const { memory } = runJson(root, ['remember', 'Run migrations before seeding', '--tags', 'db'])
  const docs = {
    index: runJson(root, ['index']),
    search: runJson(root, ['search', 'migrations']),
    list: runJson(root, ['list']),
    get: runJson(root, ['get', memory.id]),
    stats: runJson(root, ['stats']),
    'search-code': runJson(root, ['search-code', 'login']),
    recall: runJson(root, ['recall', 'login']),
    impact: runJson(root, ['impact', 'src/login.ts']),
    export: runJson(root, ['export']),
    prune: runJson(root, ['prune', '--dry-run']),
    health: runJson(root, ['health']),
    sessions: runJson(root, ['sessions']),
    'agent-files import': runJson(root, ['agent-files', 'import']),
    'agent-files export': runJson(root, ['agent-files', 'export', '--dry-run']),
    'sync status': runJson(root, ['sync', 'status']),
    'model status': runJson(root, ['model', 'status']),
    forget: runJson(root, ['forget', memory.id]),
  }
  assert.equal(docs.get.id, memory.id)
  assert.equal(docs.search[0].memory.id, memory.id)
  assert.equal(docs.forget.forgotten, true)
  assert.equal(docs.export.memories, 1)
  assert.equal(typeof docs.export.text, 'string')
  assert.equal(docs['model status'].state, 'disabled')
  for (const [cmd, doc] of Object.entries(docs)) assert.equal(typeof doc, 'object', cmd)
})
