//! The BERT encoder behind the built-in model (all-MiniLM-L6-v2): a plain-Rust f32 forward pass
//! over ragged batches, with the `gemm` crate for every matrix product.
//!
//! Why not a tensor framework: measured here, candle spent ~40% of the time outside its matrix
//! products (allocating per op, erf and exp one element at a time, padding every sequence to the
//! batch's longest). Owning the pass lets us
//! - pack a batch's sequences end to end with no padding at all: the linear layers run over the
//!   real tokens only, and attention runs per sequence over its own length;
//! - pre-transpose the weights once and fuse the query/key/value projections into one product;
//! - fold the bias into the product (the destination starts as the bias row) and fuse residual +
//!   layer norm, GELU and softmax into single vectorisable passes.
//!
//! The caller runs one [`BertEncoder::encode`] per thread; nothing here spawns threads.

use super::half_panels::HalfPanels;
use super::int8_panels::Int8Panels;
use super::tensors::{Safetensors, TensorSource, WordTable, WORD_EMBEDDINGS};
use crate::error::{Error, Result};
use gemm::Parallelism;

/// The parts of a BERT `config.json` the encoder needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct BertConfig {
    /// Width of every hidden state (384 for MiniLM-L6).
    pub hidden_size: usize,
    /// Transformer layers (6 for MiniLM-L6).
    pub num_hidden_layers: usize,
    /// Attention heads per layer; `hidden_size` must divide evenly among them.
    pub num_attention_heads: usize,
    /// Longest input the position table covers.
    pub max_position_embeddings: usize,
    /// Epsilon of every layer norm.
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    /// Activation of the feed-forward layer; only the exact (erf) GELU is supported.
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
}

fn default_layer_norm_eps() -> f64 {
    1e-12
}

fn default_hidden_act() -> String {
    "gelu".to_owned()
}

/// Inputs of at most this many rows (tokens) go through the few-row panels (int8 or f16) when
/// the CPU has them: a query, up to the default token limit. Measured on one query against
/// `gemm`'s f32 kernels split across two threads, f16: 42 words (~55 tokens) 14.6 against
/// 22.7 ms, 100 words (128 tokens) 35.5 against 42.9 ms; while the other core is busy (as
/// recall's keyword SQL keeps it) about half the time up to 60 words, 0.84x at 128 tokens; int8
/// takes 0.6-0.7x of f16's time (`docs/PERFORMANCE.md`). At 32 rows recall's p99 was set by
/// queries just past it. Batches of bulk embedding are far larger and keep the f32 kernels.
const FEW_ROWS: usize = 128;

/// Few-row products of at least this many rows split their rows across two threads when the
/// call allows it (`threads` > 1): a query this long takes several milliseconds, longer than
/// recall's keyword SQL keeps the other core busy.
const SPLIT_ROWS: usize = 40;

/// Whether a product of `rows` rows goes through the few-row panels split across threads.
fn splits_rows(parallelism: Parallelism, rows: usize) -> bool {
    matches!(parallelism, Parallelism::Rayon(n) if n > 1) && (SPLIT_ROWS..=FEW_ROWS).contains(&rows)
}

/// The weights that products of at most [`FEW_ROWS`] rows (a query) run through. Each falls back
/// to the next one down where the CPU lacks its kernel: int8 needs AVX-512 VNNI, f16 needs AVX2,
/// FMA and F16C; batches of more rows always use the f32 weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FewTokenWeights {
    /// The f32 weights, through `gemm` like every batch.
    F32,
    /// f16 copies of the weights (21 MB more for MiniLM-L6): see `half_panels`.
    F16,
    /// int8 copies quantised per output column, inputs quantised per row and block of 64 (10.6 MB
    /// more): see `int8_panels`.
    Int8,
}

