// The package as a user meets it: the packed tarballs installed into a fresh project outside
// the repository (its own package.json), then loaded from CommonJS and ESM, type-checked by a
// strict tsc under node16 and bundler resolution, and used end to end. Fails if a tarball lacks
// anything a user needs.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, before, after } from 'node:test'

import { repo, tarballs } from './tarballs.mjs'

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
let project
let packages

/** A fresh project dir outside the repository with `files` written into it. */
function freshProject(name, files = {}) {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `engram-${name}-`)))
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }))
  for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text)
  return dir
}

function npmInstall(dir, specs) {
  execFileSync(npm, ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...specs], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'inherit'],
  })
}

/** Runs node in the project with the per-user model cache pointed at an empty dir. */
function runNode(args, env = {}) {
  const result = spawnSync(process.execPath, args, {
    cwd: project,
    encoding: 'utf8',
    env: { ...process.env, ENGRAM_CACHE_DIR: join(project, 'empty-cache'), ENGRAM_MODEL_DIR: '', ...env },
  })
  assert.equal(result.status, 0, `node ${args.join(' ')} failed:\n${result.stdout}\n${result.stderr}`)
  return result.stdout
}

before(() => {
  packages = tarballs()
  project = freshProject('consumer')
  const started = process.hrtime.bigint()
  npmInstall(project, [packages.root, packages.platform, ...(packages.model ? [packages.model] : [])])
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  const sizes = Object.fromEntries(Object.entries(packages).filter(([, p]) => p).map(([k, p]) => [k, `${(readFileSync(p).length / 1e6).toFixed(1)} MB`]))
  console.log(`# tarballs ${JSON.stringify(sizes)}; npm install into a fresh project: ${ms.toFixed(0)} ms`)
})

after(() => {
  if (project) rmSync(project, { recursive: true, force: true })
})

test('the tarballs carry what a user needs and nothing of the repository', () => {
  const list = (tgz) => execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).split('\n').filter(Boolean)
  const root = list(packages.root)
  for (const f of ['index.js', 'binding.js', 'index.d.ts', 'bin/engram.js', 'LICENSE', 'README.md', 'package.json']) {
    assert.ok(root.includes(`package/${f}`), `root tarball lacks ${f}: ${root.join(', ')}`)
  }
  assert.ok(!root.some((f) => /\.node$|^package\/(src|target|__test__)\//.test(f)), root.join(', '))
  const platform = list(packages.platform)
  assert.ok(platform.some((f) => /^package\/engram\.[\w-]+\.node$/.test(f)), platform.join(', '))
  assert.ok(platform.includes('package/LICENSE'))
  const name = platform.find((f) => f.endsWith('.node')).slice('package/'.length)
  const pkg = JSON.parse(execFileSync('tar', ['-xzOf', packages.platform, 'package/package.json'], { encoding: 'utf8' })).name
  const binary = readFileSync(join(project, 'node_modules', pkg, name))
  if (binary.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) {
    assert.ok(!elfSectionTypes(binary).includes(SHT_SYMTAB), 'the shipped binary is stripped (no .symtab)')
  }
})

const SHT_SYMTAB = 2

/** The section types of a 64-bit little-endian ELF file (enough to tell a stripped one). */
function elfSectionTypes(elf) {
  const offset = Number(elf.readBigUInt64LE(0x28))
  const size = elf.readUInt16LE(0x3a)
  const count = elf.readUInt16LE(0x3c)
  return Array.from({ length: count }, (_, i) => elf.readUInt32LE(offset + i * size + 4))
}

test('CommonJS require and the CLI work from the installed package', () => {
  const out = runNode(['-e', `
    const engram = require('engram')
    if (typeof engram.Engram.open !== 'function') throw new Error('no Engram.open')
    if (engram.ErrorCode.NotFound !== 'ENGRAM_NOT_FOUND') throw new Error('ErrorCode is not a value')
    if (Object.keys(engram).some((k) => k.startsWith('__') && k !== '__napiBindingTarget')) throw new Error('internal hooks exported')
    console.log(require.resolve('engram'))
  `])
  assert.match(out, /node_modules[\\/]engram[\\/]index\.js/)
  const cli = join(project, 'node_modules', '.bin', 'engram')
  const help = execFileSync(cli, ['--help'], { encoding: 'utf8' })
  assert.match(help, /engram model install/)
})

test('ESM named imports resolve through the CommonJS entry', () => {
  writeFileSync(join(project, 'esm.mjs'), `
    import { Engram, ErrorCode, installModel, builtinModel } from 'engram'
    import engram from 'engram'
    if (Engram !== engram.Engram) throw new Error('named and default exports differ')
    if (typeof installModel !== 'function' || builtinModel().files.length !== 3) throw new Error('model API missing')
    console.log(ErrorCode.Aborted)
  `)
  assert.equal(runNode(['esm.mjs']).trim(), 'ENGRAM_ABORTED')
})

for (const resolution of ['node16', 'bundler']) {
  test(`strict tsc --noEmit type-checks a consumer under moduleResolution ${resolution}`, () => {
    const dir = join(project, `ts-${resolution}`)
    mkdirSync(dir, { recursive: true })
    const module = resolution === 'node16' ? 'node16' : 'esnext'
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2022', module, moduleResolution: resolution, strict: true, noEmit: true,
        skipLibCheck: false, types: ['node'], typeRoots: [join(repo, 'node_modules', '@types')],
      },
      files: ['main.ts'],
    }))
    writeFileSync(join(dir, 'main.ts'), `
      import { Engram, ErrorCode, installModel, type RecallResult, type ModelDownloadProgress } from 'engram'
      export async function run(root: string): Promise<RecallResult> {
        const memory = await Engram.open({ path: root + '/memory.db', projectRoot: root })
        await memory.remember({ type: 'gotcha', content: 'x' })
        const result = await memory.recall('x', { budgetTokens: 500 })
        await memory.close()
        return result
      }
      export function isNotFound(err: unknown): boolean {
        return (err as { code?: string }).code === ErrorCode.NotFound
      }
      export const progress = (p: ModelDownloadProgress): number => p.bytes / p.total
      export const install = () => installModel({ onProgress: progress, signal: AbortSignal.timeout(1000) })
      // @ts-expect-error: not a memory type
      export const bad = (m: Engram) => m.remember({ type: 'bogus', content: 'x' })
    `)
    const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc')
    const result = spawnSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8' })
    assert.equal(result.status, 0, `tsc (${resolution}) failed:\n${result.stdout}${result.stderr}`)
  })
}

