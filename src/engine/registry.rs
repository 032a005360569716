//! The process-wide engine registry: canonical path -> the one live engine for that file.
//!
//! The addon is loaded once per process and shared by the main thread and every worker
//! thread, so these statics are process-wide. Entries are weak: when the last handle of a file
//! closes, its engine (and its connections) go away. An entry stays until the engine's files
//! are released (its sync loop may still be dropping the replica), so that a new engine for
//! the file waits for that instead of opening the replica a second time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use super::lifetime::Lifetime;
use super::{Engine, EngineOptions};
use crate::error::{Error, Result};

/// A file's engine, and its lifetime (which outlives it until the files are released).
struct Entry {
    engine: Weak<Engine>,
    lifetime: Arc<Lifetime>,
}

static ENGINES: LazyLock<Mutex<HashMap<PathBuf, Entry>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Serialises engine *creation* (held across the async open) so that two threads opening the
/// same new file cannot both create an engine. Lookups of live engines do not take it.
static CREATING: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(|| tokio::sync::Mutex::new(()));

fn live(path: &Path) -> Option<Arc<Engine>> {
    ENGINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(path)
        .and_then(|entry| entry.engine.upgrade())
}

/// The lifetime of the file's engine that is gone but has not released the files yet.
fn letting_go(path: &Path) -> Option<Arc<Lifetime>> {
    ENGINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(path)
        .filter(|entry| entry.engine.strong_count() == 0 && !entry.lifetime.is_released())
        .map(|entry| Arc::clone(&entry.lifetime))
}

pub(super) async fn open(path: &Path, options: EngineOptions) -> Result<Arc<Engine>> {
    let key = match &options.sync {
        // No file: a remote-only engine, keyed by its server.
        Some(sync) if path.as_os_str().is_empty() => crate::sync::remote::registry_key(&sync.url)?,
        _ => canonical_db_path(path)?,
    };
    if let Some(engine) = live(&key) {
        tracing::trace!(path = %key.display(), "joining the open engine");
        return join(engine, &options);
    }
    let _creating = loop {
        let creating = CREATING.lock().await;
        if let Some(engine) = live(&key) {
            return join(engine, &options);
        }
        // The previous engine of this file is closing: its sync loop is dropping the replica.
        // Wait without the lock (a slow release must not hold up opening other files), then
        // look again: another open may have created the engine meanwhile.
        match letting_go(&key) {
            Some(previous) => {
                drop(creating);
                previous.released().await;
            }
            None => break creating,
        }
    };
    let runtime = tokio::runtime::Handle::try_current().ok();
    let started = std::time::Instant::now();
    let mode = match &options.sync {
        _ if crate::sync::remote::url_of(&key).is_some() => "remote",
        Some(_) => "sync",
        None => "local",
    };
    let engine = match Engine::create(key.clone(), options).await {
        Ok(engine) => Arc::new(engine),
        Err(e) => {
            tracing::debug!(path = %key.display(), mode, code = e.code(), error = %e, "opening the engine failed");
            return Err(e);
        }
    };
    tracing::debug!(
        path = %key.display(),
        mode,
        ms = crate::log::ms(started.elapsed()),
        "opened the engine"
    );
    if let Some(sync) = &engine.sync {
        sync.start(Arc::downgrade(&engine), &engine.lifetime, runtime);
    }
    let entry = Entry {
        engine: Arc::downgrade(&engine),
        lifetime: Arc::clone(&engine.lifetime),
    };
    ENGINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, entry);
    Ok(engine)
}

/// A later open joins the live engine and its settings, except that it may not name another
/// sync server (one replica per file per process).
fn join(engine: Arc<Engine>, options: &EngineOptions) -> Result<Arc<Engine>> {
    if engine.store.is_remote() {
        // Keyed by its URL: the options can only name the same server.
        return Ok(engine);
    }
    let ignored = options_the_live_engine_keeps(&engine, options);
    if !ignored.is_empty() {
        // Not an error: a handle dropped while background work ends, then opened again, meets
        // its own engine still alive. But a caller who meant other settings should hear it.
        tracing::warn!(
            path = %engine.path().display(),
            ignored = ?ignored,
            "this file is already open in this process with other settings: the open joins \
             that engine and keeps its settings (close every handle of it first to change them)"
        );
    }
    if let Some(wanted) = &options.sync {
        let wanted = crate::sync::normalize_url(&wanted.url)?;
        match &engine.sync {
            Some(sync) if sync.url() == wanted => {}
            Some(sync) => {
                return Err(Error::SyncConfig(format!(
                    "{} is open in this process syncing with {}, not {wanted}",
                    engine.path().display(),
                    sync.url()
                )))
            }
            None => {
                return Err(Error::SyncConfig(format!(
                    "{} is open in this process without sync; open every handle of a file \
                     with the same sync options (or none after the first)",
                    engine.path().display()
                )))
            }
        }
    }
    Ok(engine)
}

