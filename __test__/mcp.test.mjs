// `engram mcp` as an agent meets it: the server started as a child process
// (`node bin/engram.js mcp --root <project> --db <file>`) and driven over stdio by the MCP SDK's
// own Client: the tool list and schemas, every tool with good and bad arguments, both
// resources, background indexing and the watcher, the database shared with another process
// (and its lock), and a clean exit when the client closes stdin or sends SIGTERM.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js'

import { Engram } from './helpers.mjs'

const bin = fileURLToPath(new URL('../bin/engram.js', import.meta.url))
const TOOL_NAMES = ['feedback', 'forget', 'impact', 'memory_health', 'planner_context', 'qa_context', 'recall', 'remember', 'search_code', 'session_context']

let dir
let root
let dbPath
let server // { client, transport, stderr: () => string, errors }
let memoryId // the gotcha on src/money.ts

/** Starts `engram mcp` with `args` and connects the SDK client to it. */
async function startServer(args) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, 'mcp', ...args],
    cwd: dir,
    env: { ...process.env },
    stderr: 'pipe',
  })
  let stderr = ''
  transport.stderr.on('data', (chunk) => (stderr += chunk))
  const client = new Client({ name: 'engram-test', version: '1.0.0' })
  const errors = []
  client.onerror = (err) => errors.push(err)
  // The client hands the negotiated version to a transport that takes it (stdio does not).
  let protocolVersion
  transport.setProtocolVersion = (version) => (protocolVersion = version)
  const started = performance.now()
  await client.connect(transport)
  return { client, transport, errors, protocolVersion, connectMs: performance.now() - started, stderr: () => stderr }
}

/** The text of a tool result (asserting it is one text block). */
function textOf(result) {
  assert.equal(result.content.length, 1, JSON.stringify(result))
  assert.equal(result.content[0].type, 'text')
  return result.content[0].text
}

async function call(name, args) {
  const result = await server.client.callTool({ name, arguments: args })
  assert.notEqual(result.isError, true, `${name} failed: ${JSON.stringify(result.content)}`)
  return textOf(result)
}

/** Calls a tool that must fail; returns its text after checking isError and the code. */
async function callFails(name, args, code) {
  const result = await server.client.callTool({ name, arguments: args })
  assert.equal(result.isError, true, `${name}(${JSON.stringify(args)}) should fail: ${JSON.stringify(result.content)}`)
  const text = textOf(result)
  assert.ok(text.startsWith(`${code}: `), `${name}(${JSON.stringify(args)}): expected ${code}, got: ${text}`)
  return text
}

/** Polls `fn` until it returns a truthy value (or fails after `ms`). */
async function poll(what, fn, ms = 20_000) {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await fn()
    if (value) return value
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** A TypeScript tree large enough that indexing it takes a moment, plus the files the tests use. */
function writeProject() {
  mkdirSync(join(root, 'src'), { recursive: true })
  writeFileSync(
    join(root, 'src/money.ts'),
    'export function roundCents(value: number): number {\n  return Math.round(value * 100) / 100\n}\n',
  )
  writeFileSync(
    join(root, 'src/billing.ts'),
    [
      "import { roundCents } from './money'",
      '',
      'export function computeInvoiceTotal(lines: { qty: number; price: number }[]): number {',
      '  return roundCents(lines.reduce((sum, l) => sum + l.qty * l.price, 0))',
      '}',
      '',
    ].join('\n'),
  )
  for (let m = 0; m < 40; m++) {
    mkdirSync(join(root, `gen/mod${m}`), { recursive: true })
    for (let f = 0; f < 50; f++) {
      const fns = Array.from(
        { length: 8 },
        (_, i) => `export function helper${m}x${f}x${i}(a: number, b: number): number {\n  const c = a * ${i} + b\n  return c > ${f} ? c - ${m} : c + ${i}\n}\n`,
      )
      writeFileSync(join(root, `gen/mod${m}/file${f}.ts`), fns.join('\n'))
    }
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'engram-mcp-'))
  root = join(dir, 'project')
  dbPath = join(dir, 'memory.db')
  writeProject()
  server = await startServer(['--root', root, '--db', dbPath])
})

after(async () => {
  await server?.client.close()
  rmSync(dir, { recursive: true, force: true })
})

