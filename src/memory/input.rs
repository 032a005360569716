//! Inputs of `remember` and `update`, their limits, and the validation that turns them into
//! rows: every field is checked (coded `ENGRAM_INVALID_ARG` naming the field), the privacy
//! filter runs on every free-text field, and paths are confined to the project root.

use std::path::{Component, Path};

use serde_json::Value;

use super::model::{
    MemoryRelation, MemoryScope, MemorySource, MemoryType, ShareScope, WorkUnitRef,
};
use super::privacy::{redact, redact_json, Redacted};
use crate::error::{Error, Result};

/// Size limits applied to every input (configurable per engine).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Maximum UTF-8 bytes of `content` (after trimming).
    pub max_content_bytes: usize,
    /// Maximum entries in each list field (tags, files, modules, node ids, relations).
    pub max_list_len: usize,
    /// Maximum bytes of one list entry / identifier.
    pub max_item_bytes: usize,
    /// Maximum bytes of the serialised `metadata` object.
    pub max_metadata_bytes: usize,
    /// Maximum characters of `citationText` (the seed's inline chip).
    pub max_citation_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_content_bytes: 16 * 1024,
            max_list_len: 128,
            max_item_bytes: 1024,
            max_metadata_bytes: 64 * 1024,
            max_citation_chars: 40,
        }
    }
}

/// What `remember` accepts. Only `memory_type` and `content` are required.
#[derive(Debug, Clone)]
pub struct RememberInput {
    /// What kind of knowledge.
    pub memory_type: MemoryType,
    /// The text (secrets are redacted before storage).
    pub content: String,
    /// 0..=1, default 0.8.
    pub confidence: Option<f64>,
    /// Tags.
    pub tags: Vec<String>,
    /// Files (relative to the project root, or absolute inside it).
    pub related_files: Vec<String>,
    /// Modules.
    pub related_modules: Vec<String>,
    /// Default `global`.
    pub scope: Option<MemoryScope>,
    /// Default `project`.
    pub share_scope: Option<ShareScope>,
    /// Default `agent_explicit`.
    pub source: Option<MemorySource>,
    /// Creating session.
    pub session_id: Option<String>,
    /// Commit the knowledge refers to.
    pub commit_sha: Option<String>,
    /// Methodology unit.
    pub work_unit_ref: Option<WorkUnitRef>,
    /// Methodology plugin.
    pub methodology: Option<String>,
    /// Graph node the memory is attached to.
    pub target_node_id: Option<String>,
    /// Graph nodes it affects.
    pub impacted_node_ids: Vec<String>,
    /// Links to memories or files.
    pub relations: Vec<MemoryRelation>,
    /// Custom half-life in days.
    pub decay_half_life_days: Option<f64>,
    /// Default false.
    pub needs_review: Option<bool>,
    /// Default false.
    pub user_verified: Option<bool>,
    /// Short citation label.
    pub citation_text: Option<String>,
    /// Default false.
    pub pinned: Option<bool>,
    /// A JSON object for the app.
    pub metadata: Option<Value>,
    /// Patterns whose presence in a recall's query or recent files surfaces the memory.
    pub triggers: Vec<String>,
}

impl RememberInput {
    /// An input with the two required fields and every other field at its default.
    pub fn new(memory_type: MemoryType, content: impl Into<String>) -> Self {
        RememberInput {
            memory_type,
            content: content.into(),
            confidence: None,
            tags: Vec::new(),
            related_files: Vec::new(),
            related_modules: Vec::new(),
            scope: None,
            share_scope: None,
            source: None,
            session_id: None,
            commit_sha: None,
            work_unit_ref: None,
            methodology: None,
            target_node_id: None,
            impacted_node_ids: Vec::new(),
            relations: Vec::new(),
            decay_half_life_days: None,
            needs_review: None,
            user_verified: None,
            citation_text: None,
            pinned: None,
            metadata: None,
            triggers: Vec::new(),
        }
    }
}

