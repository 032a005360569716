//! SQL for the code index (schema home `code`): what the indexer knows of each file, writing a
//! batch of analysed files in one transaction, removals, staleness, symbol resolution and reads.
//!
//! Writes go through JSON arrays expanded by `json_each`, one statement per table per batch,
//! so a batch of hundreds of files costs a handful of statements (and FTS5 flushes once).

use std::collections::HashMap;

use libsql::{params, Connection, Transaction};
use serde_json::{json, Value};

use super::analyze::FileAnalysis;
use crate::error::{DbContext, Error, Result};

/// What the index holds for a file, to decide whether it must be read again.
#[derive(Debug, Clone)]
pub(crate) struct KnownFile {
    pub id: i64,
    pub content_hash: Option<String>,
    pub size_bytes: i64,
    pub mtime_ns: Option<i64>,
    /// Skipped for being over the size cap (worth another look if the cap grew).
    pub too_large: bool,
}

/// Every file the index holds for a project, by path.
pub(crate) async fn known_files(
    conn: &Connection,
    project_id: &str,
) -> Result<HashMap<String, KnownFile>> {
    let mut rows = conn
        .query(
            "SELECT path, id, content_hash, size_bytes, mtime_ns, coalesce(issues, '') LIKE '%too_large%'
             FROM code_files WHERE project_id = ?1",
            params![project_id],
        )
        .await
        .ctx("reading indexed files")?;
    let mut files = HashMap::new();
    while let Some(row) = rows.next().await.ctx("reading indexed files")? {
        files.insert(
            row.get::<String>(0).ctx("path")?,
            KnownFile {
                id: row.get(1).ctx("id")?,
                content_hash: row.get(2).ctx("content_hash")?,
                size_bytes: row.get(3).ctx("size_bytes")?,
                mtime_ns: row.get(4).ctx("mtime_ns")?,
                too_large: row.get::<i64>(5).ctx("issues")? != 0,
            },
        );
    }
    Ok(files)
}

/// One analysed (or skipped) file, ready to be written.
#[derive(Debug)]
pub(crate) struct FileRecord {
    pub path: String,
    pub existing_id: Option<i64>,
    pub size_bytes: i64,
    pub mtime_ns: Option<i64>,
    /// `None` for a skipped file.
    pub language: Option<&'static str>,
    pub content_hash: Option<String>,
    /// Same content as indexed: only the file row (mtime) is refreshed.
    pub unchanged: bool,
    pub analysis: FileAnalysis,
    /// Per reference in `analysis.references`: the project path an import resolves to.
    pub resolved: Vec<Option<String>>,
}

/// Counts of what a batch wrote.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Written {
    pub chunks: u64,
    pub symbols: u64,
    pub references: u64,
}

/// Marks the references of `file_ids` stale (they are about to be rebuilt), in its own commit
/// so readers see the staleness while the rebuild runs.
pub(crate) async fn mark_stale(conn: &Connection, file_ids: &[i64], now: i64) -> Result<()> {
    if file_ids.is_empty() {
        return Ok(());
    }
    conn.execute(
        "UPDATE code_refs SET stale_at = ?2
         WHERE file_id IN (SELECT value FROM json_each(?1)) AND stale_at IS NULL",
        params![json!(file_ids).to_string(), now],
    )
    .await
    .ctx("marking references stale")?;
    Ok(())
}

