//! Reading and writing agent files (`CLAUDE.md`, `AGENTS.md`, `.cursorrules`) inside the
//! project root, safely: the path is confined to the root (no `..`, no absolute path
//! elsewhere, no symlink leading out of it), the file must be UTF-8 text of at most
//! [`MAX_AGENT_FILE_BYTES`], and a write replaces the file atomically (a temporary file in the
//! same directory, flushed, then renamed over it), so an agent reading the file never sees half
//! of it and a crash never leaves it truncated.
//!
//! A symlinked agent file (`AGENTS.md -> CLAUDE.md` is common) is read and written through:
//! the write replaces the link's target, which must itself be inside the root. (A dangling
//! link, whose target does not exist yet, is replaced by a regular file.)

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::memory::input::confine_path;

/// Largest agent file read or written (1 MiB): agent files are loaded into every prompt, so a
/// larger one is not an agent file.
pub const MAX_AGENT_FILE_BYTES: usize = 1024 * 1024;

/// An agent file located in the project root.
#[derive(Debug, Clone)]
pub(crate) struct AgentPath {
    /// Forward-slash path relative to the root, as stored in tags and reports.
    pub relative: String,
    /// Where the file's bytes live: the path itself, or a symlink's target inside the root.
    pub target: PathBuf,
}

/// Confines `path` (relative to `root`, or absolute inside it) and resolves symlinks; the
/// file need not exist yet.
pub(crate) fn locate(root: &Path, path: &str) -> Result<AgentPath> {
    let relative = confine_path(path, Some(root))?;
    let joined = root.join(&relative);
    let target = match std::fs::canonicalize(&joined) {
        Ok(real) => real,
        // Not there yet: its directory must be (and must be inside the root).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = joined.parent().unwrap_or(root);
            match std::fs::canonicalize(dir) {
                Ok(real_dir) => real_dir.join(joined.file_name().unwrap_or_default()),
                Err(_) => joined.clone(),
            }
        }
        Err(e) => return Err(Error::io(format!("resolving {relative}"), e)),
    };
    if !target.starts_with(root) {
        return Err(Error::invalid(format!(
            "{relative} leads outside the project root {} (symlink to {})",
            root.display(),
            target.display()
        )));
    }
    Ok(AgentPath { relative, target })
}

/// The file's text, or `None` when it does not exist. Fails with `ENGRAM_INVALID_ARG` for a
/// directory, a file over [`MAX_AGENT_FILE_BYTES`], binary content (NUL bytes) or invalid
/// UTF-8, naming the file.
pub(crate) fn read(path: &AgentPath) -> Result<Option<String>> {
    let meta = match std::fs::metadata(&path.target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {}", path.relative), e)),
    };
    if !meta.is_file() {
        return Err(Error::invalid(format!("{} is not a file", path.relative)));
    }
    if meta.len() > MAX_AGENT_FILE_BYTES as u64 {
        return Err(too_big(&path.relative, meta.len()));
    }
    // Checked above, but the file may have been swapped for a FIFO or grown since: read it
    // without blocking in open and never past the cap.
    let bytes =
        crate::file_read::read_regular(&path.target, MAX_AGENT_FILE_BYTES as u64, &path.relative)?;
    if bytes.contains(&0) {
        return Err(Error::invalid(format!(
            "{} is binary (it holds NUL bytes), not an agent file",
            path.relative
        )));
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        Error::invalid(format!(
            "{} is not UTF-8 text (invalid byte at offset {})",
            path.relative,
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Replaces the file's content with `text` atomically, keeping its permissions (a new file is
/// created `0644`).
pub(crate) fn write(path: &AgentPath, text: &str) -> Result<()> {
    if text.len() > MAX_AGENT_FILE_BYTES {
        return Err(too_big(&path.relative, text.len() as u64));
    }
    let dir = path
        .target
        .parent()
        .ok_or_else(|| Error::invalid(format!("{} has no directory", path.relative)))?;
    let io = |e: std::io::Error| Error::io(format!("writing {}", path.relative), e);
    let mut builder = tempfile::Builder::new();
    builder.prefix(".engram-").suffix(".tmp");
    // A temporary file is private (0600); a new agent file is read by people and tools like
    // any other file in the repository.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let mut temp = builder.tempfile_in(dir).map_err(io)?;
    temp.write_all(text.as_bytes()).map_err(io)?;
    temp.as_file().sync_all().map_err(io)?;
    if let Ok(meta) = std::fs::metadata(&path.target) {
        std::fs::set_permissions(temp.path(), meta.permissions()).map_err(io)?;
    }
    temp.persist(&path.target).map_err(|e| io(e.error))?;
    Ok(())
}

fn too_big(relative: &str, len: u64) -> Error {
    Error::invalid(format!(
        "{relative} is {len} bytes; agent files are read and written up to {MAX_AGENT_FILE_BYTES}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let (_dir, root) = root();
        assert_eq!(locate(&root, "./CLAUDE.md").unwrap().relative, "CLAUDE.md");
        assert_eq!(
            locate(&root, "CLAUDE.md").unwrap().target,
            root.join("CLAUDE.md")
        );
        for bad in ["../CLAUDE.md", "/etc/passwd", "a/../../x.md"] {
            let err = locate(&root, bad).unwrap_err();
            assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{bad}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_inside_the_root_only() {
        let (_dir, root) = root();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "- never read me please").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), root.join("CLAUDE.md"))
            .unwrap();
        let err = locate(&root, "CLAUDE.md").unwrap_err();
        assert!(
            err.to_string().contains("outside the project root"),
            "{err}"
        );

        std::fs::write(root.join("AGENTS.md"), "- use pnpm for everything\n").unwrap();
        std::os::unix::fs::symlink(root.join("AGENTS.md"), root.join("LINK.md")).unwrap();
        let link = locate(&root, "LINK.md").unwrap();
        write(&link, "- replaced through the link\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("AGENTS.md")).unwrap(),
            "- replaced through the link\n"
        );
        assert!(std::fs::symlink_metadata(root.join("LINK.md"))
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn bad_files_are_refused_with_their_name() {
        let (_dir, root) = root();
        let at = |name: &str| locate(&root, name).unwrap();
        assert!(read(&at("CLAUDE.md")).unwrap().is_none(), "missing is None");
        std::fs::write(root.join("bin.md"), b"abc\0def").unwrap();
        std::fs::write(root.join("latin1.md"), b"caf\xe9 rules").unwrap();
        std::fs::write(root.join("huge.md"), vec![b'a'; MAX_AGENT_FILE_BYTES + 1]).unwrap();
        std::fs::create_dir(root.join("dir.md")).unwrap();
        for (name, needle) in [
            ("bin.md", "binary"),
            ("latin1.md", "not UTF-8"),
            ("huge.md", "bytes"),
            ("dir.md", "not a file"),
        ] {
            let err = read(&at(name)).unwrap_err();
            assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
            assert!(err.to_string().contains(name), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn writes_replace_the_whole_file_and_leave_no_temporary() {
        let (_dir, root) = root();
        let path = locate(&root, "CLAUDE.md").unwrap();
        write(&path, "first version, much longer than the second\n").unwrap();
        write(&path, "second\n").unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some("second\n"));
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("CLAUDE.md")]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(root.join("CLAUDE.md"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o644, "a new agent file is readable by all");
        }
    }
}
