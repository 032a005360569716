// Next.js configuration for the engram example.

/** @type {import('next').NextConfig} */
const nextConfig = {
  // engram is a Node-API addon: its JS loader picks a prebuilt `.node` binary at run time
  // (`engram-linux-x64-gnu`, `engram-darwin-arm64`, ...). A bundler cannot inline a native
  // binary, and bundling the loader breaks the lookup of the platform package. Listing it here
  // keeps `require('engram')` a plain Node require from node_modules in the server build.
  // The platform packages are only ever required by engram's loader, so they need no entry.
  serverExternalPackages: ['engram'],
}

export default nextConfig
