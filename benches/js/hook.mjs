// One Claude Code hook end to end: `engram hook <event>` as the child process Claude Code
// starts (process start, addon load, open, resume the session's checkpoint, observe, checkpoint,
// exit), per event kind, through Node and through the native launcher `engram-hook`, against a project database with MEMORIES memories, a session
// that grows as the rounds go, and a file with gotchas. Then where the time goes: the same
// steps timed inside one child process. Kinds alternate round by round, so drift of the
// machine hits them alike; medians, p90 and p99 over ROUNDS each.
//   node benches/js/hook.mjs [rounds] [memories]
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { memories } from './corpus.mjs'

const ROUNDS = Number(process.argv[2] ?? 40)
const MEMORIES = Number(process.argv[3] ?? 2000)
const BIN = fileURLToPath(new URL('../../bin/engram.js', import.meta.url))
const INDEX_JS = fileURLToPath(new URL('../../index.js', import.meta.url))
const require = createRequire(import.meta.url)
const { Engram } = require(INDEX_JS)

const SESSION = '7d3e9a42-1c5b-4f8e-a0d6-3b9c2e71f548' // in the `full` A/B group

const dir = mkdtempSync(join(tmpdir(), 'engram-hook-bench-'))
const root = join(dir, 'project')
mkdirSync(join(root, 'src', 'db'), { recursive: true })
const poolFile = join(root, 'src', 'db', 'pool.ts')
const poolText = 'export function acquire(n: number) {\n  return Math.min(n, 10)\n}\n'
writeFileSync(poolFile, poolText)
const dbPath = join(root, '.engram', 'memory.db')
mkdirSync(join(root, '.engram'), { recursive: true })

function payload(fields) {
  return JSON.stringify({ session_id: SESSION, transcript_path: join(dir, 'none.jsonl'), cwd: root, permission_mode: 'default', ...fields })
}

/** The native launcher napi build made, loading the repository's addon (Linux). */
const REPO = fileURLToPath(new URL('../..', import.meta.url))
const LAUNCHER = join(REPO, 'target', 'x86_64-unknown-linux-gnu', 'release', 'engram-hook')
const ADDON = readdirSync(REPO).find((f) => /^engram\..+\.node$/.test(f))
const NATIVE = existsSync(LAUNCHER) && ADDON

let toolUse = 0
/** Each event kind's hook arguments and payload. */
const KINDS = {
  'pre-tool-use': () => ({
    args: ['pre-tool-use', '--root', root],
    input: payload({ hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'npm test' }, tool_use_id: `toolu_${++toolUse}` }),
  }),
  'post-tool-use (Bash)': () => ({
    args: ['post-tool-use', '--root', root],
    input: payload({
      hook_event_name: 'PostToolUse',
      tool_name: 'Bash',
      tool_input: { command: `wc -l src/part${toolUse}.ts` },
      tool_response: { stdout: `12 src/part${toolUse}.ts\n`, stderr: '', interrupted: false, isImage: false },
      tool_use_id: `toolu_${++toolUse}`,
    }),
  }),
  'post-tool-use (Read + augment)': () => ({
    args: ['post-tool-use', '--root', root],
    input: payload({
      hook_event_name: 'PostToolUse',
      tool_name: 'Read',
      tool_input: { file_path: poolFile },
      tool_response: { type: 'text', file: { filePath: poolFile, content: poolText, numLines: 3, startLine: 1, totalLines: 3 } },
      tool_use_id: `toolu_${++toolUse}`,
    }),
  }),
  'session-start (sessionContext)': () => ({
    args: ['session-start', '--root', root],
    input: payload({ hook_event_name: 'SessionStart', source: 'startup' }),
  }),
}

/**
 * What the settings `hook install` writes run: bin/engram-hook (a shell script) in an installed
 * layout, engram next to its platform package, which holds the launcher and the addon.
 */
function installedWrapper() {
  const modules = join(dir, 'node_modules')
  mkdirSync(join(modules, 'engram', 'bin'), { recursive: true })
  mkdirSync(join(modules, 'engram-linux-x64-gnu'), { recursive: true })
  copyFileSync(join(REPO, 'bin', 'engram-hook'), join(modules, 'engram', 'bin', 'engram-hook'))
  copyFileSync(LAUNCHER, join(modules, 'engram-linux-x64-gnu', 'engram-hook'))
  symlinkSync(join(REPO, ADDON), join(modules, 'engram-linux-x64-gnu', ADDON))
  return join(modules, 'engram', 'bin', 'engram-hook')
}
const WRAPPER = NATIVE ? installedWrapper() : null

/**
 * What is timed: the floors, then every kind through Node (`engram hook`), natively, and
 * through the settings' script (which runs the launcher here).
 */
