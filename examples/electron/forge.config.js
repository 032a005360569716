// Electron Forge configuration of the engram example (`npm run make`).
'use strict'

module.exports = {
  packagerConfig: {
    asar: {
      // Native code cannot be loaded from inside app.asar. The plugin below unpacks every
      // `.node` file (engram-<platform>'s binary); this pattern also unpacks the rest of
      // engram's packages, e.g. the optional model package whose weights the native code
      // reads from disk. The plugin merges its pattern with this one.
      unpack: '**/node_modules/engram*/**',
    },
  },
  plugins: [
    {
      name: '@electron-forge/plugin-auto-unpack-natives',
      config: {},
    },
  ],
  makers: [{ name: '@electron-forge/maker-zip', config: {} }],
}
