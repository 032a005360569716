//! Embedders that run somewhere else (an HTTP server, a JS function): what they share.
//!
//! A [`Backend`] makes one raw call; [`RemoteEmbedder`] learns the model's width from a probe
//! call when it connects, splits work into calls the provider accepts, and checks every answer
//! (one vector per text, the same width, finite, not zero) before L2-normalising it. Providers
//! differ in wire format only.
//!
//! Models trained on asymmetric pairs want a prefix naming what a text is (`query: ` and
//! `passage: ` for e5, `search_query: ` and `search_document: ` for nomic-embed-text): without
//! it they embed queries and documents as if alike and rank worse. [`InputPrefixes`] puts them
//! before every text on the way out, the query one on search queries and the document one on
//! everything stored. The document prefix decides what the stored vectors mean, so it is part
//! of the model's identity (a short hash after the name); the query prefix is not (changing it
//! re-embeds nothing).

use crate::embed::{Embedder, EmbedderId};
use crate::error::{Error, Result};

/// Text put before every input of a remote model, by what the input is. Empty: nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputPrefixes {
    /// Before each search query (`query: `, `search_query: `, or an instruction such as
    /// `Represent this sentence for searching relevant passages: `).
    pub query: String,
    /// Before each text stored with a vector: chunks, definitions, memories (`passage: `,
    /// `search_document: `).
    pub document: String,
}

/// Bytes of one prefix, at most: an instruction is a sentence, not a document.
pub const MAX_PREFIX_BYTES: usize = 1024;

impl InputPrefixes {
    /// Checks both prefixes: none blank (only whitespace, which would change the identity
    /// and nothing else) or longer than [`MAX_PREFIX_BYTES`]. `names` are the two prefixes'
    /// names in messages (option names or environment variables).
    pub fn validated(self, names: [&str; 2]) -> Result<Self> {
        for (name, value) in names.iter().zip([&self.query, &self.document]) {
            if !value.is_empty() && value.trim().is_empty() {
                return Err(Error::invalid(format!(
                    "{name} must not be only whitespace (leave it unset for no prefix)"
                )));
            }
            if value.len() > MAX_PREFIX_BYTES {
                return Err(Error::invalid(format!(
                    "{name} must be at most {MAX_PREFIX_BYTES} bytes, got {}",
                    value.len()
                )));
            }
        }
        Ok(self)
    }

    /// The model name stored with the vectors: `model` itself without a document prefix, else
    /// `model+d` and 8 hex digits of the prefix's SHA-256 (vectors embedded with another
    /// prefix are another model's).
    pub fn identity(&self, model: &str) -> String {
        if self.document.is_empty() {
            return model.to_owned();
        }
        use sha2::Digest;
        let digest = sha2::Sha256::digest(self.document.as_bytes());
        let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        format!("{model}+d{hex}")
    }
}

/// What one call of a provider may carry.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Texts per call.
    pub max_texts: usize,
    /// Bytes of text per call (a batch is cut before this is passed, unless one text does).
    pub max_bytes: usize,
}

