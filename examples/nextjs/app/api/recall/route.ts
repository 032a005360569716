// GET /api/recall?q=...&limit=...: memories (and indexed code) ranked for a query, as JSON.
import type { RecallOptions } from 'engram'

import { errorResponse, getEngram } from '@/lib/engram'

// engram is a native addon: it runs in the Node.js runtime, never on the edge.
export const runtime = 'nodejs'
// Every request reads the database: never prerender or cache this route.
export const dynamic = 'force-dynamic'

export async function GET(request: Request): Promise<Response> {
  const params = new URL(request.url).searchParams
  const options: RecallOptions = {}
  // Passed through as numbers: engram rejects a bad limit with ENGRAM_INVALID_ARG (a 400).
  if (params.has('limit')) options.limit = Number(params.get('limit'))
  if (params.has('budget')) options.budgetTokens = Number(params.get('budget'))
  try {
    const memory = await getEngram()
    const { items, context, usedTokens, skipped } = await memory.recall(params.get('q') ?? '', options)
    return Response.json({
      items: items.map((i) => ({
        kind: i.kind,
        id: i.id,
        score: i.score,
        citation: i.citation,
        content: i.memory?.content ?? i.chunk?.content,
        type: i.memoryType,
      })),
      context,
      usedTokens,
      skipped,
    })
  } catch (err) {
    return errorResponse(err)
  }
}