test('initialize answers at once, at the current protocol version, while indexing runs', async () => {
  const info = server.client.getServerVersion()
  assert.equal(info.name, 'engram')
  assert.match(info.version, /^\d+\.\d+\.\d+/)
  assert.ok(server.client.getServerCapabilities().tools, 'tools capability')
  assert.ok(server.client.getServerCapabilities().resources, 'resources capability')
  assert.match(server.client.getInstructions(), /call recall/)
  // The client offers the SDK's latest version; the server accepts it.
  assert.equal(LATEST_PROTOCOL_VERSION, '2025-11-25')
  assert.equal(server.protocolVersion, LATEST_PROTOCOL_VERSION)
  // The initial index of ~2,000 files is still running: initialize did not wait for it...
  const health = await call('memory_health', {})
  assert.match(health, /Code index: being built/, health)
  // ...and tools answer meanwhile, saying that code results may be incomplete.
  const code = await call('search_code', { query: 'helper0x0x0' })
  assert.match(code, /Note: the code index is still being built \(started \d+ s ago\)/, code)
  const recall = await call('recall', { query: 'computeInvoiceTotal' })
  assert.match(recall, /items ranked/, recall)
  console.log(`# connect (spawn, addon load, open, initialize): ${server.connectMs.toFixed(0)} ms`)
})

test('lists the ten tools with schemas and descriptions', async () => {
  const { tools } = await server.client.listTools()
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOL_NAMES)
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, 'object', tool.name)
    assert.equal(tool.inputSchema.additionalProperties, false, tool.name)
    assert.ok(tool.description.length > 150, `${tool.name} has a description an agent can act on`)
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema]))
  const props = (name) => Object.keys(byName[name].properties ?? {}).sort()
  assert.deepEqual(props('recall'), ['budgetTokens', 'limit', 'phase', 'query', 'recentFiles'])
  assert.deepEqual(byName.recall.required, ['query'])
  assert.deepEqual(byName.recall.properties.phase.enum, ['define', 'implement', 'validate', 'refine', 'explore', 'reflect'])
  assert.deepEqual(byName.remember.required.sort(), ['content', 'type'])
  assert.ok(byName.remember.properties.type.enum.includes('gotcha'))
  for (const p of ['tags', 'relatedFiles', 'confidence', 'triggers']) assert.ok(byName.remember.properties[p], `remember.${p}`)
  assert.deepEqual(props('search_code'), ['limit', 'query'])
  assert.deepEqual(byName.impact.required, ['target'])
  assert.deepEqual(byName.feedback.properties.kind.enum, ['helpful', 'wrong', 'correction'])
  assert.deepEqual(byName.feedback.required.sort(), ['id', 'kind'])
  assert.deepEqual(byName.forget.required, ['id'])
  assert.deepEqual(props('memory_health'), [])
  assert.deepEqual(props('session_context'), ['budgetTokens', 'modules', 'sessionType', 'task'])
  assert.equal(byName.session_context.required, undefined)
  assert.deepEqual(byName.planner_context.required, ['task'])
  assert.deepEqual(props('qa_context'), ['budgetTokens', 'modules'])
})

test('search_code finds the project once indexing is done, and files written later (watch)', async () => {
  const first = await poll('the initial index', async () => {
    const text = await call('search_code', { query: 'computeInvoiceTotal', limit: 3 })
    return text.includes('src/billing.ts:1-5') && !text.includes('still being built') && text
  })
  // The file's two small definitions are one chunk (a block).
  assert.match(first, /^\[1\] src\/billing\.ts:1-5 \(block\) score /)
  assert.match(first, /```typescript\nimport \{ roundCents \} from '\.\/money'\n\nexport function computeInvoiceTotal/)
  const health = await call('memory_health', {})
  assert.match(health, /Code index: ready: 2002 files \(2002 indexed/, health)
  // initialize was answered before indexing could have finished.
  const indexSecs = Number(/chunks in ([\d.]+) s/.exec(health)[1])
  assert.ok(server.connectMs < indexSecs * 1000, `connect took ${server.connectMs} ms, indexing ${indexSecs} s`)
  await poll('the watcher to be running', async () => (await call('memory_health', {})).includes('kept current by a file watcher'))

  // A Python file written now reaches the index through watch().
  mkdirSync(join(root, 'py'))
  writeFileSync(
    join(root, 'py/tax.py'),
    'def apply_vat(amount, rate=0.2):\n    """Add value-added tax to an amount."""\n    return amount * (1 + rate)\n',
  )
  const hit = await poll('the watcher to index py/tax.py', async () => {
    const text = await call('search_code', { query: 'apply vat' })
    return text.includes('py/tax.py:1-3') && text
  })
  assert.match(hit, /\(function apply_vat\)/)
  assert.match(hit, /```python\ndef apply_vat/)
})

