//! Vector search: the exact in-process index the dense retrieval path scans, its int8
//! quantisation with error bounds, and (in `store.rs`) the vectors persisted in libSQL.

mod index;
mod quant;

pub use index::{SearchOutcome, VectorHit, VectorIndex};
