// `engram hook <event>`: Claude Code's hooks feed an observed session, so engram learns from what
// the agent does without being asked; `engram hook install` writes those hooks (and the MCP
// server) into the project's Claude Code settings.
//
// Claude Code runs each hook as its own process with one JSON payload on stdin, and reads what
// the hook prints on stdout. So an event that needs the database opens it, restores the session
// from its last checkpoint, observes, checkpoints and closes; tool calls that need no answer
// (anything but a file tool) only append to the session's state file, observed by the next hook
// that opens the database. A lock file per session serialises the hooks that parallel tool calls
// run at once. A hook must never get in the agent's way: on any
// error it prints nothing, exits 0 and appends one line (event, code, message: never payload
// contents, which may hold secrets) to <root>/.engram/hooks/hook.log.
'use strict'

const fs = require('node:fs')
const { dirname, join, relative, resolve } = require('node:path')
const { isDeepStrictEqual, parseArgs } = require('node:util')

/** The events, by their command-line name, with Claude Code's name for each. */
const EVENTS = {
  'session-start': 'SessionStart',
  'user-prompt-submit': 'UserPromptSubmit',
  'pre-tool-use': 'PreToolUse',
  'post-tool-use': 'PostToolUse',
  'post-tool-use-failure': 'PostToolUseFailure',
  stop: 'Stop',
  'session-end': 'SessionEnd',
}
/** The hook events whose matcher is a tool name ("*": every tool). */
const TOOL_EVENTS = new Set(['PreToolUse', 'PostToolUse', 'PostToolUseFailure'])
/** Tools whose result gets the file's unseen gotchas and dead ends appended. */
const FILE_TOOLS = new Set(['Read', 'Edit', 'Write', 'MultiEdit'])
const AGENTS = ['claude-code']

/** Overall budget of one hook run (env ENGRAM_HOOK_TIMEOUT_MS): then it gives up silently. */
const TIMEOUT_MS = 10_000
/** How long a hook waits for another hook of the same session to finish. */
const LOCK_WAIT_MS = 3_000
/** A lock older than this is left over from a killed hook. */
const LOCK_STALE_MS = 15_000
/**
 * Most observer messages a session's state file holds before a hook flushes them into the
 * session's checkpoint (a tool result is two).
 */
const MAX_PENDING = 400
/** A session not seen for this long is finalized by the next session's start. */
const ORPHAN_MS = 6 * 3_600_000
/** Most orphans one session start finalizes (each costs a finalize). */
const MAX_ORPHANS = 3
/** Most stdin read (a Write's payload carries the whole file). */
const MAX_STDIN_BYTES = 64 << 20
/** The lock of the session registry (a name no session id maps to: sessionKey never starts with a dot). */
const REGISTRY_LOCK = '.registry'
/** Most transcript bytes read at one stop. */
const MAX_TRANSCRIPT_BYTES = 8 << 20
/** The log is rotated (to hook.log.1) past this size. */
const MAX_LOG_BYTES = 1 << 20
/** Claude Code's timeout for our hooks, in seconds: above ours, far below its 60 s default. */
const CLAUDE_TIMEOUT_S = 15

// --- entry ---------------------------------------------------------------------------------------

/** `engram hook ...` (argv without `hook`): resolves to the exit code. */
async function runHook(argv) {
  if (argv[0] === 'install') return runInstall(argv.slice(1))
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(HOOK_HELP)
    return 0
  }
  return runEvent(argv)
}

const HOOK_HELP = `engram hook: Claude Code hooks that feed engram's observer

Usage:
  engram hook <event> [--root DIR] [--db FILE]
      reads one Claude Code hook payload on stdin; <event> is one of
      ${Object.keys(EVENTS).join(', ')}
      (or Claude Code's name, e.g. PostToolUse; default: the payload's hook_event_name).
      Prints only what the agent should read; on any error prints nothing, exits 0 and
      logs one line to <root>/.engram/hooks/hook.log.
  engram hook install --agent claude-code [--root DIR] [--yes] [--dry-run] [--settings FILE]
      adds engram's hooks to <root>/.claude/settings.json and its MCP server to
      <root>/.mcp.json; shows the change, and writes it only with --yes.`

// --- one event -----------------------------------------------------------------------------------

/** Handles one hook event; always resolves to 0 (a failing hook must not disturb the agent). */
async function runEvent(argv) {
  const ctx = { event: '?', root: null, locks: new Set() }
  const restoreConsole = guardStdout()
  const releaseOnExit = () => releaseAll(ctx)
  process.once('exit', releaseOnExit)
  const limit = Number(process.env.ENGRAM_HOOK_TIMEOUT_MS) || TIMEOUT_MS
  // Unref'd: it never keeps the process alive, yet fires while the work is still pending.
  const timer = setTimeout(() => {
    logLine(ctx, 'ENGRAM_ABORTED', `gave up after ${limit} ms`)
    process.exit(0)
  }, limit)
  timer.unref()
  try {
    const out = await handleEvent(ctx, argv)
    if (out) await new Promise((done) => process.stdout.write(`${JSON.stringify(out)}\n`, done))
  } catch (err) {
    logLine(ctx, errorCode(err), errorMessage(err))
  } finally {
    clearTimeout(timer)
    releaseAll(ctx)
    process.removeListener('exit', releaseOnExit)
    restoreConsole()
  }
  return 0
}

