//! The AST chunker: cuts a parsed file at definition boundaries.
//!
//! Rules: a definition that fits the budget is one chunk; a function, method or macro is never
//! split, whatever its size; a larger definition (class, impl, module...) is split at its
//! children, and each piece names the container and repeats its signature in the context
//! prefix; small adjacent items at one level are merged up to a budget; comments and attributes
//! go with the item they precede. A merged chunk (a block) lists each definition it holds as a
//! part with its own text and prefix, embedded on its own, and so does a class or impl that fit
//! whole, for each of its members. Recursion stops at [`MAX_DEPTH`] (then lines are used), so
//! pathological nesting degrades instead of overflowing the stack.

use std::collections::HashMap;

use tree_sitter::{Node, Tree};

use super::chunk::{
    estimate_tokens, finish, pack_lines, part_of, Chunk, ChunkHead, ChunkKind, ChunkOptions,
    ChunkPart, Lines, MAX_PARTS,
};
use super::definitions::Definition;

/// Deeper than this, an oversized node is cut by lines instead of by children.
pub const MAX_DEPTH: usize = 256;

/// A contiguous byte range at one level of the tree.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: usize,
    end: usize,
    /// The container being split that this piece belongs to.
    within: Option<usize>,
    /// The definition this segment is (with its leading comments).
    def: Option<usize>,
    /// A comment or attribute: it belongs to the next item.
    leading: bool,
}

/// Result of chunking one file.
pub struct AstChunks {
    /// The chunks, in file order, covering every non-blank byte.
    pub chunks: Vec<Chunk>,
    /// Set when nesting deeper than [`MAX_DEPTH`] forced line cuts.
    pub too_deep: bool,
}

/// Chunks `text` (already parsed into `tree`) given its definitions.
pub fn chunk(
    path: &str,
    text: &str,
    tree: &Tree,
    defs: &[Definition],
    options: &ChunkOptions,
) -> AstChunks {
    let mut cutter = Cutter {
        text,
        defs,
        by_node: defs
            .iter()
            .enumerate()
            .map(|(i, d)| (d.node_id, i))
            .collect(),
        options,
        segments: Vec::new(),
        split_at: HashMap::new(),
        too_deep: false,
    };
    let root = tree.root_node();
    let mut cursor = root.walk();
    for child in root.children(&mut cursor) {
        cutter.collect(child, 1, None);
    }
    let segments = attach_leading(cutter.segments, &cutter.split_at);
    let groups = group(&segments, text, options);
    let lines = Lines::new(text);
    let chunks = groups
        .into_iter()
        .filter_map(|g| {
            let mut chunk = finish(path, text, &lines, g.start, g.end, head(defs, &g))?;
            chunk.parts = parts(&chunk, &g, defs, &segments, (path, text, &lines));
            Some(chunk)
        })
        .collect();
    AstChunks {
        chunks,
        too_deep: cutter.too_deep,
    }
}

struct Cutter<'a> {
    text: &'a str,
    defs: &'a [Definition],
    by_node: HashMap<usize, usize>,
    options: &'a ChunkOptions,
    segments: Vec<Segment>,
    /// For each definition that was split: the level (`within`) it was found at.
    split_at: HashMap<usize, Option<usize>>,
    too_deep: bool,
}

