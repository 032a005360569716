//! Prepared statements kept per connection, keyed by their (static) SQL: preparing a
//! memory or graph statement costs 30-60 µs, often more than running it. Each statement is
//! handed out behind a guard that resets it when dropped, so none keeps a read snapshot or a
//! half-stepped write after its use, even when the future using it is dropped half-way.
//!
//! A statement whose LIMIT is a bare parameter is re-prepared by SQLite at every rebinding
//! (libsql builds SQLite with STAT4): write `LIMIT ?N + 0` in cached SQL.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;

use libsql::{Connection, Statement};

use crate::error::{DbContext, Result};

/// Most statements cached per connection (the hot paths use a handful).
const MAX_CACHED: usize = 32;

/// The statements prepared on one connection.
#[derive(Default)]
pub(crate) struct StatementCache {
    statements: HashMap<&'static str, Arc<Statement>>,
}

impl StatementCache {
    /// The statement for `sql` on `conn` (which must be the connection this cache belongs
    /// to), prepared on first use, reset and ready to bind.
    pub(crate) async fn get(&mut self, conn: &Connection, sql: &'static str) -> Result<Cached> {
        let statement = match self.statements.get(sql) {
            Some(statement) => Arc::clone(statement),
            None => {
                let statement = Arc::new(conn.prepare(sql).await.ctx("preparing a statement")?);
                if self.statements.len() >= MAX_CACHED {
                    self.statements.clear();
                }
                self.statements.insert(sql, Arc::clone(&statement));
                statement
            }
        };
        statement.reset();
        Ok(Cached(statement))
    }
}

/// A cached statement in use; reset when dropped. Drop the rows it returned first (declare
/// this guard before them).
pub struct Cached(Arc<Statement>);

impl Deref for Cached {
    type Target = Statement;

    fn deref(&self) -> &Statement {
        &self.0
    }
}

impl Drop for Cached {
    fn drop(&mut self) {
        self.0.reset();
    }
}
