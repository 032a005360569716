// Root layout of the example (no fonts: nothing is fetched at build time).
import type { ReactNode } from 'react'

export const metadata = { title: 'engram + Next.js' }

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  )
}
