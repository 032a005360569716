// `engram mcp`: engram as an MCP server over stdio, for agents (Claude Code, Cursor, any MCP
// client). Built on the official MCP SDK's server and stdio transport; the protocol is the SDK's
// (its latest version, negotiated down for older clients). stdout carries the protocol only:
// every log line goes to stderr.
//
// The SDK's low-level `Server` is used rather than `McpServer` so that arguments a tool's schema
// rejects come back as the same kind of tool error as engram's own failures
// (`ENGRAM_INVALID_ARG: recall: query: ...`), which `McpServer` does not allow to shape.
'use strict'

const { existsSync } = require('node:fs')
const { resolve } = require('node:path')

const { Server } = require('@modelcontextprotocol/sdk/server/index.js')
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js')
const {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ReadResourceRequestSchema,
  McpError,
  ErrorCode: McpErrorCode,
} = require('@modelcontextprotocol/sdk/types.js')
const { z } = require('zod')

const { version } = require('../package.json')

const MEMORY_TYPES = [
  'gotcha',
  'decision',
  'preference',
  'pattern',
  'requirement',
  'error_pattern',
  'module_insight',
  'prefetch_pattern',
  'work_state',
  'causal_dependency',
  'task_calibration',
  'e2e_observation',
  'dead_end',
  'work_unit_outcome',
  'workflow_recipe',
  'context_cost',
]
const SESSION_TYPES = ['build', 'insights', 'roadmap', 'terminal', 'changelog', 'spec_creation', 'pr_review']
const PHASES = ['define', 'implement', 'validate', 'refine', 'explore', 'reflect']
/** MCP's "resource not found" error code (the spec's -32002). */
const RESOURCE_NOT_FOUND = -32002
/** How long shutdown waits for requests being answered. */
const DRAIN_MS = 10_000
/** Most memories the `engram://memories` resource (and the resource list) carries. */
const RESOURCE_LIST_LIMIT = 200

const INSTRUCTIONS = `engram is this project's persistent memory: what earlier sessions learned (gotchas, decisions, conventions, error fixes), plus a searchable index of the project's code.
- Before starting a task, or when unsure how something here works, call recall with a description of the task; pass the files you are working on as recentFiles.
- When you learn something a future session should know (a pitfall, a decision and its reason, a command that works), call remember with a short, specific statement and the files it concerns.
- Before changing a file or function, call impact to see what depends on it and the memories attached to it.
- Before planning a multi-step task, call planner_context (step-estimate calibration, failed approaches, coupled files); before end-to-end testing, call qa_context.
- When a memory you were given was helpful or wrong, call feedback with its id (a correction stores the right text and retires the wrong one); call forget for one that no longer applies.`

// --- tool schemas --------------------------------------------------------------------------------

const paths = (what) => z.array(z.string().min(1)).max(200).describe(what)

