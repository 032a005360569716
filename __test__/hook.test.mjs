// `engram hook`: Claude Code's hooks as child processes, each event its own
// `node bin/engram.js hook <event>` (or the native launcher `engram-hook <event>`, which runs the
// same core without Node) with the payload on stdin, on a temp project: a recorded
// session replayed hook by hook (what finalize promotes, what the next session is told), hooks
// of parallel tool calls at once, inputs that must never break the agent, orphaned sessions,
// and `hook install` on fresh and existing settings.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { spawn, spawnSync } from 'node:child_process'
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { Engram, addon, tempDir } from './helpers.mjs'

const repo = fileURLToPath(new URL('..', import.meta.url))
const bin = join(repo, 'bin', 'engram.js')
const recorded = JSON.parse(readFileSync(new URL('fixtures/claude-code-session.json', import.meta.url), 'utf8'))
const SESSION = recorded.events[0].payload.session_id
/** Session ids of the tests below (all in the `full` A/B group: see the first test). */
const NEXT = '7d3e9a42-1c5b-4f8e-a0d6-3b9c2e71f548'
const READER = 'c41a7f09-5e2d-4b63-8f1a-9d0e6b3c2a75'
const OTHER = 'e8b25d6c-3f71-4a09-b4e2-1c7d9f0a6e38'
const augments = typeof addon.ObserverSession?.prototype?.augmentToolResult === 'function'

/** The environment of every run: no embedder, sync or engine log. */
function env(extra = {}) {
  const base = { ...process.env, ENGRAM_EMBED_PROVIDER: 'none', ...extra }
  for (const k of ['ENGRAM_SYNC_URL', 'ENGRAM_SYNC_TOKEN', 'ENGRAM_LOG', 'ENGRAM_HOOK_TIMEOUT_MS']) if (!(k in extra)) delete base[k]
  return base
}

/**
 * How hooks start: `cli` is `node bin/engram.js hook`; `native` the launcher napi build made
 * (Linux), loading the repository's addon. Tests that run under both set `runner` first.
 */
const addonFile = readdirSync(repo).find((f) => /^engram\..+\.node$/.test(f))
const launcher = join(repo, 'target', 'x86_64-unknown-linux-gnu', 'release', 'engram-hook')
const RUNNERS = existsSync(launcher) && addonFile ? ['cli', 'native'] : ['cli']
let runner = 'cli'

/** The program and arguments of a hook run by the current runner. */
function command(args) {
  return runner === 'native' ? [launcher, args] : [process.execPath, [bin, 'hook', ...args]]
}

/** The environment of a hook run by the current runner. */
function hookEnv(extra) {
  return env(runner === 'native' ? { ENGRAM_ADDON: join(repo, addonFile), ...extra } : extra)
}

/** Runs `engram hook ...args` with `input` on stdin; { code, stdout, stderr }. */
function hook(cwd, args, input, extraEnv) {
  const [program, argv] = command(args)
  const r = spawnSync(program, argv, { cwd, input, env: hookEnv(extraEnv), encoding: 'utf8', timeout: 60_000 })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** The same, without waiting: resolves once the process exits. */
function hookAsync(cwd, args, input) {
  return new Promise((done, fail) => {
    const [program, argv] = command(args)
    const child = spawn(program, argv, { cwd, env: hookEnv() })
    let stdout = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.on('error', fail)
    child.on('exit', (code) => done({ code, stdout }))
    child.stdin.end(input)
  })
}

/** Whether util-linux's flock is here (it takes the same advisory lock the hooks take). */
const FLOCK = spawnSync('flock', ['--version']).status === 0

/** Whether another process holds the lock `file` (false when flock is not here to tell). */
function held(file) {
  return FLOCK && spawnSync('flock', ['-n', file, 'true']).status !== 0
}

/**
 * A process holding the lock `file` as a running hook would (null without util-linux's flock):
 * kill it to let go.
 */
async function holdLock(file) {
  if (!FLOCK) return null
  mkdirSync(dirname(file), { recursive: true })
  // -o: the command does not inherit the lock, so killing flock itself lets go.
  const holder = spawn('flock', ['-o', file, '-c', 'echo held; exec sleep 60 >/dev/null 2>&1'])
  await new Promise((done) => holder.stdout.once('data', done))
  return holder
}

/** `SessionStart` -> `session-start`. */
const kebab = (name) => name.replace(/[A-Z]/g, (c, i) => (i ? '-' : '') + c.toLowerCase())

/** A project with a few real source files (the fixture's copies) and its transcript path. */
function project(t) {
  const dir = tempDir(t)
  const root = join(dir, 'proj')
  for (const [to, from] of Object.entries(recorded.copy)) {
    mkdirSync(dirname(join(root, to)), { recursive: true })
    copyFileSync(join(repo, from), join(root, to))
  }
  for (const [to, text] of Object.entries(recorded.write)) writeFileSync(join(root, to), text)
  return { root, transcript: join(dir, 'claude', `${SESSION}.jsonl`) }
}

/** The fixture's value with its placeholders filled in for `p`. */
function fill(p, value) {
  if (typeof value === 'string') {
    if (value.startsWith('$CONTENT:')) return readFileSync(join(p.root, value.slice('$CONTENT:'.length)), 'utf8')
    return value.replaceAll('$PROJECT', p.root).replaceAll('$TRANSCRIPT', p.transcript)
  }
  if (Array.isArray(value)) return value.map((v) => fill(p, v))
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(p, v)]))
  return value
}

