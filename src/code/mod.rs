//! Code intelligence: the language registry, tree-sitter parsing, the AST chunker with
//! contextual prefixes, structural extraction (definitions, imports, calls, inheritance) and
//! the indexer that keeps a project's code searchable.
//!
//! API boundary: [`analyze`] is pure (bytes in, chunks and symbols out, no I/O); the indexer
//! owns the file system and the database.

pub mod analyze;
mod ast_chunker;
pub mod chunk;
pub mod definitions;
pub mod extract;
pub mod indexer;
pub mod language;
mod parse_pool;
mod pending;
mod query_pass;
pub mod read;
pub mod resolve;
mod store;
mod text_chunker;
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