/** Reads the payload, finds the root and session, and runs the event's handler. */
async function handleEvent(ctx, argv) {
  const args = eventArgs(argv)
  // What a failure is logged under, refined as the payload tells more.
  ctx.event = eventName(args.event) ?? args.event ?? '?'
  ctx.root = resolve(args.root || process.cwd())
  const payload = await readPayload()
  if (!args.root && typeof payload?.cwd === 'string' && payload.cwd) ctx.root = resolve(payload.cwd)
  if (!payload) throw invalid('stdin is not one JSON object')
  const name = args.event ?? payload.hook_event_name
  const event = eventName(name)
  ctx.event = event ?? name ?? '?'
  if (!event) {
    const events = Object.keys(EVENTS).join(', ')
    throw invalid(name === undefined ? `no event: name one of ${events}` : `unknown event "${name}" (events: ${events})`)
  }
  if (!isDirectory(ctx.root)) throw invalid(`project root ${ctx.root} is not a directory`)
  const sessionId = typeof payload.session_id === 'string' ? payload.session_id.trim() : ''
  if (!sessionId) throw invalid('the payload has no session_id')
  Object.assign(ctx, {
    sessionId,
    payload,
    hooksDir: join(ctx.root, '.engram', 'hooks'),
    dbPath: resolve(args.db || join(ctx.root, '.engram', 'memory.db')),
    projectId: args.project,
  })
  const out = await HANDLERS[event](ctx)
  if (event !== 'SessionEnd') await touchRegistry(ctx, sessionId, Date.now())
  return out
}

/** The flags of an event run; lenient, since a hook's command line must not fail it. */
function eventArgs(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { root: { type: 'string' }, db: { type: 'string' }, project: { type: 'string' } },
    allowPositionals: true,
    strict: false,
  })
  const str = (v) => (typeof v === 'string' && v.trim() ? v : undefined)
  return { event: positionals[0], root: str(values.root), db: str(values.db), project: str(values.project) }
}

/** `SessionStart` for `session-start`, `SessionStart` or `sessionstart`; else undefined. */
function eventName(name) {
  if (typeof name !== 'string') return undefined
  const key = name.toLowerCase().replace(/[-_]/g, '')
  return Object.values(EVENTS).find((e) => e.toLowerCase() === key)
}

/** The JSON object on stdin, or null when it is not one (its text is never logged). */
async function readPayload() {
  try {
    const value = JSON.parse(await readStdin())
    return value && typeof value === 'object' && !Array.isArray(value) ? value : null
  } catch (err) {
    if (err.code === 'ENGRAM_INVALID_ARG') throw err
    return null
  }
}

/**
 * All of stdin. Through `process.stdin`, although its socket stream costs a hook 6-8 ms: a
 * synchronous read of fd 0 blocks the event loop (a payload that never ends would stop the
 * hook's own timeout), and a read on libuv's thread pool keeps the process from exiting.
 */
