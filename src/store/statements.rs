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

/// Most statements cached per connection (the hot paths use a handful).
const MAX_CACHED: usize = 32;

/// The statements prepared on one connection.
#[derive(Default)]
pub(crate) struct StatementCache {
    statements: HashMap<&'static str, Arc<Entry>>,
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
        let entry = match self.statements.get(sql) {
            Some(entry) => Arc::clone(entry),
            None => {
                let statement = conn.prepare(sql).await.ctx("preparing a statement")?;
                let entry = Arc::new(Entry {
                    statement,
                    in_use: AtomicBool::new(false),
                });
                if self.statements.len() >= MAX_CACHED {
                    self.statements.clear();
                }
                self.statements.insert(sql, Arc::clone(&entry));
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

    #[tokio::test]
    async fn a_statement_in_use_is_not_handed_out_again() {
        let db = libsql::Builder::new_local(":memory:")
            .build()
            .await
            .unwrap();
        let conn = db.connect().unwrap();
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
}
