// `engram hook <event>`: Claude Code's hooks feed an observed session, so engram learns from what
// the agent does without being asked; `engram hook install` writes those hooks (and the MCP
// server) into the project's Claude Code settings.
//
// The event itself runs in the core (`src/hook/`, through `runHookEvent`): state files, locks,
// the session registry, observing and checkpoints. The native launcher `engram-hook` in the
// platform package runs that same code without Node, ~10 ms a hook instead of Node's 70-110 ms
// start; the settings `hook install` writes run `bin/engram-hook`, which runs the launcher when
// the machine has one, else Node. What stays here:
// reading stdin under the hook's time budget, and the install.
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
const AGENTS = ['claude-code']
/**
 * The environment variables that choose the embedder, which `hook install` copies into the
 * settings: the vectors' identity depends on them, so a hook or an MCP server started without
 * the CLI's would embed under another identity (and embed everything again). Never a secret:
 * API keys stay in the environment Claude Code runs in.
 */
const EMBEDDER_ENV = [
  'ENGRAM_EMBED_PROVIDER',
  'ENGRAM_EMBED_MODEL',
  'ENGRAM_EMBED_URL',
  'ENGRAM_EMBED_QUERY_PREFIX',
  'ENGRAM_EMBED_DOCUMENT_PREFIX',
  'ENGRAM_MODEL_DIR',
  'ENGRAM_DEFINITION_VECTORS',
]
const PROVIDERS = ['local', 'ollama', 'openai', 'none']

/** Overall budget of one hook run (env ENGRAM_HOOK_TIMEOUT_MS): then it gives up silently. */
const TIMEOUT_MS = 10_000
/** Most stdin read (a Write's payload carries the whole file). */
const MAX_STDIN_BYTES = 64 << 20
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
  engram hook <event> [--root DIR] [--db FILE] [--project ID]
      reads one Claude Code hook payload on stdin; <event> is one of
      ${Object.keys(EVENTS).join(', ')}
      (or Claude Code's name, e.g. PostToolUse; default: the payload's hook_event_name).
      Prints only what the agent should read; on any error prints nothing, exits 0 and
      logs one line to <root>/.engram/hooks/hook.log. The native launcher engram-hook
      (in the platform package, next to the addon) takes the same arguments without Node.
  engram hook install --agent claude-code [--root DIR] [--yes] [--dry-run] [--settings FILE]
      adds engram's hooks to <root>/.claude/settings.json and its MCP server to
      <root>/.mcp.json; shows the change, and writes it only with --yes. The embedder's
      settings in this environment (ENGRAM_EMBED_PROVIDER, _MODEL, _URL, _QUERY_PREFIX,
      _DOCUMENT_PREFIX, ENGRAM_MODEL_DIR, ENGRAM_DEFINITION_VECTORS) go with them, so the
      hooks and the server embed as the CLI does; API keys never do.`

// --- one event -----------------------------------------------------------------------------------

/**
 * Handles one hook event in the core (`runHookEvent`, the code the native launcher runs too);
 * always resolves to 0 (a failing hook must not disturb the agent).
 */
async function runEvent(argv) {
  const restoreConsole = guardStdout()
  const limit = Number(process.env.ENGRAM_HOOK_TIMEOUT_MS) || TIMEOUT_MS
  // Unref'd: it never keeps the process alive, yet fires while the work is still pending.
  // A lock the core held is left to a dead pid, which the next hook breaks.
  const timer = setTimeout(() => {
    logLine(argv, 'ENGRAM_ABORTED', `gave up after ${limit} ms`)
    process.exit(0)
  }, limit)
  timer.unref()
  try {
    const payload = await readStdin()
    const { runHookEvent } = require('../index.js')
    const out = await runHookEvent(argv, payload)
    if (out) await new Promise((done) => process.stdout.write(`${out}\n`, done))
  } catch (err) {
    logLine(argv, typeof err?.code === 'string' ? err.code : 'ENGRAM_INTERNAL', String(err?.message ?? err))
  } finally {
    clearTimeout(timer)
    restoreConsole()
  }
  return 0
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

// --- logging (what fails before the core runs; the core logs the rest the same way) -------------

/** Appends `time event code: message` to <root>/.engram/hooks/hook.log (stderr when there is no root). */
function logLine(argv, code, message) {
  const { values, positionals } = parseArgs({ args: argv, options: { root: { type: 'string' } }, allowPositionals: true, strict: false })
  const root = resolve(typeof values.root === 'string' && values.root.trim() ? values.root : process.cwd())
  const text = message.split('\n')[0]
  const event = EVENTS[positionals[0]] ?? positionals[0] ?? '?'
  const line = `${new Date().toISOString()} ${event} ${code}: ${text.length > 300 ? `${text.slice(0, 299)}…` : text}\n`
  try {
    if (!isDirectory(root)) throw new Error('no root')
    const file = join(root, '.engram', 'hooks', 'hook.log')
    fs.mkdirSync(dirname(file), { recursive: true })
    try {
      if (fs.statSync(file).size > MAX_LOG_BYTES) fs.renameSync(file, `${file}.1`)
    } catch {}
    fs.appendFileSync(file, line)
  } catch {
    process.stderr.write(`engram hook: ${line}`)
  }
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

/** Writes through a temporary file and a rename, so a reader never sees half a file. */
function writeAtomic(file, text) {
  fs.mkdirSync(dirname(file), { recursive: true })
  const tmp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(tmp, text)
  fs.renameSync(tmp, file)
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
  const embedder = embedderEnv(process.env)
  const runner = engramRunner(root, embedder)
  const files = [
    planFile(resolve(values.settings ?? join(root, '.claude', 'settings.json')), (s) => withHooks(s, runner.hookCommand)),
    planFile(join(root, '.mcp.json'), (s) => withMcpServer(s, runner.mcpServer)),
  ]
  console.log(`engram hook install: Claude Code in ${root}`)
  console.log(`hooks run: ${runner.hookCommand('<event>')}${runner.native ? ' (native here, no Node)' : ''}`)
  if (Object.keys(embedder).length) {
    console.log(`embedder: ${Object.keys(embedder).join(', ')} from this environment, for the hooks and the MCP server`)
    if (embedder.ENGRAM_EMBED_PROVIDER === 'openai') {
      console.log('note: API keys are not written: Claude Code must see ENGRAM_EMBED_API_KEY (or OPENAI_API_KEY) itself')
    }
    if (process.platform === 'win32') {
      console.log('note: on Windows the hook commands cannot carry them: set them where Claude Code runs')
    }
    if (embedder.ENGRAM_MODEL_DIR) {
      console.log(`note: ENGRAM_MODEL_DIR is this machine's path; teammates need the model there too`)
    }
  }
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
 * Hooks run `bin/engram-hook`, a shell script that runs the native launcher of the machine's
 * platform package when one is installed, else Node (so the settings work on every machine of
 * a team); on Windows, `node .../engram.js hook`.
 * `--root "$CLAUDE_PROJECT_DIR"` pins the project: the payload's cwd follows the agent's `cd`.
 */
