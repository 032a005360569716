// `engram mcp` as an agent meets it: the `recall` tool's round trip over stdio, at ~50,000
// chunks (issue 34: p50 <= 20 ms). The tree is real code (the CPython standard library
// installed here, then crates of the cargo registry by name, as benches/js/recall.mjs builds
// it; here ~1.2M lines, 56,491 chunks, the tree recall.mjs measures), indexed and embedded
// once with the JS API, plus 5,000 synthetic memories (benches/js/corpus.mjs) related to its
// files. The server runs as agents start it, `node bin/engram.js mcp --root <tree> --db <file>
// --no-index --no-watch` (the index is prebuilt), and the MCP SDK's own client drives it over
// stdio.
//
// For each embedder setting (the built-in model when it is installed and the chunks have
// vectors, and `--provider none`: keyword and graph paths only) it times:
//   - MCP: `callTool({ name: 'recall', arguments: { query } })`, the whole round trip as the
//     client sees it (JSON-RPC over the pipe, the SDK's validation on both sides, the server's
//     handler and the text it formats);
//   - API: `db.recall(query, { trackAccess: true })` in this process on the same file (what the
//     server's handler calls), and without trackAccess;
//   - MCP `ping`: the transport's floor;
//   - `search_code` and `impact` (file and symbol targets), MCP against API.
// MCP and API recalls alternate query by query (the order flipping), so the machine's noise
// and cold caches fall on both; then each path runs back to back, as one client alone meets
// it. Then one more server, instrumented by a preload that times its request handlers and
// the `recall()` inside them, splits the round trip into the engine, the napi boundary, the
// rest of the handler, and the transport + SDK. Queries: identifiers of the tree,
// descriptions, memory-like word lists (44, cycled). Whether the dense path ran is printed
// (from `memory_health` and the recall results).
//
// The tree and the database are kept in ENGRAM_BENCH_DIR (default ~/.cache/engram-bench/mcp):
// the first run copies, indexes and embeds (~36 min on this 2-core machine with the model),
// later runs reuse them (~50 s; delete ready.json there to redo the setup, e.g. after
// installing the model). ENGRAM_BENCH_CPU_PROF=<dir> writes a .cpuprofile of the
// instrumented server there.
//   node benches/js/mcp.mjs [N]      N: timed calls per path and setting (default 440)
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { homedir, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { hrtime } from 'node:process'
import { fileURLToPath } from 'node:url'

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

import { memories, percentile, queries, rng } from './corpus.mjs'
import { buildCorpus, DESCRIPTIONS, IDENTIFIERS, sourceFiles } from './source_tree.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const repo = fileURLToPath(new URL('../..', import.meta.url))
const bin = join(repo, 'bin', 'engram.js')

const N = Number(process.argv[2] ?? 440)
if (!Number.isInteger(N) || N < 10) throw new Error('usage: node benches/js/mcp.mjs [N >= 10]')
const WANT_LINES = 1_090_000
const MEMORIES = 5_000

// --- the tree (as benches/js/recall.mjs builds it) ----------------------------------------------

const dir = resolve(process.env.ENGRAM_BENCH_DIR ?? join(homedir(), '.cache', 'engram-bench', 'mcp'))
const root = join(dir, 'corpus')
const dbPath = join(dir, 'mcp.db')
const readyPath = join(dir, 'ready.json')

const secsSince = (t0) => (Number(hrtime.bigint() - t0) / 1e9).toFixed(1)

/** Builds the tree and the database once; returns what they hold. */
async function prepare() {
  if (existsSync(readyPath)) return JSON.parse(readFileSync(readyPath, 'utf8'))
  mkdirSync(dir, { recursive: true })
  if (!existsSync(root)) {
    const t0 = hrtime.bigint()
    console.log(`mcp: copying ~${WANT_LINES} lines of code into ${root}`)
    const lines = buildCorpus(root, WANT_LINES)
    console.log(`mcp: ${lines} lines (${secsSince(t0)} s)`)
  }
  const db = await Engram.open({ path: dbPath, projectRoot: root })
  try {
    let t0 = hrtime.bigint()
    const indexed = await db.index()
    console.log(`mcp: indexed ${indexed.filesIndexed} files (${indexed.filesUnchanged} unchanged), ${indexed.chunks} chunks (${secsSince(t0)} s)`)
    const files = sourceFiles(root)
    const have = (await db.stats()).total
    if (have < MEMORIES) {
      const pick = rng(11)
      const batch = memories(MEMORIES - have, 5).map((m) => ({ ...m, relatedFiles: [files[Math.floor(pick() * files.length)]] }))
      for (let i = 0; i < batch.length; i += 1000) await db.rememberMany(batch.slice(i, i + 1000))
    }
    let embedded = false
    const status = db.embeddingStatus()
    if (status.state === 'available' || status.state === 'ready') {
      t0 = hrtime.bigint()
      const e = await db.embedPending({
        onProgress: (p) => process.stderr.write(`\rmcp: embedding: ${p.kind} ${p.done}/${p.total}   `),
      })
      process.stderr.write('\n')
      console.log(`mcp: embedded ${e.chunks} chunks, ${e.memories} memories (${secsSince(t0)} s)`)
      embedded = true
    } else {
      console.log(`mcp: no embedding model (${status.state}: ${status.reason ?? ''}); keyword and graph paths only`)
    }
    await db.settled?.()
    const ready = { chunks: indexed.chunks, files: indexed.filesSeen, memories: (await db.stats()).total, embedded }
    writeFileSync(readyPath, JSON.stringify(ready))
    return ready
  } finally {
    await db.close()
  }
}

// --- queries and targets ----------------------------------------------------------------------

const QUERIES = [...IDENTIFIERS, ...DESCRIPTIONS, ...queries(16, 17)]
// impact targets: files and symbols of CPython's stdlib with dependents (those not in the
// index are dropped at the start).
const IMPACT_FILES = ['python/json/decoder.py', 'python/shutil.py', 'python/collections/__init__.py', 'python/tempfile.py']
const IMPACT_SYMBOLS = ['python/json/decoder.py:JSONDecoder', 'python/shutil.py:rmtree', 'python/tempfile.py:mkdtemp', 'python/subprocess.py:Popen']

// --- timing -------------------------------------------------------------------------------------

const ms = (t0) => Number(hrtime.bigint() - t0) / 1e6

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b)
  return {
    n: s.length,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    mean: s.reduce((a, b) => a + b, 0) / s.length,
  }
}

