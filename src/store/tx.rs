//! Write transactions that work the same on a local file and on a remote server.
//!
//! libsql's own `Transaction` opens a *new* Hrana stream on a remote connection, so
//! statements run on the connection itself (our cached statements, for one) would land
//! outside the transaction. A [`WriteTx`] therefore runs `BEGIN IMMEDIATE` on the connection it
//! is given, and every statement of that connection (through the transaction or not) is part
//! of it. On a local file it is libsql's transaction, unchanged.
//!
//! A remote transaction dropped without commit cannot roll back synchronously: the
//! [`super::Writer`] that owns the connection rolls it back when released, before the next
//! writer can run, and [`begin_write`] rolls back any transaction still open as a last resort.

use std::ops::Deref;

use libsql::{Connection, TransactionBehavior};

use crate::error::{DbContext, Result};

/// Something a write transaction can begin on: a bare connection (a local file or a
/// replica) or the store's writer (which knows whether it talks to a remote server).
pub trait WriteTarget {
    /// The connection the transaction runs on.
    fn connection(&self) -> &Connection;
    /// Whether the connection is a remote (Hrana) stream.
    fn is_remote(&self) -> bool {
        false
    }

    /// Why a write must not begin here (the file is known to be damaged), if it must not.
    fn refused(&self) -> Option<crate::error::Error> {
        None
    }
}

impl WriteTarget for Connection {
    fn connection(&self) -> &Connection {
        self
    }
}

/// A bare connection to a remote server, for code that has no [`super::Writer`] yet (the
/// migrations a remote-only store runs at open): its transactions run on its own stream.
pub struct RemoteConnection<'a>(pub &'a Connection);

impl WriteTarget for RemoteConnection<'_> {
    fn connection(&self) -> &Connection {
        self.0
    }

    fn is_remote(&self) -> bool {
        true
    }
}

/// An open write transaction. Dropping it without [`WriteTx::commit`] rolls it back, so an
/// early `?` return leaves no half batch.
pub struct WriteTx {
    inner: Inner,
}

enum Inner {
    Local(libsql::Transaction),
    /// `BEGIN IMMEDIATE` sent on this (shared) remote connection.
    Remote(Connection),
}

/// Starts an immediate (write-locking) transaction: taking the lock up front avoids the
/// deferred-upgrade deadlock SQLite answers with SQLITE_BUSY.
pub async fn begin_write(target: &(impl WriteTarget + ?Sized)) -> Result<WriteTx> {
    if let Some(refusal) = target.refused() {
        return Err(refusal);
    }
    let conn = target.connection();
    if !target.is_remote() {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .await
            .ctx("beginning write transaction")?;
        return Ok(WriteTx {
            inner: Inner::Local(tx),
        });
    }
    if !conn.is_autocommit() {
        // A transaction an earlier writer dropped and nobody rolled back (no runtime to do it
        // on, or the rollback failed): end it, on a fresh stream if the old one is gone.
        let _ = conn.execute("ROLLBACK", ()).await;
        conn.reset().await;
    }
    conn.execute("BEGIN IMMEDIATE", ())
        .await
        .ctx("beginning write transaction")?;
    Ok(WriteTx {
        inner: Inner::Remote(conn.clone()),
    })
}

impl WriteTx {
    /// Commits the transaction.
    pub async fn commit(self) -> libsql::Result<()> {
        match self.inner {
            Inner::Local(tx) => tx.commit().await,
            Inner::Remote(conn) => conn.execute("COMMIT", ()).await.map(drop),
        }
    }

    /// Rolls the transaction back.
    pub async fn rollback(self) -> libsql::Result<()> {
        match self.inner {
            Inner::Local(tx) => tx.rollback().await,
            Inner::Remote(conn) => conn.execute("ROLLBACK", ()).await.map(drop),
        }
    }
}

impl Deref for WriteTx {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        match &self.inner {
            Inner::Local(tx) => tx,
            Inner::Remote(conn) => conn,
        }
    }
}