const EVENTS = {
  'node -e 0': () => ({ program: process.execPath, args: ['-e', '0'] }),
  ...Object.fromEntries(Object.entries(KINDS).map(([name, make]) => [`node: ${name}`, () => {
    const { args, input } = make()
    return { program: process.execPath, args: [BIN, 'hook', ...args], input }
  }])),
  ...(NATIVE
    ? {
        'native: --version (load only)': () => ({ program: LAUNCHER, args: ['--version'] }),
        ...Object.fromEntries(Object.entries(KINDS).map(([name, make]) => [`native: ${name}`, () => ({ program: LAUNCHER, ...make() })])),
        ...Object.fromEntries(Object.entries(KINDS).map(([name, make]) => [`settings script: ${name}`, () => ({ program: WRAPPER, ...make() })])),
      }
    : {}),
}

// Where the time goes: the hook's steps, timed inside one process (no lock files, no stdin).
const STEPS_CHILD = `
const { performance } = require('node:perf_hooks')
const t = [performance.now()]
const { Engram } = require(process.env.BENCH_INDEX)
t.push(performance.now())
Engram.open({ path: process.env.BENCH_DB, projectRoot: process.env.BENCH_ROOT }).then(async (db) => {
  t.push(performance.now())
  const session = (await db.resumeSession(process.env.BENCH_SESSION)) ?? db.observe({ sessionId: process.env.BENCH_SESSION })
  t.push(performance.now())
  const step = session.snapshot().currentStep + 1
  session.observeMany([
    { type: 'memory:tool-call', toolName: 'Bash', args: { command: 'ls' }, stepIndex: step, toolCallId: 'x' + step },
    { type: 'memory:tool-result', toolName: 'Bash', result: 'a\\nb\\n', stepIndex: step, toolCallId: 'x' + step },
  ])
  t.push(performance.now())
  const saved = await session.checkpoint()
  t.push(performance.now())
  await db.close()
  t.push(performance.now())
  const d = (i) => t[i + 1] - t[i]
  console.log(JSON.stringify({ require: d(0), open: d(1), resume: d(2), observe: d(3), checkpoint: d(4), close: d(5), checkpointBytes: saved.bytes }))
})
`

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}

function summary(samples) {
  const s = [...samples].sort((a, b) => a - b)
  return { p50: quantile(s, 0.5), p90: quantile(s, 0.9), p99: quantile(s, 0.99) }
}

try {
  // The database: MEMORIES memories, two gotchas on pool.ts (confidence above the new
  // project's threshold), the code indexed.
  const db = await Engram.open({ path: dbPath, projectRoot: root })
  const inputs = memories(MEMORIES)
  for (let i = 0; i < inputs.length; i += 500) await db.rememberMany(inputs.slice(i, i + 500))
  await db.remember({ type: 'gotcha', content: 'acquire() caps the pool at ten connections', relatedFiles: ['src/db/pool.ts'], confidence: 0.95 })
  await db.remember({ type: 'dead_end', content: 'Raising the cap to 100 exhausted the connection slots', relatedFiles: ['src/db/pool.ts'], confidence: 0.95 })
  await db.index()
  await db.close()

  const samples = Object.fromEntries(Object.keys(EVENTS).map((k) => [k, []]))
  const steps = []
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, make] of Object.entries(EVENTS)) {
      const { program, args, input } = make()
      const t0 = performance.now()
      const addon = program === LAUNCHER ? join(REPO, ADDON) : ''
      const r = spawnSync(program, args, { input, encoding: 'utf8', env: { ...process.env, ENGRAM_ADDON: addon } })
      samples[name].push(performance.now() - t0)
      if (r.status !== 0) throw new Error(`${name}: exit ${r.status} ${r.stderr}`)
    }
    const r = spawnSync(process.execPath, ['-e', STEPS_CHILD], {
      encoding: 'utf8',
      env: { ...process.env, BENCH_INDEX: INDEX_JS, BENCH_DB: dbPath, BENCH_ROOT: root, BENCH_SESSION: `${SESSION}-steps` },
    })
    if (r.status !== 0) throw new Error(`steps: ${r.stderr}`)
    steps.push(JSON.parse(r.stdout))
  }

  console.log(`engram hook, ${ROUNDS} rounds, ${MEMORIES} memories, one growing session (ms)`)
  console.log('event                                              p50     p90     p99')
  for (const [name, values] of Object.entries(samples)) {
    const s = summary(values)
    console.log(`${name.padEnd(48)} ${s.p50.toFixed(1).padStart(6)}  ${s.p90.toFixed(1).padStart(6)}  ${s.p99.toFixed(1).padStart(6)}`)
  }
  console.log('\nwhere the time goes (inside one process, medians, ms)')
  for (const key of ['require', 'open', 'resume', 'observe', 'checkpoint', 'close']) {
    console.log(`  ${key.padEnd(11)} ${summary(steps.map((s) => s[key])).p50.toFixed(2).padStart(7)}`)
  }
  console.log(`  checkpoint size at the end: ${steps.at(-1).checkpointBytes} bytes`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
