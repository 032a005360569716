// Electron main process of the example: one engram engine for the app, agent tasks run in
// worker threads, their observer messages forwarded to an ObserverSession and finalized into
// memories. Runs unchanged under plain Node (`node main.js <dataDir> [projectRoot]`), which is
// how the example's test drives it: no Electron binary is needed to check the memory side.
'use strict'

const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { Worker } = require('node:worker_threads')

const { Engram } = require('engram')

const { bundledModelDir, memoryDbPath, userDataDir } = require('./paths')

/** One id per project root: one file holds every project, each handle sees only its own. */
function projectIdOf(projectRoot) {
  return crypto.createHash('sha256').update(path.resolve(projectRoot)).digest('hex').slice(0, 16)
}

/** Opens the app's memory for a project. Call once per project and keep the handle. */
async function openMemory({ userData, projectRoot }) {
  const dbPath = memoryDbPath(userData)
  fs.mkdirSync(path.dirname(dbPath), { recursive: true })
  const modelDir = bundledModelDir()
  const options = { path: dbPath, projectRoot, projectId: projectIdOf(projectRoot) }
  // Only when the app ships the model; otherwise engram's own lookup (ENGRAM_MODEL_DIR, the
  // per-user cache, the model package) applies. The model loads on first use, not here.
  if (modelDir) options.embeddings = { modelDir }
  const memory = await Engram.open(options)
  return { memory, dbPath, projectId: options.projectId }
}

/**
 * Runs one agent task in a worker thread. The worker posts the observer's IPC messages
 * (`memory:tool-call`, `memory:tool-result`, `memory:reasoning`, `memory:record`, ...); this
 * thread feeds them to the session (synchronous, microseconds, no I/O: fine on the main
 * process's event loop) and finalizes it when the worker exits, however it exits.
 */
function runAgentTask({ memory, dbPath, projectId }, { projectRoot, task }) {
  const sessionId = crypto.randomUUID()
  const session = memory.observe({ sessionId, sessionType: 'build', workUnit: task })
  const worker = new Worker(path.join(__dirname, 'agent-worker.js'), {
    workerData: { dbPath, projectRoot, projectId, task },
  })
  let context = null
  let rejected = 0
  let crash = null
  worker.on('message', (message) => {
    if (typeof message?.type !== 'string') return
    if (message.type.startsWith('memory:')) {
      try {
        session.observe(message)
      } catch (err) {
        // A malformed message (ENGRAM_INVALID_ARG) must not take the main process down.
        rejected++
        console.warn('observer rejected', message.type, err.code, err.message)
      }
    } else if (message.type === 'agent:context') {
      context = message
    }
  })
  worker.on('error', (err) => {
    crash = err
  })
  return new Promise((resolve, reject) => {
    worker.once('exit', () => {
      const snapshot = session.snapshot()
      // A crashed agent still finalizes: a failed session keeps its dead ends as memories.
      // Otherwise the outcome is the one its `memory:session-complete` message gave.
      session.finalize(crash ? 'failure' : undefined).then(
        (result) => resolve({ sessionId, snapshot, result, context, rejected, crash }),
        reject,
      )
    })
  })
}

/** Electron: open on ready, serve the renderer over IPC, close before the app quits. */
function runInElectron() {
  const { app, ipcMain } = require('electron')
  // The project the agent works on; a real app gets it from its UI.
  const projectRoot = process.env.AGENT_PROJECT_ROOT ?? process.cwd()
  let opened = null
  app.whenReady().then(() => {
    opened = openMemory({ userData: userDataDir(), projectRoot })
    ipcMain.handle('engram:recall', async (_event, query) => (await opened).memory.recall(String(query)))
    ipcMain.handle('agent:run', async (_event, task) => {
      const { result } = await runAgentTask(await opened, { projectRoot, task: String(task) })
      return { promoted: result.promoted.map((m) => m.content) }
    })
    // Create the app's BrowserWindow here as usual; the memory side needs none.
  })
  // close() resolves once the file is released; exit only after it, so that nothing
  // acknowledged is cut off and the next launch finds the file unlocked. app.exit() does not
  // emit will-quit again.
  app.on('will-quit', (event) => {
    if (!opened) return
    event.preventDefault()
    opened
      .then(({ memory }) => memory.close())
      .catch((err) => console.error('engram close', err))
      .finally(() => app.exit())
  })
}

/** Plain Node: one task against `<dataDir>`, the outcome as one JSON line on stdout. */
async function runOnce(dataDir, projectRoot) {
  const root = path.resolve(projectRoot ?? process.cwd())
  const opened = await openMemory({ userData: userDataDir(dataDir ?? process.env.ENGRAM_USER_DATA), projectRoot: root })
  try {
    const { snapshot, result, context, rejected, crash } = await runAgentTask(opened, {
      projectRoot: root,
      task: 'make npm test pass',
    })
    return {
      dbPath: opened.dbPath,
      events: snapshot.events,
      toolCalls: snapshot.toolCalls,
      rejected,
      crash: crash ? String(crash) : null,
      outcome: result.outcome,
      promoted: result.promoted.map((m) => ({ type: m.type, source: m.source, content: m.content })),
      candidates: result.candidates.map((c) => ({ signal: c.signal, decision: c.decision })),
      recalledByWorker: context?.memories ?? [],
    }
  } finally {
    await opened.memory.close()
  }
}

if (process.versions.electron) {
  runInElectron()
} else if (require.main === module) {
  runOnce(process.argv[2], process.argv[3]).then(
    (summary) => console.log(JSON.stringify(summary)),
    (err) => {
      console.error(err)
      process.exitCode = 1
    },
  )
}

module.exports = { openMemory, runAgentTask, projectIdOf }
