//! The project's git history, read with `gix` (no `git` binary needed): which files changed
//! between a commit and `HEAD`. The staleness pass (`lifecycle::git_drift`) asks this for the
//! commits memories were written at.
//!
//! A change is a tree-to-tree diff of the commit's tree against `HEAD`'s, not a walk of the
//! commits between them: its cost follows the trees' differences (unchanged subtrees are
//! skipped by id), not the history's length. Without rename tracking a rename is a deletion
//! of the old path and an addition of the new one, so a memory about the old path sees it
//! change. Paths come back relative to the project root (which may lie below the work tree's
//! root, as in a monorepo); paths outside the project are dropped.
//!
//! Everything here is blocking and `gix::Repository` is not `Send` (without the `parallel`
//! feature): callers run a whole [`History`] on one blocking thread.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gix::bstr::ByteSlice;
use gix::diff::tree::{recorder::Change, Recorder, State};
use gix::objs::TreeRefIter;
use gix::ObjectId;

use crate::error::{Error, Result};

/// What one staleness pass over the memories found (`lifecycle::git_drift`), reported with
/// the index run it followed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GitStaleness {
    /// `HEAD` the pass compared with (`None`: nothing was compared: the project is in no
    /// repository, it has no commit yet, or no memory has a `commitSha` and related files).
    pub head: Option<String>,
    /// Memories with a `commitSha` and related files that were looked at.
    pub checked: u64,
    /// Memories whose confidence was lowered by this pass.
    pub lowered: u64,
    /// Memories this pass flagged for review.
    pub flagged_for_review: u64,
    /// Memories whose commit the repository does not hold, or that `HEAD` does not descend
    /// from (another branch, an old tag): left as they were.
    pub unknown_commits: u64,
    /// Wall time of the pass (reading the memories, the history, and writing).
    pub duration: std::time::Duration,
}

/// Commits walked back from `HEAD` at most to tell whether a memory's commit is an ancestor
/// (a commit further back is taken for unknown).
const MAX_WALK: usize = 500_000;

/// Bytes of decoded objects `gix` keeps between diffs against the same `HEAD` (measured:
/// ~1.5x faster over 200 diffs than no cache).
const OBJECT_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// The history of the repository holding a project, with `HEAD` resolved once and the
/// changes since each commit asked for remembered.
pub struct History {
    repo: gix::Repository,
    head: ObjectId,
    head_tree: ObjectId,
    /// The project root relative to the work tree's root, `/`-separated, empty at the root.
    prefix: String,
    state: State,
    by_commit: HashMap<String, Option<Arc<HashSet<String>>>>,
    by_tree: HashMap<ObjectId, Arc<HashSet<String>>>,
}

