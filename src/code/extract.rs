//! Structural references for the knowledge graph's layer 1: imports, call sites and
//! inheritance, from a language's `imports.scm`, `calls.scm` and `inherits.scm`. Each is tied
//! to the innermost definition it occurs in. Imports are resolved to files later
//! (`resolve.rs`), calls and base types to definitions by the index.

use std::collections::HashSet;

use tree_sitter::Node;

use super::definitions::{text, Definition};
use super::query_pass::Matches;

/// What a reference expresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefKind {
    /// This file depends on a module (`target` is the specifier as written).
    Imports,
    /// A call (or construction, or macro use) of `target` by name.
    Calls,
    /// `from_symbol` extends `target`.
    Extends,
    /// `from_symbol` implements `target` (interfaces, traits).
    Implements,
}

impl RefKind {
    /// The stable name stored in the index.
    pub fn as_str(self) -> &'static str {
        match self {
            RefKind::Imports => "imports",
            RefKind::Calls => "calls",
            RefKind::Extends => "extends",
            RefKind::Implements => "implements",
        }
    }
}

/// One reference from this file to something by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// What it expresses.
    pub kind: RefKind,
    /// Qualified name of the innermost definition it occurs in (`None`: file level).
    pub from_symbol: Option<String>,
    /// What is referenced: a module specifier, a callee name, a base type's name.
    pub target: String,
    /// For Python's `from m import name`: `name`, which may be a submodule. For Rust's
    /// `mod name;` the target is `name` and this is `"mod"`.
    pub member: Option<String>,
    /// 1-based line of the reference.
    pub line: u32,
}

/// Turns the matches of `imports.scm`, `calls.scm` and `inherits.scm` into references. Calls
/// are kept once per (caller, callee).
pub(crate) fn references(matches: &Matches, source: &[u8], defs: &[Definition]) -> Vec<Reference> {
    let mut refs = Vec::new();
    for m in &matches.imports {
        let captures = matches.captures(m);
        let node = captures
            .iter()
            .find(|(n, _)| *n == "source" || *n == "module");
        let Some(&(capture, node)) = node else {
            continue;
        };
        let member = captures
            .iter()
            .find(|(n, _)| *n == "name")
            .map(|(_, n)| text(*n, source));
        let target = clean_specifier(&text(node, source));
        if target.is_empty() {
            continue;
        }
        refs.push(Reference {
            kind: RefKind::Imports,
            from_symbol: None,
            target,
            member: if capture == "module" {
                Some("mod".to_owned())
            } else {
                member
            },
            line: line_of(node),
        });
    }
    let mut seen_calls = HashSet::new();
    for m in &matches.calls {
        let Some(&(_, node)) = matches.captures(m).iter().find(|(n, _)| *n == "callee") else {
            continue;
        };
        let from_symbol =
            enclosing(defs, node.start_byte()).map(|d| defs[d].qualified_name.clone());
        let target = text(node, source);
        if seen_calls.insert((from_symbol.clone(), target.clone())) {
            refs.push(Reference {
                kind: RefKind::Calls,
                from_symbol,
                target,
                member: None,
                line: line_of(node),
            });
        }
    }
    for m in &matches.inherits {
        let captures = matches.captures(m);
        let Some(&(_, ty)) = captures.iter().find(|(n, _)| *n == "type") else {
            continue;
        };
        for &(capture, base) in captures {
            let kind = match capture {
                "extends" => RefKind::Extends,
                "implements" => RefKind::Implements,
                _ => continue,
            };
            let type_name = type_name(&text(ty, source));
            let from_symbol = enclosing(defs, ty.start_byte())
                .map(|d| defs[d].qualified_name.clone())
                .filter(|q| q.rsplit('.').next() == Some(type_name.as_str()))
                .unwrap_or(type_name);
            let target = type_name_of_base(&text(base, source));
            if !target.is_empty() {
                refs.push(Reference {
                    kind,
                    from_symbol: Some(from_symbol),
                    target,
                    member: None,
                    line: line_of(base),
                });
            }
        }
    }
    refs
}

/// Index of the innermost definition containing byte `pos` (`defs` sorted outer-first).
pub fn enclosing(defs: &[Definition], pos: usize) -> Option<usize> {
    let after = defs.partition_point(|d| d.start_byte <= pos);
    let mut candidate = after.checked_sub(1);
    while let Some(i) = candidate {
        if defs[i].end_byte > pos {
            return Some(i);
        }
        candidate = defs[i].parent;
    }
    None
}

fn line_of(node: Node) -> u32 {
    node.start_position().row as u32 + 1
}

/// A specifier without quotes, aliases (`as x`) or Rust use-groups (`::{a, b}`).
fn clean_specifier(raw: &str) -> String {
    let s = raw
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`');
    let s = s.split(" as ").next().unwrap_or(s);
    let s = s.split("::{").next().unwrap_or(s);
    s.trim().trim_end_matches("::*").to_owned()
}

/// `Foo<T>` -> `Foo`.
fn type_name(raw: &str) -> String {
    raw.split(['<', '(', '['])
        .next()
        .unwrap_or(raw)
        .trim()
        .to_owned()
}

/// The last path segment of a base type: `models.Base` -> `Base`, `fmt::Display` -> `Display`,
/// `Base<T>` -> `Base`, `*Embedded` -> `Embedded`.
fn type_name_of_base(raw: &str) -> String {
    let base = type_name(raw);
    let last = base.rsplit(['.', ':']).next().unwrap_or(&base);
    last.trim_start_matches(['*', '&']).trim().to_owned()
}
