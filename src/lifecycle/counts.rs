//! Reading one row of counts: trust evidence, a session's counts and health all ask SQLite
//! for a single row of `count(*)`/`sum(...)` columns.

use libsql::params::IntoParams;
use libsql::Connection;

use crate::error::{DbContext, Error, Result};

/// Runs `sql`, which returns exactly one row of `N` integer columns, and returns them
/// (negative values, which a count never is, read as 0). `what` names the query in errors.
pub(crate) async fn count_row<const N: usize>(
    conn: &Connection,
    sql: &str,
    params: impl IntoParams,
    what: &'static str,
) -> Result<[u64; N]> {
    let mut rows = conn.query(sql, params).await.ctx(what)?;
    let row = rows
        .next()
        .await
        .ctx(what)?
        .ok_or_else(|| Error::Internal(format!("{what}: no row")))?;
    let mut out = [0u64; N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = row.get::<i64>(i as i32).ctx(what)?.max(0) as u64;
    }
    Ok(out)
}
