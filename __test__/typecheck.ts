// Compiled (not run) by `tsc` in the test script: the README's TypeScript usage must type-check
// against the generated index.d.ts, and misuse must not.
import {
  type AgentFileExport,
  type ConsolidateReport,
  type FinalizeResult,
  type SessionSnapshot,
  type StepLimit,
  type SynthesisRequest,
  type SynthesisResult,
  type SyncEvent,
  type SyncReport,
  type SyncStatus,
  Engram,
  type CodeHit,
  type EmbeddingsOptions,
  ErrorCode,
  type GraphNode,
  type Impact,
  type IndexSummary,
  type InjectSummary,
  type RecallResult,
  type StepInjection,
  type DerivedSummary,
  type Memory,
  type ModuleSummary,
  type Neighbour,
  type NodeScore,
  type RelationRequest,
  type RememberInput,
  type SearchHit,
  type Subgraph,
} from '../index.js'

export async function quickStart(): Promise<SearchHit[]> {
  const memory = await Engram.open({ path: '.engram/memory.db', projectRoot: process.cwd() })
  const input: RememberInput = {
    type: 'gotcha',
    content: 'Run migrations before seeding the test database',
    tags: ['db'],
    relatedFiles: ['src/db/seed.ts'],
  }
  const { memory: stored, created }: { memory: Memory; created: boolean } = await memory.remember(input)
  void created
  await memory.update(stored.id, { confidence: 0.9 })
  const hits = await memory.search('migrations', { limit: 5, types: ['gotcha', 'decision'] })
  await memory.close()
  return hits
}

export function isClosedError(err: unknown): boolean {
  const code: ErrorCode = 'ENGRAM_CLOSED'
  return err instanceof Error && (err as Error & { code?: string }).code === code
}

export function isNotFound(err: unknown): boolean {
  // ErrorCode is a value too: its members have the literal types of the codes.
  const code: ErrorCode = ErrorCode.NotFound
  const literal: 'ENGRAM_NOT_FOUND' = ErrorCode.NotFound
  void literal
  // @ts-expect-error: no such member
  void ErrorCode.NoSuchCode
  return err instanceof Error && (err as Error & { code?: string }).code === code
}

export async function misuse(db: Engram): Promise<void> {
  // @ts-expect-error: 'bogus' is not a MemoryType
  await db.remember({ type: 'bogus', content: 'x' })
  // @ts-expect-error: content is required
  await db.remember({ type: 'gotcha' })
}

export async function indexCode(memory: Engram): Promise<[IndexSummary, CodeHit[]]> {
  const controller = new AbortController()
  const summary = await memory.index({
    ignore: ['generated/'],
    signal: controller.signal,
    onProgress: (p) => console.log(p.phase, p.filesDone, p.filesTotal),
  })
  const chunks = await memory.chunksOf('src/auth/tokens.ts')
  console.log(chunks.map((c) => `${c.kind} ${c.qualifiedName ?? ''} ${c.startLine}-${c.endLine}`))
  // @ts-expect-error: onProgress takes a function
  await memory.index({ onProgress: 'verbose' })
  return [summary, await memory.searchCode('verify token', { limit: 5 })]
}

export async function followChanges(memory: Engram): Promise<IndexSummary> {
  await memory.watch({
    debounceMs: 200,
    ignore: ['tmp/'],
    onEvent: (e) => console.log(e.type, e.summary?.indexedPaths, e.summary?.removedPaths, e.code),
  })
  // @ts-expect-error: debounceMs is a number
  await memory.watch({ debounceMs: 'fast' })
  const stopped: boolean = memory.unwatch()
  console.log(stopped)
  // @ts-expect-error: paths is an array
  await memory.indexPaths('src/a.ts')
  return memory.indexPaths(['src/a.ts', 'src/b'])
}