async function readStdin() {
  const chunks = []
  let size = 0
  for await (const chunk of process.stdin) {
    size += chunk.length
    if (size > MAX_STDIN_BYTES) throw invalid(`stdin holds more than ${MAX_STDIN_BYTES} bytes`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

const HANDLERS = {
  async SessionStart(ctx) {
    const out = await withSession(ctx, async ({ db, session }) => {
      // Orphans first, so that what they promote is in this session's context.
      await finalizeOrphans(ctx, db)
      if (typeof db.sessionContext !== 'function') return null
      const c = await db.sessionContext({ sessionType: 'build', sessionId: session.sessionId, budgetTokens: 2000 })
      return c?.text ? context('SessionStart', c.text) : null
    })
    return out.result
  },

  // Only keeps the session alive: no message type fits a user's prompt (memory:reasoning is
  // the model's text, memory:search the agent's own memory searches).
  async UserPromptSubmit(ctx) {
    await withSession(ctx, async () => null)
    return null
  },

  // The call is observed together with its result (post-tool-use): a result observed after a
  // checkpoint restore finds no call to pair with. So this only notes when the call started
  // and reserves its step, in the order Claude Code issued the calls; no database needed.
  async PreToolUse(ctx) {
    const id = toolUseId(ctx.payload)
    await withState(ctx, (state) => {
      if (id && !state.calls[id]) state.calls[id] = { step: ++state.step, at: Date.now(), done: false }
    })
    return null
  },

  // A file tool's result may get the file's pitfalls appended: that needs the database. Any
  // other tool's call and result go to the session's state file (secrets redacted), and the
  // next hook that opens the database observes them: most tool calls cost no database work.
  async PostToolUse(ctx) {
    const p = ctx.payload
    const result = resultText(p.tool_response)
    const isError = responseIsError(p.tool_response)
    if (!FILE_TOOLS.has(p.tool_name)) return journalToolUse(ctx, p, result, isError)
    const out = await withSession(ctx, async ({ session, state }) => {
      if (!observeToolUse(session, state, p, result, isError)) return null
      if (typeof session.augmentToolResult !== 'function') return null
      const augmented = await session.augmentToolResult(p.tool_name, toolInput(p))
      return augmented?.content ? context('PostToolUse', augmented.content) : null
    })
    return out.result
  },

  // A user's interruption is not a failure of the code: kept as an answer, not an error.
  async PostToolUseFailure(ctx) {
    const p = ctx.payload
    const text = typeof p.error === 'string' ? p.error : resultText(p.error)
    return journalToolUse(ctx, p, text, p.is_interrupt !== true)
  },

  // The end of an agent turn, not of the session.
  async Stop(ctx) {
    await withSession(ctx, async ({ session, state }) => endTurn(ctx, session, state))
    return null
  },

  async SessionEnd(ctx) {
    await withSession(ctx, async ({ db, session, state }) => {
      endTurn(ctx, session, state)
      await session.finalize('success')
      // Ending the session records what it used and learned: how the project's trust level
      // (and with it what is injected unasked) progresses.
      await db.endSession(ctx.sessionId)
      return { finalized: true }
    })
    return null
  },
}

/** `{ hookSpecificOutput }`: text Claude Code adds to the agent's context. */
function context(hookEventName, additionalContext) {
  return { hookSpecificOutput: { hookEventName, additionalContext } }
}

// --- observing -----------------------------------------------------------------------------------

function toolUseId(p) {
  return typeof p.tool_use_id === 'string' && p.tool_use_id ? p.tool_use_id : undefined
}

function toolInput(p) {
  return p.tool_input && typeof p.tool_input === 'object' && !Array.isArray(p.tool_input) ? p.tool_input : {}
}

/**
 * The messages of a finished tool call and its result, at the step pre-tool-use reserved (else
 * the next one), and the call marked observed; null for a call already observed (a payload
 * delivered twice).
 */
function toolUseMessages(state, p, result, isError) {
  if (typeof p.tool_name !== 'string' || !p.tool_name) throw invalid('the payload has no tool_name')
  const id = toolUseId(p)
  const noted = id ? state.calls[id] : undefined
  if (noted?.done) return null
  const step = noted?.step ?? ++state.step
  const now = Date.now()
  const shared = { toolName: p.tool_name, stepIndex: step, toolCallId: id }
  if (id) state.calls[id] = { step, at: noted?.at ?? now, done: true }
  return [
    { type: 'memory:tool-call', ...shared, args: toolInput(p), timestamp: noted?.at ?? now },
    { type: 'memory:tool-result', ...shared, result, isError, timestamp: now },
  ]
}

/** Observes a finished tool call and its result; false for one already observed. */
function observeToolUse(session, state, p, result, isError) {
  const messages = toolUseMessages(state, p, result, isError)
  if (messages) session.observeMany(messages)
  return messages !== null
}

/**
 * Keeps a finished tool call and its result in the session's state file, every string in them
 * redacted as the database would be (`redactSecrets`); flushes through the database once the
 * file holds MAX_PENDING messages.
 */
async function journalToolUse(ctx, p, result, isError) {
  const { redactSecrets } = require('../index.js')
  let full = false
  await withState(ctx, (state) => {
    const messages = toolUseMessages(state, p, result, isError)
    if (!messages) return
    state.pending = [...(state.pending ?? []), ...messages.map((m) => redactDeep(m, redactSecrets))]
    full = state.pending.length >= MAX_PENDING
  })
  if (full) await withSession(ctx, async () => null)
  return null
}

/** `value` with every string in it redacted. */
function redactDeep(value, redact) {
  if (typeof value === 'string') return redact(value).text
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, redact))
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v, redact)]))
  }
  return value
}

/** Observes what the state file holds for the session (see `journalToolUse`). */
function flushPending(session, state) {
  if (state.pending?.length) {
    session.observeMany(state.pending)
    state.pending = []
  }
}

/**
 * A tool's answer as the text the agent read: a string as is; a shell's stdout and stderr; a
 * file read's content (an image's base64 is no text); a search's file list; an edit's
 * confirmation (its payload carries the whole file, which the agent never saw); MCP text
 * blocks; else the JSON.
 */
