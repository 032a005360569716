//! Test support: how SQLite plans a statement on a freshly migrated database, which is what
//! a user's file looks like (engram never runs ANALYZE, so the planner has no statistics and
//! guesses). Tests use it to pin the loop order of statements whose good plan the planner
//! would not find by itself.

use super::{Store, StoreOptions};

/// The `EXPLAIN QUERY PLAN` steps of `sql` (parameters unbound: NULL), one detail per step,
/// in execution order, on a new database in a temporary directory.
pub(crate) async fn query_plan(sql: &str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Store::open(&dir.path().join("plan.db"), &StoreOptions::default())
        .await
        .expect("a new database opens");
    let reader = store.reader().await;
    let mut rows = reader
        .query(&format!("EXPLAIN QUERY PLAN {sql}"), ())
        .await
        .expect("the statement prepares");
    let mut steps = Vec::new();
    while let Some(row) = rows.next().await.expect("plan rows read") {
        steps.push(row.get::<String>(3).expect("plan detail"));
    }
    steps
}

/// Whether a step of the plan mentions `text` (an index name and the columns it is searched
/// by, for instance).
pub(crate) fn mentions(steps: &[String], text: &str) -> bool {
    steps.iter().any(|step| step.contains(text))
}

/// Whether the plan's first loop is over `json_each` (a `SCAN` of the virtual table that
/// every other table is then looked up from), so an id list of n entries costs n lookups.
pub(crate) fn list_drives(steps: &[String]) -> bool {
    steps
        .iter()
        .find(|s| s.starts_with("SCAN") || s.starts_with("SEARCH"))
        .is_some_and(|first| first.contains("VIRTUAL TABLE"))
}

/// Whether every full scan in the plan is of a `json_each` list: every table is reached by an
/// index, in every branch of a compound statement.
pub(crate) fn scans_only_the_list(steps: &[String]) -> bool {
    steps
        .iter()
        .filter(|s| s.starts_with("SCAN"))
        .all(|s| s.contains("VIRTUAL TABLE"))
}
