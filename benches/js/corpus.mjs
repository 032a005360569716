// Deterministic synthetic memories and queries for benchmarks: programming vocabulary in
// sentence-like combinations, so FTS term statistics resemble real notes.
const WORDS = (
  'auth token refresh session cookie database migration schema index query cache redis queue worker ' +
  'thread pool connection timeout retry backoff error panic exception stack trace log metric ' +
  'deploy docker container kubernetes config env variable secret build compile test fixture mock ' +
  'route handler middleware request response header json parse serialize stream buffer file path ' +
  'module import export function class method interface type generic trait async await promise ' +
  'lock mutex race deadlock transaction commit rollback replica sync offline network socket http ' +
  'graph node edge closure impact search rank embedding vector chunk prefix budget token limit'
).split(' ')

export function rng(seed = 42) {
  let s = seed >>> 0 || 1
  return () => {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    return (s >>> 0) / 4294967296
  }
}

export function sentence(rand, min = 8, max = 24) {
  const n = min + Math.floor(rand() * (max - min))
  const out = []
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(rand() * WORDS.length)])
  return out.join(' ')
}

const TYPES = ['gotcha', 'decision', 'pattern', 'error_pattern', 'module_insight', 'preference']

export function memories(count, seed = 7) {
  const rand = rng(seed)
  return Array.from({ length: count }, (_, i) => ({
    type: TYPES[i % TYPES.length],
    content: `${sentence(rand)} (#${i})`,
    tags: [WORDS[Math.floor(rand() * WORDS.length)]],
    relatedFiles: [`src/${WORDS[Math.floor(rand() * WORDS.length)]}/${i % 97}.ts`],
  }))
}

export function queries(count, seed = 99) {
  const rand = rng(seed)
  return Array.from({ length: count }, (_, i) => sentence(rand, 1 + (i % 5), 2 + (i % 5)))
}

export function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

export function summary(samplesNs) {
  const s = samplesNs.map(Number).sort((a, b) => a - b)
  const us = (ns) => ns / 1000
  return { n: s.length, p50_us: us(percentile(s, 50)), p99_us: us(percentile(s, 99)), max_us: us(s[s.length - 1]) }
}
