//! The project walk: every file under the root that the index reads, honouring `.gitignore`,
//! the default and configured ignore lists, never following symlinks (no loops, nothing outside
//! the root), plus the project's path set for import resolution; and the same rules for a
//! single path, for file events.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::UNIX_EPOCH;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::WalkBuilder;

use super::indexer::{IndexOptions, DEFAULT_IGNORES};
use super::language::{FileKind, Language};
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
    let overrides = overrides(root, options)?;
    let walker = WalkBuilder::new(root)
        .hidden(true)
        // `.ignore` files are not read (PathRules, the same rules for file events, reads
        // `.gitignore` only).
        .ignore(false)
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
        project.insert(&rel);
        files.push(Walked::new(rel, abs.to_path_buf(), &meta, kind));
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((files, project))
}

/// Files found under event paths.
pub(crate) struct Scanned {
    pub files: Vec<Walked>,
    /// The event paths, for finding what the index holds under them.
    pub prefixes: Vec<String>,
    /// `go.mod` files above or under the paths, for Go import resolution.
    pub go_mods: Vec<(String, String)>,
}

/// Finds the indexable files at or under event paths (project-relative; paths leaving the
/// root are dropped), with the rules of the walk.
pub(crate) fn scan_paths(root: &Path, rules: &PathRules, paths: &[String]) -> Scanned {
    let mut scanned = Scanned {
        files: Vec::new(),
        prefixes: Vec::new(),
        go_mods: Vec::new(),
    };
    let mut seen = HashSet::new();
    for rel in paths {
        let rel = rel.trim_matches('/');
        let rel_path = Path::new(rel);
        let inside = rel_path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if rel.is_empty() || !inside {
            continue;
        }
        // Whatever the index holds under the path is replaced by what is found now (nothing,
        // when it is gone or ignored).
        scanned.prefixes.push(rel.to_owned());
        let Ok(meta) = std::fs::symlink_metadata(root.join(rel_path)) else {
            continue;
        };
        if rules.is_ignored(rel_path, meta.is_dir()) {
            continue;
        }
        if meta.is_file() {
            add_file(root, rel_path, &mut scanned, &mut seen);
        } else if meta.is_dir() {
            let walker = WalkBuilder::new(root.join(rel_path))
                .standard_filters(false)
                .follow_links(false)
                .build();
            for entry in walker.flatten() {
                let (Ok(sub), Some(file_type)) =
                    (entry.path().strip_prefix(root), entry.file_type())
                else {
                    continue;
                };
                if file_type.is_file() && !rules.is_ignored(sub, false) {
                    add_file(root, sub, &mut scanned, &mut seen);
                }
            }
        }
    }
    scanned
}

fn add_file(root: &Path, rel: &Path, scanned: &mut Scanned, seen: &mut HashSet<String>) {
    let Some(rel_str) = rel.to_str().map(|r| r.replace('\\', "/")) else {
        return;
    };
    let abs = root.join(rel);
    if rel.file_name().is_some_and(|n| n == "go.mod") {
        if let Some(text) = read_go_mod(&abs) {
            scanned.go_mods.push((rel_str.clone(), text));
        }
    }
    let (Some(kind), Ok(meta)) = (FileKind::of(rel), std::fs::metadata(&abs)) else {
        return;
    };
    if seen.insert(rel_str.clone()) {
        if kind == FileKind::Code(Language::Go) {
            find_go_mod(root, rel, scanned);
        }
        scanned.files.push(Walked::new(rel_str, abs, &meta, kind));
    }
}

/// Largest `go.mod` read (a real one is a few KiB).
const MAX_GO_MOD_BYTES: u64 = 1024 * 1024;

/// A `go.mod`'s text, if it is a readable regular UTF-8 file of at most [`MAX_GO_MOD_BYTES`]:
/// a FIFO named `go.mod` must not block the scan (opening it for reading waits for a writer).
fn read_go_mod(path: &Path) -> Option<String> {
    let bytes = crate::file_read::read_regular(path, MAX_GO_MOD_BYTES, "go.mod").ok()?;
    String::from_utf8(bytes).ok()
}