/** A payload of session `id` in project `p`. */
function payload(p, id, fields) {
  return { session_id: id, transcript_path: p.transcript, cwd: p.root, permission_mode: 'default', ...fields }
}

/** A Read's PostToolUse payload for `file` (relative to the root). */
function readPayload(p, id, file, toolUseId) {
  const path = join(p.root, file)
  const content = readFileSync(path, 'utf8')
  return payload(p, id, {
    hook_event_name: 'PostToolUse',
    tool_name: 'Read',
    tool_input: { file_path: path },
    tool_response: { type: 'text', file: { filePath: path, content, numLines: content.split('\n').length, startLine: 1, totalLines: content.split('\n').length } },
    tool_use_id: toolUseId,
  })
}

/** Asserts a hook printed nothing, or one hookSpecificOutput for `event`; returns its context. */
function contextOf(r, event) {
  assert.equal(r.code, 0, r.stderr)
  if (!r.stdout) return null
  const out = JSON.parse(r.stdout)
  assert.deepEqual(Object.keys(out), ['hookSpecificOutput'])
  assert.equal(out.hookSpecificOutput.hookEventName, event)
  assert.equal(typeof out.hookSpecificOutput.additionalContext, 'string')
  return out.hookSpecificOutput.additionalContext
}

const hooksDir = (p) => join(p.root, '.engram', 'hooks')
const logOf = (p) => (existsSync(join(hooksDir(p), 'hook.log')) ? readFileSync(join(hooksDir(p), 'hook.log'), 'utf8') : '')
const registry = (p) => JSON.parse(readFileSync(join(hooksDir(p), 'sessions.json'), 'utf8'))
const open = (p) => Engram.open({ path: join(p.root, '.engram', 'memory.db'), projectRoot: p.root })

/** Replays the recorded session: the transcript grows as Claude Code writes it, hook by hook. */
function replay(p) {
  mkdirSync(dirname(p.transcript), { recursive: true })
  return recorded.events.map((e) => {
    for (const line of e.transcript ?? []) appendFileSync(p.transcript, `${JSON.stringify(fill(p, line))}\n`)
    const body = fill(p, e.payload)
    const r = hook(p.root, [kebab(body.hook_event_name)], JSON.stringify(body))
    return { event: body.hook_event_name, r }
  })
}

test('the sessions of these tests are in the full A/B group (the others get no injection)', async (t) => {
  const db = await Engram.open({ path: join(tempDir(t), 'memory.db') })
  for (const id of [SESSION, NEXT, READER, OTHER]) assert.equal(db.observe({ sessionId: id }).snapshot().abGroup, 'full', id)
  await db.close()
})

