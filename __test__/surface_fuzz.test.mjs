// The whole public JS surface against hostile arguments (issue 35: "0 process crashes, 0 hangs
// and 0 uncoded errors over the whole hostile corpus"). Every method of Engram and of an
// ObserverSession, Engram's statics, every function the module exports and the class
// constructors are called with each hostile value (null, NaN, lone surrogates, 2 MB strings,
// Symbols, BigInts, a Proxy that throws on every trap, 200-deep nesting, FTS5 syntax...) in each
// argument position, in each field of their options objects (two levels deep) and each element
// of their arrays, while the other positions hold valid values; the functions an app passes
// (callbacks, loggers, embedders) return or throw the same values. Each call must
// return/resolve or throw/reject an Error whose `code` starts with `ENGRAM_`: never a bare
// TypeError, never a dead process, never a call that does not settle.
//
// The surface is enumerated at run time (prototypes, statics, exports); arities and the fields
// of options objects come from index.d.ts, so a method or an option added later is fuzzed
// without being listed here. VALID below only makes calls reach deeper than argument checks.
//
// The calls run in child processes (this file, re-run with ENGRAM_SURFACE_FUZZ_CHILD set), each
// call announced on stdout before it starts: a crash is pinned on the call that was running, a
// call that has not settled after PATIENCE_MS is 'hung' (and the child, whose threads it may
// hold, is replaced), and a JS thread blocked for good is killed by a watchdog. The children
// run in a sandbox: HOME, caches and model dirs in a temp dir, the model hub at a closed port,
// the working directory a temp dir (relative paths such as '*' land there).
//
// Skipped on purpose:
// - the getters (`closed`, `projectId`, `path`, `sessionId`) take no argument: only the
//   receiver test calls them;
// - the internal hooks index.js hides (`__panicForTests`, `__setModelPackageDir`,
//   `__strictFieldsForTests`): not public, and the first panics on purpose;
// - nothing public: `close` is fuzzed on a handle of its own, `watch` is stopped and
//   `setLogger` reset to null after every call, `installModel` reaches only a closed port and
//   the sandbox, `deleteAll` and friends run on a database made for their method alone.
// Callbacks the fixture cannot make engram call (`onSyncEvent`'s listener without a sync
// server, `synthesize` without a module past a session threshold, `finalize`'s `synthesize`
// without promoted signals) are still passed, just never invoked.
// Wrong receivers (`Engram.prototype.search.call({})`) are called too: V8 refuses them before
// engram runs, and index.js codes the refusal.
//
// ENGRAM_SURFACE_FUZZ_DUMP=/tmp/fuzz.json writes every outcome there.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const entry = join(import.meta.dirname, '..', 'index.js')
const self = fileURLToPath(import.meta.url)

/** How long one call may take before it counts as hung. */
const PATIENCE_MS = 5000
/** How long a child may print nothing (a fixture's setup included) before it is killed. */
const SILENCE_MS = PATIENCE_MS + 15_000
/** Children running at once. */
const CONCURRENCY = 2
/** Calls per child (a child also ends early after a hang). */
const CALLS_PER_CHILD = 1500

// ---------------------------------------------------------------------------------------------
// The hostile corpus: a label (a JS expression, for repros) and a maker (a fresh value per call).

const BIG = 'x'.repeat(2 * 1024 * 1024)
const TRAP_MESSAGE = 'surface fuzz: proxy trap'

function nested(depth, wrap) {
  let value = 1
  for (let i = 0; i < depth; i++) value = wrap(value)
  return value
}

function throwingProxy() {
  const traps = [
    'get', 'set', 'has', 'deleteProperty', 'ownKeys', 'getOwnPropertyDescriptor', 'defineProperty',
    'getPrototypeOf', 'setPrototypeOf', 'isExtensible', 'preventExtensions', 'apply', 'construct',
  ]
  const handler = {}
  for (const trap of traps) {
    handler[trap] = () => {
      throw new Error(TRAP_MESSAGE)
    }
  }
  return new Proxy({}, handler)
}

const HOSTILE = {
  'null': () => null,
  'undefined': () => undefined,
  'NaN': () => Number.NaN,
  '-1': () => -1,
  '1.5': () => 1.5,
  '2 ** 53': () => 2 ** 53,
  'Infinity': () => Number.POSITIVE_INFINITY,
  "''": () => '',
  "'\\u0000'": () => '\u0000',
  "'\\ud800'": () => '\ud800',
  "'x'.repeat(2 ** 21)": () => BIG,
  '{}': () => ({}),
  '[]': () => [],
  '{ unknownKey: 1 }': () => ({ unknownKey: 1 }),
  '{ __proto__: { polluted: 1 } }': () => ({ __proto__: { polluted: 1 } }),
  'Object.create(null)': () => Object.create(null),
  '{ a: { a: ... } } (200 deep)': () => nested(200, (a) => ({ a })),
  '[[...]] (200 deep)': () => nested(200, (a) => [a]),
  "Symbol('x')": () => Symbol('x'),
  '10n': () => 10n,
  '() => {}': () => () => {},
  'new Proxy({}, throwing on every trap)': throwingProxy,
  'Object.freeze({})': () => Object.freeze({}),
  'new Date(NaN)': () => new Date(Number.NaN),
  "Buffer.from('abc')": () => Buffer.from('abc'),
  'new Uint8Array(4)': () => new Uint8Array(4),
  '\'"unbalanced\'': () => '"unbalanced',
  "'NEAR(a b'": () => 'NEAR(a b',
  "'*'": () => '*',
  "'a OR AND b'": () => 'a OR AND b',
  "'col:term'": () => 'col:term',
}

