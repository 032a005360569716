//! Damage to a database file: found cheaply at open, found fully by SQLite's `quick_check`,
//! and what the store does once it knows (refuses writes, so that nothing is written into a
//! damaged file and spread).
//!
//! - **At open** ([`check_header`]): the 100-byte header and the file's length, no page read
//!   beyond it. A file cut short (its length not a whole number of pages, or shorter than the
//!   page count its header records) fails the open with `ENGRAM_CORRUPT`.
//! - **Later** ([`quick_check`]): `PRAGMA quick_check` reads every page (O(file size)), so it
//!   runs when asked (`Engram::check_integrity`, `engram doctor`) and once in the background a
//!   few seconds after a local file opens, on a thread of lowered priority. What it finds marks
//!   the store [`Damage`]d: every later write transaction fails with `ENGRAM_CORRUPT` naming
//!   the damage and the way out (`engram doctor --salvage`); reads go on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use libsql::Connection;

use crate::error::{DbContext, Error, Result};

/// SQLite's file header: magic string, and where the fields read here live.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";
const HEADER_BYTES: usize = 100;
/// Most problems `quick_check` lists.
pub const MAX_PROBLEMS: u32 = 100;

/// How long after a local file opens its background check starts: a short-lived process (a
/// CLI command, an agent hook) is gone by then and never pays for reading the whole file.
pub const BACKGROUND_CHECK_DELAY: Duration = Duration::from_secs(5);

/// What is known about a store's damage (shared by its writer and the background check).
#[derive(Debug)]
pub(crate) struct Damage {
    path: PathBuf,
    found: Mutex<Option<String>>,
}

impl Damage {
    /// Nothing known yet about the file at `path`.
    pub(crate) fn new(path: PathBuf) -> Self {
        Damage {
            path,
            found: Mutex::new(None),
        }
    }

    /// Records damage (the first description wins).
    pub(crate) fn mark(&self, what: impl Into<String>) {
        let mut slot = self.found.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            let what = what.into();
            tracing::error!(damage = %what, "the database file is damaged: writes are refused from now on");
            *slot = Some(what);
        }
    }

    /// The damage found, if any.
    pub(crate) fn found(&self) -> Option<String> {
        self.found.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The error a write gets once damage is known.
    pub(crate) fn refusal(&self) -> Option<Error> {
        self.found().map(|what| corrupt(&self.path, &what))
    }

    /// Marks the damage `problems` describe, if any.
    pub(crate) fn mark_problems(&self, problems: &[String]) {
        if let Some(first) = problems.first() {
            let more = match problems.len() {
                1 => String::new(),
                n => format!(" (and {} more problems)", n - 1),
            };
            self.mark(format!("damaged pages: {first}{more}"));
        }
    }
}

/// The background check of one store: a thread of lowered priority that waits
/// [`BACKGROUND_CHECK_DELAY`], runs [`quick_check`] once on its own connection and marks what it
/// finds. Dropping it stops the thread (a check under way finishes its current step first).
#[derive(Debug)]
pub(crate) struct Background {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts the check on `conn` for `damage`.
    pub(crate) fn start(conn: Connection, damage: Arc<Damage>) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("engram-integrity".into())
            .spawn(move || {
                let start = Instant::now() + BACKGROUND_CHECK_DELAY;
                while Instant::now() < start {
                    if stopped.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::park_timeout(start.saturating_duration_since(Instant::now()));
                }
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                crate::thread_priority::lower_current_thread();
                match futures::executor::block_on(quick_check(&conn)) {
                    Ok(problems) => damage.mark_problems(&problems),
                    Err(e) => {
                        tracing::debug!(error = %e, "the background integrity check could not run")
                    }
                }
            })?;
        Ok(Background {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// `ENGRAM_CORRUPT` for `path` with `what` and the way out.
pub(crate) fn corrupt(path: &Path, what: &str) -> Error {
    Error::Corrupt {
        context: format!(
            "{}: {what}; writes are refused so the damage does not spread. `engram doctor --db {}` reports it, `--salvage <new file>` copies the memories that can still be read",
            path.display(),
            path.display()
        ),
        source: what.to_owned().into(),
    }
}

/// Checks the header and length of the database file at `path` (a missing or empty file is a
/// new database: fine). `Err(description)` for a file cut short or with a damaged header.
pub fn check_header(path: &Path) -> std::result::Result<(), String> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(()); // not there yet (or unreadable: opening it says why)
    };
    let length = file.metadata().map(|m| m.len()).unwrap_or(0);
    if length == 0 {
        return Ok(());
    }
    let mut header = [0u8; HEADER_BYTES];
    if length < HEADER_BYTES as u64 || file.read_exact(&mut header).is_err() {
        return Err(format!(
            "the file is {length} bytes, shorter than a database header"
        ));
    }
    if &header[..16] != MAGIC {
        // Not a SQLite file at all: opening it reports that (ENGRAM_CORRUPT, not a database).
        return Ok(());
    }
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536u64,
        n if n >= 512 && n.is_power_of_two() => u64::from(n),
        n => return Err(format!("the header's page size {n} is not valid")),
    };
    if length % page_size != 0 {
        return Err(format!(
            "the file is {length} bytes, not a whole number of {page_size}-byte pages (cut short?)"
        ));
    }
    let change_counter = u32::from_be_bytes(header[24..28].try_into().expect("4 bytes"));
    let pages = u32::from_be_bytes(header[28..32].try_into().expect("4 bytes"));
    let valid_for = u32::from_be_bytes(header[92..96].try_into().expect("4 bytes"));
    // The page count is trustworthy only when it was written with the current change counter.
    if pages > 0 && valid_for == change_counter && length < u64::from(pages) * page_size {
        return Err(format!(
            "the file is {length} bytes, but its header records {pages} pages of {page_size} bytes (cut short)"
        ));
    }
    Ok(())
}