impl FewTokenWeights {
    /// The kind named `"int8"`, `"f16"` or `"f32"` (the spelling of the JS option
    /// `queryPrecision` and of the benches' switches).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "int8" => Some(Self::Int8),
            "f16" => Some(Self::F16),
            "f32" => Some(Self::F32),
            _ => None,
        }
    }
}

/// A few-row copy of a linear layer's weights.
enum FewRowPanels {
    Half(HalfPanels),
    Int8(Int8Panels),
}

impl FewRowPanels {
    /// The panels `wanted` asks for, or the nearest kind this CPU runs (none: use f32).
    fn build(
        wanted: FewTokenWeights,
        weight_t: &[f32],
        inputs: usize,
        outputs: usize,
    ) -> Option<Self> {
        if wanted == FewTokenWeights::Int8 && Int8Panels::supported() {
            return Some(Self::Int8(Int8Panels::from_transposed(
                weight_t, inputs, outputs,
            )));
        }
        (wanted != FewTokenWeights::F32 && HalfPanels::supported())
            .then(|| Self::Half(HalfPanels::from_transposed(weight_t, inputs, outputs)))
    }

    fn multiply_add(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        match self {
            Self::Half(panels) => panels.multiply_add(x, rows, out),
            Self::Int8(panels) => panels.multiply_add(x, rows, out),
        }
    }
}

