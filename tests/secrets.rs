//! Secrets never reach the database, on any write path (issue 35).
//!
//! The corpus (`tests/fixtures/secrets/corpus.json`: fake secrets of many kinds, each in
//! context, bare, and with a distinctive core; and look-alikes that only resemble secrets) is
//! written through every API that stores text, one database file per path. Then every column
//! of every table, and the raw bytes of the database and its WAL (which also hold deleted rows
//! and the search index), are searched for each secret's core, case-insensitively; and every
//! look-alike is read back and must be unchanged. The test prints a table per path and fails on
//! any leak or any altered look-alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use engram::clock::ManualClock;
use engram::graph::NodeInput;
use engram::lifecycle::{
    AgentImportOptions, EventNote, ExportFormat, ExportOptions, FeedbackInput, FeedbackKind,
    OnConflict,
};
use engram::memory::input::confine_path;
use engram::memory::{MemoryPatch, MemoryType, RememberInput, WorkUnitRef};
use engram::observer::{Message, RecordEntry, SessionOptions, ToolCall, ToolResult};
use engram::{EngineOptions, Engram, OpenOptions};
use serde::Deserialize;
use serde_json::{json, Value};

const T0: i64 = 1_767_225_600_000;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Secret {
    kind: String,
    text: String,
    value: String,
    core: String,
    metadata_key: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Corpus {
    secrets: Vec<Secret>,
    look_alikes: Vec<String>,
    metadata_look_alikes: Vec<(String, String)>,
}

fn corpus() -> Corpus {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/secrets/corpus.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What one write path did with the corpus.
#[derive(Default)]
struct Outcome {
    path: &'static str,
    secrets: usize,
    leaked: Vec<String>,
    look_alikes: usize,
    altered: Vec<String>,
}

/// A fresh database (and project root) for one path.
struct Db {
    dir: tempfile::TempDir,
    e: Engram,
}

impl Db {
    async fn open() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&root).unwrap();
        let mut options = OpenOptions::new(dir.path().join("memory.db"));
        options.project_root = Some(root);
        options.engine = EngineOptions {
            clock: Arc::new(ManualClock::new(T0)),
            ..EngineOptions::default()
        };
        let e = Engram::open(options).await.unwrap();
        Db { dir, e }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// Everything the file holds, lower-cased: every value of every table (as text), then the
    /// raw bytes of the database and its WAL.
    async fn everything(&self) -> String {
        self.e.settled().await.unwrap();
        let file = self.dir.path().join("memory.db");
        let db = libsql::Builder::new_local(&file).build().await.unwrap();
        let conn = db.connect().unwrap();
        let mut tables = Vec::new();
        let mut rows = conn
            .query("SELECT name FROM sqlite_master WHERE type = 'table'", ())
            .await
            .unwrap();
        while let Some(row) = rows.next().await.unwrap() {
            tables.push(row.get::<String>(0).unwrap());
        }
        let mut out = String::new();
        for table in tables {
            let Ok(mut rows) = conn.query(&format!("SELECT * FROM \"{table}\""), ()).await else {
                continue;
            };
            while let Ok(Some(row)) = rows.next().await {
                for i in 0..row.column_count() {
                    match row.get_value(i).unwrap() {
                        libsql::Value::Text(t) => out.push_str(&t),
                        libsql::Value::Blob(b) => out.push_str(&String::from_utf8_lossy(&b)),
                        _ => {}
                    }
                    out.push('\u{1}');
                }
            }
        }
        for suffix in ["", "-wal"] {
            let mut name = file.clone().into_os_string();
            name.push(suffix);
            if let Ok(bytes) = std::fs::read(&name) {
                out.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
        out.to_lowercase()
    }

    /// The kinds of the secrets `tested` whose core is anywhere in the file.
    async fn leaks(&self, corpus: &Corpus, tested: &[usize]) -> Vec<String> {
        let all = self.everything().await;
        tested
            .iter()
            .map(|&i| &corpus.secrets[i])
            .filter(|s| all.contains(&s.core.to_lowercase()))
            .map(|s| s.kind.clone())
            .collect()
    }
}

/// Every memory of the file (up to 1,000).
async fn listed(e: &Engram) -> Vec<engram::memory::Memory> {
    let filter = engram::memory::ListFilter {
        limit: Some(1000),
        ..Default::default()
    };
    e.list(&filter).await.unwrap()
}

fn all(corpus: &Corpus) -> Vec<usize> {
    (0..corpus.secrets.len()).collect()
}

fn note(body: &str) -> EventNote {
    EventNote {
        body: Some(body.to_owned()),
        ..EventNote::default()
    }
}

/// Metadata carrying a secret every way: in a note, bare under its secret-named key at the
/// top, nested in an object and an array, in a list under a secret-named key, and as a key.
fn secret_metadata(s: &Secret) -> Value {
    let key = &s.metadata_key;
    json!({
        "note": s.text,
        key: s.value,
        "nested": { "deeper": [ { key: s.value } ], "credentials": { "value": s.value } },
        "keys": { key: [s.value] },
        s.text.clone(): "as a key",
    })
}

/// Metadata with every look-alike: in notes, and each metadata look-alike at the top and
/// nested.
fn look_alike_metadata(c: &Corpus) -> Value {
    let mut top = serde_json::Map::new();
    let mut nested = serde_json::Map::new();
    for (k, v) in &c.metadata_look_alikes {
        top.insert(k.clone(), json!(v));
        nested.insert(k.clone(), json!(v));
    }
    top.insert("notes".into(), json!(c.look_alikes));
    top.insert("nested".into(), Value::Object(nested));
    Value::Object(top)
}

/// Records every leaf where `got` differs from `want`.
fn same_json(altered: &mut Vec<String>, at: &str, got: &Value, want: &Value) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (k, v) in w {
                same_json(
                    altered,
                    &format!("{at}.{k}"),
                    g.get(k).unwrap_or(&Value::Null),
                    v,
                );
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                altered.push(format!("{at}: extra key {k:?}"));
            }
        }
        (Value::Array(g), Value::Array(w)) if g.len() == w.len() => {
            for (i, (g, w)) in g.iter().zip(w).enumerate() {
                same_json(altered, &format!("{at}[{i}]"), g, w);
            }
        }
        _ if got != want => altered.push(format!("{at}: {want} -> {got}")),
        _ => {}
    }
}

