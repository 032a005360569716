//! Per-connection settings: WAL, durability, busy timeout, foreign keys, cache.

use std::time::Duration;

use libsql::Connection;

use crate::error::{DbContext, Result};

/// Runs a pragma, discarding any row it returns (some pragmas answer with their new value).
async fn pragma(conn: &Connection, sql: &str) -> Result<()> {
    let mut rows = conn.query(sql, ()).await.ctx(sql)?;
    while rows.next().await.ctx(sql)?.is_some() {}
    Ok(())
}

async fn common(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    conn.busy_timeout(busy_timeout)
        .ctx("setting busy timeout")?;
    pragma(conn, "PRAGMA foreign_keys = ON").await?;
    // WAL + NORMAL: a commit is durable against process crashes at once and against power
    // loss from the next checkpoint on; commits cost no fsync, which is what makes a
    // single `remember` a few tens of microseconds.
    pragma(conn, "PRAGMA synchronous = NORMAL").await?;
    pragma(conn, "PRAGMA temp_store = MEMORY").await?;
    Ok(())
}

/// Settings of the writer connection. WAL mode is persistent in the file, so setting it here,
/// once, covers every later connection.
pub(crate) async fn apply_writer(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    // Before the first statement: the previous engine of this file may still be closing its
    // last connection (which checkpoints the WAL under a lock), and an open must wait for
    // that, not fail with SQLITE_BUSY at once.
    conn.busy_timeout(busy_timeout)
        .ctx("setting busy timeout")?;
    // The first write to the file, after `migrations::refuse_foreign` read its tables.
    pragma(conn, "PRAGMA journal_mode = WAL").await?;
    common(conn, busy_timeout).await?;
    // 8 MiB of page cache for the writer (FTS merges touch many pages).
    pragma(conn, "PRAGMA cache_size = -8192").await?;
    // The checkpoint thread does this work beside the writer (see `checkpoint`); the
    // writer's own is a backstop for when writes never pause.
    pragma(
        conn,
        &format!(
            "PRAGMA wal_autocheckpoint = {}",
            super::checkpoint::WRITER_BACKSTOP_PAGES
        ),
    )
    .await
}

/// Settings of the checkpoint thread's connection: it never checkpoints on its own commits
/// (it makes none), and a busy file makes a checkpoint give up, not wait.
pub(crate) async fn apply_checkpointer(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    common(conn, busy_timeout).await?;
    pragma(conn, "PRAGMA cache_size = -256").await
}

/// Settings of the connection of the background integrity check, which reads every page
/// once: through `pread` into a small cache, not a memory map. Mapped, the pages it walks
/// count in the process's resident set (the whole file, 95 MB of a 286 MB peak five seconds
/// into a cold index of 4.2M lines); read, they stay in the OS page cache.
pub(crate) async fn apply_scanner(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    common(conn, busy_timeout).await?;
    pragma(conn, "PRAGMA cache_size = -256").await?;
    pragma(conn, "PRAGMA mmap_size = 0").await
}

/// Settings of a pooled reader connection.
pub(crate) async fn apply_reader(conn: &Connection, busy_timeout: Duration) -> Result<()> {
    common(conn, busy_timeout).await?;
    // 2 MiB each: readers share the OS page cache; keeps idle RSS small.
    pragma(conn, "PRAGMA cache_size = -2048").await?;
    // Reads through a shared memory map instead of a `pread` and a 4 KiB copy per page missed
    // in that small cache: a recall walks FTS doclists and vectors' rows across a file of
    // hundreds of MB, and the syscalls and copies were ~8% of its CPU. Mapping costs address
    // space, not memory (the pages are the OS page cache's); writes still go through the WAL.
    pragma(conn, "PRAGMA mmap_size = 1073741824").await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn mmap_size(conn: &Connection) -> i64 {
        let mut rows = conn.query("PRAGMA mmap_size", ()).await.unwrap();
        rows.next().await.unwrap().unwrap().get(0).unwrap()
    }

    /// The integrity check's whole-file read must not map the file (see [`apply_scanner`]),
    /// while readers keep their map.
    #[tokio::test]
    async fn the_whole_file_scan_reads_pages_without_a_memory_map() {
        let dir = tempfile::tempdir().unwrap();
        crate::store::process::configure();
        let db = libsql::Builder::new_local(dir.path().join("x.db"))
            .build()
            .await
            .unwrap();
        let (reader, scanner) = (db.connect().unwrap(), db.connect().unwrap());
        let timeout = Duration::from_secs(1);
        apply_reader(&reader, timeout).await.unwrap();
        apply_scanner(&scanner, timeout).await.unwrap();
        assert_eq!(mmap_size(&reader).await, 1 << 30);
        assert_eq!(mmap_size(&scanner).await, 0);
    }
}
