// The installable tarballs the package tests install: the ones in ENGRAM_TARBALLS_DIR when the
// test script packed them once for every test, else packed here by scripts/pack.mjs (with the
// model package when ENGRAM_MODEL_WHEEL names a wheel of the built-in model).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..')

let packed = null

/** `{ root, platform, model? }`: paths of the tarballs, packed at most once per process. */
export function tarballs() {
  if (packed) return packed
  let dir = process.env.ENGRAM_TARBALLS_DIR
  if (!dir) {
    dir = mkdtempSync(join(tmpdir(), 'engram-tarballs-'))
    const made = dir
    process.once('exit', () => rmSync(made, { recursive: true, force: true }))
    const model = process.env.ENGRAM_MODEL_WHEEL
    const args = [join(repo, 'scripts', 'pack.mjs'), '--out', dir]
    if (model && existsSync(model)) args.push('--model', model)
    execFileSync(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] })
  }
  const files = readdirSync(dir).filter((f) => f.endsWith('.tgz'))
  const find = (re) => {
    const name = files.find((f) => re.test(f))
    return name ? join(dir, name) : undefined
  }
  packed = {
    root: find(/^engram-\d/),
    platform: find(/^engram-(linux|darwin|win32)-/),
    model: find(/^engram-model-/),
  }
  if (!packed.root || !packed.platform) throw new Error(`no engram tarballs in ${dir}: ${files.join(', ')}`)
  return packed
}
