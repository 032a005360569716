// The knowledge graph across the boundary: injectGraph / traverse / ancestors / descendants /
// subgraph / deleteNode / deleteEdge, ENGRAM_CYCLE, argument errors, impact(), neighbours() and
// centrality() on an indexed project with attached memories, symbol staleness, and the shapes
// index.d.ts declares.
import assert from 'node:assert/strict'
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'

import { Engram, rejectsWithCode, tempDir } from './helpers.mjs'

/** Field names of `export interface <name>` in index.d.ts. */
function declaredKeys(name) {
  const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  const body = dts.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))
  assert.ok(body, `interface ${name} not found`)
  return new Set([...body[1].matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1]))
}

/** A copy of tests/fixtures/graph/<language> opened as a project (closed after the test). */
async function openFixture(t, language) {
  const dir = tempDir(t)
  const root = join(dir, 'repo')
  cpSync(new URL(`../tests/fixtures/graph/${language}/`, import.meta.url), root, { recursive: true })
  const memory = await Engram.open({ path: join(dir, 'g.db'), projectRoot: root })
  t.after(() => memory.close())
  return { dir, root, memory }
}

function assertDeclared(name, value) {
  const keys = declaredKeys(name)
  for (const key of Object.keys(value)) assert.ok(keys.has(key), `${name}.${key} is not declared`)
}

test('inject is idempotent, reads follow the closure, deletes detach', async (t) => {
  const dir = tempDir(t)
  const memory = await Engram.open({ path: join(dir, 'g.db'), closureDepth: 3 })
  t.after(() => memory.close())
  const batch = {
    nodes: [
      { key: 'svc:web', kind: 'service' },
      { key: 'svc:api', kind: 'service', metadata: { owner: 'team-a' } },
      { key: 'svc:db', kind: 'service', label: 'Postgres' },
    ],
    edges: [
      { from: 'svc:web', to: 'svc:api', kind: 'calls', weight: 2 },
      { from: 'svc:api', to: 'svc:db', kind: 'reads' },
    ],
  }
  const first = await memory.injectGraph(batch)
  assert.deepEqual(first, { nodesCreated: 3, nodesUpdated: 0, edgesCreated: 2, edgesUpdated: 0 })
  const again = await memory.injectGraph(batch)
  assert.deepEqual(again, { nodesCreated: 0, nodesUpdated: 3, edgesCreated: 0, edgesUpdated: 2 })

  const up = await memory.ancestors('svc:db')
  assert.deepEqual(
    up.nodes.map((r) => [r.node.key, r.depth, r.weight, r.via]),
    [['svc:api', 1, 1, []], ['svc:web', 2, 3, ['svc:api']]],
  )
  assertDeclared('Subgraph', up)
  assertDeclared('ReachedNode', up.nodes[0])
  assertDeclared('GraphNode', up.nodes[0].node)
  const down = await memory.descendants('svc:web', { maxDepth: 1 })
  assert.deepEqual(down.nodes.map((r) => r.node.key), ['svc:api'])

  const walk = await memory.traverse('svc:db', { direction: 'in', maxDepth: 2 })
  assert.deepEqual(walk.nodes.map((r) => r.node.key), ['svc:api', 'svc:web'])
  assert.equal(walk.edges.length, 2)
  assertDeclared('GraphEdge', walk.edges[0])

  const node = await memory.getNode('svc:api')
  assert.equal(node.metadata.owner, 'team-a')
  assert.equal(node.source, 'agent')
  assert.equal(await memory.getNode('svc:none'), null)

  const sub = await memory.subgraph(['svc:web', 'svc:api', 'svc:none'])
  assert.deepEqual(sub.nodes.map((r) => r.node.key), ['svc:api', 'svc:web'])
  assert.deepEqual(sub.edges.map((e) => `${e.from}>${e.to}`), ['svc:web>svc:api'])

  assert.equal(await memory.deleteEdge('svc:api', 'svc:db', 'reads'), true)
  assert.equal(await memory.deleteEdge('svc:api', 'svc:db', 'reads'), false)
  assert.deepEqual((await memory.ancestors('svc:db')).nodes, [])
  assert.equal(await memory.deleteNode('svc:api'), true)
  assert.deepEqual((await memory.descendants('svc:web')).nodes, [])
  const stats = await memory.graphStats()
  assert.deepEqual(stats.nodesByLayer, [0, 0, 2])
  assert.equal(stats.closureDepth, 3)
})

