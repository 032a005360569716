//! Damaged database files from JS: `Engram.checkIntegrity()` on an open handle, and the
//! top-level `checkDatabase()` / `salvageDatabase()` that work on a file without opening an
//! engine on it (behind `engram doctor`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::required;
use super::class::Engram;
use super::json::{promise_json, JsonText};
use crate::lifecycle::salvage;

/// What `checkDatabase()` found.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseCheck {
    /// The file.
    pub path: String,
    /// Its size in bytes.
    pub bytes: f64,
    /// What the header and length check found (a file cut short), if anything.
    pub header: Option<String>,
    /// What SQLite's `quick_check` found (empty: every page is sound; at most 100).
    pub problems: Vec<String>,
    /// Memories that can be read (what `salvageDatabase()` would copy).
    pub readable_memories: f64,
    /// Memory rows that could not be read.
    pub unreadable_memories: f64,
    /// Whether the file is sound.
    pub ok: bool,
}

/// What `salvageDatabase()` copied.
#[napi(object, object_from_js = false)]
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SalvageReport {
    /// The new file.
    pub path: String,
    /// Projects found.
    pub projects: u32,
    /// Memories copied.
    pub memories: f64,
    /// Memory rows that could not be read.
    pub lost: f64,
    /// Past versions copied.
    pub versions: f64,
    /// Events copied.
    pub events: f64,
}

/// Checks a database file without opening an engine on it (nothing is written): its header
/// and length, every page (SQLite's `quick_check`, O(file size)), and how many memories can
/// be read. For a file `Engram.open` refuses with `ENGRAM_CORRUPT`, or one whose handle
/// started refusing writes.
///
/// ```ts
/// const check = await checkDatabase('.engram/memory.db')
/// if (!check.ok) console.log(check.header ?? check.problems[0], check.readableMemories)
/// ```
#[napi(
    ts_args_type = "path: string",
    ts_return_type = "Promise<DatabaseCheck>"
)]
pub fn check_database<'env>(
    env: &'env Env,
    path: Unknown<'env>,
) -> Result<PromiseRaw<'env, JsonText>> {
    let path: String = arg!(env, required(env, &path, "path"));
    promise_json(
        env,
        async move { salvage::doctor(std::path::Path::new(&path)).await },
        |r| DatabaseCheck {
            path: r.path.display().to_string(),
            bytes: r.bytes as f64,
            header: r.header,
            problems: r.problems,
            readable_memories: r.readable_memories as f64,
            unreadable_memories: r.unreadable_memories as f64,
            ok: r.ok,
        },
    )
}

/// Copies the memories of a (damaged) database file that can still be read, with their past
/// versions and events, into a new engram database at `to`, project by project; `to` must not
/// exist. The code index is not copied (index the project again); observer sessions, trust
/// levels and sync state start over. Rejects with `ENGRAM_INVALID_ARG` when `to` exists.
///
/// ```ts
/// const saved = await salvageDatabase('.engram/memory.db', '.engram/salvaged.db')
/// console.log(`${saved.memories} memories copied, ${saved.lost} lost`)
/// ```
#[napi(
    ts_args_type = "from: string, to: string",
    ts_return_type = "Promise<SalvageReport>"
)]
pub fn salvage_database<'env>(
    env: &'env Env,
    from: Unknown<'env>,
    to: Unknown<'env>,
) -> Result<PromiseRaw<'env, JsonText>> {
    let from: String = arg!(env, required(env, &from, "from"));
    let to: String = arg!(env, required(env, &to, "to"));
    promise_json(
        env,
        async move { salvage::salvage(std::path::Path::new(&from), std::path::Path::new(&to)).await },
        |r| SalvageReport {
            path: r.path.display().to_string(),
            projects: r.projects,
            memories: r.memories as f64,
            lost: r.lost as f64,
            versions: r.versions as f64,
            events: r.events as f64,
        },
    )
}

#[napi]
impl Engram {
    /// Reads every page of the database file now (SQLite's `quick_check`, O(file size)) and
    /// returns the problems found (`[]`: sound). Once damage is known (from here, or from the
    /// check that runs in the background a few seconds after a local file opens), every write
    /// rejects with `ENGRAM_CORRUPT`; reads go on. Then `salvageDatabase()` copies what can be
    /// read into a new file.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn check_integrity<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, JsonText>> {
        let handle = arg!(env, self.handle());
        promise_json(env, async move { handle.check_integrity().await }, |p| p)
    }
}