/// The options of a later open that differ from the live engine's, and so have no effect.
fn options_the_live_engine_keeps(engine: &Engine, options: &EngineOptions) -> Vec<&'static str> {
    let mut ignored = Vec::new();
    if engine.closure_depth != options.closure_depth {
        ignored.push("closureDepth");
    }
    if engine.chunk_vectors != options.chunk_vectors {
        ignored.push("embeddings.definitionVectors");
    }
    if engine.auto_embed.is_some() != options.runs_auto_embed() {
        ignored.push("embeddings.autoEmbed");
    }
    ignored
}

/// Drops the entry for `path` if it is `lifetime`'s (called when its last hold ends).
pub(super) fn forget_released(path: &Path, lifetime: &Lifetime) {
    let mut map = ENGINES.lock().unwrap_or_else(|p| p.into_inner());
    if map
        .get(path)
        .is_some_and(|entry| std::ptr::eq(Arc::as_ptr(&entry.lifetime), lifetime))
    {
        map.remove(path);
    }
}

/// Whether an engine of this process has the file at `canonical` (a [`canonical_db_path`])
/// open.
pub fn is_open(canonical: &Path) -> bool {
    live(canonical).is_some()
}

/// Number of engines alive in this process (for diagnostics and tests).
pub fn open_engines() -> usize {
    ENGINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .filter(|entry| entry.engine.strong_count() > 0)
        .count()
}

/// The registry key for a database path: absolute, symlinks resolved. The file need not exist
/// yet; its parent directory is created if missing.
pub fn canonical_db_path(path: &Path) -> Result<PathBuf> {
    if path.as_os_str().is_empty() {
        return Err(Error::invalid(
            "path must not be empty (a remote-only engine gives sync.url and no path)",
        ));
    }
    if path.is_dir() {
        return Err(Error::invalid(format!(
            "path {} is a directory; give a database file path such as {}",
            path.display(),
            path.join("memory.db").display()
        )));
    }
    if path.exists() {
        return std::fs::canonicalize(path)
            .map_err(|e| Error::io(format!("resolving {}", path.display()), e));
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("path {} names no file", path.display())))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| Error::io(format!("creating directory {}", parent.display()), e))?;
    let parent = std::fs::canonicalize(&parent)
        .map_err(|e| Error::io(format!("resolving {}", parent.display()), e))?;
    Ok(parent.join(file_name))
}

#[cfg(test)]
mod tests {
    use super::{options_the_live_engine_keeps, Engine, EngineOptions};

    #[tokio::test]
    async fn a_later_open_hears_which_of_its_options_the_live_engine_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(&dir.path().join("m.db"), EngineOptions::default())
            .await
            .unwrap();
        assert!(options_the_live_engine_keeps(&engine, &EngineOptions::default()).is_empty());
        // Background embedding without a provider never runs: asking for it again changes nothing.
        let inert = EngineOptions {
            auto_embed: true,
            embeddings: crate::embed::EmbeddingProvider::Disabled,
            ..EngineOptions::default()
        };
        assert!(options_the_live_engine_keeps(&engine, &inert).is_empty());
        let other = EngineOptions {
            closure_depth: engine.closure_depth + 1,
            chunk_vectors: crate::vector::ChunkVectors::ChunksOnly,
            auto_embed: true,
            ..EngineOptions::default()
        };
        assert_eq!(
            options_the_live_engine_keeps(&engine, &other),
            [
                "closureDepth",
                "embeddings.definitionVectors",
                "embeddings.autoEmbed"
            ]
        );
    }
}
