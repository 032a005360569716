//! Importing agent files (`CLAUDE.md`, `AGENTS.md`, `.cursorrules`, or any rule file) as
//! memories, and importing them again after people edit them.
//!
//! Each rule [`super::agent_files::parse`] finds outside engram's generated section becomes a
//! `user_taught`, user-verified, pinned memory of the type the parser gave it, tagged
//! `agent-file:<path>` and with `metadata.agentFile = { path, kind, section, line }` (the line
//! where it was when first imported). Pinned, because a rule holds as long as it is in the file:
//! it does not decay and `prune` never expires it.
//!
//! Importing again reconciles the file with what the last import left, in one transaction per
//! file:
//!
//! - a rule whose text (after the privacy filter, ignoring case and whitespace) is already a
//!   memory tagged with the file is **unchanged** (if it moved to another section, its
//!   metadata follows);
//! - a new rule and a vanished rule in the same section are an **edit**: the new rule becomes a
//!   memory that supersedes the old one, and the old one is forgotten ("edited in <path>");
//! - other new rules are **created**; a rule equal to a memory engram already had (say, one an
//!   agent remembered) reinforces that memory and tags it instead;
//! - other vanished rules are **removed**: forgotten when no agent file holds them any more
//!   and an import created them, otherwise only the file's tag is dropped;
//! - in the generated section, a bullet whose text someone **edited** updates the memory its
//!   marker names (a new version, now user-verified; moving it under another type heading
//!   changes its type) unless the bullet shows an earlier version of the memory (it changed
//!   after the export: the bullet is stale, and skipped), and a bullet **added** there by hand becomes an ordinary user-taught
//!   memory (not tied to the file, so the next export writes it back with its id). Bullets
//!   deleted from the generated section change nothing: the section is a view that the next
//!   export rewrites (use `reject` or `forget` to drop a memory).
//!
//! A file that does not exist changes nothing (it is reported as not found): a checkout
//! without the file must not forget its rules.

use std::collections::{HashMap, HashSet};

use libsql::params;
use serde::Serialize;
use serde_json::{json, Value};

use super::agent_files::{self, AgentFileKind, Rule};
use super::agent_io::{self, AgentPath};
use crate::error::{DbContext, Error, Result};
use crate::memory::dedup::content_hash;
use crate::memory::rows::{from_row, SELECT_M};
use crate::memory::{
    self, Ctx, Memory, MemoryPatch, MemoryRelation, MemorySource, MemoryType, RelationType,
    RememberInput,
};
use crate::store::{begin_write, WriteTx};

/// The tag every memory imported from the agent file `path` carries.
pub fn file_tag(path: &str) -> String {
    format!("{TAG_PREFIX}{path}")
}

/// Prefix of the tags that tie memories to agent files.
pub const TAG_PREFIX: &str = "agent-file:";

/// Confidence of an imported rule: a person wrote it down for agents to follow.
pub const RULE_CONFIDENCE: f64 = 0.9;

/// Recorded as the change that ended a version when an import edits a memory.
const ENDED_BY: &str = "agent_file";

/// Which files to import.
#[derive(Debug, Clone, Default)]
pub struct AgentImportOptions {
    /// Paths relative to the project root (or absolute inside it). Empty: `CLAUDE.md`,
    /// `AGENTS.md` and `.cursorrules` at the root, those that exist.
    pub files: Vec<String>,
}

/// What importing one file did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFileImport {
    /// The file, relative to the project root.
    pub path: String,
    /// How it was read: `claude_md`, `agents_md` or `cursorrules`.
    pub kind: String,
    /// Whether the file exists (a missing file changes nothing).
    pub found: bool,
    /// Rules read outside the generated section.
    pub rules: u32,
    /// Rules already imported and unchanged.
    pub unchanged: u32,
    /// Memories created (or reinforced) for new rules.
    pub created: Vec<String>,
    /// Rules edited in place: the old memory and the one that supersedes it.
    pub edited: Vec<RuleEdit>,
    /// Memories whose rule left the file (forgotten, or untagged when they were not the
    /// file's alone).
    pub removed: Vec<String>,
    /// Memories updated from bullets edited in the generated section.
    pub generated_edits: Vec<String>,
    /// Memories created from bullets added by hand to the generated section.
    pub generated_added: Vec<String>,
    /// Rules and bullets left alone, with why.
    pub skipped: Vec<SkippedRule>,
}

