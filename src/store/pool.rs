//! A fixed pool of read connections, handed out one per concurrent read.

use std::ops::Deref;
use std::sync::Mutex;

use libsql::Connection;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Read connections plus a semaphore counting the free ones.
pub(crate) struct ReaderPool {
    free: Mutex<Vec<Connection>>,
    permits: Semaphore,
}

impl ReaderPool {
    pub(crate) fn new(conns: Vec<Connection>) -> Self {
        let permits = Semaphore::new(conns.len());
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
    conn: Option<Connection>,
    pool: &'a ReaderPool,
    _permit: SemaphorePermit<'a>,
}

impl Deref for Reader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("present until drop")
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