export async function knowledgeGraph(memory: Engram): Promise<Impact> {
  const written: InjectSummary = await memory.injectGraph({
    nodes: [{ key: 'concept:auth', kind: 'concept', metadata: { owner: 'team-a' } }],
    edges: [{ from: 'concept:auth', to: 'src/auth/login.ts', kind: 'implemented_by', weight: 2 }],
  })
  console.log(written.nodesCreated)
  // @ts-expect-error: source is 'agent' | 'user' | 'llm'
  await memory.injectGraph({ nodes: [{ key: 'k', kind: 'x', source: 'robot' }] })
  const around: Subgraph = await memory.traverse('concept:auth', { direction: 'both', maxDepth: 2 })
  console.log(around.nodes.map((r) => `${r.depth} ${r.node.key} via ${r.via.join('>')}`))
  const up = await memory.ancestors('src/auth/login.ts', { maxDepth: 2 })
  const node: GraphNode | null = await memory.getNode('src/auth/login.ts')
  console.log(up.truncated, node?.layer, (await memory.graphStats()).closureRows)
  const impact = await memory.impact('src/auth/login.ts:Auth.login', { layers: [1], memoryLimit: 10 })
  console.log(impact.memories.map((m) => `${m.role} ${m.nodeKey} ${m.memory.content}`))
  const near: Neighbour[] = await memory.neighbours(['src/auth/login.ts'], { direction: 'in', limit: 20 })
  const ranked: NodeScore[] = await memory.centrality(near.map((n) => n.node.key), { method: 'degree' })
  console.log(near.map((n) => `${n.node.key} ${n.weight} ${n.linkedTo.join(',')}`), ranked[0]?.score)
  const derived: DerivedSummary = await memory.deriveRelations(async ({ modules }: RelationRequest) => ({
    edges: modules.map((m: ModuleSummary) => ({ from: m.key, to: 'concept:core', kind: 'part_of' })),
    nodes: [{ key: 'concept:core', kind: 'concept' }],
  }))
  const indexed = await memory.index({ deriveRelations: () => null })
  console.log(derived.edgesWritten, indexed.derivedRelations?.modules, indexed.derivedRelationsError)
  return impact
}

/** The embedding providers type-check as the README shows them. */
export async function providers(embedWithMyModel: (texts: string[]) => Promise<Float32Array[]>): Promise<string[]> {
  const options: EmbeddingsOptions[] = [
    { provider: 'ollama', model: 'nomic-embed-text', fallback: [{ provider: 'local' }] },
    { provider: 'openai', model: 'text-embedding-3-small', dimensions: 1024, apiKey: 'sk-...', maxRetries: 5 },
    { provider: 'openai', model: 'bge-m3', baseUrl: 'http://localhost:8000/v1', batchSize: 32, timeoutMs: 120_000 },
    { model: 'my-model-v1', embed: embedWithMyModel },
    { provider: 'callback', model: 'plain', embed: (texts) => texts.map(() => [0.1, 0.2]) },
    // @ts-expect-error provider names are checked
    { provider: 'word2vec' },
  ]
  const opened = await Promise.all(
    options.map((embeddings, i) => Engram.open({ path: `.engram/p${i}.db`, embeddings })),
  )
  return opened.map((memory) => memory.embeddingStatus().provider)
}

/** recall() type-checks as the README shows it. */
export async function recallExample(memory: Engram, prompt: string): Promise<string> {
  const result: RecallResult = await memory.recall('where are passwords checked', {
    phase: 'implement',
    recentFiles: ['src/auth/login.ts'],
    recentToolCalls: ['Grep', 'Read'],
    filters: { kinds: ['chunk', 'memory'], types: ['gotcha'], minConfidence: 0.5 },
    budgetTokens: 3000,
    stages: { boost: true, dense: false },
    trackAccess: true,
  })
  for (const item of result.items) {
    if (item.kind === 'chunk') console.log(item.path, item.startLine, item.ranks.keyword)
    else console.log(item.memoryType, item.memory?.content)
  }
  const searched: string | undefined = result.correctedQuery
  if (searched) console.log('searched for', searched)
  // @ts-expect-error phases are checked
  await memory.recall('x', { phase: 'coding' })
  return prompt + result.context
}

/** Trigger patterns put "never do X" memories first when X is in play. */
export async function triggerExample(memory: Engram): Promise<string | undefined> {
  const { memory: stored } = await memory.remember({
    type: 'gotcha',
    content: 'never commit .env files',
    triggers: ['.env', 'dotenv'],
  })
  const patterns: string[] = stored.triggers
  await memory.update(stored.id, { triggers: [...patterns, 'secrets.json'] })
  const result = await memory.recall('add the .env to git', { recentFiles: ['config/.env'] })
  return result.items[0]?.triggeredBy
}

/** A reranker is an open option: a server speaking the Cohere format, or a function. */
export async function rerankExample(path: string, score: (q: string, d: string) => number): Promise<void> {
  const viaServer = await Engram.open({
    path,
    reranker: { url: 'https://api.cohere.com/v1/rerank', model: 'rerank-v3.5', apiKey: process.env.COHERE_API_KEY },
  })
  // close() resolves once the file is released (when this was its last handle).
  const closing: Promise<void> = viaServer.close()
  await closing
  const viaFunction = await Engram.open({
    path,
    reranker: { model: 'mine', rerank: async (query, documents) => documents.map((d) => score(query, d)) },
  })
  const result = await viaFunction.recall('where are passwords checked', { rerankDepth: 20 })
  const first: number | undefined = result.items[0]?.rerankScore
  console.log(first, result.items[0]?.ranks.rerank, result.timings.rerankMs)
  // @ts-expect-error a rerank function returns numbers
  await Engram.open({ path, reranker: { model: 'm', rerank: async () => ['x'] } })
  await viaFunction.close()
}

