//! Automatic embedding (the `autoEmbed` open option): after a write that may leave items without
//! a vector (indexing, a watch update, remember, update), one background run per project embeds
//! them. Writes during a run ask for one more run instead of starting another, so a burst of
//! writes costs at most the run going on plus one.

use std::collections::HashMap;
use std::sync::Mutex;

/// One project's background state.
#[derive(Debug, Default, Clone)]
struct ProjectState {
    running: bool,
    again: bool,
    last_error: Option<String>,
}

/// What `embeddingStatus()` reports about a project's background runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackgroundStatus {
    /// A run is going (or about to start).
    pub running: bool,
    /// How the last run failed (`CODE: message`), if it did.
    pub last_error: Option<String>,
}

/// Background runs of one engine, per project.
#[derive(Debug, Default)]
pub struct AutoEmbed {
    projects: Mutex<HashMap<String, ProjectState>>,
    /// Where runs are spawned: the runtime the engine was opened on, never the caller's (a
    /// watcher thread's own runtime is dropped, and waited for, when the watch stops).
    runtime: Option<tokio::runtime::Handle>,
}

impl AutoEmbed {
    /// Background runs spawned on `runtime` (none: runs are never started).
    pub fn new(runtime: Option<tokio::runtime::Handle>) -> Self {
        Self {
            projects: Mutex::default(),
            runtime,
        }
    }

    /// The runtime runs are spawned on.
    pub fn runtime(&self) -> Option<&tokio::runtime::Handle> {
        self.runtime.as_ref()
    }

    /// True when the caller should start a run for `project_id`; false when one is going (it
    /// is then asked to run once more when it ends).
    pub fn claim(&self, project_id: &str) -> bool {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        let state = projects.entry(project_id.to_owned()).or_default();
        if state.running {
            state.again = true;
            return false;
        }
        state.running = true;
        state.again = false;
        true
    }

    /// Records how a run ended; true when another run was asked for meanwhile (the caller runs
    /// again and keeps the claim).
    pub fn finish(&self, project_id: &str, error: Option<String>) -> bool {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        let state = projects.entry(project_id.to_owned()).or_default();
        state.last_error = error;
        if state.again {
            state.again = false;
            return true;
        }
        state.running = false;
        false
    }

    /// The project's background state.
    pub fn status(&self, project_id: &str) -> BackgroundStatus {
        let projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        projects
            .get(project_id)
            .map(|s| BackgroundStatus {
                running: s.running,
                last_error: s.last_error.clone(),
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_during_a_run_asks_for_exactly_one_more() {
        let auto = AutoEmbed::default();
        assert!(auto.claim("p"));
        assert!(!auto.claim("p"));
        assert!(!auto.claim("p"));
        assert!(auto.claim("other"), "projects are independent");
        assert!(auto.status("p").running);
        assert!(auto.finish("p", None), "one more run was asked for");
        assert!(!auto.finish("p", Some("ENGRAM_X: failed".into())));
        assert_eq!(
            auto.status("p"),
            BackgroundStatus {
                running: false,
                last_error: Some("ENGRAM_X: failed".into())
            }
        );
        assert!(auto.claim("p"));
    }
}
