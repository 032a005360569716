//! Memories: the model, input validation, the privacy filter, dedup, and the operations
//! (`remember`, `get`, `update`, `forget`, `list`, `history`, `rollback`, keyword `search`).
//!
//! API boundary: everything here takes a [`Ctx`] (store, clock, limits, project) and knows
//! nothing of JavaScript; the binding converts types and errors only.
//!
//! Architecture invariant: the memory model knows no lifecycle policy (`tests/layering.rs`).
//! What the lifecycle does when memories are written or used (links, the contradiction scan,
//! a session's use) it learns through [`WriteHooks`], which the handle passes in the [`Ctx`];
//! the hooks run inside the write's transaction, so they commit or roll back with it.
//!
//! Tables (schema home `main`, `src/store/sql/main/`):
//! - `memories`: one row per memory; `seq INTEGER PRIMARY KEY` is the stable key the FTS index
//!   uses (a TEXT primary key's implicit rowid can change on VACUUM); `id` is a UUIDv7. Lists
//!   and objects are JSON text. The unique partial index `(project_id, scope, content_hash)
//!   WHERE deprecated = 0` enforces dedup.
//! - `memory_versions(memory_id, version)`: past states, as compact snapshots (`snapshot.rs`).
//! - `memories_fts`: FTS5 external-content index over content, tags and related files
//!   (`porter unicode61 remove_diacritics 2`), one for every project in the file. New rows are
//!   added by the writer with one `INSERT ... SELECT` per write transaction
//!   (`write::index_for_search`; migration 003 says why there is no insert trigger); update and
//!   delete triggers keep it in step and fire only when indexed text actually changes.
//!   `search` ranks in the index alone for broad filters, then filters an over-fetched top
//!   (4x `limit`) by project and state; when that leaves the page short and the ranking was
//!   truncated, the exact joined ranking decides. Narrow filters go straight to the joined
//!   ranking.
//! - `memory_links(project_id, node_key, memory_seq, role)`: the graph node keys each memory is
//!   attached to (`target`, `impacted`, `file`), kept by insert/update triggers on `memories`:
//!   one insert trigger per column, each guarded by a WHEN, so a memory with empty lists costs
//!   nothing (one compound `json_each` query per insert cost ~30 us). Each link inserted or
//!   deleted logs its key to `memory_link_log` (by trigger), which the in-process graph
//!   indexes replay (`graph::served`); every update or delete of a memory logs its seq to
//!   `memory_row_log` (by trigger, keeping its last 100,000 rows), which drops the row from the
//!   memory rows those indexes keep for `impact()` (`graph::memory_rows`).
//!
//! `review` raises review flags for memories on files edited long after them (for the indexer).
//!
//! The lifecycle's columns and tables, the observer's, sync's and the vectors' are described by
//! their modules (`lifecycle`, `observer`, `sync`, `vector::store`).

pub mod dedup;
pub mod input;
pub mod model;
pub mod privacy;
mod read;
pub mod review;
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
pub use search::{SearchHit, SearchMode, SearchOptions, DEFAULT_SEARCH_LIMIT};
pub use write::Remembered;

pub(crate) use read::{attached_to_files, get, get_many, history, list, stats, triggered};
pub(crate) use search::{document_frequency, search};
pub(crate) use write::{
    archive_as_duplicate, change_in, forget, forget_in, load, prepare_batch, prepare_patch,
    remember_in, remember_many, rollback, touch, update,
};

use std::path::Path;

use futures::future::BoxFuture;
use libsql::Connection;

use crate::clock::Clock;
use crate::error::Result;
use crate::store::{Store, WriteTx};

/// Everything one memory operation needs: where to read and write, what time it is, the
/// limits, and which project (and root) the calling handle works in.
pub(crate) struct Ctx<'a> {
    pub store: &'a Store,
    pub clock: &'a dyn Clock,
    pub limits: &'a Limits,
    pub project_id: &'a str,
    pub project_root: Option<&'a Path>,
    /// What writes tell the layers above (see [`WriteHooks`]).
    pub hooks: &'a dyn WriteHooks,
}

/// What a memory write announces to the layers above, from inside its transaction: the handle
/// implements it with the lifecycle's functions, so the memory model needs no lifecycle import
/// while the lifecycle's work still commits or rolls back with the write. Boxed futures: the
/// hooks are called through `&dyn` from every write path, and a box per write costs nothing
/// next to the write.
pub(crate) trait WriteHooks: Send + Sync {
    /// A `remember` batch stored `written` (new and reinforced memories, in input order) in
    /// `tx`, search index included; the hook may change the memories it names in the same
    /// transaction and updates `written` to match.
    fn inserted<'a>(
        &'a self,
        ctx: &'a Ctx<'_>,
        tx: &'a WriteTx,
        written: &'a mut [Remembered],
    ) -> BoxFuture<'a, Result<()>>;

    /// `touch` counted a use of the memories `ids_json` (a JSON array of ids) of `project_id`
    /// at `now`, on behalf of `session_id`, in `tx`.
    fn used_in_session<'a>(
        &'a self,
        tx: &'a Connection,
        project_id: &'a str,
        session_id: &'a str,
        ids_json: &'a str,
        now: i64,
    ) -> BoxFuture<'a, Result<()>>;
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
            hooks: self.hooks,
        }
    }

    pub(crate) fn validator(&self) -> input::Validator<'_> {
        input::Validator {
            limits: self.limits,
            project_root: self.project_root,
        }
    }
}