/// Writes a batch of files in the caller's transaction: file rows upserted, old rows of changed
/// files replaced, chunks (and their full-text rows), symbols and references inserted.
pub(crate) async fn write_batch(
    tx: &Transaction,
    project_id: &str,
    batch: &[FileRecord],
    now: i64,
) -> Result<Written> {
    let mut replaced: Vec<i64> = Vec::new();
    let (mut chunks, mut fts_symbols, mut symbols, mut refs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for file in batch {
        let issues = (!file.analysis.issues.is_empty()).then(|| {
            json!(file
                .analysis
                .issues
                .iter()
                .map(|i| i.as_str())
                .collect::<Vec<_>>())
            .to_string()
        });
        if file.unchanged {
            tx.execute(
                "UPDATE code_files SET mtime_ns = ?2, indexed_at = ?3 WHERE id = ?1",
                params![file.existing_id.unwrap_or_default(), file.mtime_ns, now],
            )
            .await
            .ctx("refreshing an unchanged file")?;
            continue;
        }
        let mut rows = tx
            .query(
                "INSERT INTO code_files
                   (project_id, path, language, content_hash, size_bytes, mtime_ns, line_count, chunk_count, issues, indexed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (project_id, path) DO UPDATE SET
                   language = excluded.language, content_hash = excluded.content_hash,
                   size_bytes = excluded.size_bytes, mtime_ns = excluded.mtime_ns,
                   line_count = excluded.line_count, chunk_count = excluded.chunk_count,
                   issues = excluded.issues, indexed_at = excluded.indexed_at
                 RETURNING id",
                params![
                    project_id,
                    file.path.as_str(),
                    file.language,
                    file.content_hash.as_deref(),
                    file.size_bytes,
                    file.mtime_ns,
                    file.analysis.line_count,
                    file.analysis.chunks.len() as i64,
                    issues,
                    now
                ],
            )
            .await
            .ctx("writing a file row")?;
        let file_id: i64 = match rows.next().await.ctx("writing a file row")? {
            Some(row) => row.get(0).ctx("file id")?,
            None => return Err(Error::Internal("upsert returned no id".into())),
        };
        if let Some(id) = file.existing_id {
            replaced.push(id);
        }
        let a = &file.analysis;
        for (ordinal, c) in a.chunks.iter().enumerate() {
            chunks.push(json!([
                file_id,
                ordinal,
                c.kind.as_str(),
                c.name,
                c.qualified_name,
                json!(c.symbols).to_string(),
                c.start_line,
                c.end_line,
                c.start_byte,
                c.end_byte,
                c.content_hash,
                c.token_estimate,
                c.context,
                c.content
            ]));
            fts_symbols.push(Value::String(symbol_words(&c.symbols, c.name.as_deref())));
        }
        for d in &a.definitions {
            symbols.push(json!([
                file_id,
                d.kind.as_str(),
                d.name,
                d.qualified_name,
                d.start_line,
                d.end_line
            ]));
        }
        for (r, resolved) in a.references.iter().zip(&file.resolved) {
            refs.push(json!([
                file_id,
                r.kind.as_str(),
                r.from_symbol,
                r.target,
                r.member,
                r.line,
                resolved
            ]));
        }
    }
    let written = Written {
        chunks: chunks.len() as u64,
        symbols: symbols.len() as u64,
        references: refs.len() as u64,
    };
    delete_contents(tx, &replaced).await?;
    insert_chunks(tx, chunks, fts_symbols).await?;
    if !symbols.is_empty() {
        tx.execute(
            "INSERT INTO code_symbols (file_id, project_id, kind, name, qualified_name, start_line, end_line)
             SELECT value ->> 0, ?2, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5
             FROM json_each(?1)",
            params![Value::Array(symbols).to_string(), project_id],
        )
        .await
        .ctx("writing symbols")?;
    }
    if !refs.is_empty() {
        tx.execute(
            "INSERT INTO code_refs (file_id, project_id, kind, from_symbol, target, member, line, resolved_path)
             SELECT value ->> 0, ?2, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6
             FROM json_each(?1)",
            params![Value::Array(refs).to_string(), project_id],
        )
        .await
        .ctx("writing references")?;
    }
    Ok(written)
}

async fn insert_chunks(
    tx: &Transaction,
    chunks: Vec<Value>,
    fts_symbols: Vec<Value>,
) -> Result<()> {
    if chunks.is_empty() {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO code_chunks
           (file_id, ordinal, kind, name, qualified_name, symbols, start_line, end_line,
            start_byte, end_byte, content_hash, token_estimate, context, content)
         SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6,
                value ->> 7, value ->> 8, value ->> 9, value ->> 10, value ->> 11, value ->> 12, value ->> 13
         FROM json_each(?1)",
        params![Value::Array(chunks).to_string()],
    )
    .await
    .ctx("writing chunks")?;
    // One INSERT ... SELECT into a rowid table numbers its rows consecutively from max + 1, so
    // the batch's ids are the last `n` ids.
    let last = tx.last_insert_rowid();
    let first = last - fts_symbols.len() as i64 + 1;
    tx.execute(
        "INSERT INTO code_chunks_fts (rowid, symbol, context, content)
         SELECT c.id, j.value, c.context, c.content
         FROM json_each(?1) AS j CROSS JOIN code_chunks c ON c.id = ?2 + j.key",
        params![Value::Array(fts_symbols).to_string(), first],
    )
    .await
    .ctx("indexing chunks for search")?;
    Ok(())
}

/// Deletes the chunks (and their full-text rows), symbols and references of `file_ids`.
async fn delete_contents(tx: &Transaction, file_ids: &[i64]) -> Result<()> {
    if file_ids.is_empty() {
        return Ok(());
    }
    let ids = json!(file_ids).to_string();
    for (sql, what) in [
        (
            "DELETE FROM code_chunks_fts WHERE rowid IN
               (SELECT c.id FROM json_each(?1) AS j CROSS JOIN code_chunks c ON c.file_id = j.value)",
            "deleting old chunks from the search index",
        ),
        ("DELETE FROM code_chunks WHERE file_id IN (SELECT value FROM json_each(?1))", "deleting old chunks"),
        ("DELETE FROM code_refs WHERE file_id IN (SELECT value FROM json_each(?1))", "deleting old references"),
        ("DELETE FROM code_symbols WHERE file_id IN (SELECT value FROM json_each(?1))", "deleting old symbols"),
    ] {
        tx.execute(sql, params![ids.as_str()]).await.ctx(what)?;
    }
    Ok(())
}

/// Removes files (deleted from disk, or now ignored) and everything derived from them.
pub(crate) async fn remove_files(tx: &Transaction, file_ids: &[i64]) -> Result<()> {
    if file_ids.is_empty() {
        return Ok(());
    }
    delete_contents(tx, file_ids).await?;
    tx.execute(
        "DELETE FROM code_files WHERE id IN (SELECT value FROM json_each(?1))",
        params![json!(file_ids).to_string()],
    )
    .await
    .ctx("deleting removed files")?;
    Ok(())
}

/// Resolves unresolved calls and base types to a definition: the one of that name in the same
/// file if there is exactly one, else the only one in the project. `names` limits the work to
/// references whose target is one of them (after a single-file re-index); `None` does all.
pub(crate) async fn resolve_symbols(
    conn: &Connection,
    project_id: &str,
    names: Option<&[String]>,
) -> Result<u64> {
    let names = names.map(|n| json!(n).to_string());
    // A name defined exactly once in the caller's file wins; otherwise one defined exactly once
    // in the project. Each pass groups the definitions once and joins, instead of two
    // correlated counts per reference (4x faster on CPython's 49k references).
    let mut changed = 0;
    for (sql, what) in [
        (
            "UPDATE code_refs AS r SET resolved_symbol_id = u.id
             FROM (SELECT file_id, name, min(id) AS id FROM code_symbols
                   WHERE project_id = ?1 AND (?2 IS NULL OR name IN (SELECT value FROM json_each(?2)))
                   GROUP BY file_id, name HAVING count(*) = 1) AS u
             WHERE u.file_id = r.file_id AND u.name = r.target
               AND r.project_id = ?1 AND r.kind <> 'imports' AND r.resolved_symbol_id IS NULL",
            "resolving references within files",
        ),
        (
            "UPDATE code_refs AS r SET resolved_symbol_id = u.id
             FROM (SELECT name, min(id) AS id FROM code_symbols
                   WHERE project_id = ?1 AND (?2 IS NULL OR name IN (SELECT value FROM json_each(?2)))
                   GROUP BY name HAVING count(*) = 1) AS u
             WHERE u.name = r.target
               AND r.project_id = ?1 AND r.kind <> 'imports' AND r.resolved_symbol_id IS NULL",
            "resolving references across the project",
        ),
    ] {
        changed += conn
            .execute(sql, params![project_id, names.as_deref()])
            .await
            .ctx(what)?;
    }
    Ok(changed)
}

/// FTS text for a chunk's names: each qualified name plus its words split at case changes,
/// underscores and dots (`TokenService.getUser` -> `... token service get user`).
fn symbol_words(symbols: &[String], name: Option<&str>) -> String {
    let mut out = String::new();
    for symbol in symbols.iter().map(String::as_str).chain(name) {
        out.push_str(symbol);
        out.push(' ');
        let mut prev_lower = false;
        for ch in symbol.chars() {
            if ch == '_' || ch == '.' || ch == ':' || ch == '$' {
                out.push(' ');
                prev_lower = false;
                continue;
            }
            if ch.is_uppercase() && prev_lower {
                out.push(' ');
            }
            prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
            out.push(ch);
        }
        out.push(' ');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_words_split_identifiers() {
        let words = symbol_words(&["TokenService.getUser".into(), "MAX_TTL".into()], None);
        assert_eq!(
            words.split_whitespace().collect::<Vec<_>>(),
            [
                "TokenService.getUser",
                "Token",
                "Service",
                "get",
                "User",
                "MAX_TTL",
                "MAX",
                "TTL"
            ]
        );
    }
}