/// `y = x W^T + b` with `W^T` stored `inputs x outputs`, row-major.
struct Linear {
    weight_t: Vec<f32>,
    /// The same weights for products of a few rows, if the CPU runs their kernel.
    few_rows: Option<FewRowPanels>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Linear {
    /// `few_rows`: the copy of the weights products of a few rows use.
    fn new(
        weight_t: Vec<f32>,
        bias: Vec<f32>,
        inputs: usize,
        outputs: usize,
        few_rows: FewTokenWeights,
    ) -> Self {
        let few_rows = FewRowPanels::build(few_rows, &weight_t, inputs, outputs);
        Self {
            weight_t,
            few_rows,
            bias,
            inputs,
            outputs,
        }
    }

    /// Writes `rows` outputs into `out` (`rows x outputs`).
    fn forward(&self, x: &[f32], rows: usize, out: &mut [f32], parallelism: Parallelism) {
        assert!(x.len() >= rows * self.inputs && out.len() >= rows * self.outputs);
        for row in out[..rows * self.outputs].chunks_exact_mut(self.outputs) {
            row.copy_from_slice(&self.bias);
        }
        if let Some(panels) = self.few_rows.as_ref().filter(|_| rows <= FEW_ROWS) {
            if splits_rows(parallelism, rows) {
                // Two halves of the rows, one per core: the second is taken only by an idle
                // worker (work stealing), so a core busy elsewhere costs the wait, not a stall.
                let top = rows / 2;
                let (x_top, x_bottom) = x.split_at(top * self.inputs);
                let (out_top, out_bottom) = out.split_at_mut(top * self.outputs);
                rayon::join(
                    || panels.multiply_add(x_top, top, out_top),
                    || panels.multiply_add(x_bottom, rows - top, out_bottom),
                );
            } else {
                panels.multiply_add(x, rows, out);
            }
            return;
        }
        // SAFETY: the slices hold `rows x inputs`, `inputs x outputs` and `rows x outputs`
        // elements (asserted above; `weight_t` by construction), with the strides given.
        unsafe {
            gemm::gemm(
                rows,
                self.outputs,
                self.inputs,
                out.as_mut_ptr(),
                1,
                self.outputs as isize,
                true,
                x.as_ptr(),
                1,
                self.inputs as isize,
                self.weight_t.as_ptr(),
                1,
                self.outputs as isize,
                1.0,
                1.0,
                false,
                false,
                false,
                parallelism,
            );
        }
    }
}

struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

impl LayerNorm {
    /// `x = norm(x + residual)`, row by row (`residual` may be empty for a plain norm).
    fn add_and_normalise(&self, x: &mut [f32], residual: &[f32]) {
        add_and_normalise(x, residual, &self.gamma, &self.beta, self.eps);
    }
}

widest_simd! {
    /// `x = layer_norm(x + residual)` row by row, rows `gamma.len()` wide.
    fn add_and_normalise(x: &mut [f32], residual: &[f32], gamma: &[f32], beta: &[f32], eps: f32)
        => add_and_normalise_generic
}

#[inline(always)]
fn add_and_normalise_generic(
    x: &mut [f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    {
        let width = gamma.len();
        for (r, row) in x.chunks_exact_mut(width).enumerate() {
            if !residual.is_empty() {
                for (v, res) in row.iter_mut().zip(&residual[r * width..(r + 1) * width]) {
                    *v += res;
                }
            }
            let mean = lane_sum(row, |v| v) / width as f32;
            let var = lane_sum(row, |v| (v - mean) * (v - mean)) / width as f32;
            let inv = 1.0 / (var + eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

struct Layer {
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// A loaded BERT encoder.
pub struct BertEncoder {
    hidden: usize,
    heads: usize,
    max_positions: usize,
    vocab: usize,
    word_embeddings: WordTable,
    position_embeddings: Vec<f32>,
    token_type_row: Vec<f32>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
}

/// A [`TensorSource`] with the helpers that build the encoder's parts from it.
struct Weights<'a> {
    tensors: &'a dyn TensorSource,
    few_rows: FewTokenWeights,
}

impl Weights<'_> {
    fn get(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)> {
        self.tensors.tensor(name)
    }

    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let (values, shape) = self.get(name)?;
        if shape != [len] {
            return Err(self.bad_shape(name, &shape, &[len]));
        }
        Ok(values)
    }

    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Vec<f32>> {
        let (values, shape) = self.get(name)?;
        if shape != [rows, cols] {
            return Err(self.bad_shape(name, &shape, &[rows, cols]));
        }
        Ok(values)
    }

    fn bad_shape(&self, name: &str, found: &[usize], expected: &[usize]) -> Error {
        Error::ModelUnavailable(format!(
            "{}: tensor '{name}' has shape {found:?}, config implies {expected:?}",
            self.tensors.describe()
        ))
    }

    /// A `torch.nn.Linear` (weight `outputs x inputs`), transposed for `x W^T`.
    fn linear(&self, prefix: &str, inputs: usize, outputs: usize) -> Result<Linear> {
        let (weight_t, bias) = self.transposed(prefix, inputs, outputs)?;
        Ok(Linear::new(weight_t, bias, inputs, outputs, self.few_rows))
    }

    /// A linear layer's weight, transposed to `inputs x outputs`, and its bias.
    fn transposed(
        &self,
        prefix: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        let weight = self.matrix(&format!("{prefix}.weight"), outputs, inputs)?;
        let mut weight_t = vec![0.0; inputs * outputs];
        for o in 0..outputs {
            for i in 0..inputs {
                weight_t[i * outputs + o] = weight[o * inputs + i];
            }
        }
        Ok((weight_t, self.vector(&format!("{prefix}.bias"), outputs)?))
    }

    /// Query, key and value projections side by side: one `hidden x 3*hidden` product.
    fn fused_qkv(&self, prefix: &str, hidden: usize) -> Result<Linear> {
        let parts = ["query", "key", "value"]
            .iter()
            .map(|name| self.transposed(&format!("{prefix}.{name}"), hidden, hidden))
            .collect::<Result<Vec<_>>>()?;
        let mut weight_t = Vec::with_capacity(hidden * 3 * hidden);
        for i in 0..hidden {
            for (part, _) in &parts {
                weight_t.extend_from_slice(&part[i * hidden..(i + 1) * hidden]);
            }
        }
        let bias = parts.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        Ok(Linear::new(
            weight_t,
            bias,
            hidden,
            3 * hidden,
            self.few_rows,
        ))
    }

    fn layer_norm(&self, prefix: &str, width: usize, eps: f64) -> Result<LayerNorm> {
        Ok(LayerNorm {
            gamma: self.vector(&format!("{prefix}.weight"), width)?,
            beta: self.vector(&format!("{prefix}.bias"), width)?,
            eps: eps as f32,
        })
    }
}

/// Scratch buffers of one encode call, sized for its token count.
struct Scratch {
    x: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    x1: Vec<f32>,
    inner: Vec<f32>,
    scores: Vec<f32>,
}

impl BertEncoder {
    /// Builds the encoder from a parsed `config.json` and the bytes of `model.safetensors`
    /// (f32 weights, with or without a `bert.` name prefix). `source` names the file in errors.
    /// `few_rows`: the weights inputs of a few tokens (queries) run through where the CPU
    /// allows (see [`FewTokenWeights`]).
    pub fn load(
        config: &BertConfig,
        safetensors_bytes: &[u8],
        source: &str,
        few_rows: FewTokenWeights,
    ) -> Result<Self> {
        Self::from_tensors(
            config,
            &Safetensors::parse(safetensors_bytes, source)?,
            few_rows,
        )
    }

    /// Builds the encoder from `config` and the tensors of any [`TensorSource`].
    pub fn from_tensors(
        config: &BertConfig,
        tensors: &dyn TensorSource,
        few_rows: FewTokenWeights,
    ) -> Result<Self> {
        if config.hidden_act != "gelu" {
            return Err(Error::ModelUnavailable(format!(
                "activation '{}' is not supported (only BERT's exact 'gelu')",
                config.hidden_act
            )));
        }
        let hidden = config.hidden_size;
        let heads = config.num_attention_heads;
        if heads == 0 || hidden == 0 || !hidden.is_multiple_of(heads) {
            return Err(Error::ModelUnavailable(format!(
                "hidden size {hidden} does not split into {heads} attention heads"
            )));
        }
        let weights = Weights { tensors, few_rows };
        let (word_embeddings, word_shape) = tensors.word_table()?;
        if word_shape.len() != 2 || word_shape[1] != hidden {
            return Err(weights.bad_shape(
                WORD_EMBEDDINGS,
                &word_shape,
                &[word_shape.first().copied().unwrap_or(0), hidden],
            ));
        }
        let max_positions = config.max_position_embeddings;
        let eps = config.layer_norm_eps;
        let (token_types, token_shape) = weights.get("embeddings.token_type_embeddings.weight")?;
        if token_shape.len() != 2 || token_shape[1] != hidden || token_shape[0] == 0 {
            return Err(weights.bad_shape(
                "embeddings.token_type_embeddings.weight",
                &token_shape,
                &[1, hidden],
            ));
        }
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let p = format!("encoder.layer.{i}");
                let (_, inter_shape) = weights.get(&format!("{p}.intermediate.dense.bias"))?;
                let inner = inter_shape.first().copied().unwrap_or(0);
                if inner == 0 {
                    return Err(Error::ModelUnavailable(format!(
                        "{}: layer {i} has an empty feed-forward layer",
                        tensors.describe()
                    )));
                }
                Ok(Layer {
                    qkv: weights.fused_qkv(&format!("{p}.attention.self"), hidden)?,
                    attention_out: weights.linear(
                        &format!("{p}.attention.output.dense"),
                        hidden,
                        hidden,
                    )?,
                    attention_norm: weights.layer_norm(
                        &format!("{p}.attention.output.LayerNorm"),
                        hidden,
                        eps,
                    )?,
                    intermediate: weights.linear(
                        &format!("{p}.intermediate.dense"),
                        hidden,
                        inner,
                    )?,
                    output: weights.linear(&format!("{p}.output.dense"), inner, hidden)?,
                    output_norm: weights.layer_norm(
                        &format!("{p}.output.LayerNorm"),
                        hidden,
                        eps,
                    )?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            hidden,
            heads,
            max_positions,
            vocab: word_shape[0],
            word_embeddings,
            position_embeddings: weights.matrix(
                "embeddings.position_embeddings.weight",
                max_positions,
                hidden,
            )?,
            // Single-segment input: every token has type 0.
            token_type_row: token_types[..hidden].to_vec(),
            embeddings_norm: weights.layer_norm("embeddings.LayerNorm", hidden, eps)?,
            layers,
        })
    }

    /// Width of the hidden states (and of the pooled embedding).
    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// Longest sequence the position table allows.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Encodes sequences of token ids (each with its `[CLS]`/`[SEP]`, none longer than
    /// [`Self::max_positions`]) packed end to end, and returns each sequence's mean-pooled,
    /// L2-normalised embedding (sentence-transformers' pipeline).
    ///
    /// `threads` > 1 splits each matrix product across that many threads of the global rayon
    /// pool: worth it only for a lone small input (a query), where there is no second batch to
    /// give the other cores.
    pub fn encode(&self, sequences: &[&[u32]], threads: usize) -> Result<Vec<Vec<f32>>> {
        let parallelism = if threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        let h = self.hidden;
        let tokens: usize = sequences.iter().map(|s| s.len()).sum();
        let longest = sequences.iter().map(|s| s.len()).max().unwrap_or(0);
        if longest > self.max_positions {
            return Err(Error::Internal(format!(
                "sequence of {longest} tokens exceeds the model's {} positions",
                self.max_positions
            )));
        }
        if sequences.iter().any(|s| s.is_empty()) {
            return Err(Error::Embedding(
                "the tokenizer produced an empty sequence (it must add [CLS] and [SEP])".to_owned(),
            ));
        }
        if let Some(bad) = sequences
            .iter()
            .flat_map(|s| s.iter())
            .find(|&&id| id as usize >= self.vocab)
        {
            return Err(Error::Embedding(format!(
                "token id {bad} is outside the model's vocabulary of {}",
                self.vocab
            )));
        }
        let inner = self.layers.first().map_or(0, |l| l.intermediate.outputs);
        let mut s = Scratch {
            x: vec![0.0; tokens * h],
            qkv: vec![0.0; tokens * 3 * h],
            context: vec![0.0; tokens * h],
            x1: vec![0.0; tokens * h],
            inner: vec![0.0; tokens * inner],
            scores: vec![0.0; longest * longest],
        };
        self.embed_tokens(sequences, &mut s.x);
        let layers = |s: &mut Scratch| {
            for layer in &self.layers {
                self.layer_forward(layer, sequences, tokens, s, parallelism);
            }
        };
        if splits_rows(parallelism, tokens) {
            // On a pool thread, the products' `rayon::join`s are a push to its own queue
            // instead of a hand-off to the pool and back each (measured: 90 words 9.1 against
            // 9.8 ms alone).
            rayon::scope(|_| layers(&mut s));
        } else {
            layers(&mut s);
        }
        let mut out = Vec::with_capacity(sequences.len());
        let mut offset = 0;
        for seq in sequences {
            let mut pooled = vec![0.0f32; h];
            for row in s.x[offset * h..(offset + seq.len()) * h].chunks_exact(h) {
                for (p, v) in pooled.iter_mut().zip(row) {
                    *p += v;
                }
            }
            let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            pooled.iter_mut().for_each(|v| *v /= norm);
            out.push(pooled);
            offset += seq.len();
        }
        Ok(out)
    }

    /// Word + position + token-type embeddings, layer-normalised, into `x`.
    fn embed_tokens(&self, sequences: &[&[u32]], x: &mut [f32]) {
        let h = self.hidden;
        let mut row = 0;
        for seq in sequences {
            for (pos, &id) in seq.iter().enumerate() {
                let dst = &mut x[row * h..(row + 1) * h];
                self.word_embeddings.row_into(id as usize, dst);
                let position = &self.position_embeddings[pos * h..(pos + 1) * h];
                for ((d, p), t) in dst.iter_mut().zip(position).zip(&self.token_type_row) {
                    // (word + position) + type, in this order: the vectors stored before the
                    // word table could be quantised were summed so, bit for bit.
                    *d = *d + p + t;
                }
                row += 1;
            }
        }
        self.embeddings_norm
            .add_and_normalise(&mut x[..row * h], &[]);
    }

    fn layer_forward(
        &self,
        layer: &Layer,
        sequences: &[&[u32]],
        tokens: usize,
        s: &mut Scratch,
        parallelism: Parallelism,
    ) {
        let h = self.hidden;
        layer.qkv.forward(&s.x, tokens, &mut s.qkv, parallelism);
        self.attention(sequences, &s.qkv, &mut s.context, &mut s.scores);
        layer
            .attention_out
            .forward(&s.context, tokens, &mut s.x1, parallelism);
        layer
            .attention_norm
            .add_and_normalise(&mut s.x1[..tokens * h], &s.x[..tokens * h]);
        let inner = layer.intermediate.outputs;
        layer
            .intermediate
            .forward(&s.x1, tokens, &mut s.inner, parallelism);
        gelu_in_place(&mut s.inner[..tokens * inner]);
        layer
            .output
            .forward(&s.inner, tokens, &mut s.x, parallelism);
        layer
            .output_norm
            .add_and_normalise(&mut s.x[..tokens * h], &s.x1[..tokens * h]);
    }

    /// Multi-head self-attention of each sequence over itself (no padding, so no mask).
    fn attention(
        &self,
        sequences: &[&[u32]],
        qkv: &[f32],
        context: &mut [f32],
        scores: &mut [f32],
    ) {
        let h = self.hidden;
        let dh = h / self.heads;
        let stride = 3 * h;
        let scale = 1.0 / (dh as f32).sqrt();
        let mut offset = 0;
        for seq in sequences {
            let len = seq.len();
            for head in 0..self.heads {
                let q = qkv[offset * stride + head * dh..].as_ptr();
                let k = qkv[offset * stride + h + head * dh..].as_ptr();
                let v = qkv[offset * stride + 2 * h + head * dh..].as_ptr();
                // SAFETY: q/k/v address `len` rows of `dh` values at stride `3h` inside `qkv`
                // (rows offset..offset+len of a `tokens x 3h` buffer); `scores` holds
                // `longest^2 >= len^2` values; the context block is `len` rows of `dh` at
                // stride `h` inside `context`.
                unsafe {
                    // scores = scale * Q K^T  (len x len)
                    gemm::gemm(
                        len,
                        len,
                        dh,
                        scores.as_mut_ptr(),
                        1,
                        len as isize,
                        false,
                        q,
                        1,
                        stride as isize,
                        k,
                        stride as isize,
                        1,
                        0.0,
                        scale,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
                softmax_rows(&mut scores[..len * len], len);
                let ctx = context[offset * h + head * dh..].as_mut_ptr();
                // SAFETY: as above.
                unsafe {
                    // context = P V  (len x dh)
                    gemm::gemm(
                        len,
                        dh,
                        len,
                        ctx,
                        1,
                        h as isize,
                        false,
                        scores.as_ptr(),
                        1,
                        len as isize,
                        v,
                        1,
                        stride as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
            }
            offset += len;
        }
    }
}

/// `exp(x)` for f32 without a libm call, so loops over it vectorise: `2^n * p(r)` with
/// `x = n ln2 + r`, `|r| <= ln2/2`, and a degree-6 polynomial (relative error ~2e-7).
#[inline(always)]
fn fast_exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round to nearest by adding and removing 1.5 * 2^23 (no libm call, so it vectorises).
    const ROUND: f32 = 12_582_912.0;
    let biased = x * std::f32::consts::LOG2_E + ROUND;
    let n = biased - ROUND;
    // ln 2 split in two (Cody-Waite) so `n * LN2_HI` is exact and `r` keeps its precision.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // 2^n from `biased`'s low mantissa bits, which hold n (the exponent's bits above them fall
    // out of the shift): integer operations alone, where the saturating cast `n as i32` kept every
    // loop over this function scalar.
    let scale = f32::from_bits(biased.to_bits().wrapping_add(127) << 23);
    p * scale
}

widest_simd! {
    /// Softmax of each `width`-long row of `rows`, in place.
    fn softmax_rows(rows: &mut [f32], width: usize) => softmax_rows_generic
}

#[inline(always)]
fn softmax_rows_generic(rows: &mut [f32], width: usize) {
    for row in rows.chunks_exact_mut(width) {
        softmax_in_place(row);
    }
}

#[inline(always)]
fn softmax_in_place(row: &mut [f32]) {
    let max = lane_max(row);
    // The exponentials first and their sum after: summed in the same loop, the one running
    // total kept the whole loop scalar (a quarter of a 100-word query's time went here).
    for v in row.iter_mut() {
        *v = fast_exp(*v - max);
    }
    let inv = 1.0 / lane_sum(row, |v| v);
    row.iter_mut().for_each(|v| *v *= inv);
}

/// Independent accumulators of [`lane_sum`] and [`lane_max`]: one register of f32 lanes.
///
/// Why: float addition does not associate, so the compiler keeps a single running total in
/// order and the loop around it stays scalar; sixteen totals, folded at the end, vectorise
/// (and round a little differently, well within the model's tolerance).
const LANES: usize = 16;

/// `sum f(v)` over `values`, in [`LANES`] partial sums.
#[inline(always)]
fn lane_sum(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane += f(v);
        }
    }
    lanes.iter().sum::<f32>() + rest
}

/// The largest of `values` (`-inf` for none), in [`LANES`] partial maxima.
#[inline(always)]
fn lane_max(values: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks
        .remainder()
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    for chunk in chunks {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.max(v);
        }
    }
    lanes.iter().copied().fold(rest, f32::max)
}

/// `erf(x)` as a rational approximation (the one Eigen and TensorFlow use for f32; error a few
/// ulp), branch-free so loops over it vectorise.
#[inline(always)]
fn fast_erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_6e-3;
    p = x2 * p + -1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_473_9e-2;
    p / q
}

widest_simd! {
    /// BERT's exact GELU: `x * (1 + erf(x / sqrt 2)) / 2`, in place.
    fn gelu_in_place(values: &mut [f32]) => gelu_generic
}

#[inline(always)]
fn gelu_generic(values: &mut [f32]) {
    for v in values.iter_mut() {
        *v = 0.5 * *v * (1.0 + fast_erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_erf_matches_reference_values() {
        for (x, want) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (-1.5, -0.966_105_1),
            (6.0, 1.0),
        ] {
            assert!(
                (fast_erf(x) - want).abs() < 1e-6,
                "erf({x}) = {}",
                fast_erf(x)
            );
        }
    }

    #[test]
    fn fast_exp_matches_std() {
        let steps = (0..=3500).map(|i| -87.0 + i as f32 * 0.05);
        for x in [-80.0f32, -10.0, -1.0, -0.3, 0.0, 0.7, 5.0, 20.0, 88.0]
            .into_iter()
            .chain(steps)
        {
            let (got, want) = (fast_exp(x), x.exp());
            assert!(
                ((got - want) / want).abs() < 1e-6,
                "exp({x}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn softmax_sums_to_one() {
        let mut row = [1.0f32, 2.0, 3.0, -100.0];
        softmax_in_place(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(row[2] > row[1] && row[1] > row[0] && row[3] < 1e-30);
    }
}