function resultText(r) {
  if (r === undefined || r === null) return ''
  if (typeof r === 'string') return r
  if (typeof r !== 'object') return String(r)
  const blocks = Array.isArray(r) ? r : Array.isArray(r.content) ? r.content : null
  if (blocks) return blocks.map((b) => (typeof b?.text === 'string' ? b.text : JSON.stringify(b))).join('\n')
  if (typeof r.stdout === 'string' || typeof r.stderr === 'string') return [r.stdout, r.stderr].filter(Boolean).join('\n')
  if (typeof r.file?.content === 'string') return r.file.content
  if (typeof r.file?.base64 === 'string') return `[${r.type ?? 'image'} ${r.file.filePath ?? ''}]`
  if (typeof r.content === 'string' && !r.structuredPatch) return r.content
  if (Array.isArray(r.filenames)) return r.filenames.join('\n')
  if (typeof r.filePath === 'string') return `The file ${r.filePath} has been updated.`
  if (typeof r.result === 'string') return r.result
  return JSON.stringify(r)
}

/** Whether a tool response says it failed (a failing tool usually comes as PostToolUseFailure). */
function responseIsError(r) {
  if (!r || typeof r !== 'object') return false
  if (r.is_error === true || r.isError === true || r.interrupted === true) return true
  const exit = r.exit_code ?? r.exitCode
  return typeof exit === 'number' && exit !== 0
}

/**
 * Ends an agent turn: the model's text since the last turn as reasoning (self-corrections and
 * dead ends are read from it), then a step-complete. Hook payloads carry no model text, so it
 * comes from the transcript; Stop's `last_assistant_message` stands in when there is none.
 */
function endTurn(ctx, session, state) {
  const current = Math.max(state.step, session.snapshot().currentStep)
  let texts = null
  try {
    texts = transcriptTexts(ctx, state)
  } catch (err) {
    logLine(ctx, errorCode(err), `reading the transcript: ${errorMessage(err)}`)
  }
  const last = ctx.payload.last_assistant_message
  if (texts === null) texts = typeof last === 'string' && last.trim() ? [{ text: last }] : []
  const messages = texts.map((t) => ({ type: 'memory:reasoning', text: t.text, stepIndex: t.step ?? current }))
  if (current > state.stepDone || messages.length) messages.push({ type: 'memory:step-complete', stepNumber: current })
  if (messages.length) session.observeMany(messages)
  state.stepDone = current
  // The turn's calls are done; a call noted but never answered was denied or cut short.
  state.calls = {}
}

/**
 * The assistant's text (and thinking) written to the transcript since the last read, each with
 * the step of the tool call it preceded (the last step for text after the last call); null
 * when there is no transcript to read.
 */
function transcriptTexts(ctx, state) {
  const path = typeof ctx.payload.transcript_path === 'string' && ctx.payload.transcript_path
    ? ctx.payload.transcript_path
    : state.transcriptPath
  if (!path) return null
  let fd
  try {
    fd = fs.openSync(path, 'r')
  } catch (err) {
    if (err.code === 'ENOENT') return null
    throw err
  }
  try {
    const size = fs.fstatSync(fd).size
    // A transcript shorter than what was read was rewritten: read it again.
    let from = state.transcriptOffset <= size ? state.transcriptOffset : 0
    if (size - from > MAX_TRANSCRIPT_BYTES) from = size - MAX_TRANSCRIPT_BYTES
    const buf = Buffer.alloc(size - from)
    fs.readSync(fd, buf, 0, buf.length, from)
    const end = buf.lastIndexOf(0x0a) + 1 // only whole lines: the last may be being written
    state.transcriptOffset = from + end
    return assistantTexts(buf.subarray(0, end).toString('utf8'), state)
  } finally {
    fs.closeSync(fd)
  }
}

/** The assistant text blocks of transcript lines, stepped by the tool_use they precede. */
function assistantTexts(text, state) {
  const out = []
  let waiting = []
  for (const line of text.split('\n')) {
    let entry
    try {
      entry = line ? JSON.parse(line) : null
    } catch {
      continue // a line cut by the size cap
    }
    if (entry?.type !== 'assistant' || entry.isSidechain || !Array.isArray(entry.message?.content)) continue
    for (const block of entry.message.content) {
      const said = block?.type === 'text' ? block.text : block?.type === 'thinking' ? block.thinking : undefined
      if (typeof said === 'string' && said.trim()) waiting.push(said)
      if (block?.type === 'tool_use' && waiting.length) {
        const step = state.calls[block.id]?.step
        out.push(...waiting.map((t) => ({ text: t, step })))
        waiting = []
      }
    }
  }
  out.push(...waiting.map((t) => ({ text: t, step: undefined })))
  return out
}

// --- sessions, state, locks ----------------------------------------------------------------------

