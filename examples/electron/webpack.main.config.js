// webpack configuration for an app that bundles its Electron main process (not needed by this
// example, which ships main.js as is): engram must stay external.
'use strict'

const path = require('node:path')

/** engram and its packages (engram-<platform>, engram-model-...): loaded by Node at run time. */
const ENGRAM = /^engram($|-)/

module.exports = {
  target: 'electron-main',
  mode: 'production',
  // The worker is its own entry: `new Worker(path.join(__dirname, 'agent-worker.js'))` loads a
  // file at run time, which webpack does not follow.
  entry: { main: './main.js', 'agent-worker': './agent-worker.js' },
  output: { path: path.join(__dirname, 'dist'), filename: '[name].js' },
  // Keep __dirname the output directory, so the worker path above resolves after bundling.
  node: { __dirname: false },
  // The addon's loader picks a `.node` binary at run time from engram-<platform>: bundled, that
  // lookup breaks and webpack cannot parse the binary. `commonjs engram` leaves a plain
  // require(), resolved from node_modules, which the packager must therefore ship (electron-
  // builder ships `dependencies`; Forge's webpack plugin does not, see the README).
  externals: [
    ({ request }, callback) => (ENGRAM.test(request) ? callback(null, `commonjs ${request}`) : callback()),
  ],
}
