// What logging costs at startup: `require` of the addon and `Engram.open` of a new file (which
// runs every migration), each in a fresh child process, with logging off, with
// `ENGRAM_LOG=info` (lines to stderr) and with a `setLogger` sink at info. The modes alternate
// run by run so that drift of the machine hits them alike; medians (and p90) over RUNS each.
//   node benches/js/startup.mjs [runs]
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const RUNS = Number(process.argv[2] ?? 21)
const INDEX_JS = fileURLToPath(new URL('../../index.js', import.meta.url))

// One child: times require, (setLogger,) open, and prints them as JSON.
const CHILD = `
const { performance } = require('node:perf_hooks')
const t0 = performance.now()
const { Engram } = require(process.env.BENCH_INDEX)
const t1 = performance.now()
let lines = 0
if (process.env.BENCH_SINK) Engram.setLogger(() => { lines++ }, { level: 'info' })
const t2 = performance.now()
Engram.open({ path: process.env.BENCH_DB }).then(async (db) => {
  const t3 = performance.now()
  await db.close()
  await new Promise((resolve) => setTimeout(resolve, 20)) // let the sink's lines arrive
  console.log(JSON.stringify({ require: t1 - t0, setLogger: t2 - t1, open: t3 - t2, lines }))
})
`

const MODES = {
  off: {},
  'ENGRAM_LOG=info': { ENGRAM_LOG: 'info' },
  'setLogger (info)': { BENCH_SINK: '1' },
}

const dir = mkdtempSync(join(tmpdir(), 'engram-startup-bench-'))
const samples = Object.fromEntries(Object.keys(MODES).map((m) => [m, []]))
try {
  for (let run = 0; run < RUNS; run++) {
    for (const [mode, env] of Object.entries(MODES)) {
      const result = spawnSync(process.execPath, ['-e', CHILD], {
        env: {
          ...process.env,
          ENGRAM_LOG: '',
          ...env,
          BENCH_INDEX: INDEX_JS,
          BENCH_DB: join(dir, `${run}-${mode.replace(/\W+/g, '_')}.db`),
        },
        encoding: 'utf8',
      })
      if (result.status !== 0) throw new Error(`${mode}: ${result.stderr}`)
      const sample = JSON.parse(result.stdout.trim().split('\n').pop())
      sample.stderrLines = result.stderr.split('\n').filter(Boolean).length
      samples[mode].push(sample)
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}
const ms = (v) => `${v.toFixed(2)} ms`
console.log(`${RUNS} runs per mode, alternating (${process.version}, ${process.platform}-${process.arch})`)
console.log('mode               require p50 (p90)        open p50 (p90)           lines (stderr / sink)')
for (const [mode, list] of Object.entries(samples)) {
  const req = list.map((s) => s.require)
  const open = list.map((s) => s.open)
  console.log(
    `${mode.padEnd(18)} ${`${ms(quantile(req, 0.5))} (${ms(quantile(req, 0.9))})`.padEnd(24)} ` +
      `${`${ms(quantile(open, 0.5))} (${ms(quantile(open, 0.9))})`.padEnd(24)} ` +
      `${list[0].stderrLines} / ${list[0].lines}`,
  )
}