impl Cutter<'_> {
    fn collect(&mut self, node: Node, depth: usize, within: Option<usize>) {
        let (start, end) = (node.start_byte(), node.end_byte());
        if start >= end {
            return;
        }
        let fits = estimate_tokens(end - start) <= self.options.max_tokens;
        let leaf = node.child_count() == 0;
        if let Some(&d) = self.by_node.get(&node.id()) {
            if fits || leaf || self.defs[d].kind.is_atomic() || depth >= MAX_DEPTH {
                self.push(start, end, within, Some(d), false);
            } else {
                self.split_at.insert(d, within);
                self.children(node, depth, Some(d));
            }
            return;
        }
        if fits {
            let leading = node.kind().contains("comment") || node.kind() == "attribute_item";
            self.push(start, end, within, None, leading);
        } else if leaf || depth >= MAX_DEPTH {
            self.too_deep |= !leaf;
            for (s, e) in pack_lines(self.text, start, end, self.options.max_tokens) {
                self.push(s, e, within, None, false);
            }
        } else {
            self.children(node, depth, within);
        }
    }

    fn children(&mut self, node: Node, depth: usize, within: Option<usize>) {
        let mut cursor = node.walk();
        let before = self.segments.len();
        for child in node.children(&mut cursor) {
            self.collect(child, depth + 1, within);
        }
        // Text of the node not covered by any child (rare: some grammars leave it) is kept.
        if self.segments.len() == before {
            self.push(node.start_byte(), node.end_byte(), within, None, false);
        }
    }

    fn push(
        &mut self,
        start: usize,
        end: usize,
        within: Option<usize>,
        def: Option<usize>,
        leading: bool,
    ) {
        self.segments.push(Segment {
            start,
            end,
            within,
            def,
            leading,
        });
    }
}

/// Folds comments and attributes into the item that follows them at the same level, or into
/// the first piece of a split container they document. The whitespace between segments needs
/// no owner: a chunk spans its first to last segment and is trimmed.
fn attach_leading(
    segments: Vec<Segment>,
    split_at: &HashMap<usize, Option<usize>>,
) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(segments.len());
    let mut pending: Option<Segment> = None;
    for mut seg in segments {
        let documents = |p: &Segment| {
            p.within == seg.within || seg.within.and_then(|w| split_at.get(&w)) == Some(&p.within)
        };
        match pending.take() {
            Some(p) if documents(&p) => seg.start = p.start,
            Some(p) => out.push(p),
            None => {}
        }
        if seg.leading {
            pending = Some(seg);
        } else {
            out.push(seg);
        }
    }
    out.extend(pending);
    out
}

/// A run of segments that becomes one chunk.
#[derive(Debug, Clone)]
struct Group {
    start: usize,
    end: usize,
    /// Indexes of its segments.
    segments: std::ops::Range<usize>,
    within: Option<usize>,
    tokens: usize,
    /// Holds a definition.
    has_def: bool,
    /// Holds more than one item (definitions and/or plain code), so no one definition names it.
    mixed: bool,
}

/// Merges runs of small segments at one level. Inside a container that is being split, the
/// header (the part before its first member) and the members are not mixed, so the header
/// stays a chunk named after the container. Scraps (a closing brace) join their neighbour.
fn group(segments: &[Segment], text: &str, options: &ChunkOptions) -> Vec<Group> {
    let tokens_of = |s: usize, e: usize| estimate_tokens(text[s..e].trim().len());
    let mut groups: Vec<Group> = Vec::new();
    let mut open_small = false;
    for (index, seg) in segments.iter().enumerate() {
        let tokens = tokens_of(seg.start, seg.end);
        let small = tokens < options.small_tokens;
        let is_def = seg.def.is_some();
        if let Some(last) = groups.last_mut() {
            let same_level = last.within == seg.within;
            let kinds_mix = seg.within.is_some() && last.has_def != is_def;
            if same_level
                && open_small
                && small
                && !kinds_mix
                && last.tokens + tokens <= options.merge_tokens
            {
                last.end = seg.end;
                last.segments.end = index + 1;
                last.tokens += tokens;
                last.has_def |= is_def;
                last.mixed = true;
                continue;
            }
            if same_level && !is_def && tokens <= TINY_TOKENS {
                last.end = seg.end;
                last.segments.end = index + 1;
                last.tokens += tokens;
                continue;
            }
        }
        groups.push(Group {
            start: seg.start,
            end: seg.end,
            segments: index..index + 1,
            within: seg.within,
            tokens,
            has_def: is_def,
            mixed: false,
        });
        open_small = small;
    }
    groups
}

