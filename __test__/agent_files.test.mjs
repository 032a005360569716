// The agent-file bridge across the JS boundary: import CLAUDE.md / AGENTS.md / .cursorrules,
// export the hot tier as a generated section, import a hand edit of it back, and refuse bad
// input with codes. (The reconciliation rules are covered case by case in the Rust tests.)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { Engram, tempDir, rejectsWithCode } from './helpers.mjs'

const fixtures = fileURLToPath(new URL('../tests/fixtures/agent_files/', import.meta.url))

async function open(t) {
  const root = join(tempDir(t), 'repo')
  mkdirSync(root, { recursive: true })
  for (const name of ['CLAUDE.md', 'AGENTS.md', '.cursorrules']) copyFileSync(join(fixtures, name), join(root, name))
  const db = await Engram.open({ path: join(root, '..', 'memory.db'), projectRoot: root, embeddings: { provider: 'none' } })
  t.after(() => db.close())
  return { db, root }
}

test('agent files import as typed memories, and importing again changes nothing', async (t) => {
  const { db } = await open(t)
  const { files } = await db.importAgentFiles()
  assert.deepEqual(files.map((f) => [f.path, f.kind, f.found, f.created.length]), [
    ['CLAUDE.md', 'claude_md', true, 9],
    ['AGENTS.md', 'agents_md', true, 6],
    ['.cursorrules', 'cursorrules', true, 6],
  ])
  assert.equal((await db.get(files[0].created[0])).source, 'user_taught')
  const all = await db.list({ tags: ['agent-file:CLAUDE.md'], limit: 100 })
  assert.equal(all.length, 9)
  const trpc = all.find((m) => m.content.startsWith('We chose tRPC'))
  assert.equal(trpc.type, 'decision')
  assert.equal(trpc.metadata.agentFile.line, 16)
  assert.ok(trpc.pinned && trpc.userVerified)

  const again = await db.importAgentFiles({ files: ['CLAUDE.md'] })
  assert.equal(again.files[0].unchanged, 9)
  assert.deepEqual(again.files[0].created, [])
})

test('the hot tier is exported into the file and a hand edit of it comes back', async (t) => {
  const { db, root } = await open(t)
  const gotcha = await db.remember({ type: 'gotcha', content: 'The payments webhook retries for 72 hours; handlers must be idempotent.', confidence: 0.95 })
  await db.remember({ type: 'preference', content: 'Maybe prefer smaller pull requests.', confidence: 0.5 })
  const before = readFileSync(join(root, 'CLAUDE.md'), 'utf8')

  const dry = await db.exportAgentFile({ write: false })
  assert.equal(dry.written, false)
  assert.equal(readFileSync(join(root, 'CLAUDE.md'), 'utf8'), before)
  assert.deepEqual(dry.memoryIds, [gotcha.memory.id])

  const out = await db.exportAgentFile()
  assert.equal(out.written, true)
  assert.equal(out.minConfidence, 0.8)
  const file = readFileSync(join(root, 'CLAUDE.md'), 'utf8')
  assert.equal(file, dry.text)
  assert.ok(file.startsWith(before))
  assert.match(file, new RegExp(`handlers must be idempotent\\. <!-- engram:id=${gotcha.memory.id} -->`))
  assert.doesNotMatch(file, /smaller pull requests/)

  writeFileSync(join(root, 'CLAUDE.md'), file.replace('handlers must be idempotent.', 'handlers must be idempotent and fast.'))
  const report = await db.importAgentFiles({ files: ['CLAUDE.md'] })
  assert.deepEqual(report.files[0].generatedEdits, [gotcha.memory.id])
  const edited = await db.get(gotcha.memory.id)
  assert.match(edited.content, /idempotent and fast\.$/)
  assert.equal(edited.userVerified, true)
})

test('bad paths, files and options reject with codes', async (t) => {
  const { db, root } = await open(t)
  await rejectsWithCode(assert, db.importAgentFiles({ files: ['../outside.md'] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.importAgentFiles({ files: 'CLAUDE.md' }), 'ENGRAM_INVALID_ARG')
  writeFileSync(join(root, 'binary.md'), Buffer.from([0x2d, 0x20, 0x00, 0x01]))
  await rejectsWithCode(assert, db.importAgentFiles({ files: ['CLAUDE.md', 'binary.md'] }), 'ENGRAM_INVALID_ARG')
  assert.equal((await db.list({ limit: 10 })).length, 0, 'nothing imported')
  await rejectsWithCode(assert, db.exportAgentFile({ limit: 500 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.exportAgentFile({ types: ['rules'] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, db.exportAgentFile({ file: '/etc/hosts' }), 'ENGRAM_INVALID_ARG')

  const bare = await Engram.open({ path: join(tempDir(t), 'bare.db'), embeddings: { provider: 'none' } })
  t.after(() => bare.close())
  await rejectsWithCode(assert, bare.exportAgentFile(), 'ENGRAM_INVALID_ARG')
})
