//! Retrieval: turning what a user or agent typed into ranked results. Today this holds the
//! safe FTS5 query builder that every BM25 path uses; the four-stage pipeline joins it here.

pub mod fts_query;
pub mod fusion;
pub mod neighbourhood;
pub mod query_kind;
pub mod scoring;