function engramRunner(root, embedder = {}) {
  const posix = process.platform !== 'win32'
  // A project's engram older than bin/engram-hook gets the Node command.
  const script = posix ? 'engram-hook' : 'engram.js'
  const local = fs.existsSync(join(root, 'node_modules', 'engram', 'bin', script))
  const own = (file) => (local ? `"$CLAUDE_PROJECT_DIR/node_modules/engram/bin/${file}"` : shellQuote(resolve(__dirname, '..', 'bin', file)))
  const hookRunner = posix && (local || fs.existsSync(join(__dirname, '..', 'bin', script))) ? own('engram-hook') : `node ${own('engram.js')} hook`
  // Assignments before the command: a POSIX shell hands them to that command alone.
  const envPrefix = posix ? Object.entries(embedder).map(([name, value]) => `${name}=${shellQuote(value)} `).join('') : ''
  return {
    local,
    native: hookRunner.includes('engram-hook') && hasNativeLauncher(local ? join(root, 'node_modules', 'engram') : join(__dirname, '..')),
    hookCommand: (event) => `${envPrefix}${hookRunner} ${event} --root "$CLAUDE_PROJECT_DIR"`,
    mcpServer: {
      ...(local ? { command: 'npx', args: ['engram', 'mcp'] } : { command: 'node', args: [resolve(__dirname, '..', 'bin', 'engram.js'), 'mcp'] }),
      ...(Object.keys(embedder).length ? { env: embedder } : {}),
    },
  }
}

/**
 * The embedder's settings in `env` (those of [`EMBEDDER_ENV`] set to more than whitespace, as
 * the CLI and the hooks read them), a relative model directory made absolute (hooks and the
 * server start elsewhere). A provider the CLI would refuse is refused here too, so that no
 * hook fails on it later.
 */
function embedderEnv(env) {
  const found = Object.fromEntries(EMBEDDER_ENV.filter((name) => env[name]?.trim()).map((name) => [name, env[name]]))
  if (found.ENGRAM_MODEL_DIR) found.ENGRAM_MODEL_DIR = resolve(found.ENGRAM_MODEL_DIR)
  const provider = found.ENGRAM_EMBED_PROVIDER
  if (provider !== undefined && !PROVIDERS.includes(provider)) {
    throw Object.assign(new Error(`ENGRAM_EMBED_PROVIDER must be one of ${PROVIDERS.join(', ')} (got "${provider}")`), { code: 'ENGRAM_INVALID_ARG' })
  }
  return found
}

/**
 * Whether the engram package at `dir` has this machine's native hook launcher (where
 * bin/engram-hook looks: its platform package nested under it, or next to it).
 */
function hasNativeLauncher(dir) {
  if (process.platform !== 'linux' || !['x64', 'arm64'].includes(process.arch)) return false
  const name = `engram-linux-${process.arch}-gnu`
  let real = dir
  try {
    real = fs.realpathSync(dir)
  } catch {}
  return [join(real, 'node_modules', name), join(dirname(real), name)].some((p) => fs.existsSync(join(p, 'engram-hook')))
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
  return isObject(h) && typeof h.command === 'string' && /engram(\.js)?["']?\s+hook\s|engram-hook["']?\s/.test(h.command)
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