/// What `update` accepts: every field optional; `None` leaves it unchanged. An empty string
/// clears an optional text field (`citationText`, `commitSha`, `targetNodeId`, `methodology`).
#[derive(Debug, Clone, Default)]
pub struct MemoryPatch {
    /// New type.
    pub memory_type: Option<MemoryType>,
    /// New text (re-filtered, re-hashed for dedup).
    pub content: Option<String>,
    /// New confidence.
    pub confidence: Option<f64>,
    /// Replaces the tags.
    pub tags: Option<Vec<String>>,
    /// Replaces the files.
    pub related_files: Option<Vec<String>>,
    /// Replaces the modules.
    pub related_modules: Option<Vec<String>>,
    /// New scope.
    pub scope: Option<MemoryScope>,
    /// New share scope.
    pub share_scope: Option<ShareScope>,
    /// New commit.
    pub commit_sha: Option<String>,
    /// New methodology.
    pub methodology: Option<String>,
    /// New graph node.
    pub target_node_id: Option<String>,
    /// Replaces impacted nodes.
    pub impacted_node_ids: Option<Vec<String>>,
    /// Replaces relations.
    pub relations: Option<Vec<MemoryRelation>>,
    /// New half-life.
    pub decay_half_life_days: Option<f64>,
    /// Review flag.
    pub needs_review: Option<bool>,
    /// Verified flag.
    pub user_verified: Option<bool>,
    /// Citation label.
    pub citation_text: Option<String>,
    /// Pin flag.
    pub pinned: Option<bool>,
    /// Replaces metadata.
    pub metadata: Option<Value>,
    /// Replaces the trigger patterns.
    pub triggers: Option<Vec<String>>,
}

impl MemoryPatch {
    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.memory_type.is_none()
            && self.content.is_none()
            && self.confidence.is_none()
            && self.tags.is_none()
            && self.related_files.is_none()
            && self.related_modules.is_none()
            && self.scope.is_none()
            && self.share_scope.is_none()
            && self.commit_sha.is_none()
            && self.methodology.is_none()
            && self.target_node_id.is_none()
            && self.impacted_node_ids.is_none()
            && self.relations.is_none()
            && self.decay_half_life_days.is_none()
            && self.needs_review.is_none()
            && self.user_verified.is_none()
            && self.citation_text.is_none()
            && self.pinned.is_none()
            && self.metadata.is_none()
            && self.triggers.is_none()
    }
}

/// The longest custom half-life: 100 years. Longer would mean "never decays", which is what
/// `pinned` says.
pub const MAX_HALF_LIFE_DAYS: f64 = 36_500.0;

/// Validation context: the engine's limits and the handle's project root.
pub(crate) struct Validator<'a> {
    pub limits: &'a Limits,
    pub project_root: Option<&'a Path>,
}