/** stepInjection() type-checks as its doc shows it. */
export async function stepExample(memory: Engram, injectedIds: string[]): Promise<string | null> {
  const injection: StepInjection | null = await memory.stepInjection(7, {
    toolCalls: [{ tool: 'Read', filePath: 'src/auth/login.ts' }, { tool: 'Grep', pattern: 'session\\s+cookie' }],
    injectedIds,
  })
  if (!injection) return null
  injectedIds.push(...injection.memories.map((m) => m.id))
  return injection.type === 'gotcha_injection' ? injection.content : `search: ${injection.content}`
}

/** The observer: a session fed by an agent loop's messages, finalized into memories. */
export async function observeExample(memory: Engram): Promise<string[]> {
  const session = memory.observe({ sessionId: 'agent-42', sessionType: 'build', plannedSteps: 30 })
  session.observe({ type: 'memory:tool-call', toolName: 'Read', args: { file_path: 'src/a.ts' }, stepIndex: 1 })
  session.observe({ type: 'memory:tool-result', toolName: 'Read', result: '...', isError: false, stepIndex: 1 })
  session.observeMany([
    { type: 'memory:reasoning', text: 'Correction: a is b.', stepIndex: 2 },
    { type: 'memory:step-complete', stepNumber: 2, inputTokens: 5000 },
    { type: 'memory:record', entry: { type: 'gotcha', content: 'x', relatedFiles: ['src/a.ts'] } },
  ])
  // @ts-expect-error unknown message types do not type-check
  session.observe({ type: 'memory:nap', stepIndex: 3 })
  const snapshot: SessionSnapshot = session.snapshot()
  console.log(snapshot.abGroup === 'control', snapshot.earlyTriggers.map((e) => e.signal))
  const injection = await session.stepInjection(6)
  if (injection?.type === 'scratchpad_reflection') console.log(injection.content)
  const { limit }: StepLimit = await memory.stepLimit(30, { module: 'src/auth/' })
  console.log(limit)
  const merged = memory.mergeSessions(['agent-42/a', 'agent-42/b'], { sessionId: 'agent-42/all' })
  const result: FinalizeResult = await merged.finalize('success', {
    synthesize: async (request: SynthesisRequest) => [{ type: 'gotcha', content: request.prompt.slice(0, 80) }],
  })
  console.log(result.synthesis?.memories.length)
  const calls: SynthesisResult[] = await memory.synthesize({ mode: 'threshold', synthesize: () => [], limit: 2 })
  console.log(calls.length)
  return result.candidates.filter((c) => c.signal === 'co_access' && c.agents > 1).map((c) => c.content)
}

/** Sync with a libSQL server: options, a forced sync, status and events. */
export async function syncExample(): Promise<number> {
  const memory = await Engram.open({
    path: '.engram/memory.db',
    sync: { url: 'libsql://memory-alice.turso.io', getAuthToken: async (refresh: boolean) => (refresh ? 'new' : 'old') },
  })
  // @ts-expect-error the url is required
  await Engram.open({ path: 'x.db', sync: { authToken: 't' } })
  const id = memory.onSyncEvent((event: SyncEvent) => {
    if (event.type === 'failed') console.warn(event.error?.code, event.retryInMs)
  })
  const report: SyncReport = await memory.sync()
  const status: SyncStatus = await memory.syncStatus()
  const offline: boolean = status.state === 'offline'
  memory.offSyncEvent(id)
  return report.pushed + status.pending + (offline ? 1 : 0)
}

export async function agentFilesAndConsolidation(memory: Engram, signal: AbortSignal): Promise<number> {
  const { files } = await memory.importAgentFiles({ files: ['CLAUDE.md', '.cursorrules'] })
  const out: AgentFileExport = await memory.exportAgentFile({ file: 'AGENTS.md', limit: 20, write: false, types: ['gotcha', 'decision'] })
  // @ts-expect-error types are memory types
  await memory.exportAgentFile({ types: ['rules'] })
  const report: ConsolidateReport = await memory.consolidate({ dryRun: true, threshold: 0.95, signal })
  const bases: Array<'meaning' | 'words'> = report.groups.map((g) => g.basis)
  return files.reduce((n, f) => n + f.created.length + f.edited.length, 0) + out.memoryIds.length + bases.length
}

/** Logging: a JS logger with a level or a filter, and turning it off. */
export function loggingExample(lines: string[]): void {
  Engram.setLogger(
    (level, target, message, fields) => {
      const severe: boolean = level === 'error' || level === 'warn'
      const ms = fields.ms
      lines.push(`${severe ? '!' : ' '} ${target}: ${message} ${typeof ms === 'number' ? ms : ''}`)
    },
    { level: 'debug' },
  )
  Engram.setLogger(() => {}, { filter: 'info,engram::sync=debug' })
  // @ts-expect-error levels are the five names
  Engram.setLogger(() => {}, { level: 'verbose' })
  Engram.setLogger(null)
}
