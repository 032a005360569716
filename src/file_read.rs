//! Reading a whole file that a caller named, safely: only a regular file is read, and never
//! more than a stated number of bytes.
//!
//! A path from an application can name anything: `/dev/zero` (endless bytes: a plain
//! `read_to_string` grows until the process dies), a FIFO (opening it for reading blocks until
//! a writer appears, which may be never), a directory or a socket. So the path's metadata is
//! checked before it is opened, the file is opened without blocking (`O_NONBLOCK` on Unix, in
//! case it was swapped for a FIFO after the check), the open file is checked again, and the
//! read stops one byte past the limit.

use std::io::Read as _;
use std::path::Path;

use crate::error::{Error, Result};

/// `O_NONBLOCK` where `libc` is not a dependency (the value on macOS and the BSDs).
#[cfg(all(unix, not(target_os = "linux")))]
const O_NONBLOCK: i32 = 0x0004;
#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = libc::O_NONBLOCK;

/// The bytes of the regular file at `path`, at most `limit` of them. `what` names the file in
/// errors (e.g. "the import file /tmp/x.json").
///
/// Fails with `ENGRAM_INVALID_ARG` when the path is not a regular file (a directory, FIFO,
/// device or socket; a symlink is followed) or holds more than `limit` bytes (the message
/// names the limit), and with `ENGRAM_IO` when it does not exist or cannot be read.
pub(crate) fn read_regular(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::io(format!("reading {what}"), e);
    // Before opening: opening a FIFO for reading blocks until a writer comes.
    let meta = std::fs::metadata(path).map_err(io)?;
    check_kind(&meta, what)?;
    check_size(meta.len(), limit, what)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // The path may have been swapped for a FIFO since the check: never block in open.
    // (O_NONBLOCK changes nothing for reads of a regular file.)
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, O_NONBLOCK);
    let file = options.open(path).map_err(io)?;
    check_kind(&file.metadata().map_err(io)?, what)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len().min(limit)).unwrap_or(0));
    // One byte past the limit tells a file that grew over it from one that fits exactly.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    check_size(bytes.len() as u64, limit, what)?;
    Ok(bytes)
}

fn check_kind(meta: &std::fs::Metadata, what: &str) -> Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let kind = if meta.is_dir() {
        "a directory"
    } else {
        special_kind(meta)
    };
    Err(Error::invalid(format!(
        "{what} is {kind}, not a regular file"
    )))
}

#[cfg(unix)]
fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(not(unix))]
fn special_kind(_meta: &std::fs::Metadata) -> &'static str {
    "a special file"
}

fn check_size(len: u64, limit: u64, what: &str) -> Result<()> {
    if len > limit {
        return Err(Error::invalid(format!(
            "{what} is larger than the limit of {limit} bytes ({} MiB)",
            limit / (1024 * 1024)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_regular(&path, 10, "x").unwrap(), b"0123456789");
        let err = read_regular(&path, 9, "the file").unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        assert!(err.to_string().contains("limit of 9 bytes"), "{err}");
    }

    #[test]
    fn refuses_a_directory_and_reports_a_missing_file_as_io() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular(dir.path(), 100, "the dir").unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        assert!(err.to_string().contains("a directory"), "{err}");
        let err = read_regular(&dir.path().join("none"), 100, "x").unwrap_err();
        assert_eq!(err.code(), "ENGRAM_IO");
    }

    #[cfg(unix)]
    #[test]
    fn refuses_devices_and_fifos_without_blocking() {
        let err = read_regular(Path::new("/dev/zero"), 1 << 20, "/dev/zero").unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        assert!(err.to_string().contains("a device"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // On a thread, so that a regression blocks a thread, not the test runner.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || tx.send(read_regular(&path, 100, "the fifo")));
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO must not block")
            .unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        assert!(err.to_string().contains("a FIFO"), "{err}");
    }
}