/// One provider's raw call.
pub trait Backend: Send + Sync {
    /// `ollama`, `openai` or `callback`: the provider part of the model's identity.
    fn provider(&self) -> &'static str;
    /// The model's name as the provider knows it.
    fn model(&self) -> &str;
    /// The width asked of the provider, which its answers must have.
    fn dimensions(&self) -> Option<usize>;
    /// How much one call may carry.
    fn limits(&self) -> BatchLimits;
    /// Where the provider is, for messages (a URL, or `a JS function`).
    fn location(&self) -> String;
    /// One vector per text, in order, as the provider gave them (not yet checked).
    fn call(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

/// The text of the call that learns a model's width when it connects.
const PROBE_TEXT: &str = "engram embedding probe";

/// An embedder backed by a remote provider.
pub struct RemoteEmbedder {
    id: EmbedderId,
    backend: Box<dyn Backend>,
    prefixes: InputPrefixes,
}

impl RemoteEmbedder {
    /// Connects: one probe call learns the width (and proves the provider answers).
    /// `ENGRAM_MODEL_UNAVAILABLE` when it does not (`ENGRAM_CALLBACK` when the app's function
    /// threw, rejected or timed out). Blocking. `prefixes` go before the texts of every later
    /// call (not the probe's, which only learns the width).
    pub fn connect(backend: Box<dyn Backend>, prefixes: InputPrefixes) -> Result<Self> {
        let what = format!(
            "{} model '{}' at {}",
            backend.provider(),
            backend.model(),
            backend.location()
        );
        let unusable = |cause: &Error| match cause {
            // Already says what to do (pull the model, set the key).
            Error::ModelUnavailable(why) => Error::ModelUnavailable(why.clone()),
            // The app's own function threw, rejected or timed out: its error is the answer
            // (`ENGRAM_CALLBACK`), at the first call as at any later one.
            Error::Callback(why) => Error::Callback(why.clone()),
            _ => Error::ModelUnavailable(format!("{what} is not usable: {cause}")),
        };
        let probe = backend.call(&[PROBE_TEXT]).map_err(|e| unusable(&e))?;
        // The width asked for is the identity even if the server answered another one: the
        // check below then reports that it ignored the request.
        let dims = match probe.as_slice() {
            [vector] if !vector.is_empty() => backend.dimensions().unwrap_or(vector.len()),
            [_] => {
                return Err(unusable(&Error::Embedding(
                    "answered an empty vector".to_owned(),
                )))
            }
            _ => {
                return Err(unusable(&Error::Embedding(format!(
                    "answered {} vectors for one text",
                    probe.len()
                ))))
            }
        };
        let id = EmbedderId {
            provider: backend.provider().to_owned(),
            model: prefixes.identity(backend.model()),
            dims,
        };
        let embedder = Self {
            id,
            backend,
            prefixes,
        };
        // The probe's answer passes the checks every answer must pass.
        embedder.check(probe, 1).map_err(|e| unusable(&e))?;
        Ok(embedder)
    }

    /// Checks a call's answer for `expected` texts and normalises it.
    fn check(&self, mut vectors: Vec<Vec<f32>>, expected: usize) -> Result<Vec<Vec<f32>>> {
        let what = || {
            format!(
                "{} model '{}' at {}",
                self.id.provider,
                self.id.model,
                self.backend.location()
            )
        };
        if vectors.len() != expected {
            return Err(Error::Embedding(format!(
                "{} answered {} vectors for {expected} texts",
                what(),
                vectors.len()
            )));
        }
        for vector in &mut vectors {
            if vector.len() != self.id.dims {
                let hint = match self.backend.dimensions() {
                    Some(asked) if asked != vector.len() => format!(
                        " although {asked} were asked for (the server may not support \
                         `dimensions`: leave it unset)"
                    ),
                    _ => String::new(),
                };
                return Err(Error::Embedding(format!(
                    "{} answered a vector of {} dimensions, expected {}{hint}",
                    what(),
                    vector.len(),
                    self.id.dims
                )));
            }
            let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            if !norm.is_finite() || norm == 0.0 {
                return Err(Error::Embedding(format!(
                    "{} answered a zero or non-finite vector",
                    what()
                )));
            }
            vector.iter_mut().for_each(|x| *x /= norm);
        }
        Ok(vectors)
    }
}

impl Embedder for RemoteEmbedder {
    fn id(&self) -> &EmbedderId {
        &self.id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_prefixed(&self.prefixes.document, texts)
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_prefixed(&self.prefixes.query, texts)
    }
}

impl RemoteEmbedder {
    /// Every text with `prefix` before it, in calls within the provider's limits.
    fn embed_prefixed(&self, prefix: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if !prefix.is_empty() {
            let prefixed: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
            let refs: Vec<&str> = prefixed.iter().map(String::as_str).collect();
            return self.embed_prefixed("", &refs);
        }
        let mut out = Vec::with_capacity(texts.len());
        for batch in batches(texts, self.backend.limits()) {
            let answer = self.backend.call(batch)?;
            out.extend(self.check(answer, batch.len())?);
        }
        Ok(out)
    }
}

/// Consecutive runs of `texts` within `limits` (a text larger than the byte limit goes alone).
fn batches<'a, 't>(texts: &'a [&'t str], limits: BatchLimits) -> Vec<&'a [&'t str]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, text) in texts.iter().enumerate() {
        let full = i - start >= limits.max_texts.max(1) || bytes + text.len() > limits.max_bytes;
        if full && i > start {
            out.push(&texts[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += text.len();
    }
    if start < texts.len() {
        out.push(&texts[start..]);
    }
    out
}

/// A JSON array of numbers as a vector (`None` for anything else).
pub(crate) fn number_array(value: &serde_json::Value) -> Option<Vec<f32>> {
    value
        .as_array()?
        .iter()
        .map(|x| x.as_f64().map(|x| x as f32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A backend answering `[len, 1, 0...]` per text (or a fixed wrong answer).
    struct Lengths {
        dims: usize,
        calls: AtomicUsize,
        wrong_after_probe: Option<Vec<Vec<f32>>>,
    }

    impl Backend for Lengths {
        fn provider(&self) -> &'static str {
            "callback"
        }
        fn model(&self) -> &str {
            "lengths"
        }
        fn dimensions(&self) -> Option<usize> {
            None
        }
        fn limits(&self) -> BatchLimits {
            BatchLimits {
                max_texts: 2,
                max_bytes: 1000,
            }
        }
        fn location(&self) -> String {
            "a test".into()
        }
        fn call(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            let n = self.calls.fetch_add(1, Ordering::Relaxed);
            if let (Some(wrong), true) = (&self.wrong_after_probe, n > 0) {
                return Ok(wrong.clone());
            }
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0; self.dims];
                    v[0] = t.len() as f32;
                    v[1] = 1.0;
                    v
                })
                .collect())
        }
    }

    fn lengths(wrong: Option<Vec<Vec<f32>>>) -> RemoteEmbedder {
        lengths_with(wrong, InputPrefixes::default())
    }

    fn lengths_with(wrong: Option<Vec<Vec<f32>>>, prefixes: InputPrefixes) -> RemoteEmbedder {
        RemoteEmbedder::connect(
            Box::new(Lengths {
                dims: 3,
                calls: AtomicUsize::new(0),
                wrong_after_probe: wrong,
            }),
            prefixes,
        )
        .unwrap()
    }

    /// The length a [`Lengths`] answer encodes (its first component over the second).
    fn length_of(v: &[f32]) -> f32 {
        v[0] / v[1]
    }

    #[test]
    fn prefixes_go_before_queries_and_documents_and_the_document_one_names_the_model() {
        let prefixes = InputPrefixes {
            query: "query: ".into(),
            document: "passage: ".into(),
        };
        let embedder = lengths_with(None, prefixes.clone());
        // "ab" is 2 bytes; "passage: ab" 11, "query: ab" 9.
        assert_eq!(length_of(&embedder.embed(&["ab"]).unwrap()[0]), 11.0);
        assert_eq!(length_of(&embedder.embed_queries(&["ab"]).unwrap()[0]), 9.0);
        // Another document prefix is another identity; another query prefix is not.
        let key = embedder.id().key();
        assert!(
            key.starts_with("callback:lengths+d") && key.ends_with(":3"),
            "{key}"
        );
        let other_query = InputPrefixes {
            query: "search: ".into(),
            ..prefixes.clone()
        };
        assert_eq!(lengths_with(None, other_query).id().key(), key);
        let other_document = InputPrefixes {
            document: "doc: ".into(),
            ..prefixes
        };
        assert_ne!(lengths_with(None, other_document).id().key(), key);
        // Without prefixes, texts go as they are, under the plain name.
        let plain = lengths(None);
        assert_eq!(plain.id().key(), "callback:lengths:3");
        assert_eq!(length_of(&plain.embed_queries(&["ab"]).unwrap()[0]), 2.0);
    }

    #[test]
    fn answers_are_split_checked_and_normalised_in_order() {
        let embedder = lengths(None);
        assert_eq!(embedder.id().key(), "callback:lengths:3");
        let vectors = embedder.embed(&["abc", "a", "abcd", "ab", "x"]).unwrap();
        assert_eq!(vectors.len(), 5);
        for (v, len) in vectors.iter().zip([3.0f32, 1.0, 4.0, 2.0, 1.0]) {
            let norm = (len * len + 1.0).sqrt();
            assert!((v[0] - len / norm).abs() < 1e-6 && (v[1] - 1.0 / norm).abs() < 1e-6);
        }
    }

    #[test]
    fn wrong_answers_are_errors() {
        for wrong in [
            vec![vec![1.0, 0.0, 0.0]],                    // too few
            vec![vec![1.0, 0.0], vec![1.0, 0.0]],         // too narrow
            vec![vec![0.0; 3], vec![1.0, 0.0, 0.0]],      // zero
            vec![vec![f32::NAN, 0.0, 0.0], vec![1.0; 3]], // not finite
        ] {
            let err = lengths(Some(wrong)).embed(&["a", "b"]).unwrap_err();
            assert_eq!(err.code(), "ENGRAM_EMBEDDING", "{err}");
        }
    }

    #[test]
    fn blank_or_oversized_prefixes_are_refused_by_name() {
        let names = ["q", "d"];
        let ok = InputPrefixes {
            query: "query: ".into(),
            document: String::new(),
        };
        assert_eq!(ok.clone().validated(names).unwrap(), ok);
        let blank = InputPrefixes {
            query: String::new(),
            document: "  ".into(),
        };
        let err = blank.validated(names).unwrap_err();
        assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
        assert!(
            err.to_string().contains("d must not be only whitespace"),
            "{err}"
        );
        let long = InputPrefixes {
            query: "x".repeat(MAX_PREFIX_BYTES + 1),
            document: String::new(),
        };
        assert!(long
            .validated(names)
            .unwrap_err()
            .to_string()
            .contains("q must be at most"));
    }

    #[test]
    fn batches_respect_both_limits() {
        let limits = BatchLimits {
            max_texts: 3,
            max_bytes: 10,
        };
        let texts = ["aaaa", "bbbb", "cc", "d", "e", "f", "gggggggggggggg", "h"];
        let sizes: Vec<usize> = batches(&texts, limits).iter().map(|b| b.len()).collect();
        // 4+4 fits, +2 would reach 10 (allowed), then the count limit; the long text goes alone.
        assert_eq!(sizes, vec![3, 3, 1, 1]);
        assert!(batches(&[], limits).is_empty());
    }
}
