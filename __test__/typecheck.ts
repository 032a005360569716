// Compiled (not run) by `tsc` in the test script: the README's TypeScript usage must type-check
// against the generated index.d.ts, and misuse must not.
import { Engram, type ErrorCode, type Memory, type RememberInput, type SearchHit } from '../index.js'

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
  memory.close()
  return hits
}

export function isClosedError(err: unknown): boolean {
  const code: ErrorCode = 'ENGRAM_CLOSED'
  return err instanceof Error && (err as Error & { code?: string }).code === code
}

export async function misuse(db: Engram): Promise<void> {
  // @ts-expect-error: 'bogus' is not a MemoryType
  await db.remember({ type: 'bogus', content: 'x' })
  // @ts-expect-error: content is required
  await db.remember({ type: 'gotcha' })
}
