//! Agent files the tests share: a `CLAUDE.md`, an `AGENTS.md` in Codex style, a Markdown and
//! a plain-text `.cursorrules`, a hot tier to render, and a compact view of parsed rules.

use super::{GeneratedItem, Rule};

pub(super) const CLAUDE_MD: &str = "\
# CLAUDE.md

This file provides guidance to Claude Code (claude.ai/code) when working with code in this repository.

## Project overview

Acme Billing is a Next.js 14 app that issues invoices
and syncs payments from Stripe.

## Commands

```bash
npm install
npm run dev
```

- `npm test` runs the unit tests
- `npm run lint`
- `pnpm dev`
- Run a single test file with `npx vitest run src/lib/money.test.ts`
- Regenerate the Prisma client after editing the schema:
  ```bash
  npx prisma generate
  ```

## Code style

- Use TypeScript strict mode; no `any`.
- Prefer named exports over default exports.
  Default exports make renames harder to grep.
- Components live in `src/components`, one per file:
  - File names are PascalCase, e.g. `InvoiceTable.tsx`
  - Co-locate the test as `InvoiceTable.test.tsx`
- Keep lines short.
- Be terse.

| Tool | Purpose |
|------|---------|
| `npm run typecheck` | Type-check without emitting |
| `npm run format` | Format with Prettier |

## Architecture decisions

- We chose Prisma over raw SQL because migrations are reviewed in PRs.
- Money is stored as integer cents in `BigInt` columns.

---

## Gotchas

- Never call Stripe from a React Server Component; use the `/api/stripe` routes.
- The dev database is reset by `npm run db:reset`, which also drops seed data.

[Contributing guide](docs/CONTRIBUTING.md)

<!-- TODO: document the deploy pipeline -->
";

pub(super) const AGENTS_MD: &str = "\
# AGENTS.md

## Dev environment tips
- Use `pnpm dlx turbo run where <project_name>` to jump to a package instead of scanning with `ls`.
- Run `pnpm install --filter <project_name>` to add the package to your workspace so Vite, ESLint, and TypeScript can see it.
- Check the name field inside each package's package.json to confirm the right name—skip the top-level one.

## Testing instructions
- Find the CI plan in the .github/workflows folder.
- From the package root you can just call `pnpm test`. The commit should pass all tests before you merge.
- Fix any test or type errors until the whole suite is green.
- Do not mock the database in integration tests.

## PR instructions
- Title format: [<project_name>] <Title>
- Always run `pnpm lint` and `pnpm test` before committing.
";

pub(super) const CURSORRULES: &str = "\
You are an expert in TypeScript, Node.js, Next.js App Router, React, Shadcn UI, Radix UI and Tailwind.

Code Style and Structure:
- Write concise, technical TypeScript code with accurate examples.
- Use functional and declarative programming patterns; avoid classes.
- Prefer iteration and modularization over code duplication.

Naming Conventions
- Use lowercase with dashes for directories (e.g., components/auth-wizard).
- Favor named exports for components.

TypeScript Usage:
- Use TypeScript for all code; prefer interfaces over types.
";

pub(super) const CURSORRULES_PLAIN: &str = "\
You are an expert Python developer who writes FastAPI services.
Always answer in English, even when the question is in another language.

Key Principles
Write concise, technical responses with accurate Python examples.
Use type hints for all function signatures.

Error Handling:
Handle errors and edge cases at the beginning of functions.
Never swallow exceptions silently.
1. Validate request bodies with Pydantic models.
2. Return HTTP 422 for validation errors.
OK
";

/// (line, type, section path joined with " > ", text) of each rule.
pub(super) fn rows(rules: &[Rule]) -> Vec<(u32, &'static str, String, String)> {
    rules
        .iter()
        .map(|r| (r.line, r.memory_type, r.section.join(" > "), r.text.clone()))
        .collect()
}

pub(super) fn row(
    line: u32,
    t: &'static str,
    section: &str,
    text: &str,
) -> (u32, &'static str, String, String) {
    (line, t, section.to_owned(), text.to_owned())
}

pub(super) fn hot_tier() -> Vec<GeneratedItem<'static>> {
    vec![
        GeneratedItem {
            id: "mem_01",
            memory_type: "preference",
            text: "Prefer   named exports\nover default exports.",
        },
        GeneratedItem {
            id: "mem_02",
            memory_type: "gotcha",
            text: "Never run `prisma migrate reset` against the staging database.",
        },
        GeneratedItem {
            id: "mem_03",
            memory_type: "error_pattern",
            text: "Flaky timer tests:\n  ```ts\n  await vi.runAllTimersAsync();\n  ```\nthen rerun",
        },
        GeneratedItem {
            id: "mem_04",
            memory_type: "gotcha",
            text: "Seed data",
        },
    ]
}
