// A tree of real source code for the JS benches that need one at scale (recall.mjs, mcp.mjs):
// the CPython standard library installed here, then the `src/` of crates in the cargo registry.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join, relative } from 'node:path'

export function pythonStdlib() {
  const found = readdirSync('/usr/lib')
    .filter((d) => /^python3\.\d+$/.test(d) && existsSync(join('/usr/lib', d, 'os.py')))
    .sort()
  return found.length ? join('/usr/lib', found.at(-1)) : null
}

export function lineCount(file) {
  const text = readFileSync(file)
  let n = 0
  for (const byte of text) if (byte === 10) n++
  return n
}

/**
 * A tree of about `wantLines` lines of real code in `target`: the CPython standard library,
 * then the `src/` of crates in the cargo registry (by name) until the count is reached.
 */
export function buildCorpus(target, wantLines) {
  let lines = 0
  const copy = (from, to, ext) => {
    for (const rel of sourceFiles(from, ext)) {
      const dest = join(target, to, rel)
      mkdirSync(dirname(dest), { recursive: true })
      copyFileSync(join(from, rel), dest)
      lines += lineCount(join(from, rel))
    }
  }
  const python = pythonStdlib()
  if (python) copy(python, 'python', /\.py$/)
  const registry = join(process.env.CARGO_HOME ?? join(homedir(), '.cargo'), 'registry', 'src')
  for (const index of existsSync(registry) ? readdirSync(registry).sort() : []) {
    for (const crate of readdirSync(join(registry, index)).sort()) {
      if (lines >= wantLines) break
      const src = join(registry, index, crate, 'src')
      if (existsSync(src) && !/^(windows|linux-raw-sys)/.test(crate)) copy(src, join('crates', crate), /\.rs$/)
    }
  }
  return lines
}

/** Project-relative paths of the source files under `root` the indexer would take. */
export function sourceFiles(root, ext = /\.(py|ts|js|rs|go)$/) {
  const out = []
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      if (name.startsWith('.') || name === 'node_modules' || name === '__pycache__') continue
      const path = join(dir, name)
      const stat = statSync(path, { throwIfNoEntry: false })
      if (stat?.isDirectory()) walk(path)
      else if (stat?.isFile() && ext.test(name)) out.push(relative(root, path))
    }
  }
  walk(root)
  return out.sort()
}

/** Identifiers and descriptions of things in the CPython standard library: queries for the tree. */
export const IDENTIFIERS = [
  'urlopen', 'JSONDecoder.decode', 'ThreadPoolExecutor', 'deepcopy', 'namedtuple', 'shutil.rmtree',
  'SequenceMatcher', 'getaddrinfo', 'TarFile.extractall', 'HTTPConnection.request', 'lru_cache',
  'Popen.communicate', 'ZipFile', 'strptime', 'heappush', 'EmailMessage',
]
export const DESCRIPTIONS = [
  'parse a date string into a datetime',
  'copy a directory tree recursively',
  'read a csv file row by row',
  'retry a network connection after a timeout',
  'compress data with gzip',
  'walk the abstract syntax tree of a module',
  'escape html special characters',
  'compare two sequences and show the differences',
  'run a subprocess and capture its output',
  'thread safe queue for producers and consumers',
  'decode base64 encoded bytes',
  'format a number with thousands separators',
]
