// Agent worker thread of the example: a scripted stand-in for an agent loop. It recalls what
// earlier sessions learned (its own engram handle: same file, same engine as the main thread),
// then reports each step to the main thread as the observer's IPC messages. A real agent sends
// the same messages from its tool-call hooks; the script is what makes the example testable.
'use strict'

const { parentPort, workerData } = require('node:worker_threads')

const { Engram } = require('engram')

const { dbPath, projectRoot, projectId, task } = workerData
let step = 0

function post(message) {
  parentPort.postMessage(message)
}

/** One tool call and its result, as the observer's `memory:tool-call` / `memory:tool-result`. */
function tool(toolName, args, result, isError = false) {
  step++
  const toolCallId = `call-${step}`
  post({ type: 'memory:tool-call', toolName, args, stepIndex: step, toolCallId, timestamp: Date.now() })
  post({ type: 'memory:tool-result', toolName, result, isError, stepIndex: step, toolCallId, timestamp: Date.now() })
  post({ type: 'memory:step-complete', stepNumber: step })
}

async function main() {
  // Before the first step: what does memory say about this task? Opening the main thread's
  // file from a worker joins its engine (one writer, shared readers), so this costs no second
  // connection setup and never fights over SQLite's lock.
  const memory = await Engram.open({ path: dbPath, projectRoot, projectId })
  try {
    const { items, context } = await memory.recall(task, { phase: 'implement', filters: { kinds: ['memory'] } })
    post({ type: 'agent:context', context, memories: items.map((i) => i.memory.content) })
  } finally {
    await memory.close() // this handle only: the main thread's stays open
  }

  tool('Read', { file_path: 'package.json' }, '{ "scripts": { "test": "node --test" } }')
  tool('Read', { file_path: 'src/db/pool.ts' }, 'export const pool = new Pool({ host: "localhost", port: 5432 })')
  tool('Bash', { command: 'npm test' }, 'Error: connect ECONNREFUSED 127.0.0.1:5432\n    at TCPConnectWrap.afterConnect', true)
  step++
  post({
    type: 'memory:reasoning',
    // Worded the way the observer's self-correction patterns read it ("I was wrong about X.
    // Y is actually ..."): a self-correction is promoted from a single session.
    text: 'I was wrong about the test database. The test database is actually the Postgres container, so it must be running.',
    stepIndex: step,
  })
  tool('Bash', { command: 'docker compose up -d db' }, 'Container db  Started')
  tool('Bash', { command: 'npm test' }, '# tests 12\n# pass 12\n# fail 0')
  // What the agent chose to write down (its `record` tool): promoted as agent_explicit.
  post({
    type: 'memory:record',
    entry: {
      type: 'gotcha',
      content: 'npm test needs the Postgres container: run `docker compose up -d db` first',
      relatedFiles: ['src/db/pool.ts'],
    },
    stepIndex: step,
  })
  post({ type: 'memory:session-complete', outcome: 'success', stepsExecuted: step })
}

main().catch((err) => {
  // Rethrown from a timer so the worker exits with an 'error' event the main thread sees.
  setImmediate(() => {
    throw err
  })
})
