//! engram: a persistent, code-aware memory for AI coding agents.
//!
//! The core is plain Rust with no Node dependency (`cargo test --no-default-features` runs it
//! without Node); `src/node/` is the thin napi-rs binding behind the default `node` feature.
//! See ARCHITECTURE.md for the code map and invariants.

#[macro_use]
mod simd;

/// Every allocation of the core goes through mimalloc: answers built from the in-process
/// indexes are mostly allocation (glibc's malloc and free were ~30% of `impact()`'s CPU).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod agent;
pub mod clock;
pub mod code;
pub mod embed;
pub mod engine;
mod engram;
pub mod error;
mod file_read;
pub mod graph;
pub mod hook;
pub mod lifecycle;
pub mod log;
pub mod memory;
pub mod observer;
pub mod retrieval;
pub mod store;
pub mod sync;
pub mod text;
mod thread_priority;
pub mod vector;

// Not in the `cfg(test)` build: napi-derive registers exports only for the real addon, so the
// binding's items would all look unused there. The binding is tested from JS (`__test__/`).
#[cfg(all(feature = "node", not(test)))]
mod node;

pub use engine::{Engine, EngineOptions};
pub use engram::{
    Closing, Engram, OpenOptions, Optimized, DEFAULT_PROJECT_ID, MAX_TEXTS_PER_EMBED,
};
pub use error::{Error, Result};