/// A rule whose text changed between imports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleEdit {
    /// The memory of the old text (now forgotten, superseded).
    pub old_id: String,
    /// The memory of the new text.
    pub new_id: String,
}

/// A rule that was not imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedRule {
    /// 1-based line in the file.
    pub line: u32,
    /// Why (too long, names an unknown memory, ...).
    pub reason: String,
}

/// What an import did, file by file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentImportReport {
    /// One entry per file asked for (or per default file), in order.
    pub files: Vec<AgentFileImport>,
}

/// How a file is read: its own kind for the three agent files, Markdown for any other `.md`
/// or `.mdc`, and `.cursorrules` rules (Markdown or plain lines, detected) otherwise.
pub(crate) fn kind_of(relative: &str) -> AgentFileKind {
    AgentFileKind::from_file_name(relative).unwrap_or_else(|| {
        let lower = relative.to_ascii_lowercase();
        if lower.ends_with(".md") || lower.ends_with(".mdc") {
            AgentFileKind::AgentsMd
        } else {
            AgentFileKind::CursorRules
        }
    })
}

/// The files to work on: `files` (or the defaults), confined to `root`, each file once (a
/// symlink to a file listed before it is left out).
pub(crate) fn locate_all(root: &std::path::Path, files: &[String]) -> Result<Vec<AgentPath>> {
    let defaults: Vec<String>;
    let files = if files.is_empty() {
        defaults = AgentFileKind::ALL
            .iter()
            .map(|k| k.file_name().to_owned())
            .collect();
        &defaults
    } else {
        files
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for file in files {
        let path = agent_io::locate(root, file)?;
        // A symlink to a file already listed (`AGENTS.md -> CLAUDE.md`) is that file.
        if seen.insert(path.target.clone()) {
            out.push(path);
        }
    }
    Ok(out)
}

/// The handle's project root, which the agent-file bridge needs.
pub(crate) fn root_of<'a>(ctx: &Ctx<'a>) -> Result<&'a std::path::Path> {
    ctx.project_root
        .ok_or_else(|| Error::invalid("agent files need the handle to be opened with projectRoot"))
}

/// Imports the agent files (see the module doc). Every file is read and checked before any is
/// imported, so a bad file fails the call having changed nothing.
pub(crate) async fn import(
    ctx: &Ctx<'_>,
    options: &AgentImportOptions,
) -> Result<AgentImportReport> {
    let root = root_of(ctx)?;
    let paths = locate_all(root, &options.files)?;
    let mut texts = Vec::with_capacity(paths.len());
    for path in paths {
        let text = agent_io::read(&path)?;
        if let Some(text) = &text {
            agent_files::check_markers(text)
                .map_err(|e| Error::invalid(format!("{}: {e}", path.relative)))?;
        }
        texts.push((path, text));
    }
    let mut report = AgentImportReport::default();
    for (path, text) in texts {
        let kind = kind_of(&path.relative);
        let mut file = AgentFileImport {
            path: path.relative.clone(),
            kind: kind.as_str().to_owned(),
            found: text.is_some(),
            ..AgentFileImport::default()
        };
        if let Some(text) = text {
            import_file(ctx, &mut file, kind, &text).await?;
        }
        report.files.push(file);
    }
    Ok(report)
}

/// A rule checked and keyed for matching.
struct Keyed<'r> {
    rule: &'r Rule,
    /// Dedup hash of the text after the privacy filter: what a stored memory's text hashes to.
    hash: String,
}

