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

/** splitmix64 over BigInt: deterministic, like the Rust benches' generator (not the same
 * stream use). Returns `below(n)`: an integer in 0..n. */
export function splitmix(seed) {
  let state = BigInt(seed)
  const mask = (1n << 64n) - 1n
  return (n) => {
    state = (state + 0x9e3779b97f4a7c15n) & mask
    let z = state
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask
    z ^= z >> 31n
    return Number(z % BigInt(n))
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

// A realistic corpus: Zipf-distributed words (exponent 1) over a 4,000-term vocabulary whose
// head is English function words (which the query builder drops, as real queries contain
// them), then the programming words, then pronounceable pseudo-words standing in for
// identifiers and domain terms. Queries take 1-5 distinct words of a random memory (what an
// agent looks for usually exists), leaving out function words; every 5th query swaps one word for one that occurs
// nowhere, which exercises the relaxed fallback passes.
// The Rust bench (benches/memory.rs) implements the same generator.
const FUNCTION_WORDS = (
  'the to a of and in is for it that on with as be this are by from at or an not can if ' +
  'when we use should which have do has was will into so then but its there their our these'
).split(' ')
const VOCABULARY_SIZE = 4000

function pseudoWord(i) {
  const consonants = 'bcdfghklmnprstvz'
  const vowels = 'aeiou'
  const syllable = (k) => consonants[k % 16] + vowels[Math.floor(k / 16) % 5]
  let word = syllable(i % 80) + syllable(Math.floor(i / 80) % 80)
  if (i >= 6400) word += syllable(Math.floor(i / 6400) % 80)
  return word
}

export const zipfVocabulary = (() => {
  const seen = new Set()
  const vocab = []
  for (const w of [...FUNCTION_WORDS, ...WORDS]) if (!seen.has(w)) seen.add(w) && vocab.push(w)
  for (let i = 0; vocab.length < VOCABULARY_SIZE; i++) vocab.push(pseudoWord(i))
  return vocab
})()

const zipfCumulative = (() => {
  let total = 0
  return zipfVocabulary.map((_, rank) => (total += 1 / (rank + 1)))
})()

function zipfWord(rand) {
  const target = rand() * zipfCumulative[zipfCumulative.length - 1]
  let lo = 0
  let hi = zipfCumulative.length - 1
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (zipfCumulative[mid] < target) lo = mid + 1
    else hi = mid
  }
  return zipfVocabulary[lo]
}

function zipfSentence(rand, min = 8, max = 24) {
  const n = min + Math.floor(rand() * (max - min))
  return Array.from({ length: n }, () => zipfWord(rand)).join(' ')
}

export function zipfMemories(count, seed = 7) {
  const rand = rng(seed)
  return Array.from({ length: count }, (_, i) => ({
    type: TYPES[i % TYPES.length],
    content: `${zipfSentence(rand)} (#${i})`,
    tags: [WORDS[Math.floor(rand() * WORDS.length)]],
    relatedFiles: [`src/${zipfWord(rand)}/${i % 97}.ts`],
  }))
}

export function zipfQueries(corpus, count, seed = 99) {
  const rand = rng(seed)
  return Array.from({ length: count }, (_, i) => {
    const words = corpus[Math.floor(rand() * corpus.length)].content
      .split(' ')
      .slice(0, -1)
      .filter((w) => !FUNCTION_WORDS.includes(w))
    if (words.length === 0) words.push(zipfWord(rand))
    const want = Math.min(1 + (i % 5), new Set(words).size)
    const picked = new Set()
    while (picked.size < want) picked.add(words[Math.floor(rand() * words.length)])
    const out = [...picked]
    if (i % 5 === 4) out[out.length - 1] = `qqx${i}`
    return out.join(' ')
  })
}

export function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

export function summary(samplesNs) {
  const s = samplesNs.map(Number).sort((a, b) => a - b)
  const us = (ns) => ns / 1000
  return { n: s.length, p50_us: us(percentile(s, 50)), p99_us: us(percentile(s, 99)), max_us: us(s[s.length - 1]) }
}