/// Items this small (`}`, `;`, a keyword) never stand alone.
const TINY_TOKENS: usize = 4;

/// The definitions a chunk holds that get a vector of their own: every outermost one of a
/// block, and the members of a container chunk (a class or impl that fit whole) holding at
/// least [`MIN_MEMBERS`].
fn parts(
    chunk: &Chunk,
    g: &Group,
    defs: &[Definition],
    segments: &[Segment],
    (path, text, lines): (&str, &str, &Lines),
) -> Vec<ChunkPart> {
    let (held, enclosing): (Vec<usize>, Option<&str>) = match chunk.kind {
        ChunkKind::Block => (
            outermost(defs, g),
            g.within.map(|w| defs[w].signature.as_str()),
        ),
        ChunkKind::Def(_) => match outermost(defs, g).as_slice() {
            [container] => {
                let members: Vec<usize> = starting_in(defs, g)
                    .filter(|&i| defs[i].parent == Some(*container))
                    .collect();
                if members.len() < MIN_MEMBERS {
                    return Vec::new();
                }
                (members, Some(defs[*container].signature.as_str()))
            }
            _ => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    held.into_iter()
        .filter_map(|d| {
            let def = &defs[d];
            // A definition's own segment carries its leading comments.
            let range = segments[g.segments.clone()]
                .iter()
                .find(|seg| seg.def == Some(d))
                .map_or((def.start_byte, def.end_byte), |seg| (seg.start, seg.end));
            let named = (def.kind, def.qualified_name.as_str());
            part_of(chunk, path, text, lines, range, named, enclosing)
        })
        .take(MAX_PARTS)
        .collect()
}

/// Members a container chunk must hold for them to get vectors of their own.
const MIN_MEMBERS: usize = 2;

/// Definitions that start in a group, as a range of `defs` (sorted by start, so contiguous).
fn starting_in(defs: &[Definition], g: &Group) -> std::ops::Range<usize> {
    let first = defs.partition_point(|d| d.start_byte < g.start);
    let last = defs.partition_point(|d| d.start_byte < g.end);
    first..last
}

/// The definitions a group holds whole that no other definition it holds encloses.
fn outermost(defs: &[Definition], g: &Group) -> Vec<usize> {
    let inside = |d: &Definition| d.start_byte >= g.start && d.end_byte <= g.end;
    starting_in(defs, g)
        .filter(|&i| inside(&defs[i]) && defs[i].parent.is_none_or(|p| !inside(&defs[p])))
        .collect()
}

/// Names a group after the definitions it holds, or the container it is a piece of.
fn head(defs: &[Definition], g: &Group) -> ChunkHead {
    let outermost = outermost(defs, g);
    let symbols = defs[starting_in(defs, g)]
        .iter()
        .map(|d| d.qualified_name.clone())
        .collect();
    let enclosing_of = |d: Option<usize>| d.map(|p| defs[p].signature.clone());
    match outermost.as_slice() {
        [one] if !g.mixed => {
            let d = &defs[*one];
            ChunkHead {
                kind: ChunkKind::Def(d.kind),
                name: Some(d.name.clone()),
                qualified_name: Some(d.qualified_name.clone()),
                symbols,
                enclosing: enclosing_of(d.parent),
            }
        }
        [] => match g.within {
            Some(w) => ChunkHead {
                kind: ChunkKind::Def(defs[w].kind),
                name: Some(defs[w].name.clone()),
                qualified_name: Some(defs[w].qualified_name.clone()),
                symbols,
                enclosing: enclosing_of(defs[w].parent),
            },
            None => ChunkHead {
                kind: ChunkKind::Code,
                name: None,
                qualified_name: None,
                symbols,
                enclosing: None,
            },
        },
        _ => ChunkHead {
            kind: ChunkKind::Block,
            name: None,
            qualified_name: None,
            symbols,
            enclosing: enclosing_of(g.within),
        },
    }
}
