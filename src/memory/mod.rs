//! Memories: the model, input validation, the privacy filter, dedup, and the operations
//! (`remember`, `get`, `update`, `forget`, `list`, `history`, `rollback`, keyword `search`).
//!
//! API boundary: everything here takes a [`Ctx`] (store, clock, limits, project) and knows
//! nothing of JavaScript; the binding converts types and errors only.

pub mod dedup;
pub mod input;
pub mod model;
pub mod privacy;
mod read;
pub(crate) mod rows;
pub(crate) mod scrub;
mod search;
pub(crate) mod snapshot;
mod write;

pub use input::{Limits, MemoryPatch, RememberInput};
pub use model::{
    Memory, MemoryRelation, MemoryScope, MemorySource, MemoryType, RelationType, ShareScope,
    WorkUnitRef,
};
pub use read::{ListFilter, ListOrder, MemoryVersion, Stats};
pub use search::{SearchHit, SearchMode, SearchOptions};
pub use write::Remembered;

pub(crate) use read::{attached_to_files, get, get_many, history, list, stats, triggered};
pub(crate) use search::{document_frequency, search};
pub(crate) use write::{
    archive_as_duplicate, change_in, forget, forget_in, load, prepare_batch, prepare_patch,
    remember_in, remember_many, rollback, touch, update,
};

use std::path::Path;

use crate::clock::Clock;
use crate::store::Store;

/// Everything one memory operation needs: where to read and write, what time it is, the
/// limits, and which project (and root) the calling handle works in.
pub(crate) struct Ctx<'a> {
    pub store: &'a Store,
    pub clock: &'a dyn Clock,
    pub limits: &'a Limits,
    pub project_id: &'a str,
    pub project_root: Option<&'a Path>,
    /// Where writes queue the memories they created for the contradiction scan.
    pub scans: &'a dyn crate::lifecycle::conflict_scan::ScanQueue,
}

impl Ctx<'_> {
    /// The same store, clock and limits for another project (no project root).
    pub(crate) fn for_project<'b>(&'b self, project_id: &'b str) -> Ctx<'b> {
        Ctx {
            store: self.store,
            clock: self.clock,
            limits: self.limits,
            project_id,
            project_root: None,
            scans: self.scans,
        }
    }

    pub(crate) fn validator(&self) -> input::Validator<'_> {
        input::Validator {
            limits: self.limits,
            project_root: self.project_root,
        }
    }
}