/**
 * Runs `fn({ db, session, state })` under the session's lock on the open database and the
 * session restored from its checkpoint (or a new one), then checkpoints (unless `fn` returned
 * `{ finalized: true }`) and saves the hook state. Resolves to `{ result }`.
 */
async function withSession(ctx, fn) {
  return withLock(ctx, ctx.sessionId, async () => {
    const state = loadState(ctx, ctx.sessionId)
    // Never closed: the process exits as soon as the answer is out (bin/engram.js), and a close
    // would checkpoint the WAL and fsync it first, 10-15 ms of a hook's ~50 for nothing. Every
    // write was committed to the WAL before this returns; the next open, or the app's own
    // checkpointer, folds it into the file.
    const db = await openDatabase(ctx)
    const id = ctx.sessionId
    const session = (await db.resumeSession(id)) ?? db.observe({ sessionId: id, sessionType: 'build' })
    flushPending(session, state)
    state.step = Math.max(state.step, session.snapshot().currentStep)
    const result = await fn({ db, session, state })
    if (result?.finalized) {
      removeState(ctx, id)
      await dropFromRegistry(ctx, id)
    } else {
      await session.checkpoint()
      saveState(ctx, id, state)
    }
    return { result }
  })
}

/** Runs `fn(state)` under the session's lock and saves the state (no database). */
async function withState(ctx, fn) {
  return withLock(ctx, ctx.sessionId, async () => {
    const state = loadState(ctx, ctx.sessionId)
    fn(state)
    saveState(ctx, ctx.sessionId, state)
  })
}

async function openDatabase(ctx) {
  const { Engram } = require('../index.js')
  return Engram.open({ path: ctx.dbPath, projectRoot: ctx.root, projectId: ctx.projectId, embeddings: embeddingsFromEnv() })
}

/** The CLI's embedder settings from the environment (no sync: a hook must not wait on a network). */
function embeddingsFromEnv() {
  const env = process.env
  if (!env.ENGRAM_EMBED_PROVIDER) return undefined
  const provider = env.ENGRAM_EMBED_PROVIDER
  return {
    provider,
    model: env.ENGRAM_EMBED_MODEL || undefined,
    baseUrl: env.ENGRAM_EMBED_URL || undefined,
    apiKey: provider === 'openai' ? env.ENGRAM_EMBED_API_KEY : undefined,
  }
}

/** A file name for a session id: itself when plain, else a hash (ids come from the payload). */
function sessionKey(id) {
  if (/^[A-Za-z0-9_-]{1,80}$/.test(id)) return id
  // Required here: loading node:crypto costs ~10 ms, paid only for ids that need hashing.
  const { createHash } = require('node:crypto')
  return `h-${createHash('sha256').update(id).digest('hex').slice(0, 32)}`
}

function statePath(ctx, id) {
  return join(ctx.hooksDir, `${sessionKey(id)}.json`)
}

/**
 * What the hooks keep between processes for one session: the last step numbered, the calls of
 * the current turn (step, start time, whether observed), tool calls and results not yet
 * observed (`pending`, redacted), the step last completed, and how much of the transcript was
 * read. A new state starts reading the transcript where it is now:
 * what was said before engram watched is not this session's to learn from.
 */
function loadState(ctx, id) {
  try {
    const s = JSON.parse(fs.readFileSync(statePath(ctx, id), 'utf8'))
    if (s && typeof s === 'object' && s.calls && typeof s.calls === 'object') return s
  } catch {}
  const path = typeof ctx.payload?.transcript_path === 'string' ? ctx.payload.transcript_path : undefined
  let offset = 0
  try {
    if (path) offset = fs.statSync(path).size
  } catch {}
  return { step: 0, stepDone: 0, calls: {}, pending: [], transcriptPath: path, transcriptOffset: offset }
}

function saveState(ctx, id, state) {
  if (typeof ctx.payload?.transcript_path === 'string') state.transcriptPath = ctx.payload.transcript_path
  writeAtomic(statePath(ctx, id), JSON.stringify(state))
}

function removeState(ctx, id) {
  fs.rmSync(statePath(ctx, id), { force: true })
}

/** Writes through a temporary file and a rename, so a reader never sees half a file. */
function writeAtomic(file, text) {
  fs.mkdirSync(dirname(file), { recursive: true })
  const tmp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(tmp, text)
  fs.renameSync(tmp, file)
}

/** Runs `fn` holding the lock named `name`; throws ENGRAM_CONFLICT when it stays taken. */
async function withLock(ctx, name, fn, waitMs = LOCK_WAIT_MS) {
  // The registry's lock is the hooks' own; any other name is a session id from the payload.
  const file = join(ctx.hooksDir, `${name === REGISTRY_LOCK ? name : sessionKey(name)}.lock`)
  if (!(await acquireLock(ctx, file, waitMs))) {
    const err = new Error(`another hook held the lock ${relative(ctx.root, file)} for ${waitMs} ms`)
    err.code = 'ENGRAM_CONFLICT'
    throw err
  }
  try {
    return await fn()
  } finally {
    releaseLock(ctx, file)
  }
}