// ---------------------------------------------------------------------------------------------
// Valid arguments per target, so that the other positions pass and a hostile value reaches as
// deep as it can. `fx` is the child's fixture: a database on an indexed project with memories
// and an embedding function (so embed, denseSearch and embedPending do real work). Targets
// missing here get undefined in every position (and are still fuzzed).

/** The fixture's embedding function: 8 numbers from the text's first characters. */
const embedTexts = (texts) => texts.map((t) => Array.from({ length: 8 }, (_, i) => ((t.charCodeAt(i % Math.max(t.length, 1)) || 1) % 7) + 1))
const EMBEDDINGS = { model: 'fuzz-v1', embed: embedTexts, timeoutMs: 2000 }

const VALID = {
  'Engram#sessionContext': () => [{ task: 'pay the invoice', budgetTokens: 500 }],
  'Engram#importAgentFiles': () => [{ files: ['CLAUDE.md'] }],
  'Engram#exportAgentFile': () => [{ write: false }],
  'Engram#remember': (fx) => [{ type: 'gotcha', content: `Fuzz memory ${fx.next()}` }],
  'Engram#rememberMany': (fx) => [[{ type: 'gotcha', content: `Fuzz many ${fx.next()}` }]],
  'Engram#get': (fx) => [fx.ids[0]],
  'Engram#update': (fx) => [fx.ids[0], { tags: ['fuzz'] }],
  'Engram#forget': (fx) => [fx.ids[1], 'fuzz'],
  'Engram#history': (fx) => [fx.ids[0]],
  'Engram#rollback': (fx) => [fx.ids[0], 1],
  'Engram#list': () => [{ limit: 5 }],
  'Engram#search': () => ['migrations', { limit: 5 }],
  'Engram#index': () => [{ onProgress: () => {}, deriveRelations: () => null }],
  'Engram#indexPaths': () => [['src/app.py'], {}],
  'Engram#watch': () => [{ debounceMs: 10, onEvent: () => {} }],
  'Engram#chunksOf': () => ['src/app.py'],
  'Engram#searchCode': () => ['pay', { limit: 5 }],
  'Engram#consolidate': () => [{ dryRun: true }],
  'Engram#embed': () => [['hello']],
  'Engram#injectGraph': (fx) => [{ nodes: [{ key: `concept:fuzz${fx.next()}`, kind: 'concept' }] }],
  'Engram#deleteNode': () => ['concept:fuzz'],
  'Engram#deleteEdge': () => ['concept:fuzz', 'src/app.py', 'implemented_by'],
  'Engram#getNode': () => ['src/app.py'],
  'Engram#traverse': () => ['src/app.py', { maxDepth: 2 }],
  'Engram#ancestors': () => ['src/app.py', { maxDepth: 2 }],
  'Engram#descendants': () => ['src/app.py', { maxDepth: 2 }],
  'Engram#subgraph': () => [['src/app.py', 'src/util.ts']],
  'Engram#impact': () => ['src/app.py', {}],
  'Engram#neighbours': () => [['src/app.py'], { limit: 5 }],
  'Engram#centrality': () => [['src/app.py', 'src/util.ts'], { method: 'degree' }],
  'Engram#deriveRelations': () => [() => null, { timeoutMs: 2000 }],
  'Engram#feedback': (fx) => [fx.ids[0], { kind: 'helpful' }],
  'Engram#reviewQueue': () => [{ limit: 5 }],
  'Engram#confirm': (fx) => [fx.ids[0], { comment: 'ok' }],
  'Engram#reject': (fx) => [fx.ids[1], { comment: 'no' }],
  'Engram#supersede': (fx) => [fx.ids[1], fx.ids[0]],
  'Engram#dispute': (fx) => [fx.ids[0], { comment: 'fuzz' }],
  'Engram#comment': (fx) => [fx.ids[0], { comment: 'fuzz' }],
  'Engram#resolveDispute': (fx) => [fx.ids[0], { comment: 'fuzz' }],
  'Engram#events': (fx) => [fx.ids[0]],
  'Engram#markUsed': (fx) => [[fx.ids[0]], { sessionId: 'fz-session' }],
  'Engram#prune': () => [{}],
  'Engram#exportMemories': () => [{ format: 'json' }],
  'Engram#importMemories': (fx) => [{ format: 'json', text: fx.exported }],
  'Engram#deleteAll': () => [{ confirm: true }],
  'Engram#stepLimit': () => [10, { module: 'src/' }],
  'Engram#mergeSessions': (fx) => {
    const a = fx.db.observe({ sessionId: `fz-a${fx.next()}` })
    const b = fx.db.observe({ sessionId: `fz-b${fx.next()}` })
    return [[a.sessionId, b.sessionId], { sessionId: `fz-merged${fx.next()}` }]
  },
  'Engram#resumeSession': () => ['fz-session'],
  'Engram#observe': (fx) => [{ sessionId: `fz-obs${fx.next()}` }],
  'Engram#sessionSummary': () => ['fz-session'],
  'Engram#endSession': () => ['fz-session'],
  'Engram#setTrustLevel': () => [2],
  'Engram#health': () => [{ sessionId: 'fz-session' }],
  'Engram#memoryGaps': () => [{}],
  'Engram#resolveGap': () => ['01900000-0000-7000-8000-000000000000'],
  'Engram#recall': () => ['migrations', { limit: 5 }],
  'Engram#stepInjection': () => [5, { toolCalls: [{ tool: 'Read', filePath: 'src/app.py' }] }],
  'Engram#onSyncEvent': () => [() => {}],
  'Engram#offSyncEvent': () => [1],
  'Engram#synthesize': () => [{ mode: 'threshold', synthesize: () => [] }],
  'Engram#embedPending': () => [{ onProgress: () => {} }],
  'Engram#denseSearch': () => ['pay', { limit: 5 }],
  'Engram.open': (fx) => [{ path: join(fx.dir, `open${fx.next()}.db`), projectRoot: fx.root, embeddings: { ...EMBEDDINGS } }],
  'Engram.setLogger': () => [() => {}, { level: 'trace' }],
  'ObserverSession#augmentToolResult': () => ['Read', { file_path: 'src/app.py' }, 'def pay(x):'],
  'ObserverSession#observe': () => [{ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/app.py' }, stepIndex: 1 }],
  'ObserverSession#observeMany': () => [[{ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/app.py' }, stepIndex: 1 }]],
  'ObserverSession#stepInjection': () => [5],
  'ObserverSession#finalize': () => ['success', { synthesize: () => [] }],
  'module.installModel': (fx) => [join(fx.dir, 'no-model-here'), join(fx.dir, 'models')],
  'module.redactSecrets': () => ['export TOKEN=abc'],
  'module.checkDatabase': (fx) => [fx.dbPath],
  'module.salvageDatabase': (fx) => [fx.dbPath, join(fx.dir, `salvaged${fx.next()}.db`)],
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Before a callback entry's call: give engram a reason to call the app's function. */
const PRIME = {
  'Engram#index': (fx) => writeFileSync(join(fx.root, 'src', `gen${fx.next()}.py`), `def gen${fx.next()}():\n    return 1\n`),
  'Engram#embedPending': (fx) => fx.db.remember({ type: 'gotcha', content: `Pending memory ${fx.next()}` }),
}

/** After a callback entry's call (or any Engram.open), as part of it: make engram use the function. */
const EXERCISE = {
  'Engram.setLogger': async (fx) => {
    writeFileSync(join(fx.root, 'src', `log${fx.next()}.py`), 'def log():\n    return 1\n')
    await fx.db.index()
    await sleep(20)
  },
  'Engram#watch': async (fx) => {
    appendFileSync(join(fx.root, 'src', 'util.ts'), `// edit ${fx.next()}\n`)
    await sleep(150)
  },
  'Engram.open': async (fx, db) => {
    if (db instanceof fx.Engram) await db.embed(['hello'])
  },
}

// ---------------------------------------------------------------------------------------------
// Where a hostile value goes. A plan entry is { target, positions, position, mode, path, value }:
// - 'arg': argument `position` is the hostile value (path []);
// - 'field': it is put at `path` inside the valid argument (['limit'], ['filters', 'kinds'],
//   ['0'] for an array's element, ['0', 'content'] for a field of its first element...);
// - 'returns' / 'throws': the function the app passes at `path` returns or throws it;
// - 'receiver': the method is called on a wrong `this` (value is a RECEIVERS label).

const RECEIVERS = {
  'undefined': () => undefined,
  'null': () => null,
  '{}': () => ({}),
  '42': () => 42,
  'Object.create(<class>.prototype)': (Class) => Object.create(Class.prototype),
  'an instance of the other class': (Class, fx) => (Class === fx.Engram ? fx.session : fx.db),
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype

/** A copy of `container` with `value` at `path` ('0' steps into an array). */
function setPath(container, path, value) {
  if (path.length === 0) return value
  const [head, ...rest] = path
  if (head === '0' && (Array.isArray(container) || container === undefined)) {
    const copy = Array.isArray(container) ? [...container] : []
    copy[0] = setPath(copy[0], rest, value)
    return copy
  }
  const copy = isPlainObject(container) ? { ...container } : {}
  copy[head] = setPath(copy[head], rest, value)
  return copy
}

/** The value an entry puts at its path: the hostile value, or a function returning/throwing it. */
function slotValue(mode, h) {
  if (mode === 'returns') return () => h
  if (mode === 'throws') {
    return () => {
      throw h
    }
  }
  return h
}

// ---------------------------------------------------------------------------------------------
// The child: runs plan[from, to), one JSON line per event on fd 1 (written synchronously, so a
// crash loses nothing).

async function child() {
  const { plan, base } = JSON.parse(readFileSync(process.env.ENGRAM_SURFACE_FUZZ_PLAN, 'utf8'))
  const from = Number(process.env.ENGRAM_SURFACE_FUZZ_FROM)
  const to = Number(process.env.ENGRAM_SURFACE_FUZZ_TO)
  const addon = require(entry)
  const { Engram } = addon
  const emit = (event) => writeSync(1, `${JSON.stringify(event)}\n`)
  /** `promise`, or a 'hung' outcome if it has not settled after PATIENCE_MS. */
  const race = (promise) => {
    let timer
    const patience = new Promise((resolve) => {
      timer = setTimeout(() => resolve({ outcome: 'hung', message: `not settled after ${PATIENCE_MS} ms` }), PATIENCE_MS)
    })
    return Promise.race([promise, patience]).finally(() => clearTimeout(timer))
  }
  let current = null
  for (const kind of ['uncaughtException', 'unhandledRejection']) {
    process.on(kind, (err) => {
      let text
      try {
        text = String(err?.stack ?? err)
      } catch {
        text = typeof err
      }
      emit({ event: 'uncaught', i: current, message: `${kind}: ${text.slice(0, 500)}` })
    })
  }

  /** A short JS-like rendering of a valid argument, with MARK standing for the hostile label. */
  const MARK = '\u0001MARK\u0001'
  const show = (value, label) => {
    if (value === MARK) return label
    if (value === undefined) return 'undefined'
    if (typeof value === 'function') return '() => {}'
    const text = JSON.stringify(value, (k, v) => {
      if (v === MARK) return v
      if (typeof v === 'function') return '\u0001FN\u0001'
      if (typeof v === 'string' && v.length > 40) return `${v.slice(0, 37)}...`
      return v
    })
    return text.replaceAll('"\\u0001MARK\\u0001"', label).replaceAll('"\\u0001FN\\u0001"', '() => {}')
  }
  const labelOf = (e) => (e.mode === 'returns' ? `() => (${e.value})` : e.mode === 'throws' ? `() => { throw ${e.value} }` : e.value)

  async function setup() {
    const dir = mkdtempSync(join(base, 'fx-'))
    const root = join(dir, 'project')
    mkdirSync(join(root, 'src'), { recursive: true })
    writeFileSync(join(root, 'src', 'app.py'), 'from util import add\n\ndef pay(invoice):\n    """Pays an invoice."""\n    return add(invoice.total, 0)\n')
    writeFileSync(join(root, 'src', 'util.ts'), 'export function add(a: number, b: number): number {\n  return a + b\n}\n')
    writeFileSync(join(root, 'CLAUDE.md'), '# Rules\n\n- Always run migrations before seeding the database.\n')
    const dbPath = join(dir, 'memory.db')
    const db = await Engram.open({ path: dbPath, projectRoot: root, embeddings: { ...EMBEDDINGS } })
    await db.index()
    const made = await db.rememberMany([
      { type: 'gotcha', content: 'Run migrations before seeding', relatedFiles: ['src/app.py'] },
      { type: 'decision', content: 'Sums go through add() in src/util.ts', relatedFiles: ['src/util.ts'] },
      { type: 'pattern', content: 'Payments go through pay()' },
    ])
    await db.embedPending()
    const session = db.observe({ sessionId: 'fz-session' })
    session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/app.py' }, stepIndex: 1 })
    await session.checkpoint()
    const { text: exported } = await db.exportMemories({ format: 'json' })
    let n = 0
    return { Engram, dir, root, dbPath, db, session, ids: made.map((r) => r.memory.id), exported, next: () => ++n }
  }

  async function teardown(fx) {
    try {
      fx.db.unwatch()
    } catch {}
    const out = await race(fx.db.close().then(() => ({ outcome: 'ok' }), () => ({ outcome: 'ok' })))
    if (out.outcome === 'hung') {
      emit({ event: 'teardown-hung', i: current })
      process.exit(0)
    }
  }

  /** The call of one plan entry (a function, run and checked as one), and its repro. */
  async function prepare(e, fx) {
    const callback = e.mode === 'returns' || e.mode === 'throws'
    if (callback) await PRIME[e.target]?.(fx)
    const exercise = callback || e.target === 'Engram.open' ? EXERCISE[e.target] : undefined
    const valid = VALID[e.target]?.(fx) ?? []
    const [, scope, name] = /^(Engram#|ObserverSession#|Engram\.|module\.|new )(.+)$/.exec(e.target)
    const args = []
    const shown = []
    for (let p = 0; p < e.positions; p++) {
      if (e.mode !== 'receiver' && p === e.position) {
        args.push(setPath(valid[p], e.path, slotValue(e.mode, HOSTILE[e.value]())))
        shown.push(show(setPath(valid[p], e.path, MARK), labelOf(e)))
      } else {
        args.push(valid[p])
        shown.push(show(valid[p]))
      }
    }
    while (args.length > (e.mode === 'receiver' ? 0 : e.position + 1) && args.at(-1) === undefined) {
      args.pop()
      shown.pop()
    }
    const list = shown.join(', ')
    const then = (call) => async () => {
      const value = await call()
      if (exercise) await exercise(fx, value)
      return value
    }
    if (e.mode === 'receiver') {
      const Class = addon[scope.slice(0, -1)]
      const recv = RECEIVERS[e.value](Class, fx)
      const desc = Object.getOwnPropertyDescriptor(Class.prototype, name)
      if (desc.get) return { run: () => desc.get.call(recv), repro: `Object.getOwnPropertyDescriptor(${Class.name}.prototype, '${name}').get.call(${e.value})` }
      return { run: () => desc.value.call(recv, ...args), repro: `${Class.name}.prototype.${name}.call(${[e.value, ...shown].join(', ')})` }
    }
    if (scope === 'Engram#') return { run: then(() => fx.db[name](...args)), repro: `db.${name}(${list})` }
    if (scope === 'ObserverSession#') {
      const session = fx.db.observe({ sessionId: `fz-target${fx.next()}` })
      session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/app.py' }, stepIndex: 1 })
      return { run: then(() => session[name](...args)), repro: `session.${name}(${list})` }
    }
    if (scope === 'Engram.') return { run: then(() => Engram[name](...args)), repro: `Engram.${name}(${list})` }
    if (scope === 'module.') return { run: then(() => addon[name](...args)), repro: `engram.${name}(${list})` }
    const Class = addon[name]
    return { run: () => new Class(...args), repro: `new ${name}(${list})` }
  }

  let fx = null
  let fxTarget = null
  for (let i = from; i < to; i++) {
    const e = plan[i]
    if (e.target !== fxTarget) {
      if (fx) await teardown(fx)
      fx = await setup()
      fxTarget = e.target
    }
    current = i
    let prepared
    try {
      prepared = await prepare(e, fx)
    } catch (err) {
      emit({ event: 'done', i, outcome: 'harness', message: `preparing the call failed: ${err?.stack ?? err}` })
      continue
    }
    emit({ event: 'start', i, repro: prepared.repro })
    const started = Date.now()
    const settled = (async () => prepared.run())().then(
      (value) => ({ outcome: 'ok', value }),
      (err) => {
        const coded = err instanceof Error && typeof err.code === 'string' && err.code.startsWith('ENGRAM_')
        let message
        try {
          message = String(err?.message ?? (typeof err === 'symbol' ? err.toString() : err)).slice(0, 300)
        } catch {
          message = `(${typeof err} that cannot be printed)`
        }
        return { outcome: coded ? 'coded' : 'uncoded', code: err?.code, name: err?.constructor?.name ?? typeof err, message, trap: err instanceof Error && err.message === TRAP_MESSAGE }
      },
    )
    const out = await race(settled)
    const { value, ...result } = out
    emit({ event: 'done', i, ...result, ms: Date.now() - started })
    if (out.outcome === 'hung') process.exit(0) // it may hold a thread: the parent goes on in a new child
    if (value instanceof Engram && value !== fx.db) await race(value.close())
    try {
      fx.db.unwatch()
    } catch {}
    Engram.setLogger(null)
  }
  if (fx) await teardown(fx)
  emit({ event: 'end' })
  process.exit(0)
}

// ---------------------------------------------------------------------------------------------
// The parent: the typings, the surface, the plan, the children, the verdict.

/** Splits `text` at the top-level occurrences of `sep` (`=>` closes no bracket). */
function splitTop(text, sep) {
  const parts = []
  let depth = 0
  let from = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if ('([{<'.includes(c)) depth++
    else if (')]}'.includes(c) || (c === '>' && text[i - 1] !== '=')) depth--
    else if (c === sep && depth === 0) {
      parts.push(text.slice(from, i).trim())
      from = i + 1
    }
  }
  if (text.trim()) parts.push(text.slice(from).trim())
  return parts
}

/**
 * What index.d.ts declares: each callable's parameters (`Engram#search`, `Engram.open`,
 * `module.checkDatabase`), each a Map of the fields an object there may have (key -> type:
 * those of the interfaces its type names, and of inline object types), and `fieldsOf` for
 * the types of those fields.
 */
function readTypings(dts) {
  const interfaces = {}
  for (const [, name, body] of dts.matchAll(/^export interface (\w+) \{\n([\s\S]*?)\n\}/gm)) {
    interfaces[name] = [...body.matchAll(/^ {2}(\w+)\??: (.*)$/gm)].map((m) => [m[1], m[2]])
  }
  const fieldsOf = (type) => {
    const fields = new Map()
    // Inline object types (`IndexOptions & { onProgress?: ...; signal?: AbortSignal }`): their
    // keys, then out of the way.
    let rest = ''
    let depth = 0
    let start = 0
    for (let i = 0; i < type.length; i++) {
      if (type[i] === '{' && depth++ === 0) start = i + 1
      else if (type[i] === '}' && --depth === 0) {
        for (const member of splitTop(type.slice(start, i), ';')) {
          const m = /^(\w+)\??:\s*([\s\S]*)$/.exec(member)
          if (m) fields.set(m[1], m[2])
        }
      } else if (depth === 0) rest += type[i]
    }
    if (rest.includes('=>')) return fields // a function type
    for (const [name] of rest.matchAll(/\b[A-Z]\w*\b/g)) for (const [k, t] of interfaces[name] ?? []) fields.set(k, t)
    return fields
  }
  const paramsOf = (list) => splitTop(list, ',').map((p) => fieldsOf(p.replace(/^\w+\??:\s*/, '')))
  const params = {}
  for (const [, cls, body] of dts.matchAll(/^export declare class (\w+) \{\n([\s\S]*?)\n\}/gm)) {
    for (const [, isStatic, name, list] of body.matchAll(/^ {2}(static )?(\w+)\((.*)\)(?::.*)?$/gm)) {
      // The constructors are fuzzed as `new Engram(...)` targets.
      if (name === 'constructor') continue
      params[`${cls}${isStatic ? '.' : '#'}${name}`] = paramsOf(list)
    }
  }
  for (const [, name, list] of dts.matchAll(/^export declare function (\w+)\((.*)\):/gm)) {
    params[`module.${name}`] = paramsOf(list)
  }
  return { params, fieldsOf, classes: [...dts.matchAll(/^export declare class (\w+)/gm)].map((m) => m[1]) }
}

/** Every callable of the public surface, found at run time, and the getters (for receivers). */
function enumerateSurface(addon) {
  const targets = []
  const getters = []
  const own = (proto) => Object.getOwnPropertyNames(proto).filter((name) => name !== 'constructor')
  for (const [name, value] of Object.entries(addon)) {
    if (typeof value !== 'function') continue
    const proto = value.prototype
    if (proto && own(proto).length > 0) {
      targets.push(`new ${name}`)
      for (const m of own(proto)) {
        const desc = Object.getOwnPropertyDescriptor(proto, m)
        if (typeof desc.value === 'function') targets.push(`${name}#${m}`)
        else if (desc.get) getters.push(`${name}#${m}`)
      }
      for (const fn of Object.getOwnPropertyNames(value)) {
        if (!['length', 'name', 'prototype'].includes(fn) && typeof value[fn] === 'function') targets.push(`${name}.${fn}`)
      }
    } else {
      targets.push(`module.${name}`)
    }
  }
  return { targets, getters }
}

/** Stand-ins for the child's fixture: VALID runs here only to learn the shapes of the arguments. */
const SHAPE_FIXTURE = {
  dir: '/fixture',
  root: '/fixture/project',
  dbPath: '/fixture/memory.db',
  ids: ['id0', 'id1', 'id2'],
  exported: '{}',
  next: () => 0,
  db: { observe: ({ sessionId }) => ({ sessionId }) },
}

const isArrayType = (type) => /^(Array<|\w+\[\]$)/.test(type.trim())

function makePlan({ targets, getters }, { params, fieldsOf }) {
  const plan = []
  for (const target of targets) {
    const declared = params[target] ?? []
    const positions = Math.max(declared.length, 2)
    const valid = VALID[target]?.(SHAPE_FIXTURE) ?? []
    for (let position = 0; position < positions; position++) {
      const add = (mode, path) => {
        for (const value of Object.keys(HOSTILE)) plan.push({ target, positions, position, mode, path, value })
      }
      const callbacks = (path) => {
        add('returns', path)
        add('throws', path)
      }
      /** Each field of `object` (declared or valid), the elements of list fields, one level further. */
      const fields = (prefix, object, declaredFields, depth) => {
        for (const key of new Set([...declaredFields.keys(), ...Object.keys(object)])) {
          const path = [...prefix, key]
          const type = declaredFields.get(key) ?? ''
          const inner = object[key]
          add('field', path)
          if (typeof inner === 'function') callbacks(path)
          if (depth > 0) continue
          const list = Array.isArray(inner) || isArrayType(type)
          if (list) add('field', [...path, '0'])
          const innerObject = isPlainObject(inner) ? inner : list && isPlainObject(inner?.[0]) ? inner[0] : inner === undefined ? {} : null
          const innerFields = fieldsOf(type)
          if (innerObject && (innerFields.size || Object.keys(innerObject).length)) fields(list ? [...path, '0'] : path, innerObject, innerFields, depth + 1)
        }
      }
      add('arg', [])
      if (target.startsWith('new ')) continue
      const v = valid[position]
      const declaredFields = declared[position] ?? new Map()
      if (Array.isArray(v)) add('field', ['0'])
      if (isPlainObject(v) || (v === undefined && declaredFields.size)) fields([], v ?? {}, declaredFields, 0)
      else if (Array.isArray(v) && isPlainObject(v[0])) fields(['0'], v[0], declaredFields, 0)
      if (typeof v === 'function') callbacks([])
    }
    if (/^\w+#/.test(target)) {
      for (const value of Object.keys(RECEIVERS)) plan.push({ target, positions, position: -1, mode: 'receiver', path: [], value })
    }
  }
  for (const target of getters) {
    for (const value of Object.keys(RECEIVERS)) plan.push({ target, positions: 0, position: -1, mode: 'receiver', path: [], value })
  }
  return plan
}

/** Runs plan[from, to) in one child; resolves with its events, exit status and whether the watchdog killed it. */
function runChild(planFile, from, to, env, cwd) {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [self], {
      cwd,
      env: { ...env, ENGRAM_SURFACE_FUZZ_CHILD: '1', ENGRAM_SURFACE_FUZZ_PLAN: planFile, ENGRAM_SURFACE_FUZZ_FROM: String(from), ENGRAM_SURFACE_FUZZ_TO: String(to) },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let killed = false
    let timer
    const arm = () => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        killed = true
        proc.kill('SIGKILL')
      }, SILENCE_MS)
    }
    arm()
    proc.stdout.on('data', (d) => {
      stdout += d
      arm()
    })
    proc.stderr.on('data', (d) => (stderr += d))
    proc.on('close', (status, signal) => {
      clearTimeout(timer)
      const events = stdout.split('\n').filter(Boolean).map((line) => {
        try {
          return JSON.parse(line)
        } catch {
          return { event: 'noise', line }
        }
      })
      resolve({ events, status, signal, killed, stderr })
    })
  })
}

/** Runs the whole plan in children; returns one result per entry, and the uncaught errors. */
async function runPlan(plan, work) {
  const planFile = join(work, 'plan.json')
  const sandbox = join(work, 'sandbox')
  mkdirSync(join(sandbox, 'home'), { recursive: true })
  mkdirSync(join(sandbox, 'cwd'), { recursive: true })
  writeFileSync(planFile, JSON.stringify({ plan, base: work }))
  // No model, no network, no user files: HOME and the caches in the sandbox, the hub at a closed port.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(ENGRAM_|NODE_TEST|OPENAI_)|proxy/i.test(k)))
  Object.assign(env, {
    HOME: join(sandbox, 'home'),
    XDG_CACHE_HOME: join(sandbox, 'home', '.cache'),
    ENGRAM_CACHE_DIR: join(sandbox, 'cache'),
    ENGRAM_MODEL_DIR: join(sandbox, 'no-model'),
    ENGRAM_HUB_URL: 'http://127.0.0.1:9',
  })
  const results = new Array(plan.length)
  const uncaught = []
  const tail = (stderr) => stderr.trim().split('\n').slice(-3).join(' | ')

  async function runBatch([start, end]) {
    let from = start
    while (from < end) {
      const run = await runChild(planFile, from, end, env, join(sandbox, 'cwd'))
      let lastStarted = null
      let lastDone = from - 1
      for (const e of run.events) {
        if (e.event === 'start') {
          lastStarted = e.i
          results[e.i] = { repro: e.repro }
        } else if (e.event === 'done') {
          results[e.i] = { ...results[e.i], ...e }
          lastDone = e.i
        } else if (e.event === 'uncaught') {
          uncaught.push({ ...e, repro: results[e.i]?.repro ?? plan[e.i]?.target })
        } else if (e.event === 'teardown-hung') {
          uncaught.push({ i: e.i, repro: `close() of the handle used for ${plan[e.i].target}`, message: `close() had not settled after ${PATIENCE_MS} ms` })
        }
      }
      if (run.events.some((e) => e.event === 'end')) break
      if (lastStarted !== null && lastStarted > lastDone) {
        // The child died (or froze) during this call.
        const how = run.killed
          ? `the JS thread was blocked: no output for ${SILENCE_MS} ms`
          : `the process died (status ${run.status}, signal ${run.signal}): ${tail(run.stderr)}`
        results[lastStarted] = { ...results[lastStarted], i: lastStarted, outcome: run.killed ? 'hung' : 'crash', message: how }
        from = lastStarted + 1
      } else if (results[lastDone]?.outcome === 'hung') {
        from = lastDone + 1
      } else {
        // Died outside a call (a fixture's setup or teardown): blame the next entry and go past it.
        const next = lastDone + 1
        if (next >= end) break
        results[next] = {
          i: next,
          outcome: 'crash',
          repro: `${plan[next].target} (fixture)`,
          message: `the child died outside a call (status ${run.status}, signal ${run.signal}, watchdog ${run.killed}): ${tail(run.stderr)}`,
        }
        from = next + 1
      }
    }
  }

  const queue = []
  for (let start = 0; start < plan.length; start += CALLS_PER_CHILD) queue.push([start, Math.min(start + CALLS_PER_CHILD, plan.length)])
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (queue.length) await runBatch(queue.shift())
  }))
  for (let i = 0; i < plan.length; i++) {
    results[i] = { ...plan[i], ...(results[i] ?? { outcome: 'missing', message: 'never ran' }) }
  }
  return { results, uncaught }
}

