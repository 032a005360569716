//! Process-wide SQLite settings, made once before libSQL initialises SQLite.
//!
//! SQLite counts every allocation it makes (`SQLITE_CONFIG_MEMSTATUS`, on by default) for
//! `sqlite3_memory_used()` and the soft heap limit, neither of which engram reads, and it
//! takes a process-wide mutex to do it: a bulk write (the graph sync of a cold index) makes
//! millions of allocations. `sqlite3_config` only works before `sqlite3_initialize`, which
//! libSQL calls once, the first time any database is built in the process; so every place
//! that builds one calls [`configure`] first. If something else initialised SQLite already, the
//! setting is refused and SQLite keeps counting: slower, never wrong.

use std::sync::Once;

use libsql::ffi;

/// Applies the process-wide settings, once; a no-op after the first call.
pub(crate) fn configure() {
    static CONFIGURED: Once = Once::new();
    CONFIGURED.call_once(|| {
        // SAFETY: `sqlite3_config` must not run concurrently with other SQLite calls. Every
        // database this crate builds goes through this `Once` first, so no other thread of
        // ours can be inside SQLite before it returns; a refusal (SQLITE_MISUSE, SQLite
        // already initialised) changes nothing.
        let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int) };
        if rc != ffi::SQLITE_OK {
            tracing::debug!(
                rc,
                "SQLite was initialised before engram: allocation counting stays on"
            );
        }
    });
}