/**
 * Takes a lock file by exclusive create, retrying with back-off for `waitMs`. A lock whose
 * owner is gone, or older than LOCK_STALE_MS, was left by a killed hook and is broken.
 */
async function acquireLock(ctx, file, waitMs) {
  fs.mkdirSync(dirname(file), { recursive: true })
  const deadline = Date.now() + waitMs
  for (let delay = 5; ; delay = Math.min(delay * 2, 80)) {
    try {
      fs.writeFileSync(file, `${process.pid} ${Date.now()}\n`, { flag: 'wx' })
      ctx.locks.add(file)
      return true
    } catch (err) {
      if (err.code !== 'EEXIST') throw err
    }
    if (lockIsStale(file)) {
      fs.rmSync(file, { force: true })
      continue
    }
    if (Date.now() >= deadline) return false
    await new Promise((done) => setTimeout(done, delay + Math.random() * delay))
  }
}

function lockIsStale(file) {
  try {
    const [pid, at] = fs.readFileSync(file, 'utf8').split(' ').map(Number)
    if (Date.now() - at > LOCK_STALE_MS) return true
    if (pid && pid !== process.pid) process.kill(pid, 0) // throws ESRCH once the owner is gone
    return false
  } catch (err) {
    // ENOENT: released meanwhile (retry now); EPERM: alive under another user.
    return err.code === 'ESRCH'
  }
}

function releaseLock(ctx, file) {
  ctx.locks.delete(file)
  fs.rmSync(file, { force: true })
}

/** Releases every lock still held (on exit after a timeout, too). */
function releaseAll(ctx) {
  for (const file of ctx.locks) {
    try {
      fs.rmSync(file, { force: true })
    } catch {}
  }
  ctx.locks.clear()
}

// --- the registry of sessions and orphans ---------------------------------------------------------

const REGISTRY = 'sessions.json'

function readRegistry(ctx) {
  try {
    const r = JSON.parse(fs.readFileSync(join(ctx.hooksDir, REGISTRY), 'utf8'))
    return r && typeof r === 'object' && !Array.isArray(r) ? r : {}
  } catch {
    return {}
  }
}

/** Changes the registry under its own short lock; best effort (a missed update only delays). */
async function updateRegistry(ctx, change) {
  try {
    await withLock(ctx, REGISTRY_LOCK, async () => {
      const registry = readRegistry(ctx)
      change(registry)
      writeAtomic(join(ctx.hooksDir, REGISTRY), JSON.stringify(registry))
    }, 1_000)
  } catch (err) {
    logLine(ctx, errorCode(err), `updating ${REGISTRY}: ${errorMessage(err)}`)
  }
}

function touchRegistry(ctx, id, now) {
  return updateRegistry(ctx, (r) => {
    r[id] = now
  })
}

function dropFromRegistry(ctx, id) {
  return updateRegistry(ctx, (r) => {
    delete r[id]
  })
}

/**
 * Finalizes sessions not seen for ORPHAN_MS (Claude Code was killed, or SessionEnd is not
 * installed), so that what they showed is promoted. One whose lock is held is still alive.
 */
async function finalizeOrphans(ctx, db) {
  const now = Date.now()
  const orphans = Object.entries(readRegistry(ctx))
    .filter(([id, seen]) => id !== ctx.sessionId && !(now - Number(seen) <= ORPHAN_MS))
    .slice(0, MAX_ORPHANS)
  for (const [id] of orphans) {
    const lock = join(ctx.hooksDir, `${sessionKey(id)}.lock`)
    if (!(await acquireLock(ctx, lock, 0))) continue // a hook of it is running: alive after all
    try {
      const orphan = { ...ctx, payload: {} }
      const state = loadState(orphan, id)
      const session = (await db.resumeSession(id)) ?? (state.pending?.length ? db.observe({ sessionId: id, sessionType: 'build' }) : null)
      if (session) {
        flushPending(session, state)
        endTurn(orphan, session, state)
        await session.finalize('success')
        await db.endSession(id)
      }
      removeState(ctx, id)
    } catch (err) {
      logLine(ctx, errorCode(err), `finalizing an orphaned session: ${errorMessage(err)}`)
    } finally {
      releaseLock(ctx, lock)
    }
    await dropFromRegistry(ctx, id)
  }
}

// --- logging -------------------------------------------------------------------------------------

