// Home page: says which routes the example serves.
export default function Home() {
  return (
    <main>
      <h1>engram + Next.js</h1>
      <p>
        <code>POST /api/remember</code> with a JSON memory, <code>GET /api/recall?q=...</code> to
        get it back.
      </p>
    </main>
  )
}
