// The MemoryObserver across the JS boundary (what an agent loop pays): observe() per message,
// timed one call at a time, over realistic 500-step sessions, and finalize() of a 500-step
// session on a database holding earlier sessions' counts. The session mix is the criterion
// bench's (benches/observer.rs): per step a reasoning message (1 in 25 a self-correction),
// one or two tool calls over 120 files in 12 modules (Read 45 % with 2-20 KB results, Grep
// 15 %, Edit 20 %, Bash 15 % with 1 in 10 failing, Glob 5 %) and a step-complete.
//   node benches/js/observer.mjs
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { hrtime } from 'node:process'

import { splitmix as rng, summary } from './corpus.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const dir = mkdtempSync(join(tmpdir(), 'engram-observer-bench-'))


const ERRORS = [
  "src/api/client.ts(14,31): error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'.",
  "FAIL src/cache/warm.test.ts > warms\nError: ENOENT: no such file or directory, open '/tmp/x/index.json'",
  'error[E0308]: mismatched types\n --> src/lib.rs:10:5',
  'npm ERR! missing script: lint:fix',
  "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'user_id'",
  'Error: SQLITE_BUSY: database is locked',
]
const FILLER = 'const value = compute(input);\n'.repeat(700) // ~21 KB, sliced per read

function agentSession(seed, steps) {
  const below = rng(seed)
  const file = () => { const f = below(120); return `src/m${f % 12}/file${f}.ts` }
  const out = []
  for (let step = 1; step <= steps; step++) {
    out.push({
      type: 'memory:reasoning',
      text: below(25) === 0
        ? `Correction: the handler in module ${below(12)} validates before it parses, not after.`
        : 'I will look at how the request flows through the service and where the cache is filled, then change the handler.'.repeat(3),
      stepIndex: step,
    })
    for (let k = 0; k < 1 + below(2); k++) {
      const roll = below(100)
      if (roll < 45) {
        out.push({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: file() }, stepIndex: step })
        out.push({ type: 'memory:tool-result', toolName: 'Read', result: FILLER.slice(0, 2000 + below(18000)), isError: false, stepIndex: step })
      } else if (roll < 60) {
        out.push({ type: 'memory:tool-call', toolName: 'Grep', args: { pattern: `handle${below(40)}`, path: 'src' }, stepIndex: step })
        out.push({ type: 'memory:tool-result', toolName: 'Grep', result: `${file()}:12:  handle()\n${file()}:40:  handle()\n`, isError: false, stepIndex: step })
      } else if (roll < 80) {
        out.push({ type: 'memory:tool-call', toolName: 'Edit', args: { file_path: file(), old_string: `old ${below(1000)}`, new_string: `new ${below(1000)}` }, stepIndex: step })
        out.push({ type: 'memory:tool-result', toolName: 'Edit', result: 'The file has been updated.', isError: false, stepIndex: step })
      } else if (roll < 95) {
        const failing = below(10) === 0
        const command = ['npm run build', 'npm test', 'npx tsc --noEmit', 'npm run lint'][below(4)]
        out.push({ type: 'memory:tool-call', toolName: 'Bash', args: { command, description: 'check' }, stepIndex: step })
        out.push({ type: 'memory:tool-result', toolName: 'Bash', result: failing ? ERRORS[below(ERRORS.length)] : 'ok\n'.repeat(100), isError: failing, stepIndex: step })
      } else {
        out.push({ type: 'memory:tool-call', toolName: 'Glob', args: { pattern: 'src/**/*.test.ts' }, stepIndex: step })
        out.push({ type: 'memory:tool-result', toolName: 'Glob', result: Array.from({ length: 20 }, (_, i) => `src/m${i}/a.test.ts`).join('\n'), isError: false, stepIndex: step })
      }
    }
    out.push({ type: 'memory:step-complete', stepNumber: step, inputTokens: 4000 + step * 40 })
  }
  out.push({ type: 'memory:session-complete', outcome: 'success', stepsExecuted: steps })
  return out
}

const SESSIONS = 20
try {
  const db = await Engram.open({ path: join(dir, 'observer.db') })
  // Warm-up (JIT, allocator) on sessions that are finalized like the measured ones.
  for (let i = 0; i < 3; i++) {
    const s = db.observe({ sessionId: `warm-${i}` })
    for (const m of agentSession(100 + i, 500)) s.observe(m)
    await s.finalize()
  }
  const perMessage = []
  const byType = {}
  const finalizeNs = []
  let messages = 0
  for (let i = 0; i < SESSIONS; i++) {
    const session = agentSession(1000 + i, 500)
    const s = db.observe({ sessionId: `bench-${i}` })
    for (const m of session) {
      const t0 = hrtime.bigint()
      s.observe(m)
      const ns = hrtime.bigint() - t0
      perMessage.push(ns)
      ;(byType[m.type] ??= []).push(ns)
    }
    messages += session.length
    const t0 = hrtime.bigint()
    await s.finalize()
    finalizeNs.push(hrtime.bigint() - t0)
  }
  // observeMany: one crossing for a step's messages.
  const many = []
  {
    const session = agentSession(5000, 500)
    const s = db.observe({ sessionId: 'many' })
    const batch = 50
    for (let i = 0; i < session.length; i += batch) {
      const slice = session.slice(i, i + batch)
      const t0 = hrtime.bigint()
      s.observeMany(slice)
      many.push((hrtime.bigint() - t0) / BigInt(slice.length))
    }
    await s.finalize()
  }
  const fmt = (o) => `p50 ${o.p50_us.toFixed(2)} us, p99 ${o.p99_us.toFixed(2)} us, max ${o.max_us.toFixed(0)} us (n=${o.n})`
  console.log(`observe(), ${SESSIONS} sessions x 500 steps, ${messages} messages, one call timed at a time:`)
  console.log(`  all messages: ${fmt(summary(perMessage))}`)
  for (const [type, ns] of Object.entries(byType)) console.log(`  ${type.padEnd(24)} ${fmt(summary(ns))}`)
  console.log(`  observeMany (50 per call), per message: ${fmt(summary(many))}`)
  const f = summary(finalizeNs)
  console.log(`finalize(), 500-step session: p50 ${(f.p50_us / 1000).toFixed(2)} ms, p99 ${(f.p99_us / 1000).toFixed(2)} ms, max ${(f.max_us / 1000).toFixed(2)} ms (n=${f.n})`)
  await db.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}