const median = (xs) => stats(xs).p50
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '-')

function row(label, samples) {
  const s = stats(samples)
  return `| ${label} | ${s.n} | ${f2(s.p50)} | ${f2(s.p90)} | ${f2(s.p99)} | ${f2(s.mean)} |`
}

const HEADER = '| path | calls | p50 ms | p90 ms | p99 ms | mean ms |\n| --- | --- | --- | --- | --- | --- |'

/** The text of a tool result; throws on an error result. */
function textOf(result, what) {
  if (result.isError) throw new Error(`${what} failed: ${JSON.stringify(result.content)}`)
  return result.content.map((c) => c.text).join('')
}

/**
 * Starts `engram mcp` on the prebuilt index and connects the SDK's client. `nodeArgs` go
 * before the script (a preload, --cpu-prof); `onStderr` sees the server's stderr lines.
 */
async function startServer({ provider, nodeArgs = [], onStderr = () => {} }) {
  const args = [...nodeArgs, bin, 'mcp', '--root', root, '--db', dbPath, '--no-index', '--no-watch']
  if (provider) args.push('--provider', provider)
  const env = { ...process.env }
  delete env.ENGRAM_EMBED_PROVIDER
  const transport = new StdioClientTransport({ command: process.execPath, args, cwd: repo, env, stderr: 'pipe' })
  let pending = ''
  transport.stderr.on('data', (chunk) => {
    pending += chunk
    let nl
    while ((nl = pending.indexOf('\n')) >= 0) {
      onStderr(pending.slice(0, nl))
      pending = pending.slice(nl + 1)
    }
  })
  const client = new Client({ name: 'engram-bench', version: '1.0.0' })
  const t0 = hrtime.bigint()
  await client.connect(transport)
  return { client, transport, connectMs: ms(t0) }
}