test('a script opens, remembers, indexes a small tree, recalls and closes', () => {
  const tree = join(project, 'tree', 'src')
  mkdirSync(tree, { recursive: true })
  writeFileSync(join(tree, 'tokens.ts'), 'export function refreshToken(token: string): string {\n  return token.trim()\n}\n')
  writeFileSync(join(tree, 'db.py'), 'def open_database(path):\n    """Opens the database at path."""\n    return path\n')
  writeFileSync(join(project, 'main.cjs'), `
    const { Engram } = require('engram')
    ;(async () => {
      const root = require('node:path').join(__dirname, 'tree')
      const memory = await Engram.open({ path: root + '/.engram/memory.db', projectRoot: root })
      await memory.remember({ type: 'gotcha', content: 'Refresh the token before it expires', relatedFiles: ['src/tokens.ts'] })
      const summary = await memory.index()
      const result = await memory.recall('refresh token', { budgetTokens: 800 })
      const status = memory.embeddingStatus()
      await memory.close()
      console.log(JSON.stringify({ files: summary.filesIndexed, items: result.items.map((i) => i.kind + ':' + (i.path ?? i.id)), status }))
    })().catch((err) => { console.error(err.code, err.message); process.exit(1) })
  `)
  const out = JSON.parse(runNode(['main.cjs']).trim().split('\n').pop())
  assert.equal(out.files, 2, JSON.stringify(out))
  assert.ok(out.items.some((i) => i.startsWith('memory:')), JSON.stringify(out.items))
  assert.ok(out.items.some((i) => i.includes('src/tokens.ts')), JSON.stringify(out.items))
  if (packages.model) {
    // The per-user cache is empty in this child, so the model came from the npm package.
    assert.notEqual(out.status.state, 'unavailable', JSON.stringify(out.status))
    assert.match(out.status.modelDir, /node_modules[\\/]engram-model-all-minilm-l6-v2/)
  } else {
    assert.equal(out.status.state, 'unavailable')
  }
})

