//! Code intelligence: the language registry, tree-sitter parsing, the AST chunker with
//! contextual prefixes, structural extraction (definitions, imports, calls, inheritance) and
//! the indexer that keeps a project's code searchable.
//!
//! API boundary: [`analyze`] is pure (bytes in, chunks and symbols out, no I/O); the indexer
//! owns the file system and the database.
//!
//! Tables (schema home `code`, `src/store/sql/code/`), recomputable from the files, so never
//! synced:
//! - `code_files(project_id, path)`: one row per walked file, indexed or skipped, with content
//!   hash, size and mtime (a re-index skips files whose size and mtime match, then files whose
//!   hash matches) and `issues` (JSON: `binary`, `too_large`, `invalid_utf8`, ...).
//! - `code_chunks`: chunks in file order (kind, names, symbols, lines, bytes, hash, token
//!   estimate, context prefix, text, and `embed_hash`: the first 16 bytes of the SHA-256 of
//!   its embedding text, which keys its vector); `code_chunks_fts` indexes names (with split
//!   words), context and text, ranked with weights 4/2/1.
//! - `code_symbols`: definitions (kind, name, qualified name, lines).
//! - `code_refs`: imports (with `resolved_path`), calls and extends/implements (with
//!   `resolved_symbol_id` when one definition of that name exists in the file, else in the
//!   project); `stale_at` is set on a changed file's refs before it is re-parsed. After a run,
//!   references whose target names were defined or dropped by the changed files are resolved
//!   again (all of them past 5,000 names).
//! - `code_index_pending`: runs whose graph sync is still owed (`pending.rs`).
//!
//! The indexer's last step resolves references, then syncs the graph's layers 1 and 2 for the
//! changed files and for references elsewhere to names whose definitions changed in number or
//! qualified name (a body-only edit widens nothing; everything past 5,000 names), and marks
//! memories on symbols whose hash changed stale (`graph::code_layer`).

pub mod analyze;
mod ast_chunker;
pub mod chunk;
pub mod definitions;
pub mod extract;
pub mod git;
pub mod indexer;
pub mod language;
mod parse_pool;
mod pending;
mod query_pass;
pub mod read;
pub mod resolve;
mod store;
mod text_chunker;
mod ts_alloc;
pub(crate) mod walk;
pub mod watch;

pub use analyze::{analyze, AnalyzeOptions, FileAnalysis, FileIssue};
pub use chunk::{Chunk, ChunkKind, ChunkOptions};
pub use definitions::{DefKind, Definition};
pub use extract::{RefKind, Reference};
pub use indexer::{FileProblem, IndexOptions, IndexPhase, IndexProgress, IndexSummary};
pub use language::{FileKind, Language, TextFormat};
pub use read::{CodeChunk, CodeHit};
pub use watch::{OnWatchEvent, WatchEvent, WatchOptions, Watcher};
