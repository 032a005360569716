//! Versioned schema migrations, one ordered list per schema *home*.
//!
//! A home is a group of tables that lives in one database file. Today every home lives in the
//! one file; the sync work splits what can be recomputed on each device (code index,
//! structural graph) from what cannot (memories, knowledge), so each table's home is declared
//! here, once, by the list its migration is in.
//!
//! Invariants: a migration is applied in one transaction together with the version bump, so a
//! crash leaves the file at the old or the new version, never between; a file whose recorded
//! version is newer than this build knows is refused (`ENGRAM_SCHEMA_TOO_NEW`), never touched.

use libsql::Connection;

use super::WriteTarget;
use crate::error::{DbContext, Error, Result};

/// One step of a home's schema.
#[derive(Debug)]
pub struct Migration {
    /// 1-based, consecutive.
    pub version: i64,
    /// Short name for logs and `stats()`.
    pub name: &'static str,
    /// The DDL, run as one batch inside the migration's transaction.
    pub sql: &'static str,
}

/// A group of tables that lives in one database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// Memories and their history: what cannot be recomputed from the files on a device.
    Main,
    /// The code index (files, chunks, symbols, references) and the knowledge graph with its
    /// closure table: recomputed from the files, so it stays local when memories sync.
    Code,
}

impl Home {
    /// Every home, in the order they are migrated.
    pub const ALL: &'static [Home] = &[Home::Main, Home::Code];

    /// The name recorded in `engram_schema`.
    pub fn name(self) -> &'static str {
        match self {
            Home::Main => "main",
            Home::Code => "code",
        }
    }

    /// This home's migrations, oldest first.
    pub fn migrations(self) -> &'static [Migration] {
        match self {
            Home::Main => MAIN,
            Home::Code => CODE,
        }
    }

    /// Newest version this build knows.
    pub fn latest(self) -> i64 {
        self.migrations().last().map_or(0, |m| m.version)
    }
}

const MAIN: &[Migration] = &[
    Migration {
        version: 1,
        name: "memories",
        sql: include_str!("sql/main/001_memories.sql"),
    },
    Migration {
        version: 2,
        name: "list_order_indexes",
        sql: include_str!("sql/main/002_list_order_indexes.sql"),
    },
    Migration {
        version: 3,
        name: "fts_insert_in_code",
        sql: include_str!("sql/main/003_fts_insert_in_code.sql"),
    },
    Migration {
        version: 4,
        name: "memory_links",
        sql: include_str!("sql/main/004_memory_links.sql"),
    },
    Migration {
        version: 5,
        name: "memory_links_split_insert",
        sql: include_str!("sql/main/005_memory_links_split_insert.sql"),
    },
    Migration {
        version: 6,
        name: "memory_vectors",
        sql: include_str!("sql/main/006_memory_vectors.sql"),
    },
    Migration {
        version: 7,
        name: "memory_vocab",
        sql: include_str!("sql/main/007_memory_vocab.sql"),
    },
    Migration {
        version: 8,
        name: "memory_triggers",
        sql: include_str!("sql/main/008_memory_triggers.sql"),
    },
    Migration {
        version: 9,
        name: "observer",
        sql: include_str!("sql/main/009_observer.sql"),
    },
    Migration {
        version: 10,
        name: "sync",
        sql: include_str!("sql/main/010_sync.sql"),
    },
    Migration {
        version: 11,
        name: "knowledge",
        sql: include_str!("sql/main/011_knowledge.sql"),
    },
    Migration {
        version: 12,
        name: "lifecycle",
        sql: include_str!("sql/main/012_lifecycle.sql"),
    },
    Migration {
        version: 13,
        name: "sessions_trust",
        sql: include_str!("sql/main/013_sessions_trust.sql"),
    },
    Migration {
        version: 14,
        name: "session_context",
        sql: include_str!("sql/main/014_session_context.sql"),
    },
    Migration {
        version: 15,
        name: "git_changes",
        sql: include_str!("sql/main/015_git_changes.sql"),
    },
    Migration {
        version: 16,
        name: "memory_link_log",
        sql: include_str!("sql/main/016_memory_link_log.sql"),
    },
    Migration {
        version: 17,
        name: "memory_row_log",
        sql: include_str!("sql/main/017_memory_row_log.sql"),
    },
];

const CODE: &[Migration] = &[
    Migration {
        version: 1,
        name: "code_index",
        sql: include_str!("sql/code/001_code_index.sql"),
    },
    Migration {
        version: 2,
        name: "graph",
        sql: include_str!("sql/code/002_graph.sql"),
    },
    Migration {
        version: 3,
        name: "graph_read_paths",
        sql: include_str!("sql/code/003_graph_read_paths.sql"),
    },
    Migration {
        version: 4,
        name: "chunk_vectors",
        sql: include_str!("sql/code/004_chunk_vectors.sql"),
    },
    Migration {
        version: 5,
        name: "chunk_vocab",
        sql: include_str!("sql/code/005_chunk_vocab.sql"),
    },
    Migration {
        version: 6,
        name: "observer_checkpoints",
        sql: include_str!("sql/code/006_observer_checkpoints.sql"),
    },
    Migration {
        version: 7,
        name: "knowledge_backfill",
        sql: include_str!("sql/code/007_knowledge_backfill.sql"),
    },
    Migration {
        version: 8,
        name: "index_pending",
        sql: include_str!("sql/code/008_index_pending.sql"),
    },
    Migration {
        version: 9,
        name: "chunk_parts",
        sql: include_str!("sql/code/009_chunk_parts.sql"),
    },
    Migration {
        version: 10,
        name: "graph_log",
        sql: include_str!("sql/code/010_graph_log.sql"),
    },
];

