//! Vector search: the exact in-process index the dense retrieval path scans (`index.rs`), its
//! int8 quantisation with error bounds (`quant.rs`), vectors persisted in libSQL with their
//! change logs (`store.rs`), the engine's indexes kept current from those logs (`service.rs`),
//! the job that embeds everything that has no vector yet (`job.rs`), and dense search for a project
//! with filters (`dense.rs`), and the automatic background runs of the `autoEmbed` option
//! (`auto.rs`).

mod auto;
mod dense;
mod index;
mod job;
mod quant;
mod service;
mod store;

pub use auto::{AutoEmbed, BackgroundStatus};
pub(crate) use dense::{dense_ranking, dense_search, describe, part_symbols};
pub use dense::{DenseHit, DenseQuery, MAX_DENSE_LIMIT};
pub use index::{SearchOutcome, VectorHit, VectorIndex};
pub use job::{embed_pending, EmbedProgress, EmbedReport};
pub use service::VectorIndexes;
pub(crate) use store::decode as decode_vector;
#[cfg(test)]
pub(crate) use store::part_key;
pub use store::{ChunkVectors, ItemKind};