for (const via of RUNNERS) test(`a recorded Claude Code session, one hook process per event, promotes its error fix and self-correction (${via})`, async (t) => {
  runner = via
  const p = project(t)
  for (const { event, r } of replay(p)) contextOf(r, event)
  assert.equal(logOf(p), '', 'no hook failed')

  const db = await open(p)
  const memories = await db.list({ limit: 100 })
  const describe = memories.map((m) => `\n  ${m.type}: ${m.content}`).join('')
  const fix = memories.find((m) => m.type === 'error_pattern')
  assert.ok(fix, `an error_pattern was promoted:${describe}`)
  assert.equal(fix.source, 'observer_inferred')
  assert.match(fix.content, /npx vitest run/)
  assert.match(fix.content, /fixed by editing `src\/auth\/tokens\.ts`/)
  assert.deepEqual(fix.relatedFiles, ['src/auth/tokens.ts'])
  // Read from the transcript at Stop: the hook payloads carry no model text.
  const correction = memories.find((m) => m.type === 'gotcha' && m.content.includes('I was wrong about the clock'))
  assert.ok(correction, `the self-correction was promoted:${describe}`)
  assert.match(correction.content, /passed to verify\(\) as a second argument/)
  assert.deepEqual(correction.relatedFiles, ['src/auth/tokens.ts'], 'the file it was said about (the edits around it)')
  assert.ok(!memories.some((m) => /read the token service/.test(m.content)), 'ordinary text is not a correction')

  // Session end leaves nothing behind: no checkpoint, state, lock or registry entry (the
  // registry's own lock file stays).
  assert.equal(await db.resumeSession(SESSION), null)
  assert.deepEqual(readdirSync(hooksDir(p)).filter((f) => f !== 'sessions.json' && f !== '.registry.lock'), [])
  assert.ok(!(SESSION in registry(p)))

  // Session end ended the session for the trust level too (what it learned is counted).
  const ended = await db.sessionSummary(SESSION)
  assert.equal(ended.learned.length, memories.filter((m) => m.sessionId === SESSION).length)
  assert.ok(ended.learned.length >= 2)
  const contextApi = typeof db.sessionContext === 'function'
  await db.close()

  // Memories of one session sit below the cautious level's injection threshold (0.80), so a
  // new project's next session hears of them through the last session's handoff only.
  await t.test('the next session start hands over what the last session learned', (st) => {
    if (!contextApi) return st.skip('sessionContext is not in this build')
    const r = hook(p.root, ['session-start'], JSON.stringify(payload(p, 'handoff-probe', { hook_event_name: 'SessionStart', source: 'startup' })))
    const text = contextOf(r, 'SessionStart')
    assert.match(text ?? '', new RegExp(`## Last session\\nbuild session ${SESSION} \\(success, `), text)
    assert.match(text, /- learned \[Memory #[^\]]*I was wrong about the clock/)
    assert.doesNotMatch(text, /## Relevant memories/)
    hook(p.root, ['session-end'], JSON.stringify(payload(p, 'handoff-probe', { hook_event_name: 'SessionEnd', reason: 'exit' })))
  })

  // A project that trusts its memories more (level 3: above 0.55) is shown them.
  const trusting = await open(p)
  await trusting.setTrustLevel(3)
  await trusting.close()

  await t.test('a new session starts with them in its context', (st) => {
    if (!contextApi) return st.skip('sessionContext is not in this build')
    const r = hook(p.root, ['session-start'], JSON.stringify(payload(p, NEXT, { hook_event_name: 'SessionStart', source: 'startup' })))
    const text = contextOf(r, 'SessionStart')
    assert.ok(text, 'SessionStart printed a context')
    assert.match(text, /I was wrong about the clock/)
    assert.match(text, /npx vitest run/)
  })

  await t.test('reading the file shows its gotchas once', (st) => {
    if (!augments) return st.skip('augmentToolResult is not in this build')
    const first = contextOf(hook(p.root, ['post-tool-use'], JSON.stringify(readPayload(p, READER, 'src/auth/tokens.ts', 'toolu_01Rd1'))), 'PostToolUse')
    assert.match(first ?? '', /I was wrong about the clock/)
    const again = contextOf(hook(p.root, ['post-tool-use'], JSON.stringify(readPayload(p, READER, 'src/auth/tokens.ts', 'toolu_01Rd2'))), 'PostToolUse')
    assert.ok(!again?.includes('I was wrong about the clock'), 'never shown twice in a session')
    const other = contextOf(hook(p.root, ['post-tool-use'], JSON.stringify(readPayload(p, READER, 'src/orders/service.py', 'toolu_01Rd3'))), 'PostToolUse')
    assert.equal(other, null, 'a file without memories adds nothing')
  })
  assert.equal(logOf(p), '')
})

for (const via of RUNNERS) test(`8 hooks of parallel tool calls at once lose no message (${via})`, async (t) => {
  runner = via
  const p = project(t)
  assert.equal(hook(p.root, ['user-prompt-submit'], JSON.stringify(payload(p, SESSION, { hook_event_name: 'UserPromptSubmit', prompt: 'x' }))).code, 0)
  const runs = await Promise.all(
    Array.from({ length: 8 }, (_, i) => {
      const body = payload(p, SESSION, {
        hook_event_name: 'PostToolUse',
        tool_name: 'Bash',
        tool_input: { command: `wc -l src/part${i}.ts` },
        tool_response: { stdout: `${i} src/part${i}.ts\n`, stderr: '', interrupted: false, isImage: false },
        tool_use_id: `toolu_01Par${i}`,
      })
      return hookAsync(p.root, ['post-tool-use'], JSON.stringify(body))
    }),
  )
  for (const r of runs) assert.deepEqual(r, { code: 0, stdout: '' })
  assert.equal(logOf(p), '')
  // Bash calls need no answer: they wait in the state file for the next hook that opens the
  // database (here a prompt).
  const state = JSON.parse(readFileSync(join(hooksDir(p), `${SESSION}.json`), 'utf8'))
  assert.equal(state.pending.length, 16)
  assert.equal(hook(p.root, ['user-prompt-submit'], JSON.stringify(payload(p, SESSION, { hook_event_name: 'UserPromptSubmit', prompt: 'y' }))).code, 0)
  const db = await open(p)
  const s = (await db.resumeSession(SESSION)).snapshot()
  assert.equal(s.toolCalls, 8)
  assert.equal(s.events, 16, 'each call and its result')
  assert.equal(s.currentStep, 8, 'each call its own step')
  await db.close()
  const locks = readdirSync(hooksDir(p)).filter((f) => f.endsWith('.lock'))
  assert.ok(locks.length > 0 && !locks.some((f) => held(join(hooksDir(p), f))), 'every lock was released')
})

for (const via of RUNNERS) test(`pre-tool-use numbers the steps; a result pairs with its call by tool_use_id (${via})`, async (t) => {
  runner = via
  const p = project(t)
  const call = (event, id, extra) =>
    hook(p.root, [event], JSON.stringify(payload(p, SESSION, { hook_event_name: '', tool_name: 'Bash', tool_input: { command: 'npm test' }, tool_use_id: id, ...extra })))
  assert.equal(call('pre-tool-use', 'toolu_a').stdout, '')
  assert.equal(call('pre-tool-use', 'toolu_b').stdout, '')
  // Answered in the other order, as parallel calls can be.
  assert.equal(call('post-tool-use-failure', 'toolu_b', { error: 'Exit code 1\nError: boom' }).code, 0)
  assert.equal(call('post-tool-use', 'toolu_a', { tool_response: { stdout: 'ok', stderr: '', interrupted: false } }).code, 0)
  assert.equal(call('post-tool-use', 'toolu_a', { tool_response: { stdout: 'ok', stderr: '', interrupted: false } }).code, 0, 'delivered twice')
  assert.equal(call('user-prompt-submit', undefined, { prompt: 'next' }).code, 0)
  assert.equal(logOf(p), '')
  const db = await open(p)
  const s = (await db.resumeSession(SESSION)).snapshot()
  assert.deepEqual([s.toolCalls, s.events, s.currentStep, s.errors], [2, 4, 2, 1])
  await db.close()
})

for (const via of RUNNERS) test(`tool calls kept for later are redacted in the state file and in the checkpoint (${via})`, async (t) => {
  runner = via
  const p = project(t)
  const secret = 'hunter2-Zq8vR4kP'
  const token = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'
  const body = payload(p, SESSION, {
    hook_event_name: 'PostToolUse',
    tool_name: 'Bash',
    tool_input: { command: `curl -u admin:${secret} https://ci.example.com/api` },
    tool_response: { stdout: `GITHUB_TOKEN=${token}\n`, stderr: '', interrupted: false },
    tool_use_id: 'toolu_secret',
  })
  assert.deepEqual(hook(p.root, ['post-tool-use'], JSON.stringify(body)), { code: 0, stdout: '', stderr: '' })
  const stateText = readFileSync(join(hooksDir(p), `${SESSION}.json`), 'utf8')
  assert.ok(stateText.includes('curl -u admin:'), 'the call is kept')
  assert.ok(!stateText.includes(secret) && !stateText.includes(token), stateText)
  assert.equal(hook(p.root, ['stop'], JSON.stringify(payload(p, SESSION, { hook_event_name: 'Stop' }))).code, 0)
  assert.equal(JSON.parse(readFileSync(join(hooksDir(p), `${SESSION}.json`), 'utf8')).pending.length, 0, 'flushed')
  const db = await open(p)
  t.after(() => db.close())
  assert.equal((await db.resumeSession(SESSION)).snapshot().toolCalls, 1)
  assert.equal(logOf(p), '')
})

for (const via of RUNNERS) test(`a hook never breaks the agent: it exits 0, prints nothing and logs one line (${via})`, async (t) => {
  runner = via
  const p = project(t)
  const secret = 'sk-live-4f9a8b7c6d5e4f3a2b1c'
  const cases = [
    ['garbage stdin', ['post-tool-use'], `{"session_id": "${secret}", not json`, /PostToolUse ENGRAM_INVALID_ARG: stdin is not one JSON object/],
    ['an unknown event', ['frobnicate'], JSON.stringify(payload(p, SESSION, { prompt: secret })), /frobnicate ENGRAM_INVALID_ARG: unknown event "frobnicate"/],
    ['no session id', ['user-prompt-submit'], JSON.stringify({ cwd: p.root, hook_event_name: 'UserPromptSubmit', prompt: secret }), /UserPromptSubmit ENGRAM_INVALID_ARG: the payload has no session_id/],
    ['no event at all', [], JSON.stringify(payload(p, SESSION, { prompt: secret })), /\? ENGRAM_INVALID_ARG: no event: name one of session-start/],
  ]
  for (const [what, args, input, line] of cases) {
    const before = logOf(p)
    const r = hook(p.root, args, input)
    assert.deepEqual([r.code, r.stdout], [0, ''], what)
    const added = logOf(p).slice(before.length)
    assert.equal(added.split('\n').filter(Boolean).length, 1, `${what}: one line`)
    assert.match(added, line, what)
  }
  assert.ok(!logOf(p).includes(secret), 'payload contents are never logged')

  // A database file that is not one.
  mkdirSync(join(p.root, '.engram'), { recursive: true })
  writeFileSync(join(p.root, '.engram', 'memory.db'), 'not a database, just text\n'.repeat(200))
  const before = logOf(p)
  const r = hook(p.root, ['post-tool-use'], JSON.stringify(readPayload(p, SESSION, 'src/auth/tokens.ts', 'toolu_x')))
  assert.deepEqual([r.code, r.stdout], [0, ''])
  assert.match(logOf(p).slice(before.length), /^\S+ PostToolUse ENGRAM_\w+: .+\n$/)
  assert.equal(readFileSync(join(p.root, '.engram', 'memory.db'), 'utf8'), 'not a database, just text\n'.repeat(200), 'left as it was')

  // A root that does not exist: the line goes to stderr.
  const gone = hook(p.root, ['stop'], JSON.stringify({ session_id: SESSION, cwd: join(p.root, 'nope') }))
  assert.deepEqual([gone.code, gone.stdout], [0, ''])
  assert.match(gone.stderr, /engram hook: \S+ Stop ENGRAM_INVALID_ARG: project root .*nope is not a directory/)
})

for (const via of RUNNERS) test(`a hook that cannot finish in time gives up silently; a held lock makes it wait, a killed holder's is free (${via})`, async (t) => {
  runner = via
  const p = project(t)
  const started = Date.now()
  const stuck = await new Promise((done) => {
    // stdin never closes: the hook waits for its payload until its timeout.
    const [program, argv] = command(['stop'])
    const child = spawn(program, argv, { cwd: p.root, env: hookEnv({ ENGRAM_HOOK_TIMEOUT_MS: '300' }) })
    let stdout = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.on('exit', (code) => done({ code, stdout }))
  })
  assert.deepEqual(stuck, { code: 0, stdout: '' })
  assert.ok(Date.now() - started < 5_000)
  assert.match(readFileSync(join(p.root, '.engram', 'hooks', 'hook.log'), 'utf8'), /Stop ENGRAM_ABORTED: gave up after 300 ms/)

  const lock = join(hooksDir(p), `${SESSION}.lock`)
  const prompt = JSON.stringify(payload(p, SESSION, { hook_event_name: 'UserPromptSubmit', prompt: 'x' }))
  // Held by a live process (another hook, as far as this one can tell).
  const holder = await holdLock(lock)
  if (holder) {
    const before = logOf(p)
    const waited = Date.now()
    assert.equal(hook(p.root, ['user-prompt-submit'], prompt).code, 0)
    assert.ok(Date.now() - waited >= 2_500, 'it waited for the lock')
    assert.match(logOf(p).slice(before.length), /UserPromptSubmit ENGRAM_CONFLICT: another hook held the lock/)
    // Its holder is killed: the lock is free at once.
    holder.kill('SIGKILL')
    await new Promise((done) => holder.once('exit', done))
  }
  const logged = logOf(p)
  const r = hook(p.root, ['user-prompt-submit'], prompt)
  assert.deepEqual([r.code, r.stdout, logOf(p)], [0, '', logged], 'it ran without waiting or failing')
  const db = await open(p)
  assert.ok(await db.resumeSession(SESSION), 'the session was created')
  await db.close()
})

for (const via of RUNNERS) test(`a session start finalizes sessions not seen for 6 hours, and only those (${via})`, async (t) => {
  runner = via
  const p = project(t)
  const send = (id, event, fields) => hook(p.root, [event], JSON.stringify(payload(p, id, fields)))
  for (const id of [SESSION, OTHER]) {
    send(id, 'user-prompt-submit', { hook_event_name: 'UserPromptSubmit', prompt: 'fix it' })
    for (const n of [1, 2]) {
      send(id, 'post-tool-use-failure', { hook_event_name: 'PostToolUseFailure', tool_name: 'Bash', tool_input: { command: 'npm run build' }, tool_use_id: `toolu_${id}_${n}`, error: "Exit code 2\nsrc/a.ts(3,1): error TS2304: Cannot find name 'x'." })
    }
  }
  send(READER, 'user-prompt-submit', { hook_event_name: 'UserPromptSubmit', prompt: 'look around' })
  // SESSION's Claude Code was killed 7 hours ago; OTHER is still running; READER was quiet as
  // long, but a hook of it is running right now (it holds its lock).
  const old = Date.now() - 7 * 3_600_000
  writeFileSync(join(hooksDir(p), 'sessions.json'), JSON.stringify({ ...registry(p), [SESSION]: old, [READER]: old }))
  const holder = await holdLock(join(hooksDir(p), `${READER}.lock`))
  t.after(() => holder?.kill('SIGKILL'))
  assert.equal(send(NEXT, 'session-start', { hook_event_name: 'SessionStart', source: 'startup' }).code, 0)
  assert.equal(logOf(p), '')
  const db = await open(p)
  assert.equal(await db.resumeSession(SESSION), null, 'the orphan was finalized')
  assert.ok(await db.resumeSession(OTHER), 'a live session is left alone')
  if (holder) assert.ok(await db.resumeSession(READER), 'so is one whose hook is running')
  const promoted = await db.list({ limit: 20 })
  assert.ok(promoted.some((m) => m.content.includes('TS2304') && m.sessionId === SESSION), promoted.map((m) => m.content).join('\n'))
  await db.close()
  assert.deepEqual(Object.keys(registry(p)).sort(), (holder ? [NEXT, OTHER, READER] : [NEXT, OTHER]).sort())
  assert.ok(!existsSync(join(hooksDir(p), `${SESSION}.json`)))
})

// --- hook install ----------------------------------------------------------------------------------

const EVENTS = ['SessionStart', 'UserPromptSubmit', 'PreToolUse', 'PostToolUse', 'PostToolUseFailure', 'Stop', 'SessionEnd']
/** The variables `hook install` copies into the settings (lib/hook.js's EMBEDDER_ENV). */
const EMBEDDER_VARS = ['ENGRAM_EMBED_PROVIDER', 'ENGRAM_EMBED_MODEL', 'ENGRAM_EMBED_URL', 'ENGRAM_EMBED_QUERY_PREFIX', 'ENGRAM_EMBED_DOCUMENT_PREFIX', 'ENGRAM_MODEL_DIR', 'ENGRAM_DEFINITION_VECTORS']
/** `hook install` in `root`, its environment without embedder settings unless `embedder` names some. */
const install = (root, args, embedder = {}) => {
  const unset = Object.fromEntries(EMBEDDER_VARS.map((name) => [name, '']))
  const r = spawnSync(process.execPath, [bin, 'hook', 'install', ...args], { cwd: root, env: env({ ...unset, ...embedder }), encoding: 'utf8' })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}
const settingsPath = (root) => join(root, '.claude', 'settings.json')
const WINDOWS = process.platform === 'win32'
/** What the settings run in a project with engram installed (a POSIX script; Node on Windows). */
const localHookRunner = WINDOWS
  ? 'node "$CLAUDE_PROJECT_DIR/node_modules/engram/bin/engram.js" hook'
  : '"$CLAUDE_PROJECT_DIR/node_modules/engram/bin/engram-hook"'
const engramCommands = (settings, event) =>
  settings.hooks[event].flatMap((g) => g.hooks).map((h) => h.command).filter((c) => /engram(\.js)?"? hook |engram-hook"? /.test(c))

/** A project with engram in its node_modules (a link to this checkout, so the hooks run). */
function localProject(t) {
  const root = join(tempDir(t), 'app')
  mkdirSync(join(root, 'node_modules'), { recursive: true })
  symlinkSync(repo, join(root, 'node_modules', 'engram'), 'dir')
  return root
}

test('bin/engram-hook runs the platform package\'s native launcher when there is one, else Node', { skip: !RUNNERS.includes('native') }, (t) => {
  // An installed layout: engram and its platform package side by side (npm's hoisted layout).
  const modules = join(tempDir(t), 'node_modules')
  const engramDir = join(modules, 'engram')
  mkdirSync(join(engramDir, 'bin'), { recursive: true })
  copyFileSync(join(repo, 'bin', 'engram-hook'), join(engramDir, 'bin', 'engram-hook'))
  symlinkSync(bin, join(engramDir, 'bin', 'engram.js'))
  const p = project(t)
  const prompt = (id) => JSON.stringify(payload(p, id, { hook_event_name: 'UserPromptSubmit', prompt: 'x' }))
  const wrapper = (id, extra) => spawnSync('sh', [join(engramDir, 'bin', 'engram-hook'), 'user-prompt-submit', '--root', p.root], {
    input: prompt(id),
    env: env(extra),
    encoding: 'utf8',
  })
  // No platform package: Node runs it (ENGRAM_ADDON means nothing there).
  assert.equal(wrapper(NEXT, { ENGRAM_ADDON: '/nowhere/engram.node' }).status, 0)
  assert.equal(logOf(p), '')
  assert.ok(existsSync(join(hooksDir(p), `${NEXT}.json`)), 'Node ran the hook')
  // With one, the launcher runs: it fails to load the addon ENGRAM_ADDON names, and says so.
  const platform = join(modules, 'engram-linux-x64-gnu')
  mkdirSync(platform)
  copyFileSync(launcher, join(platform, 'engram-hook'))
  assert.equal(wrapper(READER, { ENGRAM_ADDON: '/nowhere/engram.node' }).status, 0)
  assert.match(logOf(p), /user-prompt-submit ENGRAM_NO_BINARY: engram-hook: cannot load \/nowhere\/engram\.node/)
  // And with the addon next to it, as the platform package ships them, it runs the hook.
  symlinkSync(join(repo, addonFile), join(platform, addonFile))
  const r = wrapper(OTHER, { ENGRAM_ADDON: '' })
  assert.deepEqual([r.status, r.stderr], [0, ''])
  assert.ok(existsSync(join(hooksDir(p), `${OTHER}.json`)), 'the launcher ran the hook')
})

test('hook install shows the change, writes only with --yes, and a second run changes nothing', (t) => {
  const root = localProject(t)
  const shown = install(root, ['--agent', 'claude-code'])
  assert.equal(shown.code, 0, shown.stderr)
  assert.match(shown.stdout, /\.claude\/settings\.json \(new file\):/)
  assert.match(shown.stdout, /\+ {5}"PostToolUse": \[/)
  assert.match(shown.stdout, /\.mcp\.json \(new file\):/)
  assert.match(shown.stdout, /re-run with --yes/)
  assert.ok(!existsSync(settingsPath(root)) && !existsSync(join(root, '.mcp.json')), 'nothing written')
  const dry = install(root, ['--agent', 'claude-code', '--yes', '--dry-run'])
  assert.match(dry.stdout, /dry run: nothing written/)
  assert.ok(!existsSync(settingsPath(root)))

  const wrote = install(root, ['--agent', 'claude-code', '--yes'])
  assert.equal(wrote.code, 0, wrote.stderr)
  assert.match(wrote.stdout, /wrote \.claude\/settings\.json and \.mcp\.json/)
  const settings = JSON.parse(readFileSync(settingsPath(root), 'utf8'))
  assert.deepEqual(Object.keys(settings.hooks), EVENTS)
  for (const event of EVENTS) {
    const [group] = settings.hooks[event]
    assert.equal(settings.hooks[event].length, 1)
    assert.equal(group.matcher, ['PreToolUse', 'PostToolUse', 'PostToolUseFailure'].includes(event) ? '*' : undefined)
    assert.deepEqual(group.hooks, [{
      type: 'command',
      command: `${localHookRunner} ${kebab(event)} --root "$CLAUDE_PROJECT_DIR"`,
      timeout: 15,
    }])
  }
  assert.deepEqual(JSON.parse(readFileSync(join(root, '.mcp.json'), 'utf8')), { mcpServers: { engram: { command: 'npx', args: ['engram', 'mcp'] } } })

  const bytes = [readFileSync(settingsPath(root)), readFileSync(join(root, '.mcp.json'))]
  const again = install(root, ['--agent', 'claude-code', '--yes'])
  assert.equal(again.code, 0)
  assert.match(again.stdout, /already installed: nothing to change/)
  assert.deepEqual([readFileSync(settingsPath(root)), readFileSync(join(root, '.mcp.json'))], bytes, 'byte-identical')

  // The installed command runs as Claude Code would run it (a shell, CLAUDE_PROJECT_DIR set);
  // this checkout has no platform package, so bin/engram-hook runs it through Node.
  if (WINDOWS) return
  const command = settings.hooks.UserPromptSubmit[0].hooks[0].command
  const run = spawnSync('sh', ['-c', command], {
    cwd: join(root, 'node_modules'),
    input: JSON.stringify({ session_id: SESSION, cwd: join(root, 'node_modules'), hook_event_name: 'UserPromptSubmit', prompt: 'hi' }),
    env: env({ CLAUDE_PROJECT_DIR: root }),
    encoding: 'utf8',
  })
  assert.deepEqual([run.status, run.stdout], [0, ''], run.stderr)
  assert.ok(existsSync(join(root, '.engram', 'hooks', `${SESSION}.json`)), '--root pins the project, whatever the cwd')
})

test('hook install writes the embedder settings of its environment for the hooks and the MCP server, never a key', (t) => {
  const root = localProject(t)
  const embedder = {
    ENGRAM_EMBED_PROVIDER: 'openai',
    ENGRAM_EMBED_MODEL: 'text-embedding-3-small',
    ENGRAM_EMBED_URL: 'http://127.0.0.1:9/v1',
    ENGRAM_EMBED_DOCUMENT_PREFIX: 'passage: ',
    ENGRAM_EMBED_QUERY_PREFIX: '   ', // only whitespace: unset, as the CLI and the hooks read it
  }
  const keys = { ENGRAM_EMBED_API_KEY: 'sk-engram-test-one', OPENAI_API_KEY: 'sk-engram-test-two' }
  const r = install(root, ['--agent', 'claude-code', '--yes'], { ...embedder, ...keys })
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /embedder: ENGRAM_EMBED_PROVIDER, ENGRAM_EMBED_MODEL, ENGRAM_EMBED_URL, ENGRAM_EMBED_DOCUMENT_PREFIX from this environment/)
  assert.match(r.stdout, /API keys are not written/)
  const written = {
    ENGRAM_EMBED_PROVIDER: 'openai',
    ENGRAM_EMBED_MODEL: 'text-embedding-3-small',
    ENGRAM_EMBED_URL: 'http://127.0.0.1:9/v1',
    ENGRAM_EMBED_DOCUMENT_PREFIX: 'passage: ',
  }
  const mcpText = readFileSync(join(root, '.mcp.json'), 'utf8')
  assert.deepEqual(JSON.parse(mcpText).mcpServers.engram, { command: 'npx', args: ['engram', 'mcp'], env: written })
  const settingsText = readFileSync(settingsPath(root), 'utf8')
  for (const text of [mcpText, settingsText]) assert.doesNotMatch(text, /sk-engram-test/, 'no API key is written')
  if (!WINDOWS) {
    const settings = JSON.parse(settingsText)
    const prefix = "ENGRAM_EMBED_PROVIDER=openai ENGRAM_EMBED_MODEL=text-embedding-3-small ENGRAM_EMBED_URL=http://127.0.0.1:9/v1 ENGRAM_EMBED_DOCUMENT_PREFIX='passage: '"
    for (const event of EVENTS) {
      assert.deepEqual(engramCommands(settings, event), [`${prefix} ${localHookRunner} ${kebab(event)} --root "$CLAUDE_PROJECT_DIR"`])
    }
    // The command still runs as Claude Code runs it, the settings in its environment.
    const command = settings.hooks.SessionStart[0].hooks[0].command
    const run = spawnSync('sh', ['-c', command], {
      cwd: root,
      input: JSON.stringify({ session_id: SESSION, cwd: root, hook_event_name: 'SessionStart', source: 'startup' }),
      env: env({ CLAUDE_PROJECT_DIR: root, ENGRAM_EMBED_PROVIDER: '' }),
      encoding: 'utf8',
    })
    assert.equal(run.status, 0, run.stderr)
    assert.ok(existsSync(join(root, '.engram', 'hooks', `${SESSION}.json`)), 'the hook ran')
    const log = join(root, '.engram', 'hooks', 'hook.log')
    assert.ok(!existsSync(log), existsSync(log) ? readFileSync(log, 'utf8') : '')
  }

  // Installed again without them: they go, from both files.
  const plain = install(root, ['--agent', 'claude-code', '--yes'])
  assert.equal(plain.code, 0, plain.stderr)
  assert.doesNotMatch(plain.stdout, /embedder:/)
  assert.deepEqual(JSON.parse(readFileSync(join(root, '.mcp.json'), 'utf8')).mcpServers.engram, { command: 'npx', args: ['engram', 'mcp'] })
  if (!WINDOWS) assert.doesNotMatch(readFileSync(settingsPath(root), 'utf8'), /ENGRAM_EMBED/)

  // A relative model directory is written as the absolute path it names from here.
  const local = install(root, ['--agent', 'claude-code', '--yes'], { ENGRAM_MODEL_DIR: 'models/e5' })
  assert.equal(local.code, 0, local.stderr)
  assert.deepEqual(JSON.parse(readFileSync(join(root, '.mcp.json'), 'utf8')).mcpServers.engram.env, { ENGRAM_MODEL_DIR: join(root, 'models', 'e5') })
  assert.match(local.stdout, /ENGRAM_MODEL_DIR is this machine's path/)

  // A provider the CLI would refuse is refused here, and nothing is written.
  const other = localProject(t)
  const bad = install(other, ['--agent', 'claude-code', '--yes'], { ENGRAM_EMBED_PROVIDER: 'cohere' })
  assert.equal(bad.code, 1)
  assert.match(bad.stderr, /ENGRAM_INVALID_ARG: ENGRAM_EMBED_PROVIDER must be one of local, ollama, openai, none \(got "cohere"\)/)
  assert.ok(!existsSync(settingsPath(other)) && !existsSync(join(other, '.mcp.json')), 'nothing written')
})

test('hook install keeps other hooks and settings, and replaces an earlier engram hook', (t) => {
  const root = localProject(t)
  mkdirSync(join(root, '.claude'))
  const prettier = { type: 'command', command: 'npx prettier --write "$CLAUDE_PROJECT_DIR"' }
  const existing = {
    model: 'opus',
    permissions: { allow: ['Bash(npm test:*)'], deny: ['Read(./.env)'] },
    hooks: {
      PostToolUse: [{ matcher: 'Edit|Write', hooks: [prettier, { type: 'command', command: 'npx engram hook post-tool-use' }] }],
      Notification: [{ hooks: [{ type: 'command', command: 'notify-send "Claude Code"' }] }],
      Stop: [{ hooks: [{ type: 'command', command: 'node /old/place/engram/bin/engram.js hook stop' }] }],
      SessionEnd: [{ hooks: [{ type: 'command', command: '"$CLAUDE_PROJECT_DIR/node_modules/engram-linux-x64-gnu/engram-hook" session-end --root "$CLAUDE_PROJECT_DIR"' }] }],
    },
  }
  writeFileSync(settingsPath(root), `${JSON.stringify(existing, null, 4)}\n`)
  writeFileSync(join(root, '.mcp.json'), JSON.stringify({ mcpServers: { github: { command: 'gh-mcp' } } }))
  const r = install(root, ['--agent', 'claude-code', '--yes'])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, / {2}- +"command": "node \/old\/place\/engram\/bin\/engram\.js hook stop"/, 'the diff shows what goes')
  const text = readFileSync(settingsPath(root), 'utf8')
  assert.match(text, /\n {4}"model"/, 'its indent is kept')
  const settings = JSON.parse(text)
  assert.equal(settings.model, 'opus')
  assert.deepEqual(settings.permissions, existing.permissions)
  assert.deepEqual(settings.hooks.Notification, existing.hooks.Notification)
  assert.deepEqual(settings.hooks.PostToolUse[0], { matcher: 'Edit|Write', hooks: [prettier] })
  for (const event of EVENTS) assert.equal(engramCommands(settings, event).length, 1, `one engram hook on ${event}`)
  assert.equal(settings.hooks.Stop.length, 1, 'the group the old hook emptied is gone')
  assert.doesNotMatch(text, /engram-linux-x64-gnu/, 'an earlier native hook is replaced too')
  assert.deepEqual(JSON.parse(readFileSync(join(root, '.mcp.json'), 'utf8')).mcpServers, {
    github: { command: 'gh-mcp' },
    engram: { command: 'npx', args: ['engram', 'mcp'] },
  })
  assert.match(install(root, ['--agent', 'claude-code', '--yes']).stdout, /already installed/)
})

test('hook install without engram in the project names this copy; bad arguments are usage errors', (t) => {
  const root = tempDir(t)
  const r = install(root, ['--agent', 'claude-code', '--yes', '--settings', join(root, 'local.json')])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /this machine's copy/)
  const settings = JSON.parse(readFileSync(join(root, 'local.json'), 'utf8'))
  const runner = WINDOWS ? `node ${bin} hook` : join(repo, 'bin', 'engram-hook')
  assert.equal(settings.hooks.Stop[0].hooks[0].command, `${runner} stop --root "$CLAUDE_PROJECT_DIR"`)
  assert.deepEqual(JSON.parse(readFileSync(join(root, '.mcp.json'), 'utf8')).mcpServers.engram, { command: 'node', args: [bin, 'mcp'] })
  assert.ok(!existsSync(settingsPath(root)))

  const bad = install(root, ['--agent', 'cursor'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /--agent must be one of: claude-code \(got "cursor"\)/)
  assert.equal(install(root, []).code, 2)
  assert.equal(install(root, ['--agent', 'claude-code', '--bogus']).code, 2)
  writeFileSync(join(root, 'broken.json'), '{ "hooks": ')
  const broken = install(root, ['--agent', 'claude-code', '--yes', '--settings', join(root, 'broken.json')])
  assert.equal(broken.code, 1)
  assert.match(broken.stderr, /broken\.json is not valid JSON/)
  assert.equal(readFileSync(join(root, 'broken.json'), 'utf8'), '{ "hooks": ', 'left as it was')
})