/// `PRAGMA quick_check` on `conn`: `Ok(vec![])` when the file is sound, else the problems
/// SQLite lists (at most [`MAX_PROBLEMS`]). A file too damaged to check gives one problem.
pub async fn quick_check(conn: &Connection) -> Result<Vec<String>> {
    let sql = format!("PRAGMA quick_check({MAX_PROBLEMS})");
    let mut rows = match conn.query(&sql, ()).await {
        Ok(rows) => rows,
        Err(e) => return damaged_or(Error::db("checking the file", e)),
    };
    let mut problems = Vec::new();
    loop {
        match rows.next().await {
            Ok(Some(row)) => {
                let line: String = row.get(0).ctx("reading the check")?;
                if line != "ok" {
                    problems.push(line);
                }
            }
            Ok(None) => break,
            Err(e) => return damaged_or(Error::db("checking the file", e)),
        }
    }
    Ok(problems)
}

/// A check that failed because the file is damaged is a finding, not an error.
fn damaged_or(err: Error) -> Result<Vec<String>> {
    match err {
        Error::Corrupt { source, .. } => Ok(vec![source.to_string()]),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(page_size: u16, pages: u32, valid: bool) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_BYTES];
        h[..16].copy_from_slice(MAGIC);
        h[16..18].copy_from_slice(&page_size.to_be_bytes());
        h[24..28].copy_from_slice(&7u32.to_be_bytes());
        h[28..32].copy_from_slice(&pages.to_be_bytes());
        h[92..96].copy_from_slice(&(if valid { 7u32 } else { 6 }).to_be_bytes());
        h
    }

    fn file_of(bytes: &[u8], length: usize) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut all = bytes.to_vec();
        all.resize(length, 0);
        std::fs::write(file.path(), all).unwrap();
        file
    }

    #[test]
    fn a_header_and_length_that_agree_pass() {
        let f = file_of(&header(4096, 3, true), 3 * 4096);
        assert_eq!(check_header(f.path()), Ok(()));
        // Longer than recorded is fine (the WAL's pages are checkpointed into it later).
        let f = file_of(&header(4096, 3, true), 5 * 4096);
        assert_eq!(check_header(f.path()), Ok(()));
        // A stale page count (older change counter) is not used.
        let f = file_of(&header(4096, 9, false), 3 * 4096);
        assert_eq!(check_header(f.path()), Ok(()));
        assert_eq!(check_header(Path::new("/nonexistent/engram.db")), Ok(()));
    }

    #[test]
    fn a_file_cut_short_is_found() {
        let f = file_of(&header(4096, 3, true), 3 * 4096 - 1000);
        assert!(check_header(f.path())
            .unwrap_err()
            .contains("not a whole number"));
        let f = file_of(&header(4096, 4, true), 3 * 4096);
        assert!(check_header(f.path())
            .unwrap_err()
            .contains("records 4 pages"));
        let f = file_of(&header(4096, 4, true), 60);
        assert!(check_header(f.path())
            .unwrap_err()
            .contains("shorter than a database header"));
        let f = file_of(&header(1000, 4, true), 4000);
        assert!(check_header(f.path())
            .unwrap_err()
            .contains("page size 1000"));
    }
}
