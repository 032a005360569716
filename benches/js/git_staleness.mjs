// The git staleness pass at issue 37's scale: a repository of 5,000 commits over 500 files
// (made with `git fast-import`; engram reads it in-process), 10,000 memories written at 200
// distinct commits spread over the history (a tenth of them abbreviated), each about one to
// three files. Then, in one run:
// - the first pass after the memories are written (every memory whose files changed since its
//   commit is lowered and its files recorded: the pass that writes most);
// - later passes over the same history (nothing new to count: reading the memories and the
//   history, diffing 200 trees against HEAD), medians of 7;
// - one more commit touching 10 files, and the pass that counts it.
// Target: the pass over 10k memories in a 5,000-commit repository <= 1 s.
//   node benches/js/git_staleness.mjs
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { rng } from './corpus.mjs'

const require = createRequire(import.meta.url)
const { Engram } = require('../../index.js')

const COMMITS = 5_000
const FILES = 500
const MEMORIES = 10_000
const SHAS = 200

const dir = mkdtempSync(join(tmpdir(), 'engram-git-bench-'))
const root = join(dir, 'repo')
const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' }
const git = (args, input) =>
  execFileSync('git', ['-c', 'user.name=b', '-c', 'user.email=b@example.com', ...args], {
    cwd: root,
    env,
    input,
    maxBuffer: 1 << 30,
  }).toString()

const fileName = (i) => `src/m${i % 10}/f${i}.py`
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

try {
  mkdirSync(root, { recursive: true })
  git(['init', '-q'])
  // The history as one fast-import stream: the first commit adds every file, each later one
  // changes one to three of them.
  const pick = rng(7)
  const lines = []
  const data = (text) => `data ${Buffer.byteLength(text)}\n${text}`
  for (let c = 1; c <= COMMITS; c++) {
    lines.push('commit refs/heads/main', `mark :${c}`, `committer b <b@example.com> ${1_700_000_000 + c * 60} +0000`, data(`commit ${c}`))
    if (c > 1) lines.push(`from :${c - 1}`)
    const touched = c === 1 ? [...Array(FILES).keys()] : Array.from({ length: 1 + Math.floor(pick() * 3) }, () => Math.floor(pick() * FILES))
    for (const f of touched) lines.push(`M 100644 inline ${fileName(f)}`, data(`def f${f}():\n    return ${c}\n`))
  }
  let started = performance.now()
  git(['fast-import', '--quiet'], lines.join('\n') + '\n')
  git(['checkout', '-q', 'main'])
  console.log(`git: ${COMMITS} commits over ${FILES} files made in ${(performance.now() - started).toFixed(0)} ms`)
  const shas = git(['rev-list', 'main']).trim().split('\n')
  const chosen = Array.from({ length: SHAS }, (_, i) => shas[Math.floor((i + 0.5) * (shas.length / SHAS))])

  const db = await Engram.open({ path: join(dir, 'git.db'), projectRoot: root, embeddings: { provider: 'none' } })
  let summary = await db.index()
  console.log(`git: ${summary.filesIndexed} files indexed (${summary.durationMs.toFixed(0)} ms)`)
  const batch = Array.from({ length: MEMORIES }, (_, i) => {
    const sha = chosen[i % SHAS]
    return {
      type: 'gotcha',
      content: `memory ${i}: remember how f${i % FILES} rounds its totals`,
      commitSha: i % 10 === 0 ? sha.slice(0, 10) : sha,
      relatedFiles: Array.from({ length: 1 + (i % 3) }, (_, k) => fileName((i * 7 + k * 131) % FILES)),
      confidence: 0.8,
    }
  })
  for (let i = 0; i < batch.length; i += 1000) await db.rememberMany(batch.slice(i, i + 1000))

  const report = (label, git) =>
    console.log(`| ${label} | ${git.checked} | ${git.lowered} | ${git.flaggedForReview} | ${git.unknownCommits} | ${git.durationMs.toFixed(1)} |`)
  console.log('| pass | memories checked | lowered | flagged | unknown commits | ms |\n| --- | --- | --- | --- | --- | --- |')
  summary = await db.index()
  report('first pass (writes)', summary.git)
  const steady = []
  for (let i = 0; i < 7; i++) steady.push((await db.index()).git)
  report(`later passes, nothing new (median of ${steady.length})`, { ...steady[0], durationMs: median(steady.map((g) => g.durationMs)) })
  for (let f = 0; f < 10; f++) writeFileSync(join(root, fileName(f * 37)), `def f():\n    return -${f}\n`)
  git(['commit', '-q', '-am', 'ten files'])
  summary = await db.index()
  report('after a commit of 10 files', summary.git)
  await db.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}