/** Appends `time event code: message` to the hook log (stderr when there is no root). */
function logLine(ctx, code, message) {
  const line = `${new Date().toISOString()} ${ctx.event} ${code}: ${message}\n`
  try {
    if (!ctx.root || !isDirectory(ctx.root)) throw new Error('no root')
    const file = join(ctx.root, '.engram', 'hooks', 'hook.log')
    fs.mkdirSync(dirname(file), { recursive: true })
    try {
      if (fs.statSync(file).size > MAX_LOG_BYTES) fs.renameSync(file, `${file}.1`)
    } catch {}
    fs.appendFileSync(file, line)
  } catch {
    process.stderr.write(`engram hook: ${line}`)
  }
}

function errorCode(err) {
  return typeof err?.code === 'string' ? err.code : 'ENGRAM_INTERNAL'
}

/** The error's first line, clipped: enough to act on, too short to carry a payload. */
function errorMessage(err) {
  const text = String(err?.message ?? err).split('\n')[0]
  return text.length > 300 ? `${text.slice(0, 299)}…` : text
}

function invalid(message) {
  const err = new Error(message)
  err.code = 'ENGRAM_INVALID_ARG'
  return err
}

function isDirectory(path) {
  try {
    return fs.statSync(path).isDirectory()
  } catch {
    return false
  }
}

/** Sends console output to stderr: Claude Code reads stdout (SessionStart adds it to context). */
function guardStdout() {
  const saved = { log: console.log, info: console.info, debug: console.debug }
  console.log = console.info = console.debug = (...args) => console.error(...args)
  return () => Object.assign(console, saved)
}

// --- install -------------------------------------------------------------------------------------

class UsageError extends Error {}