const TOOLS = {
  recall: {
    title: 'Recall project memory and code',
    description:
      "Search this project's memories and its indexed code together, ranked as one list, and get back a context packed into a token budget. " +
      'Call it before starting a task, before editing unfamiliar code, or whenever you need to know how something in this project works, what went wrong before, or what was decided. ' +
      'Returns Markdown: memories first (type, confidence, files), then code grouped by file, each item labelled [n]; then the ids of the memories in it (for feedback and forget) and a line saying how many tokens were used.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    schema: z.strictObject({
      query: z.string().min(1).max(8192).describe('What you need to know or are about to do, in words or identifiers (e.g. "where are session tokens refreshed").'),
      phase: z
        .enum(PHASES)
        .optional()
        .describe('What you are doing: weighs memory types (gotchas count more while implementing) and sets the default budget (implement 3000 tokens, explore 2000, ...).'),
      recentFiles: paths('Files you read or edited lately, most recent first, relative to the project root: code and memories around them rank higher.').optional(),
      budgetTokens: z.number().int().min(1).max(200000).optional().describe("Tokens the packed context may use (default: the phase's budget, else 2500)."),
      limit: z.number().int().min(1).max(200).optional().describe('Most ranked items to consider (default 20).'),
    }),
  },
  remember: {
    title: 'Remember something for later sessions',
    description:
      'Store a memory that future sessions on this project will get from recall: a gotcha, a decision and its reason, a convention, an error and its fix, a working command. ' +
      'Call it when you learn something that is not obvious from the code and would save the next session time. Keep it to one or two specific sentences and name the files it concerns. ' +
      'Secrets are redacted before storage; an identical memory is reinforced instead of duplicated. Returns the memory id and whether it was new.',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    schema: z.strictObject({
      type: z
        .enum(MEMORY_TYPES)
        .describe(
          'Kind of knowledge: gotcha (a pitfall), decision (a choice and why), preference (how the user wants things), pattern (a convention), requirement, error_pattern (an error and its fix), workflow_recipe (steps or commands that work), dead_end (an approach that failed), module_insight, work_state (where an unfinished task stands), or another engram type.',
        ),
      content: z.string().min(1).describe('The memory itself: one or two specific sentences (at most 16 KiB).'),
      tags: z.array(z.string().min(1)).max(50).optional().describe('Short tags (e.g. ["db", "tests"]).'),
      relatedFiles: paths('Files it concerns, relative to the project root: impact and recall on those files find it.').optional(),
      relatedModules: z.array(z.string().min(1)).max(50).optional().describe('Modules (directories such as "src/auth/") it concerns.'),
      confidence: z.number().min(0).max(1).optional().describe('How sure you are, 0..1 (default 0.8).'),
      triggers: z
        .array(z.string().min(2))
        .max(20)
        .optional()
        .describe('Text that puts this memory first in recall whenever it appears in the query or a recent file path (e.g. [".env"] for "never commit .env files").'),
      targetNodeId: z
        .string()
        .min(1)
        .optional()
        .describe('A code symbol it is about, as "path:Qualified.name" (e.g. "src/auth/login.ts:Auth.login"): it is marked stale when that symbol changes.'),
    }),
  },
  search_code: {
    title: 'Search the indexed code',
    description:
      "Keyword search (BM25) over the project's indexed code: definition names weigh most (split at case changes and underscores), then paths, then the text. " +
      'Call it to find where something is defined or implemented when you know words or names it would contain. ' +
      'Returns the best chunks, each with its path, line range, kind and symbol, and its code.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    schema: z.strictObject({
      query: z.string().min(1).max(8192).describe('Words or identifiers (e.g. "verify token", "parseConfig").'),
      limit: z.number().int().min(1).max(50).optional().describe('Most chunks to return (default 10).'),
    }),
  },
  impact: {
    title: 'What a change affects',
    description:
      'What a change to a file or symbol affects: every indexed file and symbol that depends on it (imports, calls, inheritance; nearest first, with depth), and the memories attached to the target or to anything affected. ' +
      'Call it before changing a file or function whose users you do not know. ' +
      'Returns the affected nodes and the attached memories (id, type, confidence, text).',
    annotations: { readOnlyHint: true, openWorldHint: false },
    schema: z.strictObject({
      target: z
        .string()
        .min(1)
        .describe('A file path relative to the project root ("src/auth/login.ts"), a symbol ("src/auth/login.ts:Auth.login"), a module ("src/auth/") or any graph node key.'),
      maxDepth: z.number().int().min(1).max(8).optional().describe('Hops to follow (default: the engine closure depth, 4).'),
      limit: z.number().int().min(1).max(500).optional().describe('Most affected nodes to list (default 100); memories come from the nodes listed.'),
      memoryLimit: z.number().int().min(0).max(200).optional().describe('Most attached memories to list, nearest first (default 20).'),
    }),
  },
  feedback: {
    title: 'Feedback on a memory',
    description:
      'Tell engram how a memory you were given (by recall or impact) held up: helpful raises its confidence; wrong lowers it and puts it back for review; correction stores your corrected text as a new verified memory that supersedes it (the old one is forgotten). ' +
      'Call it whenever a memory turned out right or wrong: it is how the memory improves. Returns the memory as it is now (and the correction\'s id).',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    schema: z
      .strictObject({
        id: z.string().min(1).describe('The memory id (from recall, impact or the engram://memories resource).'),
        kind: z.enum(['helpful', 'wrong', 'correction']).describe('helpful, wrong, or correction (then give correction).'),
        correction: z.string().min(1).optional().describe('For kind "correction": the right text, which replaces the memory.'),
        comment: z.string().min(1).max(4096).optional().describe('Why, in a few words (kept in the memory\'s event log).'),
      })
      .superRefine((v, ctx) => {
        if (v.kind === 'correction' && !v.correction) {
          ctx.addIssue({ code: 'custom', path: ['correction'], message: 'required when kind is "correction"' })
        }
        if (v.kind !== 'correction' && v.correction) {
          ctx.addIssue({ code: 'custom', path: ['correction'], message: 'only goes with kind "correction"' })
        }
      }),
  },
  forget: {
    title: 'Forget a memory',
    description:
      'Archive a memory that no longer applies (the code changed, it was a one-off, it duplicates another): it leaves recall and search but stays in its history and can be restored by a person. ' +
      'For a memory that is wrong rather than outdated, prefer feedback with kind "correction". Returns the forgotten memory\'s id and version.',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    schema: z.strictObject({
      id: z.string().min(1).describe('The memory id.'),
      reason: z.string().min(1).max(4096).optional().describe('Why it no longer applies.'),
    }),
  },
  session_context: {
    title: 'What to know before starting',
    description:
      'What this project\'s memory says an agent should know at the start of a session: unfinished work to resume, what the last session did and learned, pinned and user-taught rules, the memories for your task and the modules you will touch, workflow recipes that work here, and memories that may be outdated. ' +
      'Call it once when you start a task (before recall): pass the task in words and the directories you expect to touch. ' +
      'Returns Markdown packed into a token budget, each memory labelled [n] with its id (for feedback and forget).',
    annotations: { readOnlyHint: true, openWorldHint: false },
    schema: z.strictObject({
      task: z.string().min(1).max(8192).optional().describe('What you are about to do (e.g. "add rate limiting to the login route"): memories and recipes are ranked for it.'),
      modules: z.array(z.string().min(1)).max(50).optional().describe('Directories you expect to touch, relative to the project root (e.g. ["src/auth/"]).'),
      sessionType: z
        .enum(SESSION_TYPES)
        .optional()
        .describe('The kind of session (default build): insights for reading and explaining code, pr_review for reviewing, spec_creation for planning.'),
      budgetTokens: z.number().int().min(1).max(200000).optional().describe('Tokens the context may use (default 2000).'),
    }),
  },
  planner_context: {
    title: 'What to know before planning',
    description:
      'Before you split a task into steps: how past tasks in these modules compared with their plans (a factor to multiply your step estimates by), approaches that already failed here (write them into the plan as constraints), ' +
      'files that change together with these modules (add them to the plan\'s scope), how recent work units ended, and workflow recipes for the task. ' +
      'Returns Markdown with an "Apply to the plan" section (the factor, constraints and files), then the memories behind it, each labelled [n] with its id.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    schema: z.strictObject({
      task: z.string().min(1).max(8192).describe('The task to plan, in words.'),
      modules: z.array(z.string().min(1)).max(50).optional().describe('Directories the task will touch, relative to the project root (e.g. ["src/auth/"]).'),
      budgetTokens: z.number().int().min(1).max(200000).optional().describe('Tokens the context may use (default 3000).'),
    }),
  },
  qa_context: {
    title: 'What to know before testing',
    description:
      'Before you validate a change (a browser run, end-to-end or manual tests): the requirements of these modules, what earlier end-to-end runs observed (preconditions, timings, UI behaviour, test order, tool gotchas), and error patterns seen before with their fixes. ' +
      'Returns Markdown packed into a token budget, each memory labelled [n] with its id.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    schema: z.strictObject({
      modules: z.array(z.string().min(1)).max(50).optional().describe('Directories under test, relative to the project root (e.g. ["src/checkout/"]).'),
      budgetTokens: z.number().int().min(1).max(200000).optional().describe('Tokens the context may use (default 2000).'),
    }),
  },
  memory_health: {
    title: 'Memory health and index status',
    description:
      "The state of this project's memory: a 0-100 health score with its parts, counts (active, needing review, stale, disputed, forgotten, open gaps), memories by type, " +
      'and whether the code index is built or still being built and the embedding model available. Call it to judge how much to rely on recall, or when results look thin.',
    annotations: { readOnlyHint: true, openWorldHint: false },
    schema: z.strictObject({}),
  },
}

