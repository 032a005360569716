//! A fixed pool of read connections, handed out one per concurrent read, each with its cache
//! of prepared statements for the hot read paths.

use std::ops::Deref;
use std::sync::Mutex;

use libsql::params::IntoParams;
use libsql::{Connection, Row};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::statements::StatementCache;
use super::Held;
use crate::error::{DbContext, Result};

/// A read connection and the statements prepared on it.
pub(crate) struct PooledConn {
    conn: Connection,
    statements: StatementCache,
}

/// Read connections plus a semaphore counting the free ones.
pub(crate) struct ReaderPool {
    free: Mutex<Vec<PooledConn>>,
    permits: Semaphore,
}

impl ReaderPool {
    pub(crate) fn new(conns: Vec<Connection>, remote: bool) -> Self {
        let permits = Semaphore::new(conns.len());
        let conns = conns
            .into_iter()
            .map(|conn| PooledConn {
                conn,
                statements: StatementCache::new(remote),
            })
            .collect();
        ReaderPool {
            free: Mutex::new(conns),
            permits,
        }
    }

    pub(crate) async fn get(&self, held: Held) -> Reader<'_> {
        // The semaphore is never closed, so acquire cannot fail.
        let permit = self.permits.acquire().await.expect("reader pool closed");
        let conn = self
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .expect("a permit guarantees a free connection");
        // A borrower dropped between its BEGIN and its COMMIT (a cancelled future) left the
        // connection in a read transaction: its snapshot would hide every later write.
        if !conn.conn.is_autocommit() {
            if let Err(error) = conn.conn.execute("ROLLBACK", ()).await {
                tracing::warn!("rolling back a reader left in a transaction: {error}");
            }
        }
        Reader {
            conn: Some(conn),
            pool: self,
            _permit: permit,
            held: held.taken(),
            slowest: None,
        }
    }
}

/// A read connection borrowed from the pool; returned to it on drop.
pub struct Reader<'a> {
    conn: Option<PooledConn>,
    pool: &'a ReaderPool,
    _permit: SemaphorePermit<'a>,
    held: Held,
    /// The slowest cached statement run through this borrow, and its time (named when the
    /// borrow was slow).
    slowest: Option<(&'static str, std::time::Duration)>,
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
    /// The statement is reset before the answer is returned (or the future dropped), so it
    /// never holds a read snapshot while the connection sits in the pool.
    pub async fn query_cached<T>(
        &mut self,
        sql: &'static str,
        params: impl IntoParams,
        mut map: impl FnMut(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let started = std::time::Instant::now();
        let pooled = self.conn.as_mut().expect("present until drop");
        // Declared before the rows, so dropped (and reset) after them.
        let statement = pooled.statements.get(&pooled.conn, sql).await?;
        let mut out = Vec::new();
        let mut rows = statement.query(params).await.ctx("running a read")?;
        while let Some(row) = rows.next().await.ctx("reading a row")? {
            out.push(map(&row)?);
        }
        let took = started.elapsed();
        if self.slowest.is_none_or(|(_, slowest)| took > slowest) {
            self.slowest = Some((sql, took));
        }
        Ok(out)
    }
}

impl Reader<'_> {
    /// The first column of the first row as an integer, 0 when there is no row or it is NULL
    /// (counts, maxima), through the cached statement.
    pub async fn query_integer(
        &mut self,
        sql: &'static str,
        params: impl IntoParams,
    ) -> Result<i64> {
        let values = self
            .query_cached(sql, params, |row| {
                row.get::<Option<i64>>(0).ctx("reading an integer")
            })
            .await?;
        Ok(values.into_iter().next().flatten().unwrap_or(0))
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        self.held.end("read", self.slowest.map(|(sql, _)| sql));
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
