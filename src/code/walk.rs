//! The project walk: every file under the root that the index reads, honouring `.gitignore`,
//! the default and configured ignore lists, never following symlinks (no loops, nothing outside
//! the root), plus the project's path set for import resolution.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;

use super::indexer::{IndexOptions, DEFAULT_IGNORES};
use super::language::FileKind;
use super::resolve::ProjectFiles;
use crate::error::{Error, Result};

/// A file found by the walk.
pub(crate) struct Walked {
    /// Project-relative, '/'-separated.
    pub rel: String,
    pub abs: PathBuf,
    pub size: u64,
    pub mtime_ns: Option<i64>,
    pub kind: FileKind,
}

/// Lists the files to index (sorted by path) and the project's path set for import resolution.
pub(crate) fn walk(root: &Path, options: &IndexOptions) -> Result<(Vec<Walked>, ProjectFiles)> {
    let mut overrides = OverrideBuilder::new(root);
    let patterns = options
        .use_default_ignores
        .then_some(DEFAULT_IGNORES)
        .into_iter()
        .flatten()
        .map(|p| (*p).to_owned())
        .chain(options.ignore.iter().cloned());
    for pattern in patterns {
        // An override without `!` would mean "include only"; negated, it ignores.
        overrides
            .add(&format!("!{}", pattern.trim()))
            .map_err(|e| Error::invalid(format!("ignore pattern {pattern:?}: {e}")))?;
    }
    let overrides = overrides
        .build()
        .map_err(|e| Error::invalid(format!("ignore patterns: {e}")))?;
    let walker = WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .overrides(overrides)
        .build();
    let mut files = Vec::new();
    let mut project = ProjectFiles::default();
    for entry in walker.flatten() {
        // Symlinks are not followed: no loops, and nothing outside the root is read.
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if !file_type.is_file() {
            continue;
        }
        let abs = entry.path();
        let Some(rel) = abs.strip_prefix(root).ok().and_then(|p| p.to_str()) else {
            continue;
        };
        let rel = rel.replace('\\', "/");
        if abs.file_name().is_some_and(|n| n == "go.mod") {
            if let Ok(text) = std::fs::read_to_string(abs) {
                project.add_go_mod(&rel, &text);
            }
        }
        let Some(kind) = FileKind::of(abs) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i64);
        project.insert(&rel);
        files.push(Walked {
            rel,
            abs: abs.to_path_buf(),
            size: meta.len(),
            mtime_ns,
            kind,
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((files, project))
}
