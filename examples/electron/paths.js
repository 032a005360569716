// Where the example keeps its files: Electron's userData when running in Electron, else a
// directory the caller passes (plain Node: the example's test, a CLI, a headless server).
'use strict'

const path = require('node:path')
const fs = require('node:fs')

/**
 * The app's data directory. `process.versions.electron` (not `require('electron')`) tells the
 * two apart: under plain Node, `require('electron')` from the npm package returns the path of
 * the Electron binary, not an API, so it cannot be the test.
 */
function userDataDir(fallback) {
  if (process.versions.electron) {
    const { app } = require('electron')
    return app.getPath('userData') // e.g. ~/.config/<app name> on Linux, %APPDATA%\<app name> on Windows
  }
  if (!fallback) throw new Error('outside Electron, pass the data directory (or set ENGRAM_USER_DATA)')
  return path.resolve(fallback)
}

/**
 * The embedding model's directory when the app ships the model itself, else undefined: engram
 * then looks in ENGRAM_MODEL_DIR, the per-user cache that `engram model install` fills
 * (~/.cache/engram/models/... on Linux, shared by every app of the user), and the model's npm
 * package. A model shipped with `extraResources` lands in `process.resourcesPath`, outside
 * app.asar, where native code can read it. Without any model, everything but dense search works.
 */
function bundledModelDir() {
  if (!process.resourcesPath) return undefined // plain Node
  const dir = path.join(process.resourcesPath, 'models', 'all-minilm-l6-v2')
  return fs.existsSync(path.join(dir, 'model.safetensors')) ? dir : undefined
}

/** The database file: one per user, under userData, never inside the (read-only) app bundle. */
function memoryDbPath(userData) {
  return path.join(userData, 'engram', 'memory.db')
}

module.exports = { userDataDir, bundledModelDir, memoryDbPath }
