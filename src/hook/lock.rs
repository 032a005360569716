//! Lock files that serialise the hooks of one session (parallel tool calls run theirs at once)
//! and the updates of the session registry: an exclusive advisory lock (`flock` on Unix,
//! `LockFileEx` on Windows) on `<name>.lock`, which the operating system releases when its
//! holder exits, however it exits. So no lock outlives a killed hook and none is ever guessed
//! stale.
//!
//! A lock file is removed only by its holder (a finished session's); a waiter that then gets
//! the lock of the removed file sees that the path no longer names what it locked, and tries
//! again on the new file.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result};

/// A held lock, released when dropped (or when the process ends).
pub(super) struct Lock {
    _file: File,
    path: PathBuf,
}

impl Lock {
    /// Removes the lock file while holding it (its session is over): a waiter on it retries on
    /// a new file. On Windows the file stays: a waiter there cannot tell a removed file from
    /// its successor.
    pub fn remove(self) {
        #[cfg(unix)]
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Takes the lock `file`, retrying with back-off for `wait`; `None` when it stays taken.
pub(super) async fn acquire(file: &Path, wait: Duration) -> Result<Option<Lock>> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let failed = |e| Error::io(format!("taking the lock {}", file.display()), e);
    let deadline = std::time::Instant::now() + wait;
    let mut delay_ms = 2u64;
    loop {
        let handle = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(file)
            .map_err(failed)?;
        match handle.try_lock() {
            Ok(()) if same_file(&handle, file) => {
                return Ok(Some(Lock {
                    _file: handle,
                    path: file.to_owned(),
                }))
            }
            // The holder removed the file as we waited: lock the new one.
            Ok(()) => continue,
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(failed(e)),
        }
        if std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        // Jitter, so that hooks started together do not retry together.
        let jitter = u64::from(super::now_nanos()) % delay_ms;
        tokio::time::sleep(Duration::from_millis(delay_ms + jitter)).await;
        delay_ms = (delay_ms * 2).min(40);
    }
}

/// Whether `path` still names the file `handle` has open.
#[cfg(unix)]
fn same_file(handle: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (handle.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// On Windows lock files are never removed (see [`Lock::remove`]).
#[cfg(not(unix))]
fn same_file(_handle: &File, _path: &Path) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_lock_excludes_until_released_and_a_removed_one_is_taken_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.lock");
        let held = acquire(&file, Duration::ZERO).await.unwrap().unwrap();
        assert!(acquire(&file, Duration::from_millis(30))
            .await
            .unwrap()
            .is_none());
        drop(held);
        let again = acquire(&file, Duration::ZERO).await.unwrap().unwrap();
        // A waiter that gets the lock of a file its holder removed takes the new file's.
        let waiter = tokio::spawn({
            let file = file.clone();
            async move {
                acquire(&file, Duration::from_secs(5))
                    .await
                    .unwrap()
                    .is_some()
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        again.remove();
        assert!(waiter.await.unwrap());
        assert!(file.exists(), "the waiter holds a new file");
        // A lock file nobody holds (its holder was killed) is simply taken.
        assert!(acquire(&file, Duration::ZERO).await.unwrap().is_some());
    }

    #[cfg(unix)]
    #[test]
    fn a_handle_on_a_removed_lock_file_is_told_from_its_successor() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.lock");
        let open = || {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&file)
        };
        let waiter = open().unwrap();
        assert!(same_file(&waiter, &file));
        // The holder removes the file as the session ends; another hook creates it anew.
        std::fs::remove_file(&file).unwrap();
        assert!(!same_file(&waiter, &file), "the path names nothing");
        let successor = open().unwrap();
        assert!(waiter.try_lock().is_ok(), "the old file's lock is free...");
        assert!(
            !same_file(&waiter, &file),
            "...but it is not the lock any more"
        );
        assert!(same_file(&successor, &file));
    }
}