/// The nearest `go.mod` above a Go file (for resolving its imports without a full walk).
fn find_go_mod(root: &Path, rel: &Path, scanned: &mut Scanned) {
    let mut dir = rel.parent();
    while let Some(d) = dir {
        let candidate = d.join("go.mod");
        let rel_str = candidate.to_string_lossy().replace('\\', "/");
        if scanned.go_mods.iter().any(|(p, _)| *p == rel_str) {
            return;
        }
        if let Some(text) = read_go_mod(&root.join(&candidate)) {
            scanned.go_mods.push((rel_str, text));
            return;
        }
        dir = d.parent();
    }
}

impl Walked {
    pub(crate) fn new(
        rel: String,
        abs: PathBuf,
        meta: &std::fs::Metadata,
        kind: FileKind,
    ) -> Walked {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i64);
        Walked {
            rel,
            abs,
            size: meta.len(),
            mtime_ns,
            kind,
        }
    }
}

/// The default and configured ignore patterns as `ignore` overrides (negated: an override
/// without `!` would mean "include only").
fn overrides(root: &Path, options: &IndexOptions) -> Result<Override> {
    let mut overrides = OverrideBuilder::new(root);
    let patterns = options
        .use_default_ignores
        .then_some(DEFAULT_IGNORES)
        .into_iter()
        .flatten()
        .map(|p| (*p).to_owned())
        .chain(options.ignore.iter().cloned());
    for pattern in patterns {
        overrides
            .add(&format!("!{}", pattern.trim()))
            .map_err(|e| Error::invalid(format!("ignore pattern {pattern:?}: {e}")))?;
    }
    overrides
        .build()
        .map_err(|e| Error::invalid(format!("ignore patterns: {e}")))
}

/// The walk's rules for one path at a time (for file events): hidden names, the ignore
/// patterns, `.git/info/exclude` and every `.gitignore` from the root down to the path.
/// `.gitignore` files are read on first use and cached until [`PathRules::forget_gitignores`].
pub(crate) struct PathRules {
    root: PathBuf,
    overrides: Override,
    gitignores: Mutex<HashMap<PathBuf, Option<Arc<Gitignore>>>>,
}

impl PathRules {
    pub fn new(root: &Path, options: &IndexOptions) -> Result<PathRules> {
        Ok(PathRules {
            root: root.to_path_buf(),
            overrides: overrides(root, options)?,
            gitignores: Mutex::new(HashMap::new()),
        })
    }

    /// Whether the walk would leave out `rel` (project-relative) or a directory above it.
    pub fn is_ignored(&self, rel: &Path, is_dir: bool) -> bool {
        let components: Vec<_> = rel.components().collect();
        if components.is_empty() {
            return false;
        }
        let mut path = PathBuf::new();
        for (i, component) in components.iter().enumerate() {
            let std::path::Component::Normal(name) = component else {
                return true; // `..`, `/`: not a path inside the root
            };
            if name.to_string_lossy().starts_with('.') {
                return true;
            }
            let dir_above = path.clone();
            path.push(name);
            let last = i + 1 == components.len();
            let path_is_dir = !last || is_dir;
            let abs = self.root.join(&path);
            if self.overrides.matched(&abs, path_is_dir).is_ignore() {
                return true;
            }
            // Deeper .gitignore files win: check from this directory up to the root.
            let mut dir = Some(dir_above.as_path());
            while let Some(d) = dir {
                if let Some(gitignore) = self.gitignore(d) {
                    match gitignore.matched(&abs, path_is_dir) {
                        ignore::Match::Ignore(_) => return true,
                        ignore::Match::Whitelist(_) => break,
                        ignore::Match::None => {}
                    }
                }
                dir = d.parent();
            }
        }
        false
    }

    /// Drops the cached `.gitignore` files (one of them changed).
    pub fn forget_gitignores(&self) {
        self.gitignores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn gitignore(&self, dir: &Path) -> Option<Arc<Gitignore>> {
        let mut cache = self
            .gitignores
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        cache
            .entry(dir.to_path_buf())
            .or_insert_with(|| {
                let abs_dir = self.root.join(dir);
                let mut builder = GitignoreBuilder::new(&abs_dir);
                let mut any = builder.add(abs_dir.join(".gitignore")).is_none();
                if dir.as_os_str().is_empty() {
                    any |= builder.add(abs_dir.join(".git/info/exclude")).is_none();
                }
                let gitignore = builder.build().ok()?;
                (any && gitignore.num_ignores() + gitignore.num_whitelists() > 0)
                    .then(|| Arc::new(gitignore))
            })
            .clone()
    }
}
