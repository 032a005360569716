//! SQL for the code index (schema home `code`): what the indexer knows of each file, writing a
//! batch of analysed files in one transaction, removals, staleness, symbol resolution and reads.
//!
//! A batch of hundreds of files is one transaction with one prepared statement per table, run
//! once per row (FTS5 buffers the batch's postings and flushes them at commit).

use std::collections::HashMap;

use libsql::params::IntoParams;
use libsql::{params, Connection, Statement};
use serde_json::json;

use super::analyze::FileAnalysis;
use super::extract::RefKind;
use super::resolve::ProjectFiles;
use crate::error::{DbContext, Error, Result};
use crate::store::WriteTx;

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

/// Columns of [`known_files`] (qualified: json_each has its own `path` and `id`), as a
/// literal for `concat!`.
macro_rules! known_file_columns {
    () => {
        "f.path, f.id, f.content_hash, f.size_bytes, f.mtime_ns,
         coalesce(f.issues, '') LIKE '%too_large%'"
    };
}

/// Every indexed file of project `?1`.
const KNOWN_FILES: &str = concat!(
    "SELECT ",
    known_file_columns!(),
    " FROM code_files f WHERE f.project_id = ?1"
);

/// The indexed files of project `?1` at or under the paths `?2` (JSON). Each path drives a
/// range of the (project, path) index: `'0'` is the character after `/`, so the range holds
/// the path itself and everything under it (and siblings such as `a.ts` or `a-b` beside `a`,
/// which the exact test then drops). A path given twice, or under another given path, yields
/// its files twice. Written as a filter over every file of the project, this read each file
/// against each path: a watcher batch of 1,000 paths in a 50,000-file project took 17 s.
const KNOWN_FILES_UNDER: &str = concat!(
    "SELECT ",
    known_file_columns!(),
    " FROM json_each(?2) AS p CROSS JOIN code_files f
     WHERE f.project_id = ?1 AND f.path >= p.value AND f.path < p.value || '0'
       AND (f.path = p.value OR substr(f.path, 1, length(p.value) + 1) = p.value || '/')"
);

/// The files the index holds for a project, by path: all of them, or those at or under the
/// given paths.
pub(crate) async fn known_files(
    conn: &Connection,
    project_id: &str,
    under: Option<&[String]>,
) -> Result<HashMap<String, KnownFile>> {
    let mut rows = match under {
        None => conn.query(KNOWN_FILES, params![project_id]).await,
        Some(under) => {
            let under = json!(under).to_string();
            conn.query(KNOWN_FILES_UNDER, params![project_id, under])
                .await
        }
    }
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
    /// Read again only because a schema upgrade asked for it ([`REREAD_AFTER_UPGRADE`]): its
    /// content may be as it was, so it is not an edit.
    pub reread_after_upgrade: bool,
    pub analysis: FileAnalysis,
    /// Per reference in `analysis.references`: the project path an import resolves to.
    pub resolved: Vec<Option<String>>,
}