fn unchanged<T: PartialEq + std::fmt::Debug>(
    altered: &mut Vec<String>,
    what: &str,
    got: T,
    want: T,
) {
    if got != want {
        altered.push(format!("{what}: {want:?} -> {got:?}"));
    }
}

async fn remember_content(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let input = RememberInput::new(MemoryType::Gotcha, format!("{i}: {}", s.text));
        db.e.remember(input).await.unwrap();
    }
    let mut altered = Vec::new();
    for l in &c.look_alikes {
        let m =
            db.e.remember(RememberInput::new(MemoryType::Gotcha, l))
                .await;
        unchanged(
            &mut altered,
            "content",
            m.unwrap().memory.content,
            l.clone(),
        );
    }
    Outcome {
        path: "remember: content",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

/// The list fields and the citation of `remember`.
async fn remember_lists(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    let short = |t: &str| t.chars().count() <= 40;
    for (i, s) in c.secrets.iter().enumerate() {
        let mut input = RememberInput::new(MemoryType::Gotcha, format!("memory {i}"));
        input.tags = vec![s.text.clone()];
        // Only texts that make a path inside the root (not `//registry.npmjs.org/...`).
        input.related_files = confine_path(&s.text, Some(&db.root()))
            .map(|_| s.text.clone())
            .into_iter()
            .collect();
        input.related_modules = vec![s.text.clone()];
        input.triggers = vec![s.text.clone()];
        input.citation_text = short(&s.text).then(|| s.text.clone());
        db.e.remember(input).await.unwrap();
    }
    let mut altered = Vec::new();
    for (i, l) in c.look_alikes.iter().enumerate() {
        let mut input = RememberInput::new(MemoryType::Gotcha, format!("look-alike {i}"));
        input.tags = vec![l.clone()];
        let file = confine_path(l, Some(&db.root())).ok();
        input.related_files = file.iter().cloned().collect();
        input.related_modules = vec![l.clone()];
        input.triggers = vec![l.clone()];
        input.citation_text = short(l).then(|| l.clone());
        let m = db.e.remember(input).await.unwrap().memory;
        unchanged(&mut altered, "tags", m.tags, vec![l.clone()]);
        let files = file.into_iter().collect();
        unchanged(&mut altered, "files", m.related_files, files);
        unchanged(&mut altered, "modules", m.related_modules, vec![l.clone()]);
        unchanged(&mut altered, "triggers", m.triggers, vec![l.to_lowercase()]);
        let citation = short(l).then(|| l.clone());
        unchanged(&mut altered, "citation", m.citation_text, citation);
    }
    Outcome {
        path: "remember: tags, files, modules, triggers, citation",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

/// The identifier-like text fields of `remember` and its work unit.
async fn remember_labels(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let mut input = RememberInput::new(MemoryType::Gotcha, format!("memory {i}"));
        input.methodology = Some(s.text.clone());
        input.commit_sha = Some(s.text.clone());
        input.target_node_id = Some(s.text.clone());
        input.impacted_node_ids = vec![s.text.clone()];
        input.work_unit_ref = Some(WorkUnitRef {
            methodology: s.text.clone(),
            hierarchy: vec![s.text.clone()],
            label: s.text.clone(),
        });
        db.e.remember(input).await.unwrap();
    }
    let mut altered = Vec::new();
    for (i, l) in c.look_alikes.iter().enumerate() {
        let mut input = RememberInput::new(MemoryType::Gotcha, format!("look-alike {i}"));
        input.methodology = Some(l.clone());
        input.commit_sha = Some(l.clone());
        input.work_unit_ref = Some(WorkUnitRef {
            methodology: l.clone(),
            hierarchy: vec![l.clone()],
            label: l.clone(),
        });
        let m = db.e.remember(input).await.unwrap().memory;
        unchanged(&mut altered, "methodology", m.methodology, Some(l.clone()));
        unchanged(&mut altered, "commitSha", m.commit_sha, Some(l.clone()));
        let unit = m.work_unit_ref.unwrap();
        let got = (unit.methodology, unit.label, unit.hierarchy);
        unchanged(
            &mut altered,
            "workUnitRef",
            got,
            (l.clone(), l.clone(), vec![l.clone()]),
        );
    }
    Outcome {
        path: "remember: methodology, commitSha, node ids, workUnitRef",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

async fn remember_metadata(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let mut input = RememberInput::new(MemoryType::Gotcha, format!("memory {i}"));
        input.metadata = Some(secret_metadata(s));
        db.e.remember(input).await.unwrap();
    }
    let mut input = RememberInput::new(MemoryType::Gotcha, "look-alikes");
    let want = look_alike_metadata(c);
    input.metadata = Some(want.clone());
    let m = db.e.remember(input).await.unwrap().memory;
    let mut altered = Vec::new();
    same_json(&mut altered, "metadata", &m.metadata, &want);
    Outcome {
        path: "remember: metadata (values, bare values under secret keys, keys)",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len() + c.metadata_look_alikes.len(),
        altered,
    }
}

/// Every text field of a patch.
fn patch_with(text: &str, metadata: Value, root: &Path) -> MemoryPatch {
    let file = confine_path(text, Some(root)).ok();
    MemoryPatch {
        content: Some(text.to_owned()),
        tags: Some(vec![text.to_owned()]),
        related_files: Some(file.into_iter().collect()),
        related_modules: Some(vec![text.to_owned()]),
        triggers: Some(vec![text.to_owned()]),
        citation_text: (text.chars().count() <= 40).then(|| text.to_owned()),
        methodology: Some(text.to_owned()),
        commit_sha: Some(text.to_owned()),
        target_node_id: Some(text.to_owned()),
        impacted_node_ids: Some(vec![text.to_owned()]),
        metadata: Some(metadata),
        ..MemoryPatch::default()
    }
}

async fn update(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let m =
            db.e.remember(RememberInput::new(
                MemoryType::Gotcha,
                format!("memory {i}"),
            ))
            .await
            .unwrap()
            .memory;
        let mut patch = patch_with(&format!("{i}: {}", s.text), secret_metadata(s), &db.root());
        patch.related_files = Some(
            confine_path(&s.text, Some(&db.root()))
                .map(|_| s.text.clone())
                .into_iter()
                .collect(),
        );
        db.e.update(&m.id, patch).await.unwrap();
    }
    let mut altered = Vec::new();
    for (i, l) in c.look_alikes.iter().enumerate() {
        let m =
            db.e.remember(RememberInput::new(
                MemoryType::Gotcha,
                format!("look-alike {i}"),
            ))
            .await
            .unwrap()
            .memory;
        let patch = patch_with(l, look_alike_metadata(c), &db.root());
        let m = db.e.update(&m.id, patch.clone()).await.unwrap();
        unchanged(&mut altered, "content", Some(m.content), patch.content);
        unchanged(&mut altered, "tags", Some(m.tags), patch.tags);
        unchanged(
            &mut altered,
            "files",
            Some(m.related_files),
            patch.related_files,
        );
        unchanged(
            &mut altered,
            "citation",
            m.citation_text,
            patch.citation_text,
        );
        unchanged(
            &mut altered,
            "methodology",
            m.methodology,
            patch.methodology,
        );
        same_json(
            &mut altered,
            "metadata",
            &m.metadata,
            &patch.metadata.unwrap(),
        );
    }
    Outcome {
        path: "update: every text field of a patch",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

async fn forget(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let m =
            db.e.remember(RememberInput::new(
                MemoryType::Gotcha,
                format!("memory {i}"),
            ))
            .await
            .unwrap()
            .memory;
        db.e.forget(&m.id, Some(s.text.clone())).await.unwrap();
    }
    let mut altered = Vec::new();
    for (i, l) in c.look_alikes.iter().enumerate() {
        let m =
            db.e.remember(RememberInput::new(
                MemoryType::Gotcha,
                format!("look-alike {i}"),
            ))
            .await
            .unwrap()
            .memory;
        let m = db.e.forget(&m.id, Some(l.clone())).await.unwrap();
        unchanged(&mut altered, "reason", m.deprecated_reason, Some(l.clone()));
    }
    Outcome {
        path: "forget: reason",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

/// Feedback (helpful, wrong, correction), review (confirm, reject) and dispute threads: every
/// body, every author, every correction.
async fn events(c: &Corpus, authors: bool) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let remember = |n: &str| RememberInput::new(MemoryType::Gotcha, format!("memory {i} {n}"));
        let a = db.e.remember(remember("a")).await.unwrap().memory;
        let b = db.e.remember(remember("b")).await.unwrap().memory;
        let d = db.e.remember(remember("d")).await.unwrap().memory;
        let with_author = EventNote {
            author: authors.then(|| s.text.clone()),
            ..note(if authors { "placeholder" } else { &s.text })
        };
        for kind in [FeedbackKind::Helpful, FeedbackKind::Wrong] {
            let input = FeedbackInput {
                kind,
                correction: None,
                note: with_author.clone(),
            };
            db.e.feedback(&a.id, input).await.unwrap();
        }
        if authors {
            continue;
        }
        db.e.confirm(&a.id, None, note(&s.text)).await.unwrap();
        db.e.dispute(&a.id, note(&s.text)).await.unwrap();
        db.e.comment(&a.id, note(&s.text)).await.unwrap();
        db.e.resolve_dispute(&a.id, note(&s.text)).await.unwrap();
        db.e.reject(&d.id, note(&s.text)).await.unwrap();
        let correction = FeedbackInput {
            kind: FeedbackKind::Correction,
            correction: Some(format!("{i}: {}", s.text)),
            note: with_author,
        };
        db.e.feedback(&b.id, correction).await.unwrap();
    }
    let mut altered = Vec::new();
    for (i, l) in c.look_alikes.iter().enumerate() {
        let m =
            db.e.remember(RememberInput::new(
                MemoryType::Gotcha,
                format!("look-alike {i}"),
            ))
            .await
            .unwrap()
            .memory;
        let input = FeedbackInput {
            kind: FeedbackKind::Helpful,
            correction: None,
            note: EventNote {
                author: Some(l.clone()),
                ..note(l)
            },
        };
        let event = db.e.feedback(&m.id, input).await.unwrap().event;
        unchanged(&mut altered, "body", event.body, Some(l.clone()));
        unchanged(&mut altered, "author", event.author, Some(l.clone()));
        let out = db.e.dispute(&m.id, note(l)).await.unwrap();
        unchanged(&mut altered, "dispute", out.event.body, Some(l.clone()));
    }
    Outcome {
        path: if authors {
            "events: authors"
        } else {
            "events: feedback, correction, review and dispute bodies"
        },
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

/// A JSON export of `n` placeholder memories, each with one past version and one event, whose
/// every text is then replaced by `text(i)`.
async fn export_with(n: usize, text: impl Fn(usize) -> (String, Value)) -> Value {
    let db = Db::open().await;
    for i in 0..n {
        let m =
            db.e.remember(RememberInput::new(
                MemoryType::Gotcha,
                format!("memory {i}"),
            ))
            .await
            .unwrap()
            .memory;
        let patch = MemoryPatch {
            confidence: Some(0.5),
            ..MemoryPatch::default()
        };
        db.e.update(&m.id, patch).await.unwrap();
        let input = FeedbackInput {
            kind: FeedbackKind::Helpful,
            correction: None,
            note: note("placeholder"),
        };
        db.e.feedback(&m.id, input).await.unwrap();
    }
    let options = ExportOptions {
        format: ExportFormat::Json,
        include_forgotten: None,
    };
    let exported = db.e.export_memories(&options).await.unwrap();
    let mut doc: Value = serde_json::from_str(&exported.text).unwrap();
    let index = |m: &Value| -> usize {
        let content = m["content"].as_str().unwrap();
        content.trim_start_matches("memory ").parse().unwrap()
    };
    let fill = |m: &mut Value, i: usize, t: &str, metadata: &Value| {
        m["content"] = json!(format!("{i}: {t}"));
        m["tags"] = json!([t]);
        m["relatedModules"] = json!([t]);
        m["triggers"] = json!([t]);
        if t.chars().count() <= 40 {
            m["citationText"] = json!(t);
        }
        m["methodology"] = json!(t);
        m["commitSha"] = json!(t);
        m["targetNodeId"] = json!(t);
        m["impactedNodeIds"] = json!([t]);
        m["deprecatedReason"] = json!(t);
        m["workUnitRef"] = json!({ "methodology": t, "hierarchy": [t], "label": t });
        m["metadata"] = metadata.clone();
    };
    let mut ids = std::collections::HashMap::new();
    for m in doc["memories"].as_array_mut().unwrap() {
        let i = index(m);
        ids.insert(m["id"].as_str().unwrap().to_owned(), i);
        let (t, metadata) = text(i);
        fill(m, i, &t, &metadata);
    }
    for v in doc["versions"].as_array_mut().unwrap() {
        let i = ids[v["memoryId"].as_str().unwrap()];
        let (t, metadata) = text(i);
        fill(&mut v["memory"], i, &t, &metadata);
    }
    for e in doc["events"].as_array_mut().unwrap() {
        let i = ids[e["memoryId"].as_str().unwrap()];
        let (t, _) = text(i);
        e["body"] = json!(t);
        e["author"] = json!(t);
    }
    doc
}

async fn import_json(c: &Corpus) -> Outcome {
    let secrets = export_with(c.secrets.len(), |i| {
        (c.secrets[i].text.clone(), secret_metadata(&c.secrets[i]))
    })
    .await;
    let looks = export_with(c.look_alikes.len(), |i| {
        (c.look_alikes[i].clone(), look_alike_metadata(c))
    })
    .await;
    let db = Db::open().await;
    for doc in [&secrets, &looks] {
        let report =
            db.e.import_memories(ExportFormat::Json, &doc.to_string(), OnConflict::Skip)
                .await
                .unwrap();
        assert_eq!(report.versions, report.imported, "{report:?}");
        assert_eq!(report.events, report.imported, "{report:?}");
    }
    let mut altered = Vec::new();
    for m in looks["memories"].as_array().unwrap() {
        let id = m["id"].as_str().unwrap();
        let stored = db.e.get(id).await.unwrap();
        let want = m["content"].as_str().unwrap();
        unchanged(&mut altered, "content", stored.content.as_str(), want);
        same_json(&mut altered, "metadata", &stored.metadata, &m["metadata"]);
        let history = db.e.history(id).await.unwrap();
        for v in history {
            unchanged(&mut altered, "version", v.memory.content.as_str(), want);
        }
        for e in db.e.events(id).await.unwrap() {
            unchanged(
                &mut altered,
                "event",
                e.body.as_deref(),
                m["tags"][0].as_str(),
            );
        }
    }
    Outcome {
        path: "import: JSON memories, versions and events",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

fn quoted(text: &str) -> String {
    text.lines().map(|l| format!("> {l}\n")).collect()
}

async fn import_markdown(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    let mut md = String::from("# Memories\n\n## gotcha\n\n");
    for (i, s) in c.secrets.iter().enumerate() {
        md.push_str(&format!("### Secret {i}\n\n{}\n", quoted(&s.text)));
    }
    for (i, l) in c.look_alikes.iter().enumerate() {
        md.push_str(&format!("### Look-alike {i}\n\n{}\n", quoted(l)));
    }
    db.e.import_memories(ExportFormat::Markdown, &md, OnConflict::Skip)
        .await
        .unwrap();
    let stored = listed(&db.e).await;
    let mut altered = Vec::new();
    for l in &c.look_alikes {
        if !stored.iter().any(|m| &m.content == l) {
            altered.push(format!("content: {l:?} not stored as is"));
        }
    }
    Outcome {
        path: "import: Markdown",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

async fn import_agent_file(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    let mut md = String::from("# Project rules\n\n## Secrets\n\n");
    // One rule per paragraph: a multi-line secret (a PEM block) stays in its rule.
    for s in &c.secrets {
        md.push_str(&format!("{}\n\n", s.text));
    }
    std::fs::write(db.root().join("CLAUDE.md"), md).unwrap();
    // The look-alikes in a file of their own: which lines become rules is the parser's
    // business; none of them may lose a word to the filter.
    let looks: String = c.look_alikes.iter().map(|l| format!("- {l}\n")).collect();
    std::fs::write(db.root().join("LOOKS.md"), format!("# Rules\n\n{looks}")).unwrap();
    let options = AgentImportOptions {
        files: vec!["CLAUDE.md".into(), "LOOKS.md".into()],
    };
    db.e.import_agent_files(&options).await.unwrap();
    let mut altered = Vec::new();
    for m in listed(&db.e).await {
        if m.tags.iter().any(|t| t == "agent-file:LOOKS.md") && m.content.contains("[REDACTED]") {
            altered.push(format!("rule: {:?}", m.content));
        }
    }
    Outcome {
        path: "import: agent files",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

/// A session that shows `text` every way the observer keeps text: the work unit, a failing
/// and retried command and its error, a repeated search pattern, a web search and fetch, a
/// file path, a self-correction, a recorded entry and a memory search.
fn observed(session: &engram::observer::Session, text: &str) {
    let call = |tool: &str, step| ToolCall {
        tool: tool.into(),
        step,
        ..ToolCall::default()
    };
    let result = |tool: &str, step, error: bool, body: String| ToolResult {
        tool: tool.into(),
        step,
        is_error: error,
        full_len: body.len() as u32,
        text: body,
        ..ToolResult::default()
    };
    let mut messages = Vec::new();
    for (step, fails) in [(1, true), (2, true), (3, false)] {
        messages.push(Message::ToolCall(ToolCall {
            command: Some(text.into()),
            ..call("Bash", step)
        }));
        let body = if fails {
            format!("Error: {text}")
        } else {
            "ok".into()
        };
        messages.push(Message::ToolResult(result("Bash", step, fails, body)));
    }
    for step in 4..7 {
        messages.push(Message::ToolCall(ToolCall {
            pattern: Some(text.into()),
            ..call("Grep", step)
        }));
        messages.push(Message::ToolResult(result(
            "Grep",
            step,
            false,
            String::new(),
        )));
    }
    messages.push(Message::ToolCall(ToolCall {
        pattern: Some(text.into()),
        ..call("WebSearch", 7)
    }));
    messages.push(Message::ToolCall(ToolCall {
        url: Some(format!("https://example.com/?q={text}")),
        ..call("WebFetch", 7)
    }));
    messages.push(Message::ToolCall(ToolCall {
        path: Some(text.into()),
        ..call("Read", 8)
    }));
    messages.push(Message::Reasoning {
        text: format!("Correction: the value is {text}"),
        step: 8,
    });
    messages.push(Message::Record(RecordEntry {
        memory_type: MemoryType::Gotcha,
        content: text.into(),
        related_files: vec![text.into()],
        step: 9,
    }));
    messages.push(Message::Search { query: text.into() });
    session.observe_all(messages).unwrap();
}

fn session_options(id: &str, text: &str) -> SessionOptions {
    let mut options = SessionOptions::new(id);
    options.work_unit = Some(text.into());
    options.methodology = Some(text.into());
    options
}

/// The look-alikes recorded and searched for in one session come back unchanged in its
/// checkpoint.
async fn observed_look_alikes(db: &Db, c: &Corpus) -> Vec<String> {
    let session = db.e.observe(&SessionOptions::new("looks")).unwrap();
    let mut messages = Vec::new();
    for l in &c.look_alikes {
        messages.push(Message::Record(RecordEntry {
            memory_type: MemoryType::Gotcha,
            content: l.clone(),
            related_files: Vec::new(),
            step: 1,
        }));
        messages.push(Message::Search { query: l.clone() });
        messages.push(Message::ToolCall(ToolCall {
            tool: "Grep".into(),
            step: 1,
            pattern: Some(l.clone()),
            ..ToolCall::default()
        }));
    }
    session.observe_all(messages).unwrap();
    db.e.checkpoint(&session).await.unwrap();
    let file = db.dir.path().join("memory.db");
    let conn = libsql::Builder::new_local(&file)
        .build()
        .await
        .unwrap()
        .connect()
        .unwrap();
    let mut rows = conn
        .query(
            "SELECT state FROM observer_checkpoints WHERE session_id = 'looks'",
            (),
        )
        .await
        .unwrap();
    let state: String = rows.next().await.unwrap().unwrap().get(0).unwrap();
    let pad: Value = serde_json::from_str(&state).unwrap();
    let recorded: Vec<&str> = pad["recorded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["content"].as_str().unwrap())
        .collect();
    let searches: Vec<&str> = pad["searches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let texts: Vec<&str> = pad["texts"]["strings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let mut altered = Vec::new();
    for l in &c.look_alikes {
        let pattern = l.split_whitespace().collect::<Vec<_>>().join(" ");
        if !recorded.contains(&l.as_str())
            || !searches.contains(&l.as_str())
            || !texts.contains(&pattern.as_str())
        {
            altered.push(format!("scratchpad: {l:?}"));
        }
    }
    altered
}

async fn observer_checkpoint(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let id = format!("obs-{i}");
        let session = db.e.observe(&session_options(&id, &s.text)).unwrap();
        observed(&session, &s.text);
        db.e.checkpoint(&session).await.unwrap();
    }
    let altered = observed_look_alikes(&db, c).await;
    Outcome {
        path: "observer: checkpoint (scratchpad)",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

async fn observer_finalize(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    for (i, s) in c.secrets.iter().enumerate() {
        let id = format!("obs-{i}");
        let session = db.e.observe(&session_options(&id, &s.text)).unwrap();
        observed(&session, &s.text);
        db.e.finalize(&session, None).await.unwrap();
    }
    Outcome {
        path: "observer: finalize (signal counts, sessions, promoted memories)",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: 0,
        altered: Vec::new(),
    }
}

async fn graph(c: &Corpus) -> Outcome {
    let db = Db::open().await;
    let mut nodes = Vec::new();
    for (i, s) in c.secrets.iter().enumerate() {
        let mut node = NodeInput::new(format!("concept:secret-{i}"), "concept");
        node.label = s.text.clone();
        node.metadata = secret_metadata(s);
        nodes.push(node);
    }
    for (i, l) in c.look_alikes.iter().enumerate() {
        let mut node = NodeInput::new(format!("concept:look-{i}"), "concept");
        node.label = l.clone();
        node.metadata = look_alike_metadata(c);
        nodes.push(node);
    }
    db.e.inject_graph(&nodes, &[]).await.unwrap();
    let mut altered = Vec::new();
    for (i, l) in c.look_alikes.iter().enumerate() {
        let node =
            db.e.node(&format!("concept:look-{i}"))
                .await
                .unwrap()
                .unwrap();
        unchanged(&mut altered, "label", &node.label, l);
        same_json(
            &mut altered,
            "metadata",
            &node.metadata,
            &look_alike_metadata(c),
        );
    }
    Outcome {
        path: "graph: node labels and metadata",
        secrets: c.secrets.len(),
        leaked: db.leaks(c, &all(c)).await,
        look_alikes: c.look_alikes.len(),
        altered,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_secret_of_the_corpus_is_stored_and_no_look_alike_is_altered() {
    let c = corpus();
    let kinds: std::collections::HashSet<&str> =
        c.secrets.iter().map(|s| s.kind.as_str()).collect();
    assert!(kinds.len() >= 40, "{} kinds", kinds.len());
    assert!(c.look_alikes.len() >= 40);
    let outcomes = vec![
        remember_content(&c).await,
        remember_lists(&c).await,
        remember_labels(&c).await,
        remember_metadata(&c).await,
        update(&c).await,
        forget(&c).await,
        events(&c, false).await,
        events(&c, true).await,
        import_json(&c).await,
        import_markdown(&c).await,
        import_agent_file(&c).await,
        observer_checkpoint(&c).await,
        observer_finalize(&c).await,
        graph(&c).await,
    ];
    let mut failed = false;
    eprintln!(
        "corpus: {} secrets of {} kinds, {} look-alikes, {} metadata look-alikes",
        c.secrets.len(),
        kinds.len(),
        c.look_alikes.len(),
        c.metadata_look_alikes.len()
    );
    // A look-alike is altered on a path when any check of it there failed (a metadata
    // look-alike: when the check of its key failed).
    let altered_count = |o: &Outcome| {
        let texts = c.look_alikes.iter().filter(|l| {
            let escaped = format!("{l:?}");
            let escaped = &escaped[1..escaped.len() - 1];
            o.altered.iter().any(|a| a.contains(escaped))
        });
        let keys = c.metadata_look_alikes.iter().filter(|(k, _)| {
            let at = format!(".{k}:");
            o.altered.iter().any(|a| a.contains(&at))
        });
        texts.count() + keys.count()
    };
    for o in &outcomes {
        eprintln!(
            "{:<70} secrets stored {:>3}/{:<3} look-alikes altered {:>3}/{}",
            o.path,
            o.leaked.len(),
            o.secrets,
            altered_count(o),
            o.look_alikes
        );
        if !o.leaked.is_empty() {
            eprintln!("    stored: {}", o.leaked.join(", "));
        }
        for a in &o.altered {
            eprintln!("    altered: {a}");
        }
        failed |= !o.leaked.is_empty() || !o.altered.is_empty();
    }
    assert!(
        !failed,
        "secrets stored or look-alikes altered: see the table above"
    );
}

/// The filter alone: every corpus secret in context loses its core, every look-alike is left
/// as it is, and in JSON every bare secret under its key goes while every metadata look-alike
/// stays.
#[test]
fn the_filter_finds_every_corpus_secret_and_leaves_every_look_alike() {
    use engram::memory::privacy::{redact, redact_json};
    let c = corpus();
    let missed: Vec<&str> = c
        .secrets
        .iter()
        .filter(|s| redact(&s.text).text.contains(&s.core))
        .map(|s| s.kind.as_str())
        .collect();
    assert!(missed.is_empty(), "secrets missed in context: {missed:?}");
    let missed: Vec<&str> = c
        .secrets
        .iter()
        .filter(|s| {
            let mut v = json!({ &s.metadata_key: s.value });
            redact_json(&mut v);
            v.to_string().contains(&s.core)
        })
        .map(|s| s.kind.as_str())
        .collect();
    assert!(
        missed.is_empty(),
        "bare secrets missed under their keys: {missed:?}"
    );
    let touched: Vec<&str> = c
        .look_alikes
        .iter()
        .filter(|l| redact(l).count > 0)
        .map(String::as_str)
        .collect();
    assert!(touched.is_empty(), "look-alikes altered: {touched:?}");
    for (k, v) in &c.metadata_look_alikes {
        let mut value = json!({ k: v });
        assert_eq!(redact_json(&mut value), 0, "{k}: {v} became {value}");
    }
}
