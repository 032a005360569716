//! Remote-only engines (`sync.url` without a `path`): no local file, every statement is a
//! request to the server. For server routes and other stateless hosts, which have no disk to
//! keep a replica on.
//!
//! The server is prepared as any sync primary is (schema, capture triggers, identity), so
//! what a remote-only engine writes reaches syncing devices through the server's change log,
//! and what devices push is what it reads.

use std::path::PathBuf;

use super::{normalize_url, replica, SyncMode, SyncOptions};
use crate::error::{Error, Result};
use crate::store::{Store, StoreOptions};

/// The prefix of a remote-only engine's registry key and display path.
const KEY_PREFIX: &str = "remote:";

/// The registry key of the remote-only engine for `url` (one per server database per
/// process, like one per file).
pub(crate) fn registry_key(url: &str) -> Result<PathBuf> {
    Ok(PathBuf::from(format!(
        "{KEY_PREFIX}{}",
        normalize_url(url)?
    )))
}

/// The server URL of a remote-only engine's key, `None` for a file path.
pub(crate) fn url_of(key: &std::path::Path) -> Option<&str> {
    key.to_str()?.strip_prefix(KEY_PREFIX)
}

/// Connects to the server, migrates it and makes it a sync primary.
///
/// Fails with `ENGRAM_SYNC_CONFIG` for the offline-writes mode (it needs a local file),
/// `ENGRAM_SYNC_UNREACHABLE` or `ENGRAM_SYNC_AUTH` when the server cannot be used.
pub(crate) async fn open_store(options: &SyncOptions, store: &StoreOptions) -> Result<Store> {
    if options.mode == SyncMode::OfflineWrites {
        return Err(Error::SyncConfig(
            "offline writes need a local file: give a path, or drop offlineWrites for a \
             remote-only engine"
                .into(),
        ));
    }
    let key = registry_key(&options.url)?;
    let url = url_of(&key).expect("a remote key").to_owned();
    // Remote connections keep the token they were built with: a function is asked once.
    let token = match (&options.token_source, &options.auth_token) {
        (Some(source), _) => source.token(false).await?,
        (None, Some(token)) => token.clone(),
        (None, None) => String::new(),
    };
    let store = Store::open_remote(&url, &token, key, store).await?;
    {
        let writer = store.writer().await;
        replica::prepare_primary(&writer).await?;
    }
    Ok(store)
}