test('cycles, unknown endpoints and bad arguments reject with codes and keep nothing', async (t) => {
  const dir = tempDir(t)
  const memory = await Engram.open({ path: join(dir, 'g.db') })
  t.after(() => memory.close())
  await memory.injectGraph({
    nodes: [{ key: 'adr:1', kind: 'decision' }, { key: 'adr:2', kind: 'decision' }],
    edges: [{ from: 'adr:2', to: 'adr:1', kind: 'supersedes' }],
  })
  await rejectsWithCode(
    assert,
    memory.injectGraph({ edges: [{ from: 'adr:1', to: 'adr:2', kind: 'supersedes' }] }),
    'ENGRAM_CYCLE',
  )
  await rejectsWithCode(
    assert,
    memory.injectGraph({
      nodes: [{ key: 'adr:3', kind: 'decision' }],
      edges: [{ from: 'adr:3', to: 'adr:404', kind: 'mentions' }],
    }),
    'ENGRAM_NOT_FOUND',
  )
  assert.equal(await memory.getNode('adr:3'), null, 'the batch was rolled back')
  await rejectsWithCode(assert, memory.injectGraph({ nodes: [{ key: 'x' }] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.injectGraph({ nodes: [{ key: 'x', kind: 'k', source: 'ast' }] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.injectGraph({ edges: [{ from: 'adr:1', to: 'adr:2', kind: 'k', weight: -1 }] }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.injectGraph('nodes'), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.traverse('adr:1', { direction: 'sideways' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.traverse(42), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.ancestors('adr:1', { maxDepth: 99 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.impact('adr:404'), 'ENGRAM_NOT_FOUND')
  await rejectsWithCode(
    assert,
    Engram.open({ path: join(dir, 'other.db'), closureDepth: 0 }),
    'ENGRAM_INVALID_ARG',
  )
})

test('impact() on an indexed project lists dependents and memories; edits mark symbol memories stale', async (t) => {
  const { root, memory } = await openFixture(t, 'ts')
  const summary = await memory.index()
  assert.ok(summary.graph.nodesWritten > 0, JSON.stringify(summary.graph))
  const gotcha = await memory.remember({
    type: 'gotcha',
    content: 'handle() must stay synchronous',
    targetNodeId: 'src/api.ts:handle',
  })
  const impact = await memory.impact(join(root, 'src/util.ts'))
  assert.equal(impact.target.key, 'src/util.ts')
  assert.deepEqual(
    impact.affected.filter((r) => r.node.layer === 1).map((r) => `${r.depth} ${r.node.key}`).sort(),
    ['1 src/orders.ts', '1 src/orders.ts:renderOrder', '2 src/api.ts', '2 src/api.ts:handle', '3 src/main.ts'],
  )
  assert.deepEqual(impact.memories.map((m) => [m.memory.id, m.role, m.depth]), [[gotcha.memory.id, 'target', 2]])
  assert.equal(impact.memoriesTruncated, false)
  assertDeclared('Impact', impact)
  assertDeclared('AttachedMemory', impact.memories[0])
  assertDeclared('Memory', impact.memories[0].memory)
  // Limits cut the answer nearest first, and say so.
  const nearer = await memory.remember({ type: 'decision', content: 'formatDate stays pure', relatedFiles: ['src/util.ts'] })
  const cut = await memory.impact('src/util.ts', { memoryLimit: 1 })
  assert.deepEqual(cut.memories.map((m) => [m.memory.id, m.role, m.depth]), [[nearer.memory.id, 'file', 0]])
  assert.deepEqual([cut.truncated, cut.memoriesTruncated], [false, true])
  // (Memories come from the nodes kept: handle's is at depth 2, past the one affected node.)
  const one = await memory.impact('src/util.ts', { limit: 1 })
  assert.deepEqual(one.affected.map((r) => r.depth), [1])
  assert.deepEqual([one.truncated, one.memories.length, one.memoriesTruncated], [true, 1, false])
  const wide = await memory.impact('src/util.ts', { limit: 500, memoryLimit: 100 })
  assert.deepEqual(wide.affected.map((r) => r.node.key), impact.affected.map((r) => r.node.key))
  assert.equal(wide.memories.length, 2)

  // Changing handle's body marks the memory on it stale; the code graph's own nodes refuse
  // agent writes.
  const api = join(root, 'src/api.ts')
  writeFileSync(api, readFileSync(api, 'utf8').replace('new Date()', 'new Date(0)'))
  const update = await memory.indexPaths(['src/api.ts'])
  assert.equal(update.graph.memoriesMarkedStale, 1)
  const stale = await memory.get(gotcha.memory.id)
  assert.equal(stale.needsReview, true)
  await rejectsWithCode(assert, memory.deleteNode('src/api.ts'), 'ENGRAM_CONFLICT')
  await rejectsWithCode(assert, memory.injectGraph({ nodes: [{ key: 'src/api.ts', kind: 'file' }] }), 'ENGRAM_CONFLICT')
})

test('neighbours() and centrality() rank an indexed project; bad options reject with codes', async (t) => {
  const { memory } = await openFixture(t, 'ts')
  const summary = await memory.index()
  assert.equal(typeof summary.graph.durationMs, 'number')
  assertDeclared('GraphSyncSummary', summary.graph)

  const near = await memory.neighbours(['src/orders.ts'])
  assert.deepEqual(near.map((n) => n.node.key).sort(), [
    'src/api.ts',
    'src/api.ts:handle',
    'src/util.ts',
    'src/util.ts:formatDate',
  ])
  assert.ok(near.every((n) => n.linkedTo.length === 1 && n.linkedTo[0] === 'src/orders.ts'))
  assertDeclared('Neighbour', near[0])
  const out = await memory.neighbours(['src/orders.ts'], { direction: 'out', includeContained: false })
  assert.deepEqual(out.map((n) => n.node.key), ['src/util.ts'])

  const chain = ['src/main.ts', 'src/api.ts', 'src/orders.ts', 'src/util.ts']
  const ranked = await memory.centrality(chain)
  assert.deepEqual(ranked.map((s) => s.key), ['src/util.ts', 'src/orders.ts', 'src/api.ts', 'src/main.ts'])
  assert.ok(Math.abs(ranked.reduce((sum, s) => sum + s.score, 0) - 1) < 1e-9)
  const degree = await memory.centrality(chain, { method: 'degree' })
  assert.equal(degree.find((s) => s.key === 'src/main.ts').score, 0.5)

  await rejectsWithCode(assert, memory.centrality(chain, { method: 'eigen' }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.centrality(chain, { damping: 1.5 }), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.neighbours('src/orders.ts'), 'ENGRAM_INVALID_ARG')
  await rejectsWithCode(assert, memory.neighbours(['src/orders.ts'], { direction: 'up' }), 'ENGRAM_INVALID_ARG')
})

test('deriveRelations() and index({ deriveRelations }) write llm relations; failures are ENGRAM_CALLBACK', async (t) => {
  const { root, memory } = await openFixture(t, 'go')
  const requests = []
  const summary = await memory.index({
    deriveRelations: async (request) => {
      requests.push(request)
      await new Promise((resolve) => setTimeout(resolve, 5))
      return {
        nodes: [{ key: 'concept:billing', kind: 'concept' }],
        edges: [{ from: 'orders/', to: 'concept:billing', kind: 'part_of' }],
      }
    },
  })
  assert.deepEqual(summary.graph.modulesChanged, ['api/', 'orders/', 'util/'])
  assert.deepEqual(summary.derivedRelations, { modules: 3, nodesWritten: 1, edgesWritten: 1, edgesRemoved: 0, nodesRemoved: 0 })
  assert.equal(summary.derivedRelationsError, undefined)
  const orders = requests[0].modules.find((m) => m.key === 'orders/')
  assert.deepEqual([orders.files, orders.imports, orders.importedBy], [['orders/orders.go'], ['util/'], ['api/']])
  assertDeclared('ModuleSummary', orders)
  const concept = await memory.getNode('concept:billing')
  assert.deepEqual([concept.layer, concept.source], [2, 'llm'])
  const up = await memory.ancestors('concept:billing')
  assert.ok(up.nodes.some((r) => r.node.key === 'api/' && r.depth === 2), JSON.stringify(up.nodes))

  // A plain (non-async) deriver works too; its answer replaces the previous one.
  const again = await memory.deriveRelations(() => ({ edges: [{ from: 'api/', to: 'util/', kind: 'depends_on' }] }), {
    modules: ['api/', 'orders/'],
  })
  assert.deepEqual(again, { modules: 2, nodesWritten: 0, edgesWritten: 1, edgesRemoved: 1, nodesRemoved: 1 })
  assert.equal(await memory.getNode('concept:billing'), null)
  assert.equal((await memory.deriveRelations(() => null)).edgesWritten, 0)

  // Failures: a throw, a rejection, a malformed answer, an edge off the asked modules.
  await rejectsWithCode(assert, memory.deriveRelations(() => { throw new Error('model offline') }), 'ENGRAM_CALLBACK')
  await rejectsWithCode(assert, memory.deriveRelations(async () => { throw new Error('quota') }), 'ENGRAM_CALLBACK')
  await rejectsWithCode(assert, memory.deriveRelations(() => ({ edges: 'none' })), 'ENGRAM_CALLBACK')
  await rejectsWithCode(
    assert,
    memory.deriveRelations(() => ({ edges: [{ from: 'concept:x', to: 'concept:y', kind: 'k' }] }), { modules: ['util/'] }),
    'ENGRAM_INVALID_ARG',
  )
  await rejectsWithCode(assert, memory.deriveRelations('not a function'), 'ENGRAM_INVALID_ARG')
  assert.ok((await memory.ancestors('util/')).nodes.some((r) => r.node.key === 'api/'), 'earlier relations kept')

  // An edit re-derives only the changed module; a failing deriver leaves the index committed.
  writeFileSync(join(root, 'util/util.go'), readFileSync(join(root, 'util/util.go'), 'utf8') + '\nfunc Extra() int { return 1 }\n')
  const edited = await memory.index({ deriveRelations: () => Promise.reject(new Error('down')) })
  assert.equal(edited.filesIndexed, 1)
  assert.deepEqual(edited.graph.modulesChanged, ['util/'])
  assert.equal(edited.graph.edgesMarkedStale, 1, 'the llm relation touching util/ is stale until derived again')
  const [relation] = (await memory.subgraph(['api/', 'util/'])).edges.filter((e) => e.source === 'llm')
  assert.equal(typeof relation.staleAt, 'number')
  assertDeclared('GraphEdge', relation)
  assert.match(edited.derivedRelationsError, /^ENGRAM_CALLBACK: .*down/)
  assert.ok(await memory.getNode('util/util.go:Extra'))
})

test('graphIndexMaxMb: 0 answers every graph read from the database, the same answers', async (t) => {
  const dir = tempDir(t)
  const root = join(dir, 'repo')
  cpSync(new URL('../tests/fixtures/graph/py/', import.meta.url), root, { recursive: true })
  const first = await Engram.open({ path: join(dir, 'g.db'), projectRoot: root })
  await first.index()
  await first.remember({ type: 'gotcha', content: 'util keeps its state', relatedFiles: ['app/util.py'] })
  await first.close()
  // The option applies to the engine its open creates: the second engine gets a copy.
  for (const suffix of ['', '-wal']) {
    if (existsSync(join(dir, `g.db${suffix}`))) cpSync(join(dir, `g.db${suffix}`), join(dir, `off.db${suffix}`))
  }
  const served = await Engram.open({ path: join(dir, 'g.db'), projectRoot: root })
  t.after(() => served.close())
  const tablesOnly = await Engram.open({ path: join(dir, 'off.db'), projectRoot: root, graphIndexMaxMb: 0 })
  t.after(() => tablesOnly.close())
  const reads = [
    (m) => m.impact('app/util.py'),
    (m) => m.ancestors('app/util.py'),
    (m) => m.descendants('app/api.py'),
    (m) => m.neighbours(['app/util.py']),
  ]
  // The default engine's first graph read starts its index's load in the background.
  await reads[0](served)
  await new Promise((resolve) => setTimeout(resolve, 300))
  for (const read of reads) {
    const answer = await read(served)
    assert.deepEqual(await read(tablesOnly), answer)
  }
  const impact = await reads[0](served)
  assert.ok(impact.affected.length > 0 && impact.memories.length === 1, JSON.stringify(impact))
  await rejectsWithCode(
    assert,
    Engram.open({ path: join(dir, 'other.db'), graphIndexMaxMb: -1 }),
    'ENGRAM_INVALID_ARG',
  )
})