impl Validator<'_> {
    /// Validates and redacts the content; returns the stored text and the redaction count.
    pub fn content(&self, content: &str) -> Result<Redacted> {
        let trimmed = content.trim();
        if trimmed.is_empty() {
            return Err(Error::invalid("content must not be empty"));
        }
        if trimmed.len() > self.limits.max_content_bytes {
            return Err(Error::invalid(format!(
                "content is {} bytes; the limit is {} (maxContentBytes)",
                trimmed.len(),
                self.limits.max_content_bytes
            )));
        }
        // NUL bytes would truncate the text for FTS tokenizers and C consumers.
        let clean = trimmed.replace('\0', "\u{FFFD}");
        Ok(redact(&clean))
    }

    /// Checks a 0..=1 score.
    pub fn unit(&self, field: &str, value: f64) -> Result<f64> {
        if !value.is_finite() || !(0.0..=1.0).contains(&value) {
            return Err(Error::invalid(format!(
                "{field} must be a number between 0 and 1, got {value}"
            )));
        }
        Ok(value)
    }

    /// Checks a positive number of days, at most [`MAX_HALF_LIFE_DAYS`].
    pub fn half_life(&self, value: f64) -> Result<f64> {
        if !value.is_finite() || value <= 0.0 || value > MAX_HALF_LIFE_DAYS {
            let shown = if value.abs() < 1e15 {
                value.to_string()
            } else {
                format!("{value:e}")
            };
            return Err(Error::invalid(format!(
                "decayHalfLifeDays must be a positive number of days up to {MAX_HALF_LIFE_DAYS} \
                 (pin a memory that must not decay), got {shown}"
            )));
        }
        Ok(value)
    }

    /// Trims, drops empties and duplicates (keeping first order), redacts, checks sizes.
    pub fn list(&self, field: &str, items: &[String]) -> Result<(Vec<String>, u32)> {
        if items.len() > self.limits.max_list_len {
            return Err(Error::invalid(format!(
                "{field} has {} entries; the limit is {}",
                items.len(),
                self.limits.max_list_len
            )));
        }
        let mut out: Vec<String> = Vec::with_capacity(items.len());
        let mut redactions = 0;
        for item in items {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            self.item(field, item)?;
            let r = redact(item);
            redactions += r.count;
            if !out.contains(&r.text) {
                out.push(r.text);
            }
        }
        Ok((out, redactions))
    }

    /// Trigger patterns: a list whose entries are matched case-insensitively, so stored in
    /// lower case, and of at least two characters (one would match nearly every query).
    pub fn triggers(&self, items: &[String]) -> Result<(Vec<String>, u32)> {
        let (list, redactions) = self.list("triggers", items)?;
        let mut out: Vec<String> = Vec::with_capacity(list.len());
        for item in list {
            if item.chars().count() < 2 {
                return Err(Error::invalid(format!(
                    "triggers must be at least 2 characters long, got '{item}'"
                )));
            }
            let lower = item.to_lowercase();
            if !out.contains(&lower) {
                out.push(lower);
            }
        }
        Ok((out, redactions))
    }

    /// Checks the size of one identifier or list entry.
    pub fn item(&self, field: &str, value: &str) -> Result<()> {
        if value.len() > self.limits.max_item_bytes {
            return Err(Error::invalid(format!(
                "{field} entry is {} bytes; the limit is {}",
                value.len(),
                self.limits.max_item_bytes
            )));
        }
        Ok(())
    }

    /// An optional identifier: trimmed, empty means none. Only for ids that are looked up as
    /// given (a session's id); any other text goes through [`Validator::opt_text`].
    pub fn opt_id(&self, field: &str, value: Option<&str>) -> Result<Option<String>> {
        match value.map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => {
                self.item(field, v)?;
                Ok(Some(v.to_owned()))
            }
        }
    }

    /// An optional short text (a label, a reason, a commit, a node key, an author): trimmed,
    /// empty means none, size-checked like an identifier, and redacted.
    pub fn opt_text(&self, field: &str, value: Option<&str>) -> Result<(Option<String>, u32)> {
        match self.opt_id(field, value)? {
            None => Ok((None, 0)),
            Some(v) => {
                let r = redact(&v);
                Ok((Some(r.text), r.count))
            }
        }
    }

    /// A methodology unit: its methodology, hierarchy and label, size-checked and redacted.
    pub fn work_unit(&self, unit: Option<&WorkUnitRef>) -> Result<(Option<WorkUnitRef>, u32)> {
        let Some(unit) = unit else {
            return Ok((None, 0));
        };
        let methodology = redact(&unit.methodology);
        let label = redact(&unit.label);
        self.item("workUnitRef.methodology", &unit.methodology)?;
        self.item("workUnitRef.label", &unit.label)?;
        if unit.hierarchy.len() > self.limits.max_list_len {
            return Err(Error::invalid(format!(
                "workUnitRef.hierarchy has {} entries; the limit is {}",
                unit.hierarchy.len(),
                self.limits.max_list_len
            )));
        }
        let mut count = methodology.count + label.count;
        let mut hierarchy = Vec::with_capacity(unit.hierarchy.len());
        for level in &unit.hierarchy {
            self.item("workUnitRef.hierarchy", level)?;
            let r = redact(level);
            count += r.count;
            hierarchy.push(r.text);
        }
        let unit = WorkUnitRef {
            methodology: methodology.text,
            hierarchy,
            label: label.text,
        };
        Ok((Some(unit), count))
    }

    /// Normalises file paths to forward-slash paths relative to the project root and refuses
    /// paths that escape it.
    pub fn files(&self, items: &[String]) -> Result<(Vec<String>, u32)> {
        let (items, redactions) = self.list("relatedFiles", items)?;
        let files = items
            .iter()
            .map(|f| confine_path(f, self.project_root))
            .collect::<Result<Vec<_>>>()?;
        let mut unique: Vec<String> = Vec::with_capacity(files.len());
        for f in files {
            if !unique.contains(&f) {
                unique.push(f);
            }
        }
        Ok((unique, redactions))
    }

    /// Checks the citation label and redacts it.
    pub fn citation(&self, value: Option<&str>) -> Result<(Option<String>, u32)> {
        let Some(text) = value.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok((None, 0));
        };
        let chars = text.chars().count();
        if chars > self.limits.max_citation_chars {
            return Err(Error::invalid(format!(
                "citationText is {chars} characters; the limit is {}",
                self.limits.max_citation_chars
            )));
        }
        let r = redact(text);
        Ok((Some(r.text), r.count))
    }

    /// Checks relations: each names a target and has a 0..=1 confidence.
    pub fn relations(&self, relations: &[MemoryRelation]) -> Result<Vec<MemoryRelation>> {
        if relations.len() > self.limits.max_list_len {
            return Err(Error::invalid(format!(
                "relations has {} entries; the limit is {}",
                relations.len(),
                self.limits.max_list_len
            )));
        }
        relations
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.target_memory_id =
                    self.opt_id("relations.targetMemoryId", r.target_memory_id.as_deref())?;
                r.target_file_path = match r.target_file_path.as_deref().map(str::trim) {
                    None | Some("") => None,
                    Some(p) => Some(confine_path(&redact(p).text, self.project_root)?),
                };
                if r.target_memory_id.is_none() && r.target_file_path.is_none() {
                    return Err(Error::invalid(
                        "each relation needs targetMemoryId or targetFilePath",
                    ));
                }
                r.confidence = self.unit("relations.confidence", r.confidence)?;
                Ok(r)
            })
            .collect()
    }

    /// Checks that metadata is a JSON object within the size limit; redacts its strings and
    /// keys, and replaces values under keys that name a secret (`privacy::redact_json`).
    pub fn metadata(&self, value: Option<&Value>) -> Result<(Value, u32)> {
        let Some(value) = value else {
            return Ok((Value::Object(Default::default()), 0));
        };
        if !value.is_object() {
            return Err(Error::invalid("metadata must be a plain object"));
        }
        let mut value = value.clone();
        let redactions = redact_json(&mut value);
        let size = serde_json::to_vec(&value)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > self.limits.max_metadata_bytes {
            return Err(Error::invalid(format!(
                "metadata is {size} bytes as JSON; the limit is {}",
                self.limits.max_metadata_bytes
            )));
        }
        Ok((value, redactions))
    }
}

