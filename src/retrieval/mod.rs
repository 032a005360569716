//! Retrieval: turning what a user or agent typed into ranked results. The four-stage recall
//! pipeline: what a recall asks for (`request`), query kinds (`query_kind`), the fusion
//! weights read per query from what the paths found (`weights`), weighted fusion and the
//! neighbourhood boost (`fusion`), a memory's standing (`scoring`), files one graph edge apart
//! (`neighbourhood`) and the graph path's ranking of their chunks (`graph_chunks`), the
//! pipeline itself (`recall`), the optional reranker (`rerank`), typo tolerance for the
//! keyword path (`typo`), the HyDE fallback (`hyde`), the token-budget packing (`packing`),
//! and what to inject between an agent's steps (`injection`). The keyword paths build their
//! FTS5 queries with [`crate::text::fts_query`], which `memory` and `code` share.

pub mod cascade;
pub mod fusion;
mod graph_chunks;
pub mod hyde;
pub mod injection;
pub mod neighbourhood;
pub mod packing;
pub mod query_kind;
pub mod recall;
pub mod request;
pub mod rerank;
pub mod scoring;
mod term_counts;
pub(crate) mod typo;
pub mod weights;