/// The content hash a migration stores to have a file read again on the next index run
/// (`sql/code/009_chunk_parts.sql`): no file's hash matches it.
pub(crate) const REREAD_AFTER_UPGRADE: &str = "before-chunk-parts";

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
    tx: &WriteTx,
    project_id: &str,
    batch: &[FileRecord],
    now: i64,
) -> Result<Written> {
    let replaced: Vec<i64> = batch
        .iter()
        .filter(|f| !f.unchanged)
        .filter_map(|f| f.existing_id)
        .collect();
    delete_contents(tx, &replaced).await?;
    let statements = BatchStatements::prepare(tx).await?;
    // File rows first: an upsert opens a statement savepoint, which makes FTS5 flush its
    // buffered postings, so upserts between chunk inserts would flush once per file (a third
    // of the writer's time on CPython) instead of once per batch.
    let mut file_ids = Vec::with_capacity(batch.len());
    for file in batch {
        if file.unchanged {
            statements
                .run(
                    &statements.refresh_file,
                    params![file.existing_id.unwrap_or_default(), file.mtime_ns, now],
                    "refreshing an unchanged file",
                )
                .await?;
            file_ids.push(None);
        } else {
            file_ids.push(Some(write_file(tx, project_id, file, now).await?));
        }
    }
    let mut written = Written::default();
    // The chunk ids this batch inserts, for the vector change log (one row per batch: a
    // trigger per chunk cost ~15% of a cold index).
    let mut inserted: Option<(i64, i64)> = None;
    for (file, file_id) in batch.iter().zip(file_ids) {
        let Some(file_id) = file_id else { continue };
        let a = &file.analysis;
        for (ordinal, c) in a.chunks.iter().enumerate() {
            statements
                .run(
                    &statements.chunk,
                    params![
                        file_id,
                        ordinal as i64,
                        c.kind.as_str(),
                        c.name.as_deref(),
                        c.qualified_name.as_deref(),
                        json!(c.symbols).to_string(),
                        c.start_line,
                        c.end_line,
                        c.start_byte as i64,
                        c.end_byte as i64,
                        c.content_hash.as_str(),
                        c.token_estimate,
                        c.context.as_str(),
                        c.content.as_str(),
                        c.embed_hash.to_vec()
                    ],
                    "writing a chunk",
                )
                .await?;
            let chunk_id = tx.last_insert_rowid();
            inserted = Some(inserted.map_or((chunk_id, chunk_id), |(lo, hi)| {
                (lo.min(chunk_id), hi.max(chunk_id))
            }));
            statements
                .run(
                    &statements.chunk_fts,
                    params![
                        chunk_id,
                        symbol_words(&c.symbols, c.name.as_deref()),
                        c.context.as_str(),
                        c.content.as_str()
                    ],
                    "indexing a chunk for search",
                )
                .await?;
            for (ordinal, part) in c.parts.iter().enumerate() {
                statements
                    .run(
                        &statements.part,
                        params![
                            chunk_id,
                            ordinal as i64,
                            part.kind.as_str(),
                            part.symbol.as_str(),
                            part.start_line,
                            part.end_line,
                            part.content_range.start as i64,
                            part.content_range.end as i64,
                            part.context.as_str(),
                            part.embed_hash.to_vec()
                        ],
                        "writing a chunk's part",
                    )
                    .await?;
            }
        }
        for d in &a.definitions {
            statements
                .run(
                    &statements.symbol,
                    params![
                        file_id,
                        project_id,
                        d.kind.as_str(),
                        d.name.as_str(),
                        d.qualified_name.as_str(),
                        d.start_line,
                        d.end_line,
                        d.content_hash.as_str()
                    ],
                    "writing a symbol",
                )
                .await?;
        }
        for (r, resolved) in a.references.iter().zip(&file.resolved) {
            statements
                .run(
                    &statements.reference,
                    params![
                        file_id,
                        project_id,
                        r.kind.as_str(),
                        r.from_symbol.as_deref(),
                        r.target.as_str(),
                        r.member.as_deref(),
                        r.line,
                        resolved.as_deref()
                    ],
                    "writing a reference",
                )
                .await?;
        }
        written.chunks += a.chunks.len() as u64;
        written.symbols += a.definitions.len() as u64;
        written.references += a.references.len() as u64;
    }
    if let Some((first, last)) = inserted {
        log_chunk_range(tx, first, last).await?;
    }
    Ok(written)
}

/// Tells the vector indexes that chunks `first..=last` were inserted, deleted or changed
/// (invariant 18: the batch writer and `delete_contents` are the only places chunks change).
async fn log_chunk_range(tx: &WriteTx, first: i64, last: i64) -> Result<()> {
    tx.execute(
        "INSERT INTO code_vector_log (first_chunk, last_chunk) VALUES (?1, ?2)",
        params![first, last],
    )
    .await
    .ctx("logging chunk changes for the vector index")?;
    Ok(())
}

