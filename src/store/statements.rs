//! Prepared statements kept per connection, keyed by their (static) SQL: preparing a
//! memory or graph statement costs 30-60 µs, often more than running it. Each statement is
//! handed out behind a guard that resets it when dropped, so none keeps a read snapshot or a
//! half-stepped write after its use, even when the future using it is dropped half-way.
//!
//! A statement whose LIMIT is a bare parameter is re-prepared by SQLite at every rebinding
//! (libsql builds SQLite with STAT4): write `LIMIT ?N + 0` in cached SQL.
//!
//! On a remote connection nothing is cached: a Hrana statement decides at preparation whether
//! running it closes the stream (it does outside a transaction), so a statement prepared
//! outside a transaction and run inside one would end the transaction.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use libsql::{Connection, Statement};

use crate::error::{DbContext, Error, Result};

/// Most statements cached per connection (the hot paths use a handful; a pooled reader serves
/// every kind of read, ~50 statements across the crate). When full, the one used least
/// recently goes: clearing them all made a reader that rotates through more than this many
/// prepare its hot statements again each time.
const MAX_CACHED: usize = 32;

/// The statements prepared on one connection.
#[derive(Default)]
pub(crate) struct StatementCache {
    /// Each statement with the tick of its last use.
    statements: HashMap<&'static str, (Arc<Entry>, u64)>,
    /// Counts uses, for choosing the least recently used statement.
    tick: u64,
    /// Prepare every statement afresh (remote connections).
    uncached: bool,
}

/// A prepared statement and whether a [`Cached`] guard holds it.
struct Entry {
    statement: Statement,
    in_use: AtomicBool,
}

impl StatementCache {
    /// A cache for a local connection, or a pass-through for a remote one.
    pub(crate) fn new(remote: bool) -> Self {
        StatementCache {
            statements: HashMap::new(),
            tick: 0,
            uncached: remote,
        }
    }

    /// The statement for `sql` on `conn` (which must be the connection this cache belongs
    /// to), prepared on first use, reset and ready to bind.
    pub(crate) async fn get(&mut self, conn: &Connection, sql: &'static str) -> Result<Cached> {
        if self.uncached {
            let statement = conn.prepare(sql).await.ctx("preparing a statement")?;
            return Ok(Cached(Arc::new(Entry {
                statement,
                in_use: AtomicBool::new(true),
            })));
        }
        self.tick += 1;
        let entry = match self.statements.get_mut(sql) {
            Some((entry, used)) => {
                *used = self.tick;
                Arc::clone(entry)
            }
            None => {
                let statement = conn.prepare(sql).await.ctx("preparing a statement")?;
                let entry = Arc::new(Entry {
                    statement,
                    in_use: AtomicBool::new(false),
                });
                if self.statements.len() >= MAX_CACHED {
                    self.evict_least_recently_used();
                }
                self.statements.insert(sql, (Arc::clone(&entry), self.tick));
                entry
            }
        };
        // Handing out a statement that is still in use would reset it under its user and
        // bind into a running statement (libsql ignores bind errors): refuse instead.
        if entry.in_use.swap(true, Ordering::AcqRel) {
            return Err(Error::Internal(format!(
                "cached statement used twice at once: {}",
                sql.split_whitespace().take(6).collect::<Vec<_>>().join(" ")
            )));
        }
        entry.statement.reset();
        Ok(Cached(entry))
    }

    /// Drops the statement used least recently (one in use stays alive with its guard).
    fn evict_least_recently_used(&mut self) {
        let oldest = self
            .statements
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(sql, _)| *sql);
        if let Some(sql) = oldest {
            self.statements.remove(sql);
        }
    }

    /// Whether `sql` is cached (for tests).
    #[cfg(test)]
    fn holds(&self, sql: &str) -> bool {
        self.statements.contains_key(sql)
    }
}

/// A cached statement in use; reset when dropped. Drop the rows it returned first (declare
/// this guard before them).
pub struct Cached(Arc<Entry>);

impl Deref for Cached {
    type Target = Statement;

    fn deref(&self) -> &Statement {
        &self.0.statement
    }
}

impl Drop for Cached {
    fn drop(&mut self) {
        self.0.statement.reset();
        self.0.in_use.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection to a fresh in-memory database (keep the database alive with it).
    async fn memory_connection() -> (libsql::Database, Connection) {
        let db = libsql::Builder::new_local(":memory:")
            .build()
            .await
            .unwrap();
        let conn = db.connect().unwrap();
        (db, conn)
    }

    #[tokio::test]
    async fn a_statement_in_use_is_not_handed_out_again() {
        let (_db, conn) = memory_connection().await;
        let mut cache = StatementCache::default();
        let first = cache.get(&conn, "SELECT 1").await.unwrap();
        let again = cache.get(&conn, "SELECT 1").await;
        assert_eq!(again.err().map(|e| e.code()), Some("ENGRAM_INTERNAL"));
        drop(first);
        // The guard outlives the rows it returned (a temporary guard would reset them).
        let statement = cache.get(&conn, "SELECT 1").await.unwrap();
        let mut rows = statement.query(()).await.unwrap();
        let row = rows.next().await.unwrap().unwrap();
        assert_eq!(row.get::<i64>(0).unwrap(), 1);
    }

    #[tokio::test]
    async fn a_full_cache_lets_only_the_least_recently_used_statement_go() {
        let (_db, conn) = memory_connection().await;
        let mut cache = StatementCache::default();
        let sql: Vec<&'static str> = (0..=MAX_CACHED)
            .map(|i| &*Box::leak(format!("SELECT {i}").into_boxed_str()))
            .collect();
        for s in &sql[..MAX_CACHED] {
            drop(cache.get(&conn, s).await.unwrap());
        }
        // The first is used again: the second is now the least recently used.
        drop(cache.get(&conn, sql[0]).await.unwrap());
        drop(cache.get(&conn, sql[MAX_CACHED]).await.unwrap());
        assert!(
            !cache.holds(sql[1]),
            "the least recently used statement stayed"
        );
        for s in sql.iter().filter(|s| **s != sql[1]) {
            assert!(cache.holds(s), "{s} went");
        }
    }
}
