// Vite configuration for an app that bundles its Electron main process with Vite (electron-vite,
// Forge's Vite plugin): engram must stay external. A plain object, so it loads without Vite.
import { builtinModules } from 'node:module'

/** engram and its packages (engram-<platform>, engram-model-...): loaded by Node at run time. */
const ENGRAM = /^engram($|-)/

export default {
  build: {
    ssr: true,
    target: 'node20',
    rollupOptions: {
      input: { main: 'main.js', 'agent-worker': 'agent-worker.js' },
      // The addon's loader picks a `.node` binary at run time: bundled, that lookup breaks. Left
      // external, `require('engram')` stays and resolves from the shipped node_modules.
      external: [ENGRAM, 'electron', ...builtinModules, ...builtinModules.map((m) => `node:${m}`)],
      output: { format: 'cjs', entryFileNames: '[name].js' },
    },
  },
  // The dev server pre-bundles dependencies with esbuild, which cannot handle the binary either.
  optimizeDeps: { exclude: ['engram'] },
}