/// A home's schema version after opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaStatus {
    /// The home.
    pub home: &'static str,
    /// Version the file is at now.
    pub version: i64,
    /// Versions applied by this open (0 when the file was already current).
    pub applied: i64,
}

/// How many table names a refusal lists before "and N more".
const FOREIGN_TABLES_LISTED: usize = 5;

/// Refuses a database of another application, before anything is written to it.
///
/// An engram file is marked by its `engram_schema` table (created before any other). A file
/// with tables but without that mark belongs to someone else: switching it to WAL and adding
/// engram's tables would change another application's data, so it fails with
/// `ENGRAM_INVALID_ARG` naming its tables. An empty database (no tables: a new path, an empty
/// file) is engram's to fill. Only reads: run it before any pragma that writes (`journal_mode`).
/// A file that is not a database fails here with `ENGRAM_CORRUPT`.
pub(crate) async fn refuse_foreign(conn: &Connection, display: &str) -> Result<()> {
    const SQL: &str = "SELECT name FROM sqlite_master
                        WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
                        ORDER BY name";
    let mut rows = conn.query(SQL, ()).await.ctx("reading the file's tables")?;
    let mut tables = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading the file's tables")? {
        tables.push(row.get::<String>(0).ctx("reading the file's tables")?);
    }
    if tables.is_empty() || tables.iter().any(|t| t == "engram_schema") {
        return Ok(());
    }
    let mut listed = tables
        .iter()
        .take(FOREIGN_TABLES_LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if tables.len() > FOREIGN_TABLES_LISTED {
        listed.push_str(&format!(
            " and {} more",
            tables.len() - FOREIGN_TABLES_LISTED
        ));
    }
    Err(Error::invalid(format!(
        "{display} is not an engram database (it has tables: {listed}): engram refuses to \
         modify it; pass a new path"
    )))
}

/// Brings every listed home up to date on the writer connection.
pub(crate) async fn migrate(
    target: &(impl WriteTarget + ?Sized),
    homes: &[Home],
) -> Result<Vec<SchemaStatus>> {
    let conn = target.connection();
    conn.execute(
        "CREATE TABLE IF NOT EXISTS engram_schema (
           home TEXT PRIMARY KEY,
           version INTEGER NOT NULL,
           updated_at INTEGER NOT NULL
         )",
        (),
    )
    .await
    .ctx("creating engram_schema")?;

    let mut out = Vec::with_capacity(homes.len());
    for &home in homes {
        let found = current_version(conn, home).await?;
        if found > home.latest() {
            tracing::warn!(
                home = home.name(),
                found,
                supported = home.latest(),
                "the file's schema is newer than this build knows; refusing it untouched"
            );
            return Err(Error::SchemaTooNew {
                home: home.name(),
                found,
                supported: home.latest(),
            });
        }
        let mut applied = 0;
        let started = std::time::Instant::now();
        for m in home.migrations().iter().filter(|m| m.version > found) {
            let step = std::time::Instant::now();
            apply(target, home, m).await?;
            tracing::debug!(
                home = home.name(),
                version = m.version,
                name = m.name,
                ms = crate::log::ms(step.elapsed()),
                "applied migration {} v{} ({})",
                home.name(),
                m.version,
                m.name
            );
            applied += 1;
        }
        if applied > 0 {
            tracing::info!(
                home = home.name(),
                from = found,
                to = found + applied,
                ms = crate::log::ms(started.elapsed()),
                "migrated schema home {} from v{found} to v{}",
                home.name(),
                found + applied
            );
        }
        out.push(SchemaStatus {
            home: home.name(),
            version: found + applied,
            applied,
        });
    }
    Ok(out)
}

async fn current_version(conn: &Connection, home: Home) -> Result<i64> {
    let mut rows = conn
        .query(
            "SELECT version FROM engram_schema WHERE home = ?1",
            [home.name()],
        )
        .await
        .ctx("reading schema version")?;
    let version = match rows.next().await.ctx("reading schema version")? {
        Some(row) => row.get::<i64>(0).ctx("reading schema version")?,
        None => 0,
    };
    // Read to the end: on a remote server an abandoned cursor can leave its stream's
    // statement running, and sqld interrupts what that stream runs next.
    while rows.next().await.ctx("reading schema version")?.is_some() {}
    Ok(version)
}

async fn apply(target: &(impl WriteTarget + ?Sized), home: Home, m: &Migration) -> Result<()> {
    let context = format!(
        "applying migration {} {} v{}",
        home.name(),
        m.name,
        m.version
    );
    let tx = super::begin_write(target).await?;
    // Checked again under the write lock: a sync server's schema is shared by every device,
    // and another one may have applied this step since the version was read.
    if current_version(&tx, home).await? >= m.version {
        return tx.commit().await.ctx(&context);
    }
    tx.execute_batch(m.sql).await.ctx(&context)?;
    tx.execute(
        "INSERT INTO engram_schema(home, version, updated_at)
         VALUES (?1, ?2, CAST(unixepoch('subsec') * 1000 AS INTEGER))
         ON CONFLICT(home) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at",
        libsql::params![home.name(), m.version],
    )
    .await
    .ctx(&context)?;
    tx.commit().await.ctx(&context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for &home in Home::ALL {
            for (i, m) in home.migrations().iter().enumerate() {
                assert_eq!(m.version, i as i64 + 1, "{} {}", home.name(), m.name);
            }
        }
    }
}
