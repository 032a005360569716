//! What the hooks keep between processes for one session, in `<root>/.engram/hooks/<key>.json`:
//! the last step numbered, the calls of the current turn, tool calls and results not yet
//! observed (`pending`, redacted), the step last completed, and how far the transcript was read.
//! Files are replaced through a rename, so a reader never sees half of one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// One tool call of the current turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct CallNote {
    /// The step reserved for it.
    pub step: u32,
    /// When it started (ms since the epoch).
    pub at: i64,
    /// Whether it was observed (with its result).
    pub done: bool,
}

/// A session's hook state (see the module doc).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct HookState {
    /// The last step numbered.
    pub step: u32,
    /// The last step completed (a turn's end).
    pub step_done: u32,
    /// The current turn's calls by tool_use id.
    pub calls: BTreeMap<String, CallNote>,
    /// Observer messages (the protocol's JSON form, redacted) not yet observed.
    pub pending: Vec<Value>,
    /// The transcript the payloads named.
    pub transcript_path: Option<String>,
    /// How many bytes of it were read.
    pub transcript_offset: u64,
}

/// A file name for a session id: itself when plain, else a hash (ids come from the payload).
pub(super) fn session_key(id: &str) -> String {
    let plain = (1..=80).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        return id.to_owned();
    }
    let digest = Sha256::digest(id.as_bytes());
    format!("h-{}", &hex::encode(digest)[..32])
}

/// Where the state of session `id` lives.
pub(super) fn state_path(hooks_dir: &Path, id: &str) -> PathBuf {
    hooks_dir.join(format!("{}.json", session_key(id)))
}

/// The saved state of session `id`, else a new one that starts reading the transcript where it
/// is now: what was said before engram watched is not this session's to learn from.
pub(super) fn load(hooks_dir: &Path, id: &str, transcript: Option<&str>) -> HookState {
    if let Ok(text) = std::fs::read(state_path(hooks_dir, id)) {
        if let Ok(state) = serde_json::from_slice::<HookState>(&text) {
            return state;
        }
    }
    let offset = transcript
        .and_then(|p| std::fs::metadata(p).ok())
        .map_or(0, |m| m.len());
    HookState {
        transcript_path: transcript.map(str::to_owned),
        transcript_offset: offset,
        ..HookState::default()
    }
}

/// Saves the state of session `id` (remembering the transcript the payload named).
pub(super) fn save(
    hooks_dir: &Path,
    id: &str,
    state: &mut HookState,
    transcript: Option<&str>,
) -> Result<()> {
    if let Some(path) = transcript {
        state.transcript_path = Some(path.to_owned());
    }
    let text = serde_json::to_vec(state)
        .map_err(|e| Error::Internal(format!("hook state does not serialize: {e}")))?;
    write_atomic(&state_path(hooks_dir, id), &text)
}

/// Removes the state of session `id` (it was finalized).
pub(super) fn remove(hooks_dir: &Path, id: &str) {
    let _ = std::fs::remove_file(state_path(hooks_dir, id));
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
pub(super) fn write_atomic(file: &Path, bytes: &[u8]) -> Result<()> {
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("state");
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(format!("writing {}", file.display()), e)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_name_their_file_and_others_are_hashed() {
        assert_eq!(session_key("abc-DEF_1"), "abc-DEF_1");
        let odd = session_key("../../etc/passwd");
        assert!(odd.starts_with("h-") && odd.len() == 34, "{odd}");
        assert_ne!(odd, session_key("../../etc/passwd2"));
        assert!(session_key(&"a".repeat(81)).starts_with("h-"));
    }

    #[test]
    fn a_state_survives_a_save_and_a_broken_file_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = HookState {
            step: 3,
            ..HookState::default()
        };
        state.calls.insert(
            "c".into(),
            CallNote {
                step: 3,
                at: 9,
                done: false,
            },
        );
        save(dir.path(), "s", &mut state, Some("/t.jsonl")).unwrap();
        let back = load(dir.path(), "s", None);
        assert_eq!((back.step, back.calls["c"].at), (3, 9));
        assert_eq!(back.transcript_path.as_deref(), Some("/t.jsonl"));
        std::fs::write(state_path(dir.path(), "s"), "{ not json").unwrap();
        assert_eq!(load(dir.path(), "s", None).step, 0);
    }
}
