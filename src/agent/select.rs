//! The memories an agent-loop builder draws a section from: of given types, in the request's
//! modules (naming one, or attached to a file under one) or anywhere in the project, most
//! confident or newest first.

use std::sync::LazyLock;

use libsql::params;

use crate::error::{Error, Result};
use crate::memory::rows::{from_row, SELECT_M};
use crate::memory::{Ctx, Memory, MemoryType};

/// Which memories of a section come first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Highest stored confidence first.
    Confidence,
    /// Newest first.
    Newest,
}

/// Up to `limit` active, not stale memories of `types` in `modules` (every module when
/// empty), in `order`, over-fetched twice so that the caller's trust filter leaves a section
/// full. The caller takes its `limit` after filtering.
pub(crate) async fn of_types(
    ctx: &Ctx<'_>,
    modules: &[String],
    types: &[MemoryType],
    order: Order,
    limit: u32,
) -> Result<Vec<Memory>> {
    // Files under a module are the link keys in [module, module-with-'/'-bumped-to-'0'): a
    // range on the key index per module, not a scan. Named modules need the JSON column.
    static IN_MODULES: LazyLock<[String; 2]> = LazyLock::new(|| {
        [Order::Confidence, Order::Newest].map(|order| {
            format!(
                "SELECT {} FROM memories m WHERE m.seq IN (
                   SELECT l.memory_seq FROM json_each(?2) j CROSS JOIN memory_links l
                   WHERE l.project_id = ?1 AND l.node_key >= j.value
                     AND l.node_key < substr(j.value, 1, length(j.value) - 1) || '0'
                   UNION
                   SELECT m2.seq FROM memories m2
                   WHERE m2.project_id = ?1 AND m2.deprecated = 0 AND m2.related_modules <> '[]'
                     AND EXISTS (SELECT 1 FROM json_each(m2.related_modules) r, json_each(?2) j
                                 WHERE r.value = j.value OR r.value || '/' = j.value))
                 AND m.deprecated = 0 AND m.stale_at IS NULL
                 AND m.type IN (SELECT value FROM json_each(?3))
                 ORDER BY {} LIMIT ?4",
                *SELECT_M,
                order_by(order)
            )
        })
    });
    static ANYWHERE: LazyLock<[String; 2]> = LazyLock::new(|| {
        [Order::Confidence, Order::Newest].map(|order| {
            format!(
                "SELECT {} FROM memories m
                 WHERE m.project_id = ?1 AND m.deprecated = 0 AND m.stale_at IS NULL
                   AND m.type IN (SELECT value FROM json_each(?3)) AND ?2 IS NULL
                 ORDER BY {} LIMIT ?4",
                *SELECT_M,
                order_by(order)
            )
        })
    });
    let types: Vec<&str> = types.iter().map(|t| t.as_str()).collect();
    let (sql, modules_json) = if modules.is_empty() {
        (&ANYWHERE[order as usize], None)
    } else {
        (&IN_MODULES[order as usize], Some(to_json(&modules)?))
    };
    let mut reader = ctx.store.reader().await;
    reader
        .query_cached(
            sql.as_str(),
            params![
                ctx.project_id,
                modules_json,
                to_json(&types)?,
                i64::from(limit)
            ],
            from_row,
        )
        .await
}

fn order_by(order: Order) -> &'static str {
    match order {
        Order::Confidence => "m.confidence DESC, m.seq DESC",
        Order::Newest => "m.created_at DESC, m.seq DESC",
    }
}

/// A list as JSON text, for a `json_each` parameter.
fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Internal(e.to_string()))
}