const BAD = new Set(['uncoded', 'hung', 'crash', 'harness', 'missing'])

function findings(results, uncaught) {
  const lines = []
  for (const r of results) {
    if (!BAD.has(r.outcome)) continue
    const where = r.mode === 'receiver' ? 'this' : `arg ${r.position}${r.path.map((k) => (k === '0' ? '[0]' : `.${k}`)).join('')}${r.mode === 'returns' || r.mode === 'throws' ? ` ${r.mode}` : ''}`
    const code = r.code === undefined ? 'no code' : `code ${JSON.stringify(r.code)}`
    const trap = r.trap ? " (the Proxy trap's own error, passed through)" : ''
    lines.push(`${r.outcome.toUpperCase()} ${r.target} [${where}] = ${r.value}: ${r.repro ?? ''} -> ${r.name ?? ''} (${code}) ${JSON.stringify(r.message ?? '')}${trap}`)
  }
  for (const u of uncaught) lines.push(`UNCAUGHT during ${u.repro}: ${u.message}`)
  return lines
}

function tally(results) {
  const counts = {}
  for (const r of results) counts[r.outcome] = (counts[r.outcome] ?? 0) + 1
  return `${new Set(results.map((r) => r.target)).size} targets, ${results.length} calls: ${JSON.stringify(counts)}`
}

