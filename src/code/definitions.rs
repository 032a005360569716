//! Definitions found by a language's `definitions.scm`: what they are, their names qualified by
//! their enclosing definitions (`Class.method`), their ranges and nesting.

use std::collections::HashMap;

use tree_sitter::Node;

use super::query_pass::Matches;

/// What a definition defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DefKind {
    /// A free function (or a function-valued variable).
    Function,
    /// A function inside a class, impl, trait, interface or struct (or a Go method).
    Method,
    /// A class.
    Class,
    /// An interface.
    Interface,
    /// A type alias or other named type.
    Type,
    /// An enum.
    Enum,
    /// A struct or union.
    Struct,
    /// A trait.
    Trait,
    /// A Rust impl block (named after its type).
    Impl,
    /// A namespace or inline module.
    Module,
    /// A macro definition.
    Macro,
}

impl DefKind {
    /// The stable name stored with chunks and symbols.
    pub fn as_str(self) -> &'static str {
        match self {
            DefKind::Function => "function",
            DefKind::Method => "method",
            DefKind::Class => "class",
            DefKind::Interface => "interface",
            DefKind::Type => "type",
            DefKind::Enum => "enum",
            DefKind::Struct => "struct",
            DefKind::Trait => "trait",
            DefKind::Impl => "impl",
            DefKind::Module => "module",
            DefKind::Macro => "macro",
        }
    }

    fn from_capture(suffix: &str) -> Option<DefKind> {
        Some(match suffix {
            "function" => DefKind::Function,
            "method" => DefKind::Method,
            "class" => DefKind::Class,
            "interface" => DefKind::Interface,
            "type" => DefKind::Type,
            "enum" => DefKind::Enum,
            "struct" => DefKind::Struct,
            "trait" => DefKind::Trait,
            "impl" => DefKind::Impl,
            "module" => DefKind::Module,
            "macro" => DefKind::Macro,
            _ => return None,
        })
    }

    /// Bodies of these are never split across chunks.
    pub fn is_atomic(self) -> bool {
        matches!(self, DefKind::Function | DefKind::Method | DefKind::Macro)
    }

    /// A function directly inside one of these is a method.
    fn holds_methods(self) -> bool {
        matches!(
            self,
            DefKind::Class | DefKind::Interface | DefKind::Trait | DefKind::Impl | DefKind::Struct
        )
    }
}

/// One definition in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// What it defines.
    pub kind: DefKind,
    /// Its name as written.
    pub name: String,
    /// Its name qualified by enclosing definitions, joined with `.` (`Class.method`).
    pub qualified_name: String,
    /// Byte range, including an `export` keyword or decorators that belong to it.
    pub start_byte: usize,
    /// End of the byte range (exclusive).
    pub end_byte: usize,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
    /// Index of the innermost enclosing definition.
    pub parent: Option<usize>,
    /// The first line of its text (trimmed, at most 200 bytes): `class Foo extends Bar {`.
    pub signature: String,
    /// Hash of its text: a changed hash on re-index marks the memories attached to it stale.
    pub content_hash: String,
    /// The tree node whose range this is (the wrapper when there is one).
    pub(crate) node_id: usize,
}

struct Found<'t> {
    kind: DefKind,
    node: Node<'t>,
    name: String,
    receiver: Option<String>,
    pattern: usize,
}

/// Turns the matches of `definitions.scm` into definitions sorted by position, outer before
/// inner, with parents and qualified names set.
pub(crate) fn find(matches: &Matches, source: &[u8]) -> Vec<Definition> {
    // Keyed by the @name node: patterns that capture the same name describe one definition.
    let mut by_name: HashMap<usize, Found> = HashMap::new();
    let mut wrappers: HashMap<usize, Node> = HashMap::new();
    for m in &matches.definitions {
        let (mut def, mut name, mut receiver, mut wrapper) = (None, None, None, None);
        for &(capture_name, node) in matches.captures(m) {
            match capture_name {
                "name" => name = Some(node),
                "receiver" => receiver = Some(node),
                "definition.wrapped" => wrapper = Some(node),
                other => {
                    if let Some(kind) = other
                        .strip_prefix("definition.")
                        .and_then(DefKind::from_capture)
                    {
                        def = Some((kind, node));
                    }
                }
            }
        }
        let Some(name) = name else { continue };
        if let Some(wrapper) = wrapper {
            wrappers.insert(name.id(), wrapper);
            continue;
        }
        let Some((kind, node)) = def else { continue };
        let found = Found {
            kind,
            node,
            name: text(name, source),
            receiver: receiver.map(|r| text(r, source)),
            pattern: m.pattern,
        };
        match by_name.get(&name.id()) {
            Some(seen) if !wider(&found, seen) => {}
            _ => {
                by_name.insert(name.id(), found);
            }
        }
    }

    let mut found: Vec<Found> = by_name
        .into_iter()
        .map(|(name_id, mut f)| {
            if let Some(wrapper) = wrappers.get(&name_id) {
                if wrapper.byte_range().contains(&f.node.start_byte()) {
                    f.node = *wrapper;
                }
            }
            f
        })
        .collect();
    found.sort_by_key(|f| (f.node.start_byte(), std::cmp::Reverse(f.node.end_byte())));
    nest(found, source)
}

/// Whether `a` should replace `b` for the same name: the wider range wins, then the pattern
/// listed first.
fn wider(a: &Found, b: &Found) -> bool {
    let len = |f: &Found| f.node.end_byte() - f.node.start_byte();
    len(a) > len(b) || (len(a) == len(b) && a.pattern < b.pattern)
}

fn nest(found: Vec<Found>, source: &[u8]) -> Vec<Definition> {
    let mut defs: Vec<Definition> = Vec::with_capacity(found.len());
    let mut open: Vec<usize> = Vec::new();
    for f in found {
        let (start, end) = (f.node.start_byte(), f.node.end_byte());
        while let Some(&top) = open.last() {
            if defs[top].end_byte >= end && defs[top].start_byte <= start {
                break;
            }
            open.pop();
        }
        let parent = open.last().copied();
        let mut kind = f.kind;
        if kind == DefKind::Function && parent.is_some_and(|p| defs[p].kind.holds_methods()) {
            kind = DefKind::Method;
        }
        let qualified_name = match (&f.receiver, parent) {
            (Some(receiver), _) => format!("{receiver}.{}", f.name),
            (None, Some(p)) => format!("{}.{}", defs[p].qualified_name, f.name),
            (None, None) => f.name.clone(),
        };
        defs.push(Definition {
            kind,
            qualified_name,
            start_byte: start,
            end_byte: end,
            start_line: f.node.start_position().row as u32 + 1,
            end_line: f.node.end_position().row as u32 + 1,
            parent,
            signature: signature(&source[start..end]),
            content_hash: super::chunk::content_hash(&source[start..end]),
            node_id: f.node.id(),
            name: f.name,
        });
        open.push(defs.len() - 1);
    }
    defs
}

/// A node's text (invalid UTF-8 replaced).
pub(crate) fn text(node: Node, source: &[u8]) -> String {
    String::from_utf8_lossy(&source[node.byte_range()]).into_owned()
}

/// The first non-empty line of a definition, trimmed and capped, for context prefixes.
fn signature(text: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(text);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('@') && !l.starts_with("#["))
        .unwrap_or("");
    if line.len() <= MAX {
        return line.to_owned();
    }
    format!("{}…", crate::text::clip_bytes(line, MAX))
}