/// Reconciles one file with its memories in one write transaction.
async fn import_file(
    ctx: &Ctx<'_>,
    report: &mut AgentFileImport,
    kind: AgentFileKind,
    text: &str,
) -> Result<()> {
    let rules = agent_files::parse(kind, text);
    let validator = ctx.validator();
    let mut user = Vec::new();
    let mut generated = Vec::new();
    for rule in &rules {
        match validator.content(&rule.text) {
            Ok(redacted) => {
                let keyed = Keyed {
                    rule,
                    hash: content_hash(&redacted.text),
                };
                if rule.generated {
                    generated.push(keyed);
                } else {
                    user.push(keyed);
                }
            }
            Err(e) => report.skipped.push(SkippedRule {
                line: rule.line,
                reason: e.to_string(),
            }),
        }
    }
    report.rules = u32::try_from(user.len()).unwrap_or(u32::MAX);
    let tag = file_tag(&report.path);

    let mut conn = ctx.store.writer().await;
    let tx = begin_write(&conn).await?;
    let existing = tagged(ctx, &tx, &tag).await?;
    let plan = plan(&report.path, &user, &existing);
    report.unchanged = u32::try_from(plan.unchanged.len()).unwrap_or(u32::MAX);

    // New memories: created rules, edits, and bullets added to the generated section.
    let mut inputs = Vec::new();
    for keyed in &plan.created {
        inputs.push(rule_input(
            keyed.rule,
            &report.path,
            kind,
            Some(&tag),
            None,
        )?);
    }
    for (keyed, old) in &plan.edits {
        inputs.push(rule_input(
            keyed.rule,
            &report.path,
            kind,
            Some(&tag),
            Some(&old.id),
        )?);
    }
    let added: Vec<&Keyed<'_>> = generated
        .iter()
        .filter(|k| k.rule.generated_id.is_none())
        .collect();
    for keyed in &added {
        inputs.push(rule_input(keyed.rule, &report.path, kind, None, None)?);
    }
    let batch = memory::prepare_batch(ctx, inputs)?;
    let written = memory::remember_in(ctx, &mut conn, &tx, batch).await?;
    let mut written = written.into_iter().map(|w| w.memory.id);
    report.created = written.by_ref().take(plan.created.len()).collect();
    for (_, old) in &plan.edits {
        let new_id = written.next().expect("one memory per input");
        let reason = format!("edited in {}: superseded by {new_id}", report.path);
        memory::forget_in(ctx, &tx, &old.id, Some(reason), ENDED_BY).await?;
        report.edited.push(RuleEdit {
            old_id: old.id.clone(),
            new_id,
        });
    }
    report.generated_added = written.collect();

    for (keyed, memory) in &plan.unchanged {
        follow_section(ctx, &tx, &report.path, keyed.rule, memory).await?;
    }
    for old in &plan.removed {
        remove(ctx, &tx, &report.path, &tag, old).await?;
        report.removed.push(old.id.clone());
    }
    for keyed in generated.iter().filter(|k| k.rule.generated_id.is_some()) {
        match apply_generated_edit(ctx, &tx, keyed).await? {
            GeneratedEdit::Applied(id) => report.generated_edits.push(id),
            GeneratedEdit::Same => {}
            GeneratedEdit::Skipped(reason) => report.skipped.push(SkippedRule {
                line: keyed.rule.line,
                reason,
            }),
        }
    }
    tx.commit().await.ctx("committing agent-file import")?;
    Ok(())
}

/// The active memories of the project carrying `tag`, oldest first.
async fn tagged(ctx: &Ctx<'_>, tx: &WriteTx, tag: &str) -> Result<Vec<Memory>> {
    let sql = format!(
        "SELECT {} FROM memories m
         WHERE m.project_id = ?1 AND m.deprecated = 0
           AND EXISTS (SELECT 1 FROM json_each(m.tags) t WHERE t.value = ?2)
         ORDER BY m.seq",
        *SELECT_M
    );
    let mut rows = tx
        .query(&sql, params![ctx.project_id, tag])
        .await
        .ctx("loading agent-file memories")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().await.ctx("loading agent-file memories")? {
        out.push(from_row(&row)?);
    }
    Ok(out)
}

