//! A fixed pool of read connections, handed out one per concurrent read, each with a cache of
//! prepared statements for the hot read paths (preparing a graph or memory query costs
//! 30-60 µs, often more than running it).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use libsql::params::IntoParams;
use libsql::{Connection, Row, Statement};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::error::{DbContext, Result};

/// Most statements cached per connection (the hot paths use a handful).
const MAX_CACHED: usize = 32;

/// A read connection and the statements prepared on it, keyed by their SQL.
pub(crate) struct PooledConn {
    conn: Connection,
    statements: HashMap<&'static str, Arc<Statement>>,
}

/// Read connections plus a semaphore counting the free ones.
pub(crate) struct ReaderPool {
    free: Mutex<Vec<PooledConn>>,
    permits: Semaphore,
}

impl ReaderPool {
    pub(crate) fn new(conns: Vec<Connection>) -> Self {
        let permits = Semaphore::new(conns.len());
        let conns = conns
            .into_iter()
            .map(|conn| PooledConn {
                conn,
                statements: HashMap::new(),
            })
            .collect();
        ReaderPool {
            free: Mutex::new(conns),
            permits,
        }
    }

    pub(crate) async fn get(&self) -> Reader<'_> {
        // The semaphore is never closed, so acquire cannot fail.
        let permit = self.permits.acquire().await.expect("reader pool closed");
        let conn = self
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .expect("a permit guarantees a free connection");
        Reader {
            conn: Some(conn),
            pool: self,
            _permit: permit,
        }
    }
}

/// A read connection borrowed from the pool; returned to it on drop.
pub struct Reader<'a> {
    conn: Option<PooledConn>,
    pool: &'a ReaderPool,
    _permit: SemaphorePermit<'a>,
}

impl Deref for Reader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.pooled().conn
    }
}

impl Reader<'_> {
    fn pooled(&self) -> &PooledConn {
        self.conn.as_ref().expect("present until drop")
    }

    /// Runs `sql` through this connection's cached prepared statement and maps every row.
    /// The statement is reset before the answer is returned, so it never holds a read
    /// snapshot while the connection sits in the pool.
    pub async fn query_cached<T>(
        &mut self,
        sql: &'static str,
        params: impl IntoParams,
        mut map: impl FnMut(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let pooled = self.conn.as_mut().expect("present until drop");
        let statement = match pooled.statements.get(sql) {
            Some(statement) => Arc::clone(statement),
            None => {
                let statement = Arc::new(pooled.conn.prepare(sql).await.ctx("preparing a read")?);
                if pooled.statements.len() >= MAX_CACHED {
                    pooled.statements.clear();
                }
                pooled.statements.insert(sql, Arc::clone(&statement));
                statement
            }
        };
        statement.reset();
        // Declared before the rows, so dropped after them: also when the caller drops this
        // future half-way, the statement is reset and releases its read snapshot.
        let _reset = ResetOnDrop(Arc::clone(&statement));
        let mut out = Vec::new();
        let mut rows = statement.query(params).await.ctx("running a read")?;
        while let Some(row) = rows.next().await.ctx("reading a row")? {
            out.push(map(&row)?);
        }
        Ok(out)
    }
}

/// Resets a cached statement when dropped.
struct ResetOnDrop(Arc<Statement>);

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        self.0.reset();
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // Push before the permit is released (fields drop after this body runs).
            self.pool
                .free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(conn);
        }
    }
}
