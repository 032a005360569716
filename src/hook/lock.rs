//! Lock files that serialise the hooks of one session (parallel tool calls run theirs at once)
//! and the updates of the session registry. A lock is a file created exclusively, holding its
//! owner's pid and the time; one whose owner is gone, or older than [`LOCK_STALE_MS`], was left
//! by a killed hook and is broken. Every lock this process holds is listed, so that a hook
//! giving up on its time budget releases them before it exits.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::error::{Error, Result};

/// A lock older than this is left over from a killed hook.
const LOCK_STALE_MS: i64 = 15_000;

/// The locks this process holds.
static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A held lock, released on drop.
pub(super) struct Lock {
    file: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
        if let Ok(mut held) = HELD.lock() {
            held.retain(|f| f != &self.file);
        }
    }
}

/// Takes the lock `file`, retrying with back-off for `wait`; `None` when it stays taken.
pub(super) async fn acquire(file: &Path, wait: Duration) -> Result<Option<Lock>> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    }
    let deadline = std::time::Instant::now() + wait;
    let mut delay_ms = 5u64;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(file)
        {
            Ok(mut f) => {
                let _ = writeln!(f, "{} {}", std::process::id(), super::now_ms());
                HELD.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(file.to_owned());
                return Ok(Some(Lock {
                    file: file.to_owned(),
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("taking the lock {}", file.display()), e)),
        }
        if is_stale(file) {
            let _ = std::fs::remove_file(file);
            continue;
        }
        if std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        // Jitter, so that hooks started together do not retry together.
        let jitter = u64::from(super::now_nanos()) % delay_ms;
        tokio::time::sleep(Duration::from_millis(delay_ms + jitter)).await;
        delay_ms = (delay_ms * 2).min(80);
    }
}

/// Whether the lock `file` was left by a hook that is gone (or is older than the stale age).
fn is_stale(file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return false; // released meanwhile: retry now
    };
    let mut parts = text.split_whitespace().map(|p| p.parse::<i64>().ok());
    let (pid, at) = (parts.next().flatten(), parts.next().flatten());
    // A lock just created has no content yet: its age is the file's.
    let at = at.or_else(|| {
        let modified = std::fs::metadata(file).and_then(|m| m.modified()).ok()?;
        let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some(since.as_millis() as i64)
    });
    if at.is_none_or(|at| super::now_ms() - at > LOCK_STALE_MS) {
        return true;
    }
    match pid {
        Some(pid) if pid != i64::from(std::process::id()) => !process_alive(pid),
        _ => false,
    }
}

/// Whether process `pid` exists (alive under another user counts).
#[cfg(target_os = "linux")]
fn process_alive(pid: i64) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; it sends nothing.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Elsewhere only the age breaks a lock.
#[cfg(not(target_os = "linux"))]
fn process_alive(_pid: i64) -> bool {
    true
}

/// Removes every lock this process holds (before an exit that runs no destructors).
pub(super) fn release_all() {
    let held = std::mem::take(&mut *HELD.lock().unwrap_or_else(|e| e.into_inner()));
    for file in held {
        let _ = std::fs::remove_file(file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_lock_excludes_until_released_and_a_dead_owners_lock_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.lock");
        let held = acquire(&file, Duration::ZERO).await.unwrap().unwrap();
        assert!(acquire(&file, Duration::from_millis(30))
            .await
            .unwrap()
            .is_none());
        drop(held);
        assert!(!file.exists());
        let again = acquire(&file, Duration::ZERO).await.unwrap();
        assert!(again.is_some());
        drop(again);
        // A pid that cannot be alive, written now: broken at once on Linux.
        std::fs::write(&file, format!("{} {}\n", i32::MAX, super::super::now_ms())).unwrap();
        #[cfg(target_os = "linux")]
        assert!(acquire(&file, Duration::ZERO).await.unwrap().is_some());
        // A lock being created (no content yet) holds.
        std::fs::write(&file, "").unwrap();
        assert!(acquire(&file, Duration::ZERO).await.unwrap().is_none());
        // An old lock is broken whoever holds it.
        std::fs::write(&file, format!("{} 1\n", std::process::id())).unwrap();
        assert!(acquire(&file, Duration::ZERO).await.unwrap().is_some());
        release_all();
        assert!(!file.exists());
    }
}