/** One embedder setting: cold start, then MCP and API alternating over the same calls. */
async function measure(setting, provider) {
  const server = await startServer({ provider })
  const { client } = server
  const out = { setting, connectMs: server.connectMs }
  let t0 = hrtime.bigint()
  const first = textOf(await client.callTool({ name: 'recall', arguments: { query: QUERIES[0] } }), 'recall')
  out.firstRecallMs = ms(t0)
  out.health = textOf(await client.callTool({ name: 'memory_health', arguments: {} }), 'memory_health')
    .split('\n')
    .filter((l) => /^(Code index|Embeddings):/.test(l))
  out.firstText = first.split('\n').at(-1)

  const db = await Engram.open({ path: dbPath, projectRoot: root, embeddings: provider ? { provider } : undefined })
  const impactFiles = []
  const impactSymbols = []
  for (const [list, into] of [[IMPACT_FILES, impactFiles], [IMPACT_SYMBOLS, impactSymbols]]) {
    for (const t of list) {
      try {
        await db.impact(t, { limit: 100 })
        into.push(t)
      } catch (err) {
        if (err?.code !== 'ENGRAM_NOT_FOUND') throw err
      }
    }
  }
  const mcp = (name, args) => client.callTool({ name, arguments: args })
  const api = {
    recall: (a) => db.recall(a.query, { trackAccess: true }),
    search_code: (a) => db.searchCode(a.query, { limit: 10 }),
    impact: (a) => db.impact(a.target, { limit: 100 }),
  }

  // Warm-up: every query once each way (the model, the vector index, SQLite's pages).
  const skipped = new Set()
  let dense = 0
  for (const query of QUERIES) {
    textOf(await mcp('recall', { query }), 'recall')
    const r = await api.recall({ query })
    for (const s of r.skipped) skipped.add(s.split(':').slice(0, 2).join(':'))
    if (r.items.some((i) => i.ranks?.dense !== undefined)) dense++
  }
  out.rssMb = serverRssMb(server.transport.pid)
  out.denseRan = dense > 0 && ![...skipped].some((s) => s.startsWith('dense'))
  out.denseQueries = dense
  out.skipped = [...skipped]

  const samples = { mcp: [], api: [], apiNoTrack: [], ping: [], textBytes: [], engineMs: [], mcpSolo: [], apiSolo: [] }
  const timed = {
    mcp: async (query) => {
      const t = hrtime.bigint()
      const res = await mcp('recall', { query })
      samples.mcp.push(ms(t))
      samples.textBytes.push(Buffer.byteLength(textOf(res, 'recall')))
    },
    api: async (query) => {
      const t = hrtime.bigint()
      const r = await api.recall({ query })
      samples.api.push(ms(t))
      samples.engineMs.push(r.timings.totalMs)
    },
    apiNoTrack: async (query) => {
      const t = hrtime.bigint()
      await db.recall(query)
      samples.apiNoTrack.push(ms(t))
    },
    mcpSolo: async (query) => {
      const t = hrtime.bigint()
      await mcp('recall', { query })
      samples.mcpSolo.push(ms(t))
    },
    apiSolo: async (query) => {
      const t = hrtime.bigint()
      await api.recall({ query })
      samples.apiSolo.push(ms(t))
    },
    ping: async () => {
      const t = hrtime.bigint()
      await client.ping()
      samples.ping.push(ms(t))
    },
  }
  // MCP and API alternate, the order flipping every query and every round: whichever
  // process ran the last recall has its caches warm (the int8 codes and the model's f16
  // weights are ~22 MB each, per process), so each side gets that as often as the other.
  for (let i = 0; i < N; i++) {
    const query = QUERIES[i % QUERIES.length]
    const round = Math.floor(i / QUERIES.length)
    const order = (i + round) % 2 ? ['api', 'mcp'] : ['mcp', 'api']
    for (const step of order) await timed[step](query)
  }
  // Then each path back to back, in blocks of N/4 calls (MCP, API, API without trackAccess,
  // ping, then the reverse order): what one client alone meets.
  const solo = async (step) => {
    for (let i = 0; i < Math.max(11, Math.floor(N / 4)); i++) await timed[step](QUERIES[i % QUERIES.length])
  }
  const blocks = ['mcpSolo', 'apiSolo', 'apiNoTrack', 'ping']
  for (const step of [...blocks, ...[...blocks].reverse()]) await solo(step)

  // search_code and impact: a quarter as many calls each, same alternation.
  const other = {}
  const kinds = [
    ['search_code', IDENTIFIERS.map((query) => ({ query })).concat(DESCRIPTIONS.map((query) => ({ query })))],
    ['impact (file)', impactFiles.map((target) => ({ target }))],
    ['impact (symbol)', impactSymbols.map((target) => ({ target }))],
  ]
  for (const [label, argsList] of kinds) {
    if (!argsList.length) continue
    const tool = label.split(' ')[0]
    const m = []
    const a = []
    for (const args of argsList) {
      textOf(await mcp(tool, args), tool)
      await api[tool](args)
    }
    for (let i = 0; i < Math.max(20, Math.floor(N / 4)); i++) {
      const args = argsList[i % argsList.length]
      const steps = [
        async () => {
          const t = hrtime.bigint()
          textOf(await mcp(tool, args), tool)
          m.push(ms(t))
        },
        async () => {
          const t = hrtime.bigint()
          await api[tool](args)
          a.push(ms(t))
        },
      ]
      if ((i + Math.floor(i / argsList.length)) % 2) steps.reverse()
      for (const step of steps) await step()
    }
    other[label] = { mcp: m, api: a }
  }

  await client.close()
  await db.close()
  return { ...out, samples, other }
}

