//! An engine's lifetime: the handles that keep it open, and the holds that must end before
//! its files are let go.
//!
//! Every handle carries a [`Lease`] (shared by its clones) that counts it as open until it is
//! closed or dropped; the sync loop syncs only while some handle is open. A [`Hold`] is taken by
//! the engine itself (its last field, so it ends after the store's connections) and by its sync
//! loop (ended after the loop has dropped the replica). When the last hold ends the database
//! file and `<path>.sync/` are released: [`Lifetime::closed`] resolves for whoever closed the
//! last handle, and the registry lets a new engine open the file.
//!
//! Architecture invariant: nothing of an engine touches its files once its last hold has
//! ended, and no second engine opens a file before that (`registry::open` waits).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

#[derive(Debug, Clone, Copy)]
struct State {
    /// Handles open (leases not yet closed).
    handles: usize,
    /// Holds not yet ended; 0 is final: the files are released.
    holds: usize,
}

/// The open handles and the holds of one engine (it outlives the engine while its sync loop
/// winds down).
#[derive(Debug)]
pub(crate) struct Lifetime {
    /// The engine's registry key.
    path: PathBuf,
    state: watch::Sender<State>,
}

impl Lifetime {
    /// A lifetime for the engine of `path`, with the engine's own hold.
    pub(super) fn new(path: PathBuf) -> (Arc<Lifetime>, Hold) {
        let (state, _) = watch::channel(State {
            handles: 0,
            holds: 1,
        });
        let lifetime = Arc::new(Lifetime { path, state });
        let hold = Hold {
            lifetime: Arc::clone(&lifetime),
        };
        (lifetime, hold)
    }

    /// Another hold on the engine's files (the sync loop's).
    pub(crate) fn hold(self: &Arc<Self>) -> Hold {
        self.state.send_modify(|s| s.holds += 1);
        Hold {
            lifetime: Arc::clone(self),
        }
    }

    /// A new open handle.
    pub(crate) fn lease(self: &Arc<Self>) -> Lease {
        self.state.send_modify(|s| s.handles += 1);
        Lease {
            lifetime: Arc::clone(self),
            open: AtomicBool::new(true),
        }
    }

    /// A lease that never counts as open: for work the engine does on its own behalf (the
    /// background embedding run), which must not keep it open once every handle closed.
    pub(crate) fn uncounted_lease(self: &Arc<Self>) -> Lease {
        Lease {
            lifetime: Arc::clone(self),
            open: AtomicBool::new(false),
        }
    }

    /// How many handles are open.
    pub(crate) fn open_handles(&self) -> usize {
        self.state.borrow().handles
    }

    /// Whether every hold has ended.
    pub(crate) fn is_released(&self) -> bool {
        self.state.borrow().holds == 0
    }

    async fn until(&self, done: impl FnMut(&State) -> bool) {
        // The sender lives as long as `self`: waiting cannot fail.
        let _ = self.state.subscribe().wait_for(done).await;
    }

    /// Resolves once no handle is open (at once if none is).
    pub(crate) async fn until_unused(&self) {
        self.until(|s| s.handles == 0).await;
    }

    /// Resolves once a handle is open (at once if one is).
    pub(crate) async fn until_used(&self) {
        self.until(|s| s.handles > 0).await;
    }

    /// Resolves once every hold has ended.
    pub(crate) async fn released(&self) {
        self.until(|s| s.holds == 0).await;
    }

    /// Resolves once the files are released, or as soon as a handle is open (another handle
    /// keeps the engine, or one opened it again).
    pub(crate) async fn closed(&self) {
        self.until(|s| s.holds == 0 || s.handles > 0).await;
    }
}

/// Counts one handle as open; clones of a handle share it. Closed once, by `close()` or drop.
#[derive(Debug)]
pub(crate) struct Lease {
    lifetime: Arc<Lifetime>,
    open: AtomicBool,
}

impl Lease {
    /// Stops counting the handle as open (idempotent).
    pub(crate) fn close(&self) {
        if self.open.swap(false, Ordering::SeqCst) {
            self.lifetime.state.send_modify(|s| s.handles -= 1);
        }
    }

    /// The engine's lifetime.
    pub(crate) fn lifetime(&self) -> &Arc<Lifetime> {
        &self.lifetime
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.close();
    }
}

/// Keeps the engine's files counted as in use until dropped.
#[derive(Debug)]
pub(crate) struct Hold {
    lifetime: Arc<Lifetime>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut last = false;
        self.lifetime.state.send_modify(|s| {
            s.holds -= 1;
            last = s.holds == 0;
        });
        if last {
            super::registry::forget_released(&self.lifetime.path, &self.lifetime);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn closed_waits_for_every_hold_unless_a_handle_is_open() {
        let (lifetime, engine_hold) = Lifetime::new(PathBuf::from("/nowhere/lifetime-test.db"));
        let loop_hold = lifetime.hold();
        let lease = lifetime.lease();
        let other = lifetime.lease();
        assert_eq!(lifetime.open_handles(), 2);
        lease.close();
        lease.close();
        assert_eq!(lifetime.open_handles(), 1, "closing twice counts once");
        // Another handle is open: closing this one waits for nothing.
        tokio::time::timeout(std::time::Duration::from_secs(1), lifetime.closed())
            .await
            .expect("resolves at once");
        drop(other);
        assert_eq!(lifetime.open_handles(), 0);
        drop(engine_hold);
        assert!(!lifetime.is_released());
        let waiting = tokio::spawn({
            let lifetime = Arc::clone(&lifetime);
            async move { lifetime.closed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the loop's hold is still there");
        drop(loop_hold);
        waiting.await.unwrap();
        assert!(lifetime.is_released());
    }
}