/// How the rules of a file map onto the memories the last import left.
struct Plan<'k, 'r> {
    unchanged: Vec<(&'k Keyed<'r>, Memory)>,
    created: Vec<&'k Keyed<'r>>,
    edits: Vec<(&'k Keyed<'r>, Memory)>,
    removed: Vec<Memory>,
}

fn plan<'k, 'r>(path: &str, rules: &'k [Keyed<'r>], existing: &[Memory]) -> Plan<'k, 'r> {
    let mut by_hash: HashMap<String, usize> = HashMap::new();
    for (i, m) in existing.iter().enumerate() {
        by_hash.entry(content_hash(&m.content)).or_insert(i);
    }
    let mut matched = vec![false; existing.len()];
    let mut unchanged = Vec::new();
    let mut new = Vec::new();
    for keyed in rules {
        match by_hash.get(&keyed.hash) {
            Some(&i) if !matched[i] => {
                matched[i] = true;
                unchanged.push((keyed, existing[i].clone()));
            }
            // The parser drops duplicates within a file; a second rule with the same text
            // (differing only in case) is the same rule.
            Some(_) => {}
            None => new.push(keyed),
        }
    }
    // Pair new rules with vanished ones of this file in the same section, in file order.
    let mut edits = Vec::new();
    let mut created = Vec::new();
    for keyed in new {
        // A memory another agent file still holds is not this file's to supersede: it only
        // loses this file's tag (see `remove`).
        let partner = existing.iter().enumerate().position(|(i, m)| {
            !matched[i]
                && !held_elsewhere(m, &file_tag(path))
                && origin(m, path).is_some_and(|o| o.section == keyed.rule.section)
        });
        match partner {
            Some(i) => {
                matched[i] = true;
                edits.push((keyed, existing[i].clone()));
            }
            None => created.push(keyed),
        }
    }
    let removed = existing
        .iter()
        .zip(&matched)
        .filter(|(_, m)| !**m)
        .map(|(memory, _)| memory.clone())
        .collect();
    Plan {
        unchanged,
        created,
        edits,
        removed,
    }
}

/// Where an imported memory came from, as its metadata says.
struct Origin {
    section: Vec<String>,
}

/// The origin of `memory` when it was created by importing `path`.
fn origin(memory: &Memory, path: &str) -> Option<Origin> {
    let info = memory.metadata.get("agentFile")?;
    if info.get("path").and_then(Value::as_str) != Some(path) {
        return None;
    }
    let section = info
        .get("section")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Some(Origin { section })
}

/// The memory a rule becomes: tied to the file by `tag` (outside the generated section), and
/// superseding `supersedes` when it is an edit.
fn rule_input(
    rule: &Rule,
    path: &str,
    kind: AgentFileKind,
    tag: Option<&str>,
    supersedes: Option<&str>,
) -> Result<RememberInput> {
    let memory_type = MemoryType::parse(rule.memory_type)?;
    let mut input = RememberInput::new(memory_type, rule.text.clone());
    input.source = Some(MemorySource::UserTaught);
    input.user_verified = Some(true);
    input.needs_review = Some(false);
    input.confidence = Some(RULE_CONFIDENCE);
    input.metadata = Some(json!({
        "agentFile": {
            "path": path,
            "kind": kind.as_str(),
            "section": rule.section,
            "line": rule.line,
            "generatedSection": rule.generated,
        }
    }));
    if let Some(tag) = tag {
        input.tags = vec![tag.to_owned()];
        input.pinned = Some(true);
    }
    if let Some(old) = supersedes {
        input.relations = vec![MemoryRelation {
            target_memory_id: Some(old.to_owned()),
            target_file_path: None,
            relation_type: RelationType::Supersedes,
            confidence: 1.0,
            auto_extracted: false,
        }];
    }
    Ok(input)
}