// The preload of the instrumented server: times each request handler and the recall() calls
// inside it, one stderr line per request (written before the answer is sent).
const PRELOAD = `'use strict'
const { createRequire } = require('node:module')
const req = createRequire(${JSON.stringify(join(repo, 'lib', 'mcp.js'))})
const { Server } = req('@modelcontextprotocol/sdk/server/index.js')
const { Engram } = req('../index.js')
let engineMs = NaN
const recall = Engram.prototype.recall
Engram.prototype.recall = async function (...args) {
  const t = process.hrtime.bigint()
  try {
    const r = await recall.apply(this, args)
    engineMs = r.timings.totalMs
    return r
  } finally {
    recallMs = Number(process.hrtime.bigint() - t) / 1e6
  }
}
let recallMs = NaN
const setRequestHandler = Server.prototype.setRequestHandler
Server.prototype.setRequestHandler = function (schema, handler) {
  return setRequestHandler.call(this, schema, async (request, extra) => {
    const t = process.hrtime.bigint()
    recallMs = engineMs = NaN
    try {
      return await handler(request, extra)
    } finally {
      const handlerMs = Number(process.hrtime.bigint() - t) / 1e6
      process.stderr.write('BENCH ' + request.method + ' ' + (request.params?.name ?? '-') + ' ' + handlerMs + ' ' + recallMs + ' ' + engineMs + '\\n')
    }
  })
}
`

/**
 * Where a round trip goes: the instrumented server against this process's engine, recall
 * only, alternating query by query as in `measure` (`rounds` x the queries).
 */
