//! Where the encoder's weights come from: a [`TensorSource`] hands out BERT's tensors by their
//! Hugging Face names, whatever file format holds them (a safetensors checkpoint, the quantised
//! e5 file of `e5_file.rs`), so `bert.rs` builds its layers one way for every model.

use super::q4::Q4Rows;
use crate::error::{Error, Result};

/// Name of the word-embedding table (the only tensor a source may keep quantised).
pub const WORD_EMBEDDINGS: &str = "embeddings.word_embeddings.weight";

/// The word-embedding table: one row of `hidden` values per vocabulary entry.
pub enum WordTable {
    /// f32 rows, row-major.
    Dense(Vec<f32>),
    /// q4_0 rows, dequantised when a token is looked up.
    Q4(Q4Rows),
}

impl WordTable {
    /// Row `id` into `out` (`hidden` values).
    pub fn row_into(&self, id: usize, out: &mut [f32]) {
        match self {
            Self::Dense(values) => {
                out.copy_from_slice(&values[id * out.len()..(id + 1) * out.len()])
            }
            Self::Q4(rows) => rows.row_into(id, out),
        }
    }
}

/// BERT's tensors by name (`embeddings.LayerNorm.weight`, `encoder.layer.0.output.dense.bias`,
/// ..., without a `bert.` prefix).
pub trait TensorSource {
    /// The named tensor as f32 values and its shape, or `ENGRAM_MODEL_UNAVAILABLE`.
    fn tensor(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)>;

    /// The word-embedding table and its shape `[vocabulary, hidden]`; by default the f32 tensor
    /// [`WORD_EMBEDDINGS`].
    fn word_table(&self) -> Result<(WordTable, Vec<usize>)> {
        let (values, shape) = self.tensor(WORD_EMBEDDINGS)?;
        Ok((WordTable::Dense(values), shape))
    }

    /// The file the tensors come from, for error messages.
    fn describe(&self) -> &str;
}

/// The tensors of a safetensors checkpoint (f32 only), with or without a `bert.` name prefix.
pub struct Safetensors<'a> {
    file: safetensors::SafeTensors<'a>,
    prefix: &'static str,
    source: &'a str,
}

impl<'a> Safetensors<'a> {
    /// Parses the bytes of a `.safetensors` file; `source` names it in errors.
    pub fn parse(bytes: &'a [u8], source: &'a str) -> Result<Self> {
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| {
            Error::ModelUnavailable(format!("{source} is not a safetensors file: {e}"))
        })?;
        // Checkpoints saved from `BertForX` heads carry a `bert.` prefix; sentence-transformers'
        // do not. Accept both.
        let prefix = if file.tensor(&format!("bert.{WORD_EMBEDDINGS}")).is_ok() {
            "bert."
        } else {
            ""
        };
        Ok(Self {
            file,
            prefix,
            source,
        })
    }
}

impl TensorSource for Safetensors<'_> {
    fn tensor(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)> {
        let full = format!("{}{name}", self.prefix);
        let view = self.file.tensor(&full).map_err(|_| {
            Error::ModelUnavailable(format!(
                "{} has no tensor '{full}': not a BERT checkpoint",
                self.source
            ))
        })?;
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(Error::ModelUnavailable(format!(
                "{}: tensor '{full}' is {:?}; only f32 weights are supported",
                self.source,
                view.dtype()
            )));
        }
        let values = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok((values, view.shape().to_vec()))
    }

    fn describe(&self) -> &str {
        self.source
    }
}
