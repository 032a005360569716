// One engram engine per server process, shared by every route handler.
import path from 'node:path'

import { Engram } from 'engram'

declare global {
  // `var` is what puts it on globalThis; the promise (not the handle) is kept so that two
  // requests arriving before the first open finishes wait for the same open.
  // eslint-disable-next-line no-var
  var __engram: Promise<Engram> | undefined
}

/**
 * The process's engine, opened on first use. Kept on `globalThis` because `next dev` re-evaluates
 * modules on every edit: a module-level variable would open a new handle per hot reload and
 * never close the old ones. (engram shares one engine per file in a process anyway, but each
 * handle holds resources until it is closed.) Opened lazily, not at import, because `next build`
 * imports route modules to collect their config and must not create the database.
 */
export function getEngram(): Promise<Engram> {
  globalThis.__engram ??= Engram.open({
    // A file on the server's disk: outside `.next/` (rebuilt on every build) and outside
    // `public/`. Point ENGRAM_DB at a persistent volume in production.
    path: process.env.ENGRAM_DB ?? path.join(process.cwd(), '.engram', 'memory.db'),
    // File paths in memories (relatedFiles) are checked against this root.
    projectRoot: process.env.ENGRAM_PROJECT_ROOT ?? process.cwd(),
  }).catch((err: unknown) => {
    // Do not cache a failed open (a locked or unwritable file): the next request retries.
    globalThis.__engram = undefined
    throw err
  })
  return globalThis.__engram
}

/** HTTP status for engram's stable error codes (see `ErrorCode` in engram's index.d.ts). */
const STATUS: Record<string, number> = {
  ENGRAM_INVALID_ARG: 400,
  ENGRAM_NOT_FOUND: 404,
  ENGRAM_CONFLICT: 409,
  ENGRAM_CYCLE: 409,
  ENGRAM_SQLITE_BUSY: 503,
  ENGRAM_SYNC_UNREACHABLE: 503,
  ENGRAM_MODEL_UNAVAILABLE: 503,
}

/** Turns a thrown error into a JSON response that keeps engram's `code` for the client. */
export function errorResponse(err: unknown): Response {
  const code = (err as { code?: unknown })?.code
  const known = typeof code === 'string' && code.startsWith('ENGRAM_')
  const status = known ? (STATUS[code] ?? 500) : 500
  // Unknown failures are logged, not echoed: their messages may describe the server.
  if (status === 500) console.error(err)
  const message = known && status !== 500 ? (err as Error).message : 'internal error'
  return Response.json({ error: message, code: known ? code : 'INTERNAL' }, { status })
}
