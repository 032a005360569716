// POST /api/remember: stores a memory (engram's RememberInput as the JSON body).
import type { RememberInput } from 'engram'

import { errorResponse, getEngram } from '@/lib/engram'

// engram is a native addon: it runs in the Node.js runtime, never on the edge.
export const runtime = 'nodejs'
// Every request reads or writes the database: never prerender or cache this route.
export const dynamic = 'force-dynamic'

export async function POST(request: Request): Promise<Response> {
  let input: RememberInput
  try {
    input = await request.json()
  } catch {
    return Response.json({ error: 'the body is not JSON', code: 'INVALID_JSON' }, { status: 400 })
  }
  try {
    const memory = await getEngram()
    // engram validates the input itself (type, content size, confidence, paths inside the
    // project root) and rejects with ENGRAM_INVALID_ARG, which errorResponse turns into a 400.
    const { memory: stored, created } = await memory.remember(input)
    return Response.json({ memory: stored, created }, { status: created ? 201 : 200 })
  } catch (err) {
    return errorResponse(err)
  }
}