test('remember, then recall and impact return the memory', async () => {
  const text = await call('remember', {
    type: 'gotcha',
    content: 'roundCents uses Math.round, so negative half-cents round toward positive infinity',
    tags: ['money'],
    relatedFiles: ['src/money.ts'],
    confidence: 0.8,
  })
  const m = /^Remembered (\S+) \(gotcha, confidence 0\.80\)/.exec(text)
  assert.ok(m, text)
  memoryId = m[1]
  const again = await call('remember', {
    type: 'gotcha',
    content: 'roundCents uses Math.round, so negative half-cents round toward positive infinity',
  })
  assert.match(again, new RegExp(`^Already known: reinforced ${memoryId} \\(x1\\)`))

  const recall = await call('recall', { query: 'roundCents', phase: 'implement', recentFiles: ['src/billing.ts'], budgetTokens: 1500, limit: 10 })
  assert.match(recall, /## Memories/)
  assert.match(recall, /negative half-cents round toward positive infinity/)
  assert.match(recall, new RegExp(`\\[\\d+\\] ${memoryId} \\(gotcha\\)`), 'the memory id is listed for feedback')
  assert.match(recall, /### src\/money\.ts/)
  const used = /(\d+)\/1500 tokens packed/.exec(recall)
  assert.ok(used && Number(used[1]) > 0 && Number(used[1]) <= 1500, recall)
  // What recall hands the agent counts as used.
  assert.ok(JSON.parse(await readText(`engram://memories/${memoryId}`)).accessCount >= 1, 'recall tracks access')

  const impact = await call('impact', { target: 'src/money.ts' })
  assert.match(impact, /^Impact of a change to src\/money\.ts \(file\)/)
  assert.match(impact, /- src\/billing\.ts \(file\), depth 1/)
  assert.match(impact, /- src\/billing\.ts:computeInvoiceTotal \(function\), depth 1 via src\/money\.ts:roundCents/)
  assert.match(impact, new RegExp(`Memories attached \\(1\\):\\n- ${memoryId} · gotcha`))
  assert.match(impact, /attached to src\/money\.ts as file, depth 0/)
  const noMemories = await call('impact', { target: 'src/money.ts', memoryLimit: 0 })
  assert.match(noMemories, /Memories attached \(0, nearest first; more are attached: raise memoryLimit to list them\):/, noMemories)
  assert.doesNotMatch(noMemories, /- none/)
  // The session-start context: the memory, reinforced to 0.85, is above a new project's trust
  // threshold (0.80), so it is there for the module named, with its id.
  const start = await call('session_context', { modules: ['src/'], budgetTokens: 800 })
  assert.match(start, /^# Project memory \(engram\)/, start)
  assert.match(start, new RegExp(`## Relevant memories\n\\[1\\] gotcha · confidence 0\\.85 · ${memoryId} · src/money\\.ts\nroundCents uses`), start)
  assert.match(start, /\(\d+ of 800 tokens\)$/, start)
  assert.match(await call('session_context', { modules: ['docs/'] }), /^Nothing to start with: no unfinished work/)
  // The planner and QA contexts: nothing recorded for them in this project yet.
  assert.match(await call('planner_context', { task: 'round invoice totals', modules: ['src/'] }), /^Nothing to plan with yet/)
  assert.match(await call('qa_context', { modules: ['src/'] }), /^Nothing recorded yet for testing/)
  const symbol = await call('impact', { target: 'src/money.ts:roundCents', maxDepth: 1, limit: 1 })
  assert.match(symbol, /^Impact of a change to src\/money\.ts:roundCents \(function, src\/money\.ts\)/, symbol)
  assert.match(symbol, /Affected \(1, nearest first\):\n- src\/billing\.ts:computeInvoiceTotal \(function\), depth 1 at src\/billing\.ts:3\n/, symbol)
})

test('feedback (helpful, wrong, correction) and forget', async () => {
  const before = JSON.parse(await readText(`engram://memories/${memoryId}`)).confidence
  const helpful = await call('feedback', { id: memoryId, kind: 'helpful', comment: 'saved me a bug' })
  assert.ok(helpful.startsWith(`Recorded helpful on ${memoryId}: confidence now ${(before + 0.05).toFixed(2)}.`), helpful)

  const remembered = await call('remember', { type: 'decision', content: 'Invoices are rounded per line, not per total' })
  const decisionId = /^Remembered (\S+)/.exec(remembered)[1]
  const wrongText = await call('feedback', { id: decisionId, kind: 'wrong' })
  assert.match(wrongText, new RegExp(`^Recorded wrong on ${decisionId}: confidence now 0\\.70, back in review\\.`))
  const corrected = await call('feedback', { id: decisionId, kind: 'correction', correction: 'Invoices are rounded once, on the total' })
  const correctionId = new RegExp(`^Stored the correction as (\\S+); ${decisionId} is superseded and forgotten\\.`).exec(corrected)?.[1]
  assert.ok(correctionId, corrected)
  const old = JSON.parse(await readText(`engram://memories/${decisionId}`))
  assert.equal(old.forgotten, true)
  assert.equal(old.supersededBy, correctionId)
  assert.equal(JSON.parse(await readText(`engram://memories/${correctionId}`)).content, 'Invoices are rounded once, on the total')

  const forgotten = await call('forget', { id: correctionId, reason: 'test' })
  assert.match(forgotten, new RegExp(`^Forgot ${correctionId} \\(decision\\)`))
  const list = JSON.parse(await readText('engram://memories'))
  assert.ok(!list.some((m) => m.id === correctionId), 'a forgotten memory leaves the list')
  assert.equal(JSON.parse(await readText(`engram://memories/${correctionId}`)).forgottenReason, 'test')
})

async function readText(uri) {
  const { contents } = await server.client.readResource({ uri })
  assert.equal(contents.length, 1)
  assert.equal(contents[0].uri, uri)
  assert.equal(contents[0].mimeType, 'application/json')
  return contents[0].text
}

test('memory_health reports the score, counts and index', async () => {
  const text = await call('memory_health', {})
  const score = /^Memory health: (\d+)\/100/.exec(text)
  assert.ok(score && Number(score[1]) > 0, text)
  assert.match(text, /Memories: 1 active .* 2 forgotten/)
  assert.match(text, /By type: gotcha 1/)
  assert.match(text, /Embeddings: /)
  assert.ok(text.includes(`Database: ${dbPath}`), text)
})

test('resources: the memory list and one memory by id', async () => {
  const { resources } = await server.client.listResources()
  assert.ok(resources.some((r) => r.uri === 'engram://memories' && r.mimeType === 'application/json'))
  assert.ok(resources.some((r) => r.uri === `engram://memories/${memoryId}` && r.name.startsWith('gotcha: roundCents')))
  const { resourceTemplates } = await server.client.listResourceTemplates()
  assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate), ['engram://memories/{id}'])

  const list = JSON.parse(await readText('engram://memories'))
  assert.deepEqual(list.map((m) => m.id), [memoryId])
  assert.deepEqual(list[0].relatedFiles, ['src/money.ts'])
  const one = JSON.parse(await readText(`engram://memories/${memoryId}`))
  assert.equal(one.id, memoryId)
  assert.equal(one.content, 'roundCents uses Math.round, so negative half-cents round toward positive infinity')
  assert.equal(one.helpfulCount, 1)

  for (const [uri, code] of [
    ['engram://memories/no-such-id', 'ENGRAM_NOT_FOUND'],
    ['engram://elsewhere', 'ENGRAM_NOT_FOUND'],
  ]) {
    await assert.rejects(server.client.readResource({ uri }), (err) => {
      assert.equal(err.code, -32002, `${uri}: ${err.message}`)
      assert.ok(err.message.includes(code), err.message)
      return true
    })
  }
})

test('bad arguments and engram errors come back as tool errors with the code, and the server goes on', async () => {
  const bad = [
    // rejected by the schema
    ['recall', { query: 42 }, 'ENGRAM_INVALID_ARG', /recall: query: .*expected string/],
    ['recall', { query: 'x', phase: 'coding' }, 'ENGRAM_INVALID_ARG', /phase: /],
    ['recall', { query: 'x', budget: 100 }, 'ENGRAM_INVALID_ARG', /Unrecognized key: "budget"/],
    ['remember', { type: 'nonsense', content: 'x' }, 'ENGRAM_INVALID_ARG', /remember: type: /],
    ['remember', { type: 'gotcha' }, 'ENGRAM_INVALID_ARG', /content: /],
    ['search_code', { limit: 5 }, 'ENGRAM_INVALID_ARG', /search_code: query: /],
    ['search_code', { query: 'x', limit: 0 }, 'ENGRAM_INVALID_ARG', /limit: /],
    ['impact', {}, 'ENGRAM_INVALID_ARG', /impact: target: /],
    ['feedback', { id: memoryId, kind: 'correction' }, 'ENGRAM_INVALID_ARG', /correction: required when kind is "correction"/],
    ['feedback', { id: memoryId, kind: 'great' }, 'ENGRAM_INVALID_ARG', /kind: /],
    ['forget', { id: 7 }, 'ENGRAM_INVALID_ARG', /forget: id: /],
    ['memory_health', { verbose: true }, 'ENGRAM_INVALID_ARG', /Unrecognized key/],
    ['session_context', { budgetTokens: 0 }, 'ENGRAM_INVALID_ARG', /session_context: budgetTokens: /],
    ['no_such_tool', {}, 'ENGRAM_INVALID_ARG', /unknown tool "no_such_tool" \(tools: recall, .*session_context/],
    // rejected by engram
    ['recall', { query: 'x', recentFiles: ['../../etc/passwd'] }, 'ENGRAM_INVALID_ARG', /escapes the project root/],
    ['remember', { type: 'gotcha', content: 'outside', relatedFiles: ['../elsewhere.ts'] }, 'ENGRAM_INVALID_ARG', /elsewhere/],
    ['impact', { target: 'src/nowhere.ts' }, 'ENGRAM_NOT_FOUND', /src\/nowhere\.ts/],
    ['feedback', { id: 'no-such-id', kind: 'helpful' }, 'ENGRAM_NOT_FOUND', /no-such-id/],
    ['forget', { id: 'no-such-id' }, 'ENGRAM_NOT_FOUND', /no-such-id/],
    ['session_context', { modules: ['../outside/'] }, 'ENGRAM_INVALID_ARG', /modules: .*escapes the project root/],
    ['planner_context', { modules: ['src/'] }, 'ENGRAM_INVALID_ARG', /planner_context: task: /],
    ['qa_context', { modules: ['../outside/'] }, 'ENGRAM_INVALID_ARG', /modules: .*escapes the project root/],
  ]
  for (const [name, args, code, pattern] of bad) {
    const text = await callFails(name, args, code)
    assert.match(text, pattern, `${name}(${JSON.stringify(args)})`)
  }
  assert.deepEqual(TOOL_NAMES.filter((t) => !bad.some(([n]) => n === t)), [], 'every tool is called with bad arguments')
  // Still serving.
  await server.client.ping()
  assert.match(await call('memory_health', {}), /^Memory health/)
})

test('another process shares the database: its writes show, and its lock is ENGRAM_SQLITE_BUSY', async () => {
  const app = await Engram.open({ path: dbPath, projectRoot: root })
  try {
    const { memory } = await app.remember({ type: 'decision', content: 'Prices are stored in integer cents in the ledger table' })
    const recall = await call('recall', { query: 'ledger integer cents' })
    assert.ok(recall.includes(memory.id), recall)
    const seen = JSON.parse(await readText(`engram://memories/${memory.id}`))
    assert.equal(seen.content, 'Prices are stored in integer cents in the ledger table')
    const memories = await app.list()
    assert.ok(memories.some((m) => m.id === memoryId), 'the app sees what the agent remembered')
  } finally {
    await app.close()
  }

  // A process holding the write lock past the busy timeout (5 s): the write fails with the code.
  const holder = spawn('python3', [
    '-c',
    'import sqlite3, sys, time\n' +
      'c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)\n' +
      'c.execute("BEGIN IMMEDIATE")\n' +
      'print("locked", flush=True)\n' +
      'sys.stdin.read()\n',
    dbPath,
  ])
  try {
    await new Promise((resolve, reject) => {
      holder.stdout.once('data', resolve)
      holder.once('exit', (code) => reject(new Error(`python3 exited (${code})`)))
    })
    const started = performance.now()
    const text = await callFails('remember', { type: 'gotcha', content: 'written while another process holds the lock' }, 'ENGRAM_SQLITE_BUSY')
    assert.match(text, /retry in a moment/)
    assert.ok(performance.now() - started >= 4000, 'it waited for the busy timeout')
  } finally {
    holder.stdin.end()
    await new Promise((resolve) => (holder.exitCode === null ? holder.once('exit', resolve) : resolve()))
  }
  assert.match(await call('remember', { type: 'gotcha', content: 'written once the lock is gone' }), /^Remembered /)
})

test('nothing but the protocol reaches stdout; logs go to stderr', () => {
  assert.deepEqual(server.errors.map(String), [], 'the client saw no unparseable output or transport errors')
  assert.match(server.stderr(), /^engram mcp: serving /m)
  assert.match(server.stderr(), /^engram mcp: indexed 2002 files/m)
  assert.match(server.stderr(), /^engram mcp: watching /m)
})

test('the server exits cleanly when the client closes stdin', async () => {
  const { pid } = server.transport
  const started = performance.now()
  await server.client.close()
  const ms = performance.now() - started
  // The SDK's client sends SIGTERM after 2 s: the server must have gone on its own before.
  assert.ok(ms < 2000, `closing took ${ms.toFixed(0)} ms`)
  assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' })
  assert.match(server.stderr(), /shutting down \(the client closed stdin\)\nengram mcp: closed\n$/)
  server = null
  // The file is released and holds everything.
  const db = await Engram.open({ path: dbPath })
  assert.equal((await db.stats()).active, 3)
  await db.close()
})

test('--no-index serves without indexing, and SIGTERM closes the server cleanly', async () => {
  const other = join(dir, 'other.db')
  server = await startServer(['--root', root, '--db', other, '--no-index'])
  assert.match(await call('memory_health', {}), /Code index: not built by this server \(--no-index\)/)
  assert.match(await call('search_code', { query: 'computeInvoiceTotal' }), /^No indexed code matched "computeInvoiceTotal"\.$/)
  const closed = new Promise((resolve) => (server.transport.onclose = resolve))
  process.kill(server.transport.pid, 'SIGTERM')
  await closed
  assert.match(server.stderr(), /shutting down \(SIGTERM\)\nengram mcp: closed\n$/)
  assert.doesNotMatch(server.stderr(), /indexed|watching/)
  server = null
})

test('a request sent just before stdin closes is still answered', async () => {
  // Some clients write their last request and close stdin at once (a shell pipe does).
  const child = spawn(process.execPath, [bin, 'mcp', '--root', root, '--db', join(dir, 'raw.db'), '--no-index'], { cwd: dir })
  let stdout = ''
  child.stdout.on('data', (chunk) => (stdout += chunk))
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  const send = (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`)
  send({ id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } })
  send({ method: 'notifications/initialized' })
  send({ id: 2, method: 'tools/call', params: { name: 'remember', arguments: { type: 'gotcha', content: 'sent as stdin closed' } } })
  send({ id: 3, method: 'tools/call', params: { name: 'recall', arguments: { query: 'what was sent as stdin closed' } } })
  child.stdin.end()
  assert.deepEqual(await exited, { code: 0, signal: null })
  const answers = stdout.trim().split('\n').map((line) => JSON.parse(line))
  assert.deepEqual(answers.map((a) => a.id), [1, 2, 3])
  assert.equal(answers[0].result.protocolVersion, LATEST_PROTOCOL_VERSION)
  assert.match(answers[1].result.content[0].text, /^Remembered \S+ \(gotcha/)
  assert.match(answers[2].result.content[0].text, /sent as stdin closed/)
})