// --- helpers -------------------------------------------------------------------------------------

class ToolInputError extends Error {
  constructor(message) {
    super(message)
    this.code = 'ENGRAM_INVALID_ARG'
  }
}

/** `path.a: message; other: message` from a zod error. */
function describeIssues(error) {
  return error.issues
    .map((issue) => {
      const where = issue.path.length ? `${issue.path.join('.')}: ` : ''
      return `${where}${issue.message}`
    })
    .join('; ')
}

function text(value) {
  return { content: [{ type: 'text', text: value }] }
}

/** `CODE: message` for an engram error (anything else is a bug: ENGRAM_INTERNAL). */
function errorText(err) {
  const code = typeof err?.code === 'string' && err.code.startsWith('ENGRAM_') ? err.code : 'ENGRAM_INTERNAL'
  let message = err?.message ?? String(err)
  if (code === 'ENGRAM_SQLITE_BUSY') {
    message += ' (another process holds the database lock: retry in a moment)'
  }
  return `${code}: ${message}`
}

function shortContent(content, max = 400) {
  const flat = content.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

function memoryLine(m) {
  const files = m.relatedFiles.length ? ` · ${m.relatedFiles.join(', ')}` : ''
  const flags = [m.needsReview && 'needs review', m.staleAt && 'stale', m.forgotten && 'forgotten', m.pinned && 'pinned'].filter(Boolean)
  return `- ${m.id} · ${m.type} · confidence ${m.confidence.toFixed(2)}${flags.length ? ` · ${flags.join(', ')}` : ''}${files}\n  ${shortContent(m.content)}`
}

// --- the server ----------------------------------------------------------------------------------

/**
 * Runs the server on stdio until the client closes stdin, or SIGTERM / SIGINT; resolves once
 * the engine is closed. Options: `root`, `db` (paths), `projectId`, `embeddings` (open options),
 * `index` and `watch` (booleans, default true), `log` (a line logger, default stderr).
 */
async function runMcpServer(options) {
  const { Engram } = require('../index.js')
  const log = options.log ?? ((line) => process.stderr.write(`engram mcp: ${line}\n`))
  const root = resolve(options.root ?? process.cwd())
  const dbPath = resolve(options.db ?? resolve(root, '.engram', 'memory.db'))
  if (!existsSync(root)) {
    const err = new Error(`project root ${root} does not exist`)
    err.code = 'ENGRAM_INVALID_ARG'
    throw err
  }

  // Only the protocol may reach stdout: anything that logs through console goes to stderr.
  const restoreConsole = guardStdout()
  const onUnhandled = (err) => log(`unexpected error (the server goes on): ${err?.stack ?? err}`)
  process.on('unhandledRejection', onUnhandled)

  let db
  try {
    db = await Engram.open({ path: dbPath, projectRoot: root, projectId: options.projectId, embeddings: options.embeddings })
  } catch (err) {
    restoreConsole()
    process.removeListener('unhandledRejection', onUnhandled)
    throw err
  }
  log(`serving ${root} from ${dbPath}`)
  if (process.stdin.isTTY) log('waiting for an MCP client on stdin (agents start this command themselves; Ctrl-D or Ctrl-C ends it)')

  const indexState = { state: options.index === false ? 'off' : 'pending', startedAt: 0, summary: null, error: null, watching: false }
  const indexAbort = new AbortController()

  const server = new Server(
    { name: 'engram', title: 'engram: project memory', version },
    { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS },
  )

  // Requests being answered: shutdown lets them finish (the SDK's client closes stdin right
  // after its last request when it is done, and expects the answer first).
  const inFlight = new Set()
  const handle = (schema, handler) =>
    server.setRequestHandler(schema, (request, extra) => {
      const running = handler(request, extra)
      const settled = running.then(
        () => {},
        () => {},
      )
      inFlight.add(settled)
      settled.then(() => inFlight.delete(settled))
      return running
    })

  const toolList = Object.entries(TOOLS).map(([name, tool]) => {
    // JSON Schema 2020-12, MCP's default dialect (so the `$schema` key is left out).
    const { $schema, ...inputSchema } = z.toJSONSchema(tool.schema, { io: 'input' })
    return { name, title: tool.title, description: tool.description, inputSchema, annotations: tool.annotations }
  })
  handle(ListToolsRequestSchema, async () => ({ tools: toolList }))

  handle(CallToolRequestSchema, async (request) => {
    const { name, arguments: args } = request.params
    try {
      const tool = Object.hasOwn(TOOLS, name) ? TOOLS[name] : null
      if (!tool) throw new ToolInputError(`unknown tool "${name}" (tools: ${Object.keys(TOOLS).join(', ')})`)
      const parsed = tool.schema.safeParse(args ?? {})
      if (!parsed.success) throw new ToolInputError(`${name}: ${describeIssues(parsed.error)}`)
      return await handlers[name](parsed.data)
    } catch (err) {
      if (!(err instanceof ToolInputError) && !err?.code?.startsWith?.('ENGRAM_')) log(`${name} failed: ${err?.stack ?? err}`)
      let message = errorText(err)
      if (err?.code === 'ENGRAM_NOT_FOUND' && indexState.state === 'indexing' && (name === 'impact' || name === 'recall')) {
        message += `\n${indexingNote()}`
      }
      return { content: [{ type: 'text', text: message }], isError: true }
    }
  })

  handle(ListResourcesRequestSchema, async () => {
    const memories = await db.list({ limit: RESOURCE_LIST_LIMIT })
    return {
      resources: [
        {
          uri: 'engram://memories',
          name: 'memories',
          title: 'Project memories',
          description: `The project's active memories, newest first (at most ${RESOURCE_LIST_LIMIT}), as JSON.`,
          mimeType: 'application/json',
        },
        ...memories.map((m) => ({
          uri: `engram://memories/${m.id}`,
          name: `${m.type}: ${shortContent(m.content, 60)}`,
          description: shortContent(m.content, 200),
          mimeType: 'application/json',
        })),
      ],
    }
  })

  handle(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: 'engram://memories/{id}',
        name: 'memory',
        title: 'One memory',
        description: 'One memory by id (forgotten ones included), with every field, as JSON.',
        mimeType: 'application/json',
      },
    ],
  }))

  handle(ReadResourceRequestSchema, async (request) => {
    const { uri } = request.params
    const json = (value) => ({ contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(value, null, 2) }] })
    if (uri === 'engram://memories') return json(await db.list({ limit: RESOURCE_LIST_LIMIT }))
    const match = /^engram:\/\/memories\/([^/?#]+)$/.exec(uri)
    if (!match) throw new McpError(RESOURCE_NOT_FOUND, `ENGRAM_NOT_FOUND: no such resource: ${uri}`, { uri })
    try {
      return json(await db.get(decodeURIComponent(match[1])))
    } catch (err) {
      const code = err?.code === 'ENGRAM_NOT_FOUND' ? RESOURCE_NOT_FOUND : err?.code === 'ENGRAM_INVALID_ARG' ? McpErrorCode.InvalidParams : McpErrorCode.InternalError
      throw new McpError(code, errorText(err), { uri })
    }
  })

  function indexingNote() {
    const secs = ((Date.now() - indexState.startedAt) / 1000).toFixed(0)
    return `Note: the code index is still being built (started ${secs} s ago): code results may be incomplete; ask again in a while.`
  }

  /** A line on the index's state to append to code-related answers, or ''. */
  function indexNote() {
    if (indexState.state === 'indexing' || indexState.state === 'pending') return `\n\n${indexingNote()}`
    if (indexState.state === 'failed') return `\n\nNote: indexing the code failed (${indexState.error}): code results may be stale or missing.`
    return ''
  }

  const handlers = {
    async recall(a) {
      const result = await db.recall(a.query, {
        phase: a.phase,
        recentFiles: a.recentFiles,
        budgetTokens: a.budgetTokens,
        limit: a.limit,
        trackAccess: true,
      })
      const empty = result.items.length
        ? `The ${result.items.length} items found do not fit into ${result.budgetTokens} tokens: raise budgetTokens.`
        : 'Nothing in memory or in the indexed code matched this query.'
      const parts = [result.context || empty]
      const memories = result.items.map((item, i) => ({ item, rank: i + 1 })).filter(({ item }) => item.kind === 'memory' && item.pack !== 'budget' && item.pack !== 'none')
      if (memories.length) {
        parts.push(
          `---\nMemory ids in this context (for feedback and forget):\n${memories.map(({ item, rank }) => `[${rank}] ${item.id} (${item.memoryType})`).join('\n')}`,
        )
      }
      const extra = [
        result.correctedQuery && `searched for: ${result.correctedQuery}`,
        result.skipped.length && `skipped: ${result.skipped.join('; ')}`,
      ].filter(Boolean)
      parts.push(`${result.items.length} items ranked, ${result.usedTokens}/${result.budgetTokens} tokens packed (${result.queryKind} query)${extra.length ? `; ${extra.join('; ')}` : ''}`)
      return text(parts.join('\n\n') + indexNote())
    },

    async remember(a) {
      const { memory: m, created } = await db.remember({ ...a, source: 'agent_explicit' })
      const head = created ? `Remembered ${m.id} (${m.type}, confidence ${m.confidence.toFixed(2)}).` : `Already known: reinforced ${m.id} (x${m.reinforceCount}).`
      const redacted = m.redactions ? ` ${m.redactions} secret(s) were redacted before storage.` : ''
      return text(`${head}${redacted}\n${memoryLine(m)}`)
    },

    async search_code(a) {
      const hits = await db.searchCode(a.query, { limit: a.limit ?? 10 })
      if (!hits.length) return text(`No indexed code matched "${a.query}".${indexNote()}`)
      const blocks = hits.map(({ chunk: c, score }, i) => {
        const name = c.qualifiedName ? ` ${c.qualifiedName}` : ''
        const lines = c.content.split('\n')
        const body = lines.length > 80 ? `${lines.slice(0, 80).join('\n')}\n… (${lines.length - 80} more lines)` : c.content
        const fence = body.includes('```') ? '~~~~' : '```'
        return `[${i + 1}] ${c.path}:${c.startLine}-${c.endLine} (${c.kind}${name}) score ${score.toFixed(2)}\n${fence}${c.language}\n${body}\n${fence}`
      })
      return text(blocks.join('\n\n') + indexNote())
    },

    async impact(a) {
      const r = await db.impact(a.target, { maxDepth: a.maxDepth, limit: a.limit, memoryLimit: a.memoryLimit })
      const t = r.target
      const lines = [`Impact of a change to ${t.key} (${t.kind}${t.filePath && t.filePath !== t.key ? `, ${t.filePath}` : ''}):`]
      lines.push('', `Affected (${r.affected.length}${r.truncated ? ', truncated' : ''}, nearest first):`)
      if (!r.affected.length) lines.push('- nothing indexed depends on it')
      for (const n of r.affected) {
        const via = n.via.length ? ` via ${n.via.join(' -> ')}` : ''
        const where = n.node.filePath && n.node.startLine ? ` at ${n.node.filePath}:${n.node.startLine}` : ''
        lines.push(`- ${n.node.key} (${n.node.kind}), depth ${n.depth}${via}${where}`)
      }
      lines.push('', `Memories attached (${r.memories.length}${r.memoriesTruncated ? ', nearest first; more are attached: raise memoryLimit to list them' : ''}):`)
      if (!r.memories.length && !r.memoriesTruncated) lines.push('- none')
      for (const am of r.memories) lines.push(`${memoryLine(am.memory)}\n  (attached to ${am.nodeKey} as ${am.role}, depth ${am.depth})`)
      return text(lines.join('\n') + indexNote())
    },

    async feedback(a) {
      const r = await db.feedback(a.id, { kind: a.kind, correction: a.correction, comment: a.comment })
      const lines = []
      if (a.kind === 'correction' && r.correction) {
        lines.push(`Stored the correction as ${r.correction.id}; ${a.id} is superseded and forgotten.`, memoryLine(r.correction))
      } else {
        lines.push(`Recorded ${a.kind} on ${a.id}: confidence now ${r.memory.confidence.toFixed(2)}${r.memory.needsReview ? ', back in review' : ''}.`, memoryLine(r.memory))
      }
      if (r.trustOffer) lines.push(`Note: the project's trust level may step down to ${r.trustOffer.level} (${r.trustOffer.reason}).`)
      return text(lines.join('\n'))
    },

    async forget(a) {
      const m = await db.forget(a.id, a.reason)
      return text(`Forgot ${m.id} (${m.type}); a person can restore it (rollback to version ${m.version - 1}).\n${memoryLine(m)}`)
    },

    async session_context(a) {
      const c = await db.sessionContext({ task: a.task, modules: a.modules, sessionType: a.sessionType, budgetTokens: a.budgetTokens })
      if (!c.text) {
        return text('Nothing to start with: no unfinished work, pinned rules or memories confident enough for this task and these modules yet. Use recall while you work, and remember what the next session should know.')
      }
      const omitted = c.omitted ? `; ${c.omitted} more did not fit the budget` : ''
      return text(`${c.text}\n(${c.tokens} of ${c.budgetTokens} tokens${omitted})`)
    },
    async planner_context(a) {
      const p = await db.plannerContext(a.task, { modules: a.modules, budgetTokens: a.budgetTokens })
      if (!p.text) return text('Nothing to plan with yet: no measured sessions, dead ends, couplings, outcomes or recipes for these modules.')
      const omitted = p.omitted ? `; ${p.omitted} more did not fit the budget` : ''
      return text(`${p.text}\n(${p.tokens} of ${p.budgetTokens} tokens${omitted})`)
    },
    async qa_context(a) {
      const c = await db.qaContext({ modules: a.modules, budgetTokens: a.budgetTokens })
      if (!c.text) return text('Nothing recorded yet for testing these modules: no requirements, end-to-end observations or error patterns confident enough.')
      const omitted = c.omitted ? `; ${c.omitted} more did not fit the budget` : ''
      return text(`${c.text}\n(${c.tokens} of ${c.budgetTokens} tokens${omitted})`)
    },
    async memory_health() {
      const [h, s] = await Promise.all([db.health(), db.stats()])
      const e = db.embeddingStatus()
      const lines = [
        `Memory health: ${h.score}/100 (reviewed ${pct(h.parts.reviewed)}, fresh ${pct(h.parts.fresh)}, used ${pct(h.parts.used)}, agreed ${pct(h.parts.agreed)})`,
        `Memories: ${h.active} active (${h.activeLast30Days} used in the last 30 days), ${h.needsReview} need review, ${h.stale} stale, ${h.disputed} disputed, ${h.superseded} superseded, ${h.forgotten} forgotten; ${h.openGaps} open memory gaps`,
        `By type: ${Object.entries(s.byType).map(([t, n]) => `${t} ${n}`).join(', ') || 'none'}`,
        `Code index: ${describeIndex()}`,
        `Embeddings: ${e.provider}, ${e.state}${e.model ? ` (${e.model})` : ''}${e.reason ? `: ${e.reason}` : ''}`,
        `Database: ${s.path} (schema v${s.schemaVersion}); project root: ${root}`,
      ]
      return text(lines.join('\n'))
    },
  }

  function describeIndex() {
    const st = indexState
    switch (st.state) {
      case 'off':
        return 'not built by this server (--no-index); searches use whatever an earlier run indexed'
      case 'pending':
      case 'indexing':
        return `being built (started ${((Date.now() - st.startedAt) / 1000).toFixed(0)} s ago)`
      case 'failed':
        return `indexing failed: ${st.error}`
      default: {
        const s = st.summary
        return `ready: ${s.filesSeen} files (${s.filesIndexed} indexed, ${s.filesUnchanged} unchanged, ${s.filesSkipped} skipped), ${s.chunks} chunks in ${(s.durationMs / 1000).toFixed(1)} s; ${st.watching ? 'kept current by a file watcher' : 'not watched (--no-watch)'}`
      }
    }
  }

  // --- start, background indexing, shutdown -------------------------------------------------------

  let finished
  const done = new Promise((resolveDone) => (finished = resolveDone))
  let shuttingDown = false
  let indexRun = Promise.resolve()

  async function shutdown(reason) {
    if (shuttingDown) return
    shuttingDown = true
    log(`shutting down (${reason})`)
    indexAbort.abort()
    try {
      db.unwatch()
    } catch {}
    if (inFlight.size) {
      const drain = Promise.all(inFlight)
      const timeout = new Promise((ok) => setTimeout(ok, DRAIN_MS).unref())
      await Promise.race([drain, timeout])
    }
    try {
      await server.close()
    } catch (err) {
      log(`closing the transport failed: ${err?.message ?? err}`)
    }
    await indexRun
    await db.close()
    process.removeListener('SIGTERM', onSigterm)
    process.removeListener('SIGINT', onSigint)
    process.stdin.removeListener('end', onStdinEnd)
    process.removeListener('unhandledRejection', onUnhandled)
    restoreConsole()
    log('closed')
    finished()
  }
  const onSigterm = () => void shutdown('SIGTERM')
  const onSigint = () => void shutdown('SIGINT')
  // Deferred a turn: requests read with the last chunk of stdin start their handlers in
  // microtasks, which must have run (and be counted in flight) before shutdown looks.
  const onStdinEnd = () => setImmediate(() => void shutdown('the client closed stdin'))
  process.once('SIGTERM', onSigterm)
  process.once('SIGINT', onSigint)
  // The SDK's stdio transport does not watch for the end of stdin: a client that closes it (as
  // the SDK's own client does) expects the server to exit.
  process.stdin.once('end', onStdinEnd)

  server.onclose = () => void shutdown('the transport closed')
  server.onerror = (err) => log(`protocol error: ${err?.message ?? err}`)
  await server.connect(new StdioServerTransport())

  if (options.index !== false) {
    // After connect, so the answer to `initialize` never waits for indexing: tools work
    // meanwhile, on what the database already holds.
    indexState.state = 'indexing'
    indexState.startedAt = Date.now()
    indexRun = (async () => {
      try {
        const summary = await db.index({ signal: indexAbort.signal })
        indexState.summary = summary
        indexState.state = 'ready'
        log(`indexed ${summary.filesIndexed} files (${summary.filesUnchanged} unchanged, ${summary.filesSkipped} skipped), ${summary.chunks} chunks in ${(summary.durationMs / 1000).toFixed(1)} s`)
      } catch (err) {
        if (err?.code === 'ENGRAM_ABORTED' || shuttingDown) return
        indexState.state = 'failed'
        indexState.error = errorText(err)
        log(`indexing failed: ${indexState.error}`)
        return
      }
      if (options.watch === false || shuttingDown) return
      try {
        await db.watch({
          onEvent: (e) => {
            if (e.type === 'failed') log(`watch update failed: ${e.code}: ${e.message}`)
            else log(`re-indexed ${e.summary.indexedPaths.length} changed and ${e.summary.removedPaths.length} removed paths`)
          },
        })
        indexState.watching = true
        log(`watching ${root}`)
      } catch (err) {
        if (!shuttingDown) log(`watching failed: ${errorText(err)}`)
      }
    })()
  }

  await done
}

function pct(x) {
  return `${Math.round(x * 100)}%`
}

/** Sends console.log / info / debug to stderr; returns the function that restores them. */
function guardStdout() {
  const saved = { log: console.log, info: console.info, debug: console.debug }
  console.log = console.info = console.debug = (...args) => console.error(...args)
  return () => Object.assign(console, saved)
}

module.exports = { runMcpServer, TOOLS }