/// The row inserts of a batch, prepared once and run per row: binding values directly costs
/// less than encoding rows as JSON for SQLite to decode again.
struct BatchStatements {
    refresh_file: Statement,
    chunk: Statement,
    chunk_fts: Statement,
    part: Statement,
    symbol: Statement,
    reference: Statement,
}

impl BatchStatements {
    async fn prepare(tx: &WriteTx) -> Result<BatchStatements> {
        let prepare = |sql: &'static str| async move {
            tx.prepare(sql).await.ctx("preparing an index write")
        };
        Ok(BatchStatements {
            refresh_file: prepare(
                "UPDATE code_files SET mtime_ns = ?2, indexed_at = ?3 WHERE id = ?1",
            )
            .await?,
            chunk: prepare(
                "INSERT INTO code_chunks
                   (file_id, ordinal, kind, name, qualified_name, symbols, start_line, end_line,
                    start_byte, end_byte, content_hash, token_estimate, context, content, embed_hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            )
            .await?,
            chunk_fts: prepare(
                "INSERT INTO code_chunks_fts (rowid, symbol, context, content) VALUES (?1, ?2, ?3, ?4)",
            )
            .await?,
            part: prepare(
                "INSERT INTO code_chunk_parts
                   (chunk_id, ordinal, kind, symbol, start_line, end_line, start_off, end_off,
                    context, embed_hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .await?,
            symbol: prepare(
                "INSERT INTO code_symbols (file_id, project_id, kind, name, qualified_name, start_line, end_line, content_hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .await?,
            reference: prepare(
                "INSERT INTO code_refs (file_id, project_id, kind, from_symbol, target, member, line, resolved_path)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .await?,
        })
    }

    async fn run(&self, statement: &Statement, values: impl IntoParams, what: &str) -> Result<()> {
        let result = statement.execute(values).await;
        statement.reset();
        result.ctx(what)?;
        Ok(())
    }
}

/// Upserts a file row and returns its id.
async fn write_file(tx: &WriteTx, project_id: &str, file: &FileRecord, now: i64) -> Result<i64> {
    let issues = (!file.analysis.issues.is_empty()).then(|| {
        json!(file
            .analysis
            .issues
            .iter()
            .map(|i| i.as_str())
            .collect::<Vec<_>>())
        .to_string()
    });
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
    match rows.next().await.ctx("writing a file row")? {
        Some(row) => row.get(0).ctx("file id"),
        None => Err(Error::Internal("upsert returned no id".into())),
    }
}

/// Deletes the chunks (and their full-text rows and parts), symbols and references of
/// `file_ids`.
async fn delete_contents(tx: &WriteTx, file_ids: &[i64]) -> Result<()> {
    if file_ids.is_empty() {
        return Ok(());
    }
    let ids = json!(file_ids).to_string();
    // Before the rows go: the ids of each file's chunks, as one range per file.
    tx.execute(
        "INSERT INTO code_vector_log (first_chunk, last_chunk)
           SELECT min(c.id), max(c.id) FROM json_each(?1) AS j
           CROSS JOIN code_chunks c ON c.file_id = j.value GROUP BY c.file_id",
        params![ids.as_str()],
    )
    .await
    .ctx("logging chunk deletions for the vector index")?;
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
pub(crate) async fn remove_files(tx: &WriteTx, file_ids: &[i64]) -> Result<()> {
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

/// Which references [`resolve_symbols`] looks at.
pub(crate) enum ResolveScope<'a> {
    /// Every reference of the project, each resolved again from scratch.
    All,
    /// What changed files can move: every reference of the files `written` (new rows, so
    /// unresolved), and the unresolved references elsewhere to `defined`, the names those
    /// files define before or after (a reference into a replaced symbol row was set to NULL
    /// by the foreign key). The resolutions of `redefined` (names whose definitions changed
    /// in number or place, which can move a resolution or make it ambiguous) are cleared
    /// first. Nothing else can move: a resolution depends only on the definitions of its
    /// name. Looking at every reference to every name a changed file calls (`len`, `append`:
    /// 12k of CPython's 49k references for one edit of `os.py`) made a re-index of one file
    /// spend most of its time on references it could not change.
    Changed {
        written: &'a [String],
        defined: &'a [String],
        redefined: &'a [String],
    },
}

/// The ids of the changed files (`?3`, a JSON array of paths) in project `?1`.
const WRITTEN_FILES: &str =
    "(SELECT id FROM code_files WHERE project_id = ?1 AND path IN (SELECT value FROM json_each(?3)))";

/// Resolves calls and base types to a definition: the one of that name in the same file if
/// there is exactly one, else the only one in the project (see [`ResolveScope`] for which
/// references are looked at). Returns how many references got a resolution.
pub(crate) async fn resolve_symbols(
    conn: &Connection,
    project_id: &str,
    scope: ResolveScope<'_>,
) -> Result<u64> {
    let mut resolved = 0;
    for (i, (sql, values, what)) in resolve_statements(project_id, scope)
        .into_iter()
        .enumerate()
    {
        let affected = conn
            .execute(&sql, libsql::params::Params::Positional(values))
            .await
            .ctx(what)?;
        // The first statement clears; the others resolve.
        resolved += if i == 0 { 0 } else { affected };
    }
    Ok(resolved)
}

/// One statement of a resolution: SQL, its parameters, and what it does (for errors).
type ResolveStatement = (String, Vec<libsql::Value>, &'static str);

/// The statements of [`resolve_symbols`] for `scope`, in order: the clearing first.
fn resolve_statements(project_id: &str, scope: ResolveScope<'_>) -> Vec<ResolveStatement> {
    // Each statement's filters are spelled out rather than `?2 IS NULL OR ...`: a
    // disjunction keeps SQLite from using the (project_id, target), (project_id, name) and
    // file_id indexes, which turns a one-file update into a scan of every reference.
    let project = || libsql::Value::from(project_id.to_owned());
    let (clear_filter, symbols_filter, refs_filter, clear_params, names_params, written) =
        match scope {
            ResolveScope::Changed {
                written,
                defined,
                redefined,
            } => (
                "AND target IN (SELECT value FROM json_each(?2))",
                "AND name IN (SELECT value FROM json_each(?2))",
                "AND target IN (SELECT value FROM json_each(?2))",
                vec![project(), json!(redefined).to_string().into()],
                vec![project(), json!(defined).to_string().into()],
                Some(json!(written).to_string()),
            ),
            ResolveScope::All => ("", "", "", vec![project()], vec![project()], None),
        };
    // Definitions of these names changed: what they resolved to may now be wrong.
    let mut statements: Vec<ResolveStatement> = vec![(
        format!(
            "UPDATE code_refs SET resolved_symbol_id = NULL
             WHERE project_id = ?1 AND kind <> 'imports' AND resolved_symbol_id IS NOT NULL
               {clear_filter}"
        ),
        clear_params.clone(),
        "clearing stale resolutions",
    )];
    // A name defined exactly once in the caller's file wins; otherwise one defined exactly once
    // in the project. Each pass groups the definitions once and joins, instead of two
    // correlated counts per reference (4x faster on CPython's 49k references). The
    // within-file statements run before the project-wide ones, which only fill what is still
    // unresolved.
    let written_params = |written: &str| vec![project(), libsql::Value::Null, written.into()];
    if let Some(written) = &written {
        statements.push((
            format!(
                "UPDATE code_refs AS r SET resolved_symbol_id = u.id
                 FROM (SELECT file_id, name, min(id) AS id FROM code_symbols
                       WHERE file_id IN {WRITTEN_FILES}
                       GROUP BY file_id, name HAVING count(*) = 1) AS u
                 WHERE u.file_id = r.file_id AND u.name = r.target AND r.file_id IN {WRITTEN_FILES}
                   AND r.kind <> 'imports' AND r.resolved_symbol_id IS NULL"
            ),
            written_params(written),
            "resolving the changed files' references within their files",
        ));
    }
    // Elsewhere, only a cleared reference can newly resolve within its own file: one into
    // its own file's definition was not cleared, and one that did not resolve there before
    // still cannot (that file's definitions did not change).
    statements.push((
        format!(
            "UPDATE code_refs AS r SET resolved_symbol_id = u.id
             FROM (SELECT file_id, name, min(id) AS id FROM code_symbols
                   WHERE project_id = ?1 {symbols_filter}
                   GROUP BY file_id, name HAVING count(*) = 1) AS u
             WHERE u.file_id = r.file_id AND u.name = r.target AND r.project_id = ?1
               AND r.kind <> 'imports' AND r.resolved_symbol_id IS NULL {refs_filter}"
        ),
        clear_params,
        "resolving references within files",
    ));
    if let Some(written) = &written {
        statements.push((
            format!(
                "UPDATE code_refs AS r SET resolved_symbol_id = u.id
                 FROM (SELECT name, min(id) AS id FROM code_symbols
                       WHERE project_id = ?1 AND name IN
                         (SELECT target FROM code_refs
                          WHERE file_id IN {WRITTEN_FILES} AND kind <> 'imports')
                       GROUP BY name HAVING count(*) = 1) AS u
                 WHERE u.name = r.target AND r.file_id IN {WRITTEN_FILES}
                   AND r.kind <> 'imports' AND r.resolved_symbol_id IS NULL"
            ),
            written_params(written),
            "resolving the changed files' references across the project",
        ));
    }
    statements.push((
        format!(
            "UPDATE code_refs AS r SET resolved_symbol_id = u.id
             FROM (SELECT name, min(id) AS id FROM code_symbols
                   WHERE project_id = ?1 {symbols_filter}
                   GROUP BY name HAVING count(*) = 1) AS u
             WHERE u.name = r.target AND r.project_id = ?1
               AND r.kind <> 'imports' AND r.resolved_symbol_id IS NULL {refs_filter}"
        ),
        names_params,
        "resolving references across the project",
    ));
    statements
}

/// The names a file defines: references elsewhere to them may resolve into it.
pub(crate) fn names_defined_in(analysis: &FileAnalysis) -> impl Iterator<Item = String> + '_ {
    analysis.definitions.iter().map(|d| d.name.clone())
}

/// The definitions `(path, name, qualified name)` of the files `file_ids` as indexed now
/// (before they are replaced), one per symbol row.
pub(crate) async fn symbol_names_of(
    conn: &Connection,
    file_ids: &[i64],
) -> Result<Vec<(String, String, String)>> {
    if file_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows = conn
        .query(
            "SELECT f.path, s.name, s.qualified_name FROM code_symbols s
             JOIN code_files f ON f.id = s.file_id
             WHERE s.file_id IN (SELECT value FROM json_each(?1))",
            params![json!(file_ids).to_string()],
        )
        .await
        .ctx("reading replaced symbols")?;
    let mut names = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading replaced symbols")? {
        names.push((
            row.get(0).ctx("path")?,
            row.get(1).ctx("name")?,
            row.get(2).ctx("qualified name")?,
        ));
    }
    Ok(names)
}

/// Every indexed path of the project, for import resolution without a walk.
pub(crate) async fn project_files(conn: &Connection, project_id: &str) -> Result<ProjectFiles> {
    let mut rows = conn
        .query(
            "SELECT path FROM code_files WHERE project_id = ?1",
            params![project_id],
        )
        .await
        .ctx("reading indexed paths")?;
    let mut files = ProjectFiles::default();
    while let Some(row) = rows.next().await.ctx("reading indexed paths")? {
        files.insert(&row.get::<String>(0).ctx("path")?);
    }
    Ok(files)
}

/// Resolves again the imports that files added or removed since may change: those that found
/// no project file, and those that found a file no longer indexed (an import is otherwise
/// resolved once, when its own file is analysed). Returns the paths of the files whose imports
/// changed (their graph edges must be synced again).
pub(crate) async fn re_resolve_imports(
    conn: &Connection,
    project_id: &str,
    project: &ProjectFiles,
) -> Result<Vec<String>> {
    let mut rows = conn
        .query(
            "SELECT r.id, f.path, r.target, r.member, r.resolved_path
             FROM code_refs r JOIN code_files f ON f.id = r.file_id
             WHERE r.project_id = ?1 AND r.kind = 'imports'
               AND (r.resolved_path IS NULL
                    OR r.resolved_path NOT IN (SELECT path FROM code_files WHERE project_id = ?1))",
            params![project_id],
        )
        .await
        .ctx("reading unresolved imports")?;
    let mut changes: Vec<(i64, Option<String>)> = Vec::new();
    let mut importers: Vec<String> = Vec::new();
    while let Some(row) = rows.next().await.ctx("reading unresolved imports")? {
        let id: i64 = row.get(0).ctx("id")?;
        let from: String = row.get(1).ctx("path")?;
        let before: Option<String> = row.get(4).ctx("resolved_path")?;
        let Some(super::language::FileKind::Code(language)) =
            super::language::FileKind::of(std::path::Path::new(&from))
        else {
            continue;
        };
        let import = super::extract::Reference {
            kind: RefKind::Imports,
            from_symbol: None,
            target: row.get(2).ctx("target")?,
            member: row.get(3).ctx("member")?,
            line: 0,
        };
        let after = project.resolve(language, &from, &import);
        if after != before {
            changes.push((id, after));
            if !importers.contains(&from) {
                importers.push(from);
            }
        }
    }
    for (id, resolved) in changes {
        conn.execute(
            "UPDATE code_refs SET resolved_path = ?2 WHERE id = ?1",
            params![id, resolved],
        )
        .await
        .ctx("updating an import's resolution")?;
    }
    Ok(importers)
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

    #[test]
    fn the_migration_marks_files_with_the_hash_the_indexer_knows() {
        let sql = include_str!("../store/sql/code/009_chunk_parts.sql");
        assert!(sql.contains(&format!("content_hash = '{REREAD_AFTER_UPGRADE}'")));
    }
}

#[cfg(test)]
mod plan_tests {
    use super::{resolve_statements, ResolveScope, KNOWN_FILES_UNDER};
    use crate::store::plan::{list_drives, mentions, query_plan};

    /// A re-index of one file reaches references by its file id and by the names it
    /// defines, never by a scan of every reference or symbol.
    #[tokio::test]
    async fn resolving_after_a_change_reads_only_by_index() {
        let names = ["helper".to_owned()];
        let written = ["a.py".to_owned()];
        let scope = ResolveScope::Changed {
            written: &written,
            defined: &names,
            redefined: &names,
        };
        let statements = resolve_statements("p", scope);
        assert_eq!(statements.len(), 5);
        for (sql, _, what) in statements {
            let plan = query_plan(&sql).await;
            assert!(
                !plan
                    .iter()
                    .any(|s| s.starts_with("SCAN code_") || s.starts_with("SCAN r")),
                "{what}: {plan:#?}"
            );
        }
    }

    #[tokio::test]
    async fn files_under_paths_are_ranges_of_the_path_index() {
        let plan = query_plan(KNOWN_FILES_UNDER).await;
        assert!(list_drives(&plan), "{plan:#?}");
        assert!(
            mentions(&plan, "(project_id=? AND path>? AND path<?)"),
            "{plan:#?}"
        );
    }
}