async function split(provider, rounds) {
  const tmp = mkdtempSync(join(tmpdir(), 'engram-mcp-bench-'))
  try {
    const preload = join(tmp, 'preload.cjs')
    writeFileSync(preload, PRELOAD)
    const nodeArgs = ['--require', preload]
    const prof = process.env.ENGRAM_BENCH_CPU_PROF
    if (prof) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${resolve(prof)}`)
    const lines = []
    const server = await startServer({
      provider,
      nodeArgs,
      onStderr: (line) => line.startsWith('BENCH tools/call recall ') && lines.push(line.split(' ').slice(3).map(Number)),
    })
    const { client } = server
    const db = await Engram.open({ path: dbPath, projectRoot: root, embeddings: provider ? { provider } : undefined })
    for (const query of QUERIES) {
      await client.callTool({ name: 'recall', arguments: { query } })
      await db.recall(query, { trackAccess: true })
    }
    const rssMb = serverRssMb(server.transport.pid)
    const roundTrip = []
    const api = []
    const apiEngine = []
    const from = lines.length
    for (let r = 0; r < rounds; r++) {
      for (const query of QUERIES) {
        const steps = [
          async () => {
            const t = hrtime.bigint()
            await client.callTool({ name: 'recall', arguments: { query } })
            roundTrip.push(ms(t))
          },
          async () => {
            const t = hrtime.bigint()
            const res = await db.recall(query, { trackAccess: true })
            api.push(ms(t))
            apiEngine.push(res.timings.totalMs)
          },
        ]
        if (r % 2) steps.reverse()
        for (const step of steps) await step()
      }
    }
    // The last stderr lines may trail the answers.
    for (let i = 0; i < 50 && lines.length < from + roundTrip.length; i++) await new Promise((ok) => setTimeout(ok, 20))
    await client.close()
    await db.close()
    const measured = lines.slice(from, from + roundTrip.length)
    return {
      rssMb,
      roundTrip,
      handler: measured.map((l) => l[0]),
      recall: measured.map((l) => l[1]),
      engine: measured.map((l) => l[2]),
      rest: measured.map((l, i) => roundTrip[i] - l[0]),
      format: measured.map((l) => l[0] - l[1]),
      boundary: measured.map((l) => l[1] - l[2]),
      api,
      apiEngine,
      apiBoundary: api.map((x, i) => x - apiEngine[i]),
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

/** The resident set of a process in MB (Linux), or NaN. */
function serverRssMb(pid) {
  try {
    const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]
    return Number(kb) / 1024
  } catch {
    return NaN
  }
}

// --- run ------------------------------------------------------------------------------------------

const ready = await prepare()
console.log(
  `mcp: ${root}: ${ready.files} files, ${ready.chunks} chunks, ${ready.memories} memories, ` +
    `${ready.embedded ? 'embedded with the built-in model' : 'no vectors'}; ${N} timed calls per path`,
)

const settings = ready.embedded ? [['built-in model (dense on)', undefined], ['--provider none (dense off)', 'none']] : [['no model (dense off)', undefined]]
const results = []
for (const [label, provider] of settings) results.push(await measure(label, provider))

for (const r of results) {
  console.log(`\n### ${r.setting}`)
  console.log(`server: connect (spawn + initialize) ${r.connectMs.toFixed(0)} ms; first recall ${r.firstRecallMs.toFixed(0)} ms; RSS after warm-up ${r.rssMb.toFixed(0)} MB`)
  console.log(`memory_health: ${r.health.join(' | ')}`)
  console.log(
    `dense path ran: ${r.denseRan ? 'yes' : 'no'} (${r.denseQueries}/${QUERIES.length} queries had dense hits)` +
      `${r.skipped.length ? `; skipped: ${r.skipped.join(', ')}` : ''}`,
  )
  console.log(`recall answer: median ${(median(r.samples.textBytes) / 1024).toFixed(1)} KiB of text; last line of the first: ${r.firstText}`)
  console.log(HEADER)
  console.log(row('MCP recall round trip (stdio + SDK), alternating', r.samples.mcp))
  console.log(row('API db.recall, trackAccess (as the handler calls it), alternating', r.samples.api))
  console.log(row('  of which inside the engine (timings.total)', r.samples.engineMs))
  console.log(row('MCP recall round trip, back to back', r.samples.mcpSolo))
  console.log(row('API db.recall, trackAccess, back to back', r.samples.apiSolo))
  console.log(row('API db.recall, no trackAccess, back to back', r.samples.apiNoTrack))
  console.log(row('MCP ping round trip, back to back (transport floor)', r.samples.ping))
  for (const [label, { mcp, api }] of Object.entries(r.other)) {
    console.log(row(`MCP ${label}`, mcp))
    console.log(row(`API ${label}`, api))
  }
  const gap = r.samples.mcp.map((x, i) => x - r.samples.api[i])
  console.log(`MCP minus API, same query: median ${f2(median(gap))} ms`)
}

const sp = await split(settings[0][1], Math.max(2, Math.round(N / QUERIES.length / 2)))
console.log(
  `\n### Where a round trip goes (${settings[0][0]}, instrumented server, ${sp.roundTrip.length} recalls ` +
    `alternating with this process's; server RSS after warm-up ${sp.rssMb.toFixed(0)} MB)`,
)
console.log('| part | median ms | p90 ms |\n| --- | --- | --- |')
const part = (label, xs) => console.log(`| ${label} | ${f2(median(xs))} | ${f2(stats(xs).p90)} |`)
part('MCP round trip, client side', sp.roundTrip)
part('  server handler (zod parse, db.recall, text)', sp.handler)
part('    db.recall as the handler awaits it', sp.recall)
part('      inside the engine (timings.total)', sp.engine)
part('      napi boundary + result objects', sp.boundary)
part('    handler minus db.recall (parse, format text)', sp.format)
part('  outside the handler (pipe, JSON, SDK both sides)', sp.rest)
part('API db.recall in this process, trackAccess', sp.api)
part('  inside the engine (timings.total)', sp.apiEngine)
part('  napi boundary + result objects', sp.apiBoundary)