if (process.env.ENGRAM_SURFACE_FUZZ_CHILD) {
  await child()
} else {
  const { test, before } = await import('node:test')
  const addon = require(entry)
  const typings = readTypings(readFileSync(join(import.meta.dirname, '..', 'index.d.ts'), 'utf8'))
  const surface = enumerateSurface(addon)
  const plan = makePlan(surface, typings)
  let run

  before(async () => {
    const work = mkdtempSync(join(tmpdir(), 'engram-fuzz-'))
    try {
      const started = Date.now()
      run = await runPlan(plan, work)
      run.ms = Date.now() - started
      if (process.env.ENGRAM_SURFACE_FUZZ_DUMP) writeFileSync(process.env.ENGRAM_SURFACE_FUZZ_DUMP, JSON.stringify(run, null, 1))
    } finally {
      rmSync(work, { recursive: true, force: true })
    }
  })

  /** Asserts no crash, hang or uncoded error among the results `pick` selects. */
  const verdict = (t, pick) => {
    const results = run.results.filter(pick)
    const uncaught = run.uncaught.filter((u) => plan[u.i] && pick(plan[u.i]))
    t.diagnostic(tally(results))
    const found = findings(results, uncaught)
    assert.ok(found.length === 0, `${found.length} findings:\n${found.join('\n')}`)
  }

  test('the enumerated surface is what index.d.ts declares', () => {
    for (const cls of typings.classes) assert.equal(typeof addon[cls], 'function', `class ${cls} is not exported`)
    const missing = Object.keys(typings.params).filter((t) => !surface.targets.includes(t))
    assert.deepEqual(missing, [], 'declared in index.d.ts but not found on the module at run time')
    const undeclared = surface.targets.filter((t) => !t.startsWith('new ') && !(t in typings.params))
    assert.deepEqual(undeclared, [], 'exported at run time but not declared in index.d.ts')
    assert.ok(surface.targets.length > 90, `${surface.targets.length} targets`)
  })

  const groups = [
    ['Engram methods', 'Engram#'],
    ['Engram statics', 'Engram.'],
    ['ObserverSession methods', 'ObserverSession#'],
    ['module functions', 'module.'],
    ['class constructors', 'new '],
  ]
  for (const [label, prefix] of groups) {
    test(`hostile arguments to the ${label}: no crash, no hang, no uncoded error`, (t) => {
      verdict(t, (r) => r.mode === 'arg' && r.target.startsWith(prefix))
    })
  }

  test('hostile fields in options objects and elements in arrays: no crash, no hang, no uncoded error', (t) => {
    verdict(t, (r) => r.mode === 'field')
  })

  test("the app's functions returning or throwing hostile values: no crash, no hang, no uncoded error", (t) => {
    verdict(t, (r) => r.mode === 'returns' || r.mode === 'throws')
  })

  // A method taken off its object and called on something else: V8 refuses it before engram's
  // native code runs ("Illegal invocation"); the entry's receiver guard codes that refusal.
  test('methods and getters on a wrong receiver: a coded error', (t) => {
    verdict(t, (r) => r.mode === 'receiver')
  })

  test('summary', (t) => {
    t.diagnostic(`${tally(run.results)} in ${run.ms} ms, ${run.uncaught.length} uncaught`)
    assert.equal(run.results.length, plan.length)
  })
}