/** `engram hook install`: shows the settings change, writes it with --yes. Resolves to the exit code. */
async function runInstall(argv) {
  let values
  try {
    ;({ values } = parseArgs({
      args: argv,
      options: {
        agent: { type: 'string' },
        root: { type: 'string' },
        settings: { type: 'string' },
        yes: { type: 'boolean', default: false },
        'dry-run': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      allowPositionals: false,
    }))
    if (!AGENTS.includes(values.agent)) {
      throw new UsageError(`--agent must be one of: ${AGENTS.join(', ')}${values.agent ? ` (got "${values.agent}")` : ''}`)
    }
  } catch (err) {
    console.error(`engram: hook install: ${err.message}`)
    return 2
  }
  const root = resolve(values.root ?? process.cwd())
  if (!isDirectory(root)) {
    console.error(`engram: hook install: project root ${root} is not a directory`)
    return 2
  }
  try {
    return installClaudeCode(root, values)
  } catch (err) {
    console.error(`engram: hook install: ${err.code ? `${err.code}: ` : ''}${err.message}`)
    return 1
  }
}

function installClaudeCode(root, values) {
  const runner = engramRunner(root)
  const files = [
    planFile(resolve(values.settings ?? join(root, '.claude', 'settings.json')), (s) => withHooks(s, runner.hookCommand)),
    planFile(join(root, '.mcp.json'), (s) => withMcpServer(s, runner.mcpServer)),
  ]
  console.log(`engram hook install: Claude Code in ${root}`)
  console.log(`hooks run: ${runner.hookCommand('<event>')}`)
  if (!runner.local) {
    console.log(`note: engram is not installed in ${join(root, 'node_modules')}, so the hooks name this machine's copy;`)
    console.log('      install engram in the project to make the settings work for everyone.')
  }
  const changed = files.filter((f) => f.after !== null)
  for (const f of files) {
    const name = relative(root, f.path) || f.path
    if (f.after === null) console.log(`\n${name}: ${f.path.endsWith('.mcp.json') ? 'the engram MCP server is' : "engram's hooks are"} already installed (unchanged)`)
    else console.log(`\n${name}${f.before === null ? ' (new file)' : ''}:\n${lineDiff(f.before ?? '', f.after)}`)
  }
  if (!changed.length) {
    console.log('\nalready installed: nothing to change')
    return 0
  }
  if (values['dry-run']) {
    console.log('\ndry run: nothing written')
    return 0
  }
  if (!values.yes) {
    console.log('\nnothing written: re-run with --yes to write these changes')
    return 0
  }
  for (const f of changed) writeAtomic(f.path, f.after)
  console.log(`\nwrote ${changed.map((f) => relative(root, f.path) || f.path).join(' and ')}`)
  console.log('Claude Code runs the hooks from its next session (/hooks lists them) and asks once to approve the MCP server.')
  return 0
}

/**
 * How the hooks and the MCP server start engram: through the project's own install when there
 * is one ($CLAUDE_PROJECT_DIR keeps the settings portable), else this copy's absolute path.
 * `--root "$CLAUDE_PROJECT_DIR"` pins the project: the payload's cwd follows the agent's `cd`.
 */
function engramRunner(root) {
  const local = fs.existsSync(join(root, 'node_modules', 'engram', 'bin', 'engram.js'))
  const script = local ? '"$CLAUDE_PROJECT_DIR/node_modules/engram/bin/engram.js"' : shellQuote(resolve(__dirname, '..', 'bin', 'engram.js'))
  return {
    local,
    hookCommand: (event) => `node ${script} hook ${event} --root "$CLAUDE_PROJECT_DIR"`,
    mcpServer: local ? { command: 'npx', args: ['engram', 'mcp'] } : { command: 'node', args: [resolve(__dirname, '..', 'bin', 'engram.js'), 'mcp'] },
  }
}

function shellQuote(s) {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`
}

/** A JSON settings file's text now (null: none) and after `change` (null: no change). */
function planFile(path, change) {
  const before = fs.existsSync(path) ? fs.readFileSync(path, 'utf8') : null
  let current = {}
  if (before !== null && before.trim()) {
    try {
      current = JSON.parse(before)
    } catch (err) {
      throw Object.assign(new Error(`${path} is not valid JSON (${err.message.split('\n')[0]}): fix it first`), { code: 'ENGRAM_INVALID_ARG' })
    }
  }
  if (!isObject(current)) throw Object.assign(new Error(`${path} does not hold a JSON object`), { code: 'ENGRAM_INVALID_ARG' })
  const next = change(current)
  if (before !== null && isDeepStrictEqual(current, next)) return { path, before, after: null }
  return { path, before, after: `${JSON.stringify(next, null, indentOf(before))}\n` }
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/** The indent the file uses (2 when it has none). */
function indentOf(text) {
  const m = /\n([ \t]+)\S/.exec(text ?? '')
  return m ? (m[1].startsWith('\t') ? '\t' : m[1].length) : 2
}

/** An engram hook entry (this or an earlier install, whatever the path or runner). */
function isEngramHook(h) {
  return isObject(h) && typeof h.command === 'string' && /engram(\.js)?["']?\s+hook\s/.test(h.command)
}

/**
 * The settings with engram's hooks: every earlier engram entry removed (a group emptied by that
 * goes too), then one group per event appended; everything else kept as it was.
 */
function withHooks(settings, command) {
  const next = structuredClone(settings)
  if (next.hooks !== undefined && !isObject(next.hooks)) {
    throw Object.assign(new Error('the settings\' "hooks" is not an object: fix it first'), { code: 'ENGRAM_INVALID_ARG' })
  }
  const hooks = (next.hooks ??= {})
  const ours = Object.entries(EVENTS)
  for (const event of new Set([...Object.keys(hooks), ...ours.map(([, e]) => e)])) {
    if (!Array.isArray(hooks[event]) && hooks[event] !== undefined) continue
    const groups = (hooks[event] ?? []).flatMap((g) => {
      if (!isObject(g) || !Array.isArray(g.hooks) || !g.hooks.some(isEngramHook)) return [g]
      const rest = g.hooks.filter((h) => !isEngramHook(h))
      return rest.length ? [{ ...g, hooks: rest }] : []
    })
    const mine = ours.find(([, e]) => e === event)
    if (mine) {
      const hook = { type: 'command', command: command(mine[0]), timeout: CLAUDE_TIMEOUT_S }
      groups.push(TOOL_EVENTS.has(event) ? { matcher: '*', hooks: [hook] } : { hooks: [hook] })
    }
    if (groups.length) hooks[event] = groups
    else delete hooks[event]
  }
  return next
}

/** `.mcp.json` with the `engram` server (replacing an earlier one of that name). */
function withMcpServer(config, server) {
  const next = structuredClone(config)
  if (next.mcpServers !== undefined && !isObject(next.mcpServers)) {
    throw Object.assign(new Error('.mcp.json\'s "mcpServers" is not an object: fix it first'), { code: 'ENGRAM_INVALID_ARG' })
  }
  next.mcpServers = { ...next.mcpServers, engram: server }
  return next
}

/**
 * The lines that change between two texts, as `-` / `+` lines under `@@ line N` headers (a
 * longest-common-subsequence diff: settings files are small).
 */
function lineDiff(before, after) {
  const a = before ? before.replace(/\n$/, '').split('\n') : []
  const b = after.replace(/\n$/, '').split('\n')
  if (a.length * b.length > 4e6) return [...a.map((l) => `  - ${l}`), ...b.map((l) => `  + ${l}`)].join('\n')
  // lcs[i][j]: common lines of a[i..] and b[j..].
  const lcs = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1))
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1])
    }
  }
  const out = []
  let i = 0
  let j = 0
  let inHunk = false
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      i++
      j++
      inHunk = false
      continue
    }
    if (!inHunk) out.push(`  @@ line ${j + 1}`)
    inHunk = true
    if (i < a.length && (j >= b.length || lcs[i + 1][j] >= lcs[i][j + 1])) out.push(`  - ${a[i++]}`)
    else out.push(`  + ${b[j++]}`)
  }
  return out.join('\n')
}

module.exports = { runHook }