/// Makes `path` a forward-slash path relative to the project root, refusing `..` escapes,
/// absolute paths outside the root, and NUL bytes (no file has one; the OS would cut the path
/// there). Without a root, relative paths are kept (normalised) and absolute paths are kept as
/// given.
///
/// The check is lexical: symlinks are not resolved, so a link inside the root that points
/// outside it is accepted as the project path it is. A memory's paths name files of the project
/// (they need not exist, and engram never reads them); the code indexer, which reads files,
/// does not follow symlinks (`code::walk`), and the agent-file bridge resolves them
/// (`lifecycle::agent_io::locate`).
pub fn confine_path(path: &str, root: Option<&Path>) -> Result<String> {
    if path.contains('\0') {
        return Err(Error::invalid(format!("path {path:?} contains a NUL byte")));
    }
    let unified = path.replace('\\', "/");
    let candidate = Path::new(&unified);
    let relative = if candidate.is_absolute() {
        match root {
            Some(root) => match candidate.strip_prefix(root) {
                Ok(rel) => rel.to_path_buf(),
                Err(_) => {
                    return Err(Error::invalid(format!(
                        "path {path:?} is outside the project root {}",
                        root.display()
                    )))
                }
            },
            None => return Ok(unified),
        }
    } else {
        candidate.to_path_buf()
    };
    let mut parts: Vec<String> = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(Error::invalid(format!(
                        "path {path:?} escapes the project root"
                    )));
                }
            }
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    if parts.is_empty() {
        return Err(Error::invalid(format!("path {path:?} names no file")));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confines_paths() {
        let root = Path::new("/repo");
        assert_eq!(confine_path("./src/a.ts", Some(root)).unwrap(), "src/a.ts");
        assert_eq!(confine_path("src\\b.ts", Some(root)).unwrap(), "src/b.ts");
        assert_eq!(
            confine_path("/repo/src/c.ts", Some(root)).unwrap(),
            "src/c.ts"
        );
        assert_eq!(
            confine_path("src/x/../d.ts", Some(root)).unwrap(),
            "src/d.ts"
        );
        for bad in [
            "../etc/passwd",
            "/etc/passwd",
            "src/../../x",
            ".",
            "",
            "a\0b.ts",
        ] {
            let err = confine_path(bad, Some(root)).unwrap_err();
            assert_eq!(err.code(), "ENGRAM_INVALID_ARG", "{bad}");
        }
    }

    #[test]
    fn content_limits() {
        let limits = Limits {
            max_content_bytes: 10,
            ..Limits::default()
        };
        let v = Validator {
            limits: &limits,
            project_root: None,
        };
        assert!(v.content("   ").is_err());
        assert!(v.content("12345678901").is_err());
        assert_eq!(v.content("  ok  ").unwrap().text, "ok");
        assert!(v.unit("confidence", f64::NAN).is_err());
        assert!(v.unit("confidence", 1.5).is_err());
        assert!(v.unit("confidence", -0.1).is_err());
        assert_eq!(v.half_life(30.0).unwrap(), 30.0);
        for bad in [
            0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            1e308,
            MAX_HALF_LIFE_DAYS + 1.0,
        ] {
            assert!(v.half_life(bad).is_err(), "{bad}");
        }
    }
}