/// Keeps an unchanged rule's recorded section current when it moved under another heading.
async fn follow_section(
    ctx: &Ctx<'_>,
    tx: &WriteTx,
    path: &str,
    rule: &Rule,
    memory: &Memory,
) -> Result<()> {
    let Some(origin) = origin(memory, path) else {
        return Ok(());
    };
    if origin.section == rule.section {
        return Ok(());
    }
    let section = rule.section.clone();
    memory::change_in(ctx, tx, &memory.id, ENDED_BY, move |m| {
        if let Some(info) = m.metadata.get_mut("agentFile") {
            info["section"] = json!(section);
        }
    })
    .await?;
    Ok(())
}

/// Whether another agent file than the one tagged `tag` holds `memory`.
fn held_elsewhere(memory: &Memory, tag: &str) -> bool {
    memory
        .tags
        .iter()
        .any(|t| t != tag && t.starts_with(TAG_PREFIX))
}

/// A rule left the file: its memory loses the file's tag, and is forgotten when no agent file
/// holds it any more and an import created it (a memory engram had before the rule was
/// imported, say one an agent remembered, only loses the tag).
async fn remove(ctx: &Ctx<'_>, tx: &WriteTx, path: &str, tag: &str, memory: &Memory) -> Result<()> {
    let imported = memory.metadata.get("agentFile").is_some();
    if imported && !held_elsewhere(memory, tag) {
        let reason = format!("removed from {path}");
        memory::forget_in(ctx, tx, &memory.id, Some(reason), ENDED_BY).await?;
    } else {
        memory::change_in(ctx, tx, &memory.id, ENDED_BY, |m| {
            m.tags.retain(|t| t != tag);
        })
        .await?;
    }
    Ok(())
}

enum GeneratedEdit {
    Applied(String),
    Same,
    Skipped(String),
}

/// Applies a generated bullet to the memory its marker names when a person changed its text
/// or moved it under another type heading.
async fn apply_generated_edit(
    ctx: &Ctx<'_>,
    tx: &WriteTx,
    keyed: &Keyed<'_>,
) -> Result<GeneratedEdit> {
    let id = keyed.rule.generated_id.as_deref().expect("filtered on ids");
    let stored = match memory::load(ctx, tx, id).await {
        Ok(m) => m,
        Err(Error::NotFound { .. }) => {
            return Ok(GeneratedEdit::Skipped(format!(
                "engram:id={id} names no memory of this project"
            )))
        }
        Err(e) => return Err(e),
    };
    if stored.deprecated {
        return Ok(GeneratedEdit::Skipped(format!(
            "memory {id} is forgotten; its bullet is dropped at the next export"
        )));
    }
    let mut patch = MemoryPatch::default();
    let shown = agent_files::normalise_text(&stored.content);
    if content_hash(&shown) != keyed.hash {
        patch.content = Some(keyed.rule.text.clone());
    }
    if let Ok(memory_type) = MemoryType::parse(keyed.rule.memory_type) {
        if memory_type != stored.memory_type {
            patch.memory_type = Some(memory_type);
        }
    }
    if patch.is_empty() {
        return Ok(GeneratedEdit::Same);
    }
    // A bullet showing an earlier state of its memory is stale (the memory changed after the
    // export), not a person's edit: applying it would roll the memory back.
    let bullet_type = MemoryType::parse(keyed.rule.memory_type).ok();
    let stale = memory::history(ctx, id).await?.iter().any(|v| {
        v.memory.version != stored.version
            && content_hash(&agent_files::normalise_text(&v.memory.content)) == keyed.hash
            && bullet_type.is_none_or(|t| t == v.memory.memory_type)
    });
    if stale {
        return Ok(GeneratedEdit::Skipped(format!(
            "memory {id} changed since this section was exported; export again to refresh it"
        )));
    }
    patch.user_verified = Some(true);
    patch.needs_review = Some(false);
    let apply = memory::prepare_patch(ctx, patch)?;
    match memory::change_in(ctx, tx, id, ENDED_BY, apply).await {
        Ok(_) => Ok(GeneratedEdit::Applied(id.to_owned())),
        Err(Error::Conflict(msg)) => Ok(GeneratedEdit::Skipped(msg)),
        Err(e) => Err(e),
    }
}