test('engram mcp runs from the installed package and lists its tools to an SDK client', () => {
  // The SDK is one of engram's dependencies, so the project can reach it too.
  writeFileSync(join(project, 'mcp-client.mjs'), `
    import { Client } from '@modelcontextprotocol/sdk/client/index.js'
    import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['node_modules/engram/bin/engram.js', 'mcp', '--no-index', '--root', 'tree', '--db', 'mcp.db'],
      stderr: 'ignore',
    })
    const client = new Client({ name: 'package-test', version: '1.0.0' })
    await client.connect(transport)
    const { tools } = await client.listTools()
    console.log(tools.map((t) => t.name).sort().join(','))
    await client.close()
  `)
  mkdirSync(join(project, 'tree'), { recursive: true })
  const names = runNode(['mcp-client.mjs']).trim().split(',')
  assert.ok(names.includes('recall') && names.includes('remember'), names.join(','))
})

test('hook install in the project writes bin/engram-hook, which runs the native launcher without Node', { skip: process.platform !== 'linux' }, () => {
  const cli = join(project, 'node_modules', '.bin', 'engram')
  const shown = execFileSync(cli, ['hook', 'install', '--agent', 'claude-code', '--root', project, '--yes'], { encoding: 'utf8' })
  assert.match(shown, /hooks run: "\$CLAUDE_PROJECT_DIR\/node_modules\/engram\/bin\/engram-hook" <event> --root "\$CLAUDE_PROJECT_DIR" \(native here, no Node\)/)
  const settings = JSON.parse(readFileSync(join(project, '.claude', 'settings.json'), 'utf8'))
  const command = settings.hooks.SessionStart[0].hooks[0].command
  // As Claude Code runs it: through a shell, in the project, with CLAUDE_PROJECT_DIR set.
  const run = (id, addon) => spawnSync('sh', ['-c', command], {
    cwd: project,
    input: JSON.stringify({ session_id: id, hook_event_name: 'SessionStart', cwd: project, source: 'startup' }),
    encoding: 'utf8',
    env: { ...process.env, CLAUDE_PROJECT_DIR: project, ENGRAM_EMBED_PROVIDER: 'none', ENGRAM_ADDON: addon },
  })
  const log = join(project, '.engram', 'hooks', 'hook.log')
  // The native launcher is what runs: pointed at an addon that is not there, it says so.
  const missing = run('pkg-probe', '/nowhere/engram.node')
  assert.equal(missing.status, 0)
  assert.match(readFileSync(log, 'utf8'), /ENGRAM_NO_BINARY: engram-hook: cannot load \/nowhere\/engram\.node/)
  rmSync(log)
  // Left alone, it finds the addon next to it in the platform package and runs the hook.
  const started = run('pkg-session', '')
  assert.equal(started.status, 0, started.stderr)
  assert.equal(started.stderr, '', 'the launcher found the addon next to it')
  const registry = JSON.parse(readFileSync(join(project, '.engram', 'hooks', 'sessions.json'), 'utf8'))
  assert.ok(registry['pkg-session'] > 0, 'the session was registered')
  assert.ok(existsSync(join(project, '.engram', 'memory.db')), 'the database was opened where the README says')
  assert.ok(!existsSync(log), 'nothing failed')
})

test('without its platform package, require names the package to install', () => {
  const bare = freshProject('bare')
  try {
    npmInstall(bare, [packages.root])
    const result = spawnSync(process.execPath, ['-e', `
      try { require('engram') } catch (err) { console.log(JSON.stringify({ code: err.code, message: err.message })); process.exit(0) }
      process.exit(3)
    `], { cwd: bare, encoding: 'utf8' })
    assert.equal(result.status, 0, result.stderr)
    const err = JSON.parse(result.stdout)
    assert.equal(err.code, 'ENGRAM_NO_BINARY')
    const platformName = execFileSync('tar', ['-xzOf', packages.platform, 'package/package.json'], { encoding: 'utf8' })
    const { name, version } = JSON.parse(platformName)
    assert.ok(err.message.includes(`npm install ${name}@${version}`), err.message)
  } finally {
    rmSync(bare, { recursive: true, force: true })
  }
})