impl History {
    /// The history of the repository `project_root` is in, or `None` when it is in none, has
    /// no commit yet, or is bare (no work tree to relate paths to). A repository that exists
    /// but cannot be read is an error.
    pub fn open(project_root: &Path) -> Result<Option<History>> {
        let mut repo = match gix::discover(project_root) {
            Ok(repo) => repo,
            Err(e)
                if e.downcast_any_ref::<gix::discover::upwards::Error>()
                    .is_some() =>
            {
                return Ok(None)
            }
            Err(e) => return Err(git_error("opening the repository", e)),
        };
        repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
        let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
            return Ok(None);
        };
        let Some(prefix) = prefix_of(project_root, &workdir) else {
            return Ok(None);
        };
        let head = match repo.head() {
            Ok(mut head) => match head.try_peel_to_id() {
                Ok(Some(id)) => id.detach(),
                Ok(None) => return Ok(None),
                Err(e) => return Err(git_error("reading HEAD", e)),
            },
            Err(e) => return Err(git_error("reading HEAD", e)),
        };
        let head_tree = tree_of(&repo, head)?;
        Ok(Some(History {
            repo,
            head,
            head_tree,
            prefix,
            state: State::default(),
            by_commit: HashMap::new(),
            by_tree: HashMap::new(),
        }))
    }

    /// `HEAD`'s commit id in hex.
    pub fn head(&self) -> String {
        self.head.to_string()
    }

    /// For each of `commits`, the project's files changed between it and `HEAD` (see
    /// [`History::changed_since`]), or `None` when the repository does not hold it, it is not
    /// an ancestor of `HEAD` (another branch checked out, an old tag, a rebase in progress: the
    /// difference is not the code moving on from the memory), or reading it failed (logged).
    pub fn changed_since_each(
        &mut self,
        commits: &[String],
    ) -> HashMap<String, Option<Arc<HashSet<String>>>> {
        let resolved: HashMap<&String, ObjectId> = commits
            .iter()
            .filter_map(|c| Some((c, self.resolve(c)?)))
            .collect();
        let wanted: HashSet<ObjectId> = resolved.values().copied().collect();
        let ancestors = match self.ancestors_among(&wanted) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "git staleness: walking the history failed");
                HashSet::new()
            }
        };
        let mut out = HashMap::with_capacity(commits.len());
        for commit in commits {
            let changed = match resolved.get(commit) {
                Some(id) if ancestors.contains(id) => match self.changed_since(commit) {
                    Ok(changed) => changed,
                    Err(e) => {
                        tracing::warn!(commit = %commit, error = %e, "git staleness: diff failed");
                        None
                    }
                },
                _ => None,
            };
            out.insert(commit.clone(), changed);
        }
        out
    }

    /// Those of `wanted` that `HEAD` descends from (itself included): one walk of the history
    /// from `HEAD`, ending once all are found or after [`MAX_WALK`] commits.
    fn ancestors_among(&self, wanted: &HashSet<ObjectId>) -> Result<HashSet<ObjectId>> {
        let mut found = HashSet::new();
        if wanted.is_empty() {
            return Ok(found);
        }
        let walk = self
            .repo
            .rev_walk([self.head])
            .all()
            .map_err(|e| git_error("walking the history", e))?;
        for info in walk.take(MAX_WALK) {
            let info = info.map_err(|e| git_error("walking the history", e))?;
            if wanted.contains(&info.id) {
                found.insert(info.id);
                if found.len() == wanted.len() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The project's files that differ between `commit` (full or abbreviated hex, at least 4
    /// digits) and `HEAD`, relative to the project root; `None` when the repository holds no
    /// such commit (a sha from another clone, rebased away, or beyond a shallow clone's
    /// depth), or the prefix is ambiguous.
    fn changed_since(&mut self, commit: &str) -> Result<Option<Arc<HashSet<String>>>> {
        if let Some(known) = self.by_commit.get(commit) {
            return Ok(known.clone());
        }
        let changed = match self.resolve(commit) {
            None => None,
            Some(id) => {
                let tree = tree_of(&self.repo, id)?;
                Some(match self.by_tree.get(&tree) {
                    Some(known) => Arc::clone(known),
                    None => {
                        let diff = Arc::new(self.diff(tree)?);
                        self.by_tree.insert(tree, Arc::clone(&diff));
                        diff
                    }
                })
            }
        };
        self.by_commit.insert(commit.to_owned(), changed.clone());
        Ok(changed)
    }

    /// The commit `sha` names, if the repository has it.
    fn resolve(&self, sha: &str) -> Option<ObjectId> {
        let sha = sha.trim();
        let id = if sha.len() == self.repo.object_hash().len_in_hex() {
            ObjectId::from_hex(sha.as_bytes()).ok()?
        } else {
            let prefix = gix::hash::Prefix::from_hex(sha).ok()?;
            // The inner `Err` is an ambiguous prefix.
            self.repo.objects.lookup_prefix(prefix, None).ok()??.ok()?
        };
        let object = self.repo.try_find_object(id).ok()??;
        (object.kind == gix::object::Kind::Commit).then_some(id)
    }

    /// The project's paths that differ between `old_tree` and `HEAD`'s tree.
    fn diff(&mut self, old_tree: ObjectId) -> Result<HashSet<String>> {
        if old_tree == self.head_tree {
            return Ok(HashSet::new());
        }
        let kind = self.repo.object_hash();
        let old = self
            .repo
            .find_tree(old_tree)
            .map_err(|e| git_error("reading a tree", e))?;
        let new = self
            .repo
            .find_tree(self.head_tree)
            .map_err(|e| git_error("reading a tree", e))?;
        let mut recorder = Recorder::default();
        gix::diff::tree(
            TreeRefIter::from_bytes(&old.data, kind),
            TreeRefIter::from_bytes(&new.data, kind),
            &mut self.state,
            &self.repo.objects,
            &mut recorder,
        )
        .map_err(|e| git_error("comparing trees", e))?;
        let mut changed = HashSet::with_capacity(recorder.records.len());
        for change in recorder.records {
            let (mode, path) = match change {
                Change::Addition {
                    entry_mode, path, ..
                }
                | Change::Deletion {
                    entry_mode, path, ..
                }
                | Change::Modification {
                    entry_mode, path, ..
                } => (entry_mode, path),
            };
            // Directories are reported too, then descended into: their files are what count.
            if mode.is_tree() {
                continue;
            }
            let Ok(path) = path.to_str() else { continue };
            if let Some(relative) = within(path, &self.prefix) {
                changed.insert(relative.to_owned());
            }
        }
        Ok(changed)
    }
}

/// The tree of commit `id`.
fn tree_of(repo: &gix::Repository, id: ObjectId) -> Result<ObjectId> {
    let commit = repo
        .find_commit(id)
        .map_err(|e| git_error("reading a commit", e))?;
    Ok(commit
        .tree_id()
        .map_err(|e| git_error("reading a commit's tree", e))?
        .detach())
}

/// `root` relative to `workdir` as a `/`-separated prefix (empty when they are the same), or
/// `None` when the root is not inside the work tree.
fn prefix_of(root: &Path, workdir: &Path) -> Option<String> {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| PathBuf::from(p));
    let (root, workdir) = (canonical(root), canonical(workdir));
    let relative = root.strip_prefix(&workdir).ok()?;
    let parts: Option<Vec<&str>> = relative
        .components()
        .map(|c| c.as_os_str().to_str())
        .collect();
    Some(parts?.join("/"))
}

/// `path` (work-tree relative) relative to the project `prefix`, when it lies inside it.
fn within<'p>(path: &'p str, prefix: &str) -> Option<&'p str> {
    if prefix.is_empty() {
        return Some(path);
    }
    path.strip_prefix(prefix)?.strip_prefix('/')
}

fn git_error(doing: &str, e: impl std::fmt::Display) -> Error {
    Error::Internal(format!("git: {doing}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_taken_relative_to_the_project_inside_the_work_tree() {
        assert_eq!(within("src/a.rs", ""), Some("src/a.rs"));
        assert_eq!(within("pkg/src/a.rs", "pkg"), Some("src/a.rs"));
        assert_eq!(within("pkgx/src/a.rs", "pkg"), None);
        assert_eq!(within("other/a.rs", "pkg"), None);
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a").join("b");
        std::fs::create_dir_all(&nested).unwrap();
        assert_eq!(prefix_of(&nested, dir.path()).as_deref(), Some("a/b"));
        assert_eq!(prefix_of(dir.path(), dir.path()).as_deref(), Some(""));
        assert_eq!(prefix_of(dir.path(), &nested), None);
    }
}
