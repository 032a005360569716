// What the remote providers cost on our side (no model time): embedPending() over this
// repository's chunks through (a) a JS callback and (b) a loopback server speaking OpenAI's
// /v1/embeddings, both answering precomputed 768-d vectors, so the figures are the
// client's overhead: batching, JSON or boundary crossings, checks, normalising and storing.
// Reports chunks/s and ms per 64-text batch, and denseSearch() p50 per provider.
//   node benches/js/providers.mjs [root]
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { hrtime } from 'node:process'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')
const root = resolve(process.argv[2] ?? join(import.meta.dirname, '..', '..', 'src'))
const dir = mkdtempSync(join(tmpdir(), 'engram-providers-bench-'))
const DIMS = 768

// One fixed pseudo-random vector per text length: cheap to produce, varied enough to rank.
const table = Array.from({ length: 997 }, (_, i) => {
  const v = new Float32Array(DIMS)
  let x = i + 1
  for (let d = 0; d < DIMS; d++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0
    v[d] = (x / 2 ** 32) - 0.5
  }
  return v
})
const vectorOf = (text) => table[text.length % table.length]
const asJson = table.map((v) => JSON.stringify(Array.from(v)))

const server = createServer((req, res) => {
  let body = ''
  req.on('data', (c) => (body += c))
  req.on('end', () => {
    const { input } = JSON.parse(body)
    const data = input.map((text, index) => `{"object":"embedding","index":${index},"embedding":${asJson[text.length % asJson.length]}}`)
    res.setHeader('content-type', 'application/json')
    res.end(`{"object":"list","data":[${data.join(',')}],"model":"bench"}`)
  })
})
await new Promise((r) => server.listen(0, '127.0.0.1', r))
const baseUrl = `http://127.0.0.1:${server.address().port}/v1`

async function run(name, embeddings) {
  const db = await Engram.open({ path: join(dir, `${name}.db`), projectRoot: root, embeddings })
  await db.index()
  const started = hrtime.bigint()
  const report = await db.embedPending()
  const secs = Number(hrtime.bigint() - started) / 1e9
  const times = []
  for (let i = 0; i < 200; i++) {
    const t = hrtime.bigint()
    await db.denseSearch(`query number ${i} about code`, { limit: 10 })
    times.push(Number(hrtime.bigint() - t) / 1e6)
  }
  times.sort((a, b) => a - b)
  const batches = Math.ceil(report.textsEmbedded / 64)
  console.log(
    `${name.padEnd(9)} ${report.chunks} chunks (${report.textsEmbedded} texts) in ${secs.toFixed(2)} s: ` +
      `${(report.chunks / secs).toFixed(0)} chunks/s, ${((secs * 1000) / batches).toFixed(1)} ms per 64-text batch; ` +
      `denseSearch p50 ${times[100].toFixed(2)} ms, p99 ${times[198].toFixed(2)} ms`,
  )
  await db.close()
}

try {
  await run('callback', { model: 'bench', embed: (texts) => texts.map(vectorOf) })
  await run('openai', { provider: 'openai', model: 'bench', baseUrl })
} finally {
  server.close()
  rmSync(dir, { recursive: true, force: true })
}
