//! Downloading the built-in model from a hub: a local HTTP server stands in for the hub and
//! serves its documented layout (`/<repo>/resolve/<revision>/<file>`, large files redirected to
//! a content host, `Range` requests answered with 206), and misbehaves on demand: a connection
//! cut mid-file, a `Range` ignored, bytes that do not match the pinned SHA-256, a missing file.

mod common;

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use engram::embed::download::{download_model, DownloadProgress, HubFile, HubSource};
use sha2::{Digest, Sha256};

const REPO: &str = "acme/tiny-bert";
const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

/// How the stand-in hub misbehaves.
#[derive(Default)]
struct Faults {
    /// Close the connection after this many body bytes of the first weights request.
    cut_weights_after: Option<usize>,
    /// Answer 200 with the whole file to `Range` requests.
    ignore_range: bool,
    /// Serve weights whose bytes differ from the manifest's.
    corrupt_weights: bool,
    /// Send this many body bytes of the first weights request, then go quiet (connection open).
    stall_weights_after: Option<usize>,
    /// Answer a `Range` request with 206 from byte 0 (and a `Content-Range` saying so).
    wrong_range: bool,
}

/// One request as the hub saw it: path and `Range` header.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    range: Option<String>,
}

struct Hub {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Hub {
    fn start(files: HashMap<String, Vec<u8>>, faults: Faults) -> Hub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new((files, faults, AtomicUsize::new(0)));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, state) = (log.clone(), state.clone());
                std::thread::spawn(move || {
                    let (files, faults, weights_requests) = &*state;
                    serve(stream, &log, files, faults, weights_requests)
                });
            }
        });
        Hub { url, seen }
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    log: &Mutex<Vec<Seen>>,
    files: &HashMap<String, Vec<u8>>,
    faults: &Faults,
    weights_requests: &AtomicUsize,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let Some((path, headers)) = common::read_head(&mut reader) else {
            return;
        };
        let range = headers
            .into_iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("range"))
            .map(|(_, value)| value);
        log.lock().unwrap().push(Seen {
            path: path.clone(),
            range: range.clone(),
        });
        let prefix = format!("/{REPO}/resolve/{REVISION}/");
        // Like the hub, large files redirect to a content host (here: another path).
        if let Some(file) = path.strip_prefix(&prefix) {
            if file == "model.safetensors" {
                respond(
                    &mut stream,
                    "302 Found",
                    &[("Location", "/cdn/weights".into())],
                    b"",
                );
                continue;
            }
        }
        let name = if path == "/cdn/weights" {
            "model.safetensors"
        } else if let Some(file) = path.strip_prefix(&prefix) {
            file
        } else {
            respond(&mut stream, "404 Not Found", &[], b"");
            continue;
        };
        let Some(content) = files.get(name) else {
            respond(&mut stream, "404 Not Found", &[], b"");
            continue;
        };
        let mut content = content.clone();
        if name == "model.safetensors" && faults.corrupt_weights {
            content[7] ^= 0xff;
        }
        let start = range
            .as_deref()
            .filter(|_| !faults.ignore_range)
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.strip_suffix('-'))
            .map(|n| {
                if faults.wrong_range {
                    0
                } else {
                    n.parse::<usize>().unwrap()
                }
            });
        let (status, body, extra) = match start {
            Some(s) if s >= content.len() => ("416 Range Not Satisfiable", Vec::new(), vec![]),
            Some(s) => (
                "206 Partial Content",
                content[s..].to_vec(),
                vec![(
                    "Content-Range",
                    format!("bytes {s}-{}/{}", content.len() - 1, content.len()),
                )],
            ),
            None => ("200 OK", content, vec![]),
        };
        let first_weights =
            name == "model.safetensors" && weights_requests.fetch_add(1, Ordering::SeqCst) == 0;
        if let Some(stall) = faults.stall_weights_after.filter(|_| first_weights) {
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body[..stall]);
            let _ = stream.flush();
            // Longer than any test waits: only the client's read timeout ends this request.
            std::thread::sleep(std::time::Duration::from_secs(60));
            return;
        }
        match faults.cut_weights_after.filter(|_| first_weights) {
            Some(cut) => {
                // Announce the whole body, send part of it, hang up.
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body[..cut]);
                let _ = stream.flush();
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return;
            }
            None => respond(&mut stream, status, &extra, &body),
        }
    }
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

/// A model's three files: small JSON configs and 3 MB of weights (several progress reports).
fn model_files() -> HashMap<String, Vec<u8>> {
    let weights: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    HashMap::from([
        ("config.json".to_owned(), br#"{"hidden_size": 8}"#.to_vec()),
        ("tokenizer.json".to_owned(), br#"{"model": {}}"#.to_vec()),
        ("model.safetensors".to_owned(), weights),
    ])
}

fn source(hub: &Hub, files: &HashMap<String, Vec<u8>>) -> HubSource {
    let mut manifest: Vec<HubFile> = files
        .iter()
        .map(|(path, bytes)| HubFile {
            path: path.clone(),
            bytes: bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(bytes)),
        })
        .collect();
    manifest.sort_by(|a, b| a.path.cmp(&b.path));
    HubSource {
        base_url: hub.url.clone(),
        repo: REPO.to_owned(),
        revision: REVISION.to_owned(),
        files: manifest,
        read_timeout: std::time::Duration::from_millis(400),
    }
}

/// Runs a download, collecting every progress report.
fn download(
    source: &HubSource,
    dest: &Path,
    cancel: &AtomicBool,
    cancel_at: Option<u64>,
) -> (
    engram::Result<engram::embed::ModelFiles>,
    Vec<DownloadProgress>,
) {
    let reports = Mutex::new(Vec::new());
    let result = download_model(
        source,
        dest,
        &|p: &DownloadProgress| {
            if cancel_at.is_some_and(|at| p.file == "model.safetensors" && p.file_bytes >= at) {
                cancel.store(true, Ordering::SeqCst);
            }
            reports.lock().unwrap().push(p.clone());
        },
        cancel,
    );
    (result, reports.into_inner().unwrap())
}

fn assert_installed(dest: &Path, files: &HashMap<String, Vec<u8>>) {
    for (name, bytes) in files {
        assert_eq!(&std::fs::read(dest.join(name)).unwrap(), bytes, "{name}");
    }
    // Nothing of the download is left beside the model.
    let leftovers: Vec<_> = std::fs::read_dir(dest.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn downloads_verifies_and_installs_following_redirects() {
    let files = model_files();
    let hub = Hub::start(files.clone(), Faults::default());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("model");
    let source = source(&hub, &files);
    let (result, reports) = download(&source, &dest, &AtomicBool::new(false), None);
    let installed = result.unwrap();
    assert_eq!(installed.dir, dest);
    assert_installed(&dest, &files);
    // Progress only grows, and ends at the total, with several reports for the weights.
    let total = source.total_bytes();
    assert!(reports.windows(2).all(|w| w[0].bytes <= w[1].bytes));
    assert_eq!(reports.last().unwrap().bytes, total);
    assert!(reports
        .iter()
        .all(|r| r.total == total && r.resumed_bytes == 0));
    assert!(
        reports
            .iter()
            .filter(|r| r.file == "model.safetensors")
            .count()
            >= 4
    );
    let paths: Vec<String> = hub.requests().into_iter().map(|s| s.path).collect();
    assert!(paths.contains(&"/cdn/weights".to_owned()), "{paths:?}");
}

#[test]
fn a_cut_connection_resumes_with_a_range_request() {
    let files = model_files();
    let hub = Hub::start(
        files.clone(),
        Faults {
            cut_weights_after: Some(1_200_000),
            ..Faults::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("model");
    let source = source(&hub, &files);
    let (first, _) = download(&source, &dest, &AtomicBool::new(false), None);
    let err = first.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_DOWNLOAD", "{err}");
    assert!(!dest.exists(), "nothing unverified is installed");

    let (second, reports) = download(&source, &dest, &AtomicBool::new(false), None);
    second.unwrap();
    assert_installed(&dest, &files);
    // The Range goes to the hub's URL and follows its redirect to the content host.
    let ranged: Vec<(String, String)> = hub
        .requests()
        .into_iter()
        .filter_map(|s| Some((s.path, s.range?)))
        .collect();
    let weights = format!("/{REPO}/resolve/{REVISION}/model.safetensors");
    let expected = [weights, "/cdn/weights".to_owned()].map(|p| (p, "bytes=1200000-".to_owned()));
    assert_eq!(
        ranged, expected,
        "only the weights resume, from where they stopped"
    );
    // The small files finished in the first run and are not fetched again.
    let config_fetches = hub
        .requests()
        .iter()
        .filter(|s| s.path.ends_with("/config.json"))
        .count();
    assert_eq!(config_fetches, 1);
    let last = reports.last().unwrap();
    assert!(last.resumed_bytes >= 1_200_000, "{last:?}");
}

/// A first run cut off by `faults`, then a second run that must install the right bytes;
/// returns the hub to look at what was asked of it.
fn cut_then_completed(faults: Faults) -> Hub {
    let files = model_files();
    let hub = Hub::start(files.clone(), faults);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("model");
    let source = source(&hub, &files);
    assert!(download(&source, &dest, &AtomicBool::new(false), None)
        .0
        .is_err());
    download(&source, &dest, &AtomicBool::new(false), None)
        .0
        .unwrap();
    assert_installed(&dest, &files);
    hub
}

#[test]
fn a_server_that_ignores_range_still_gives_a_correct_file() {
    let hub = cut_then_completed(Faults {
        cut_weights_after: Some(500_000),
        ignore_range: true,
        ..Faults::default()
    });
    // The second run asked for the rest; the server sent the whole file, written afresh.
    assert!(hub.requests().iter().any(|s| s.range.is_some()));
}

#[test]
fn a_range_answered_from_another_offset_restarts_the_file() {
    let hub = cut_then_completed(Faults {
        cut_weights_after: Some(700_000),
        wrong_range: true,
        ..Faults::default()
    });
    // Asked once with a Range (answered from byte 0), then once afresh without one.
    let weights: Vec<_> = hub
        .requests()
        .into_iter()
        .filter(|s| s.path == "/cdn/weights")
        .map(|s| s.range)
        .collect();
    assert_eq!(weights, [None, Some("bytes=700000-".to_owned()), None]);
}

#[test]
fn a_stalled_server_times_out_and_a_second_install_meanwhile_is_refused() {
    let files = model_files();
    let hub = Hub::start(
        files.clone(),
        Faults {
            stall_weights_after: Some(900_000),
            ..Faults::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("model");
    let source = source(&hub, &files);
    let first = std::thread::scope(|scope| {
        let first = scope.spawn(|| download(&source, &dest, &AtomicBool::new(false), None).0);
        // Wait until the first install holds the download, then try a second one.
        while !hub.requests().iter().any(|s| s.path == "/cdn/weights") {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let second = download(&source, &dest, &AtomicBool::new(false), None).0;
        assert_eq!(second.unwrap_err().code(), "ENGRAM_CONFLICT");
        first.join().unwrap()
    });
    // The read timeout ends the first one with a coded error, not the server's hang-up.
    let err = first.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_DOWNLOAD", "{err}");
    assert!(err.to_string().contains("timeout"), "{err}");
    download(&source, &dest, &AtomicBool::new(false), None)
        .0
        .unwrap();
    assert_installed(&dest, &files);
}

#[test]
fn a_destination_that_cannot_take_the_model_fails_before_downloading() {
    let files = model_files();
    let hub = Hub::start(files.clone(), Faults::default());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let (result, _) = download(
        &source(&hub, &files),
        dir.path(),
        &AtomicBool::new(false),
        None,
    );
    assert_eq!(result.unwrap_err().code(), "ENGRAM_INVALID_ARG");
    assert!(hub.requests().is_empty(), "nothing was fetched");
}

#[test]
fn bytes_that_do_not_match_the_pinned_sha256_are_refused_and_removed() {
    let files = model_files();
    let hub = Hub::start(
        files.clone(),
        Faults {
            corrupt_weights: true,
            ..Faults::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("model");
    let (result, _) = download(&source(&hub, &files), &dest, &AtomicBool::new(false), None);
    let err = result.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_DOWNLOAD");
    assert!(err.to_string().contains("SHA-256"), "{err}");
    assert!(!dest.exists());
    // The bad file is gone; a later run starts it afresh instead of resuming bad bytes.
    let parts: Vec<_> = walk(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("model.safetensors"))
        .collect();
    assert!(parts.is_empty(), "{parts:?}");
}

#[test]
fn cancelling_keeps_the_partial_file_and_the_next_run_resumes() {
    let files = model_files();
    let hub = Hub::start(files.clone(), Faults::default());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("model");
    let source = source(&hub, &files);
    let cancel = AtomicBool::new(false);
    let (first, _) = download(&source, &dest, &cancel, Some(1_000_000));
    assert_eq!(first.unwrap_err().code(), "ENGRAM_ABORTED");
    assert!(!dest.exists());
    let (second, reports) = download(&source, &dest, &AtomicBool::new(false), None);
    second.unwrap();
    assert_installed(&dest, &files);
    assert!(hub.requests().iter().any(|s| s.range.is_some()));
    assert!(reports.last().unwrap().resumed_bytes >= 1_000_000);
}

#[test]
fn a_missing_file_names_the_status_and_the_layout() {
    let mut files = model_files();
    let hub = Hub::start(files.clone(), Faults::default());
    let mut source = source(&hub, &files);
    source.revision = "not-a-revision".to_owned();
    files.clear();
    let dir = tempfile::tempdir().unwrap();
    let (result, _) = download(
        &source,
        &dir.path().join("model"),
        &AtomicBool::new(false),
        None,
    );
    let err = result.unwrap_err();
    assert_eq!(err.code(), "ENGRAM_DOWNLOAD");
    assert!(err.to_string().contains("HTTP 404"), "{err}");
}

#[test]
fn an_unreachable_hub_fails_with_a_download_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let files = model_files();
    let hub = Hub {
        url: format!("http://127.0.0.1:{port}"),
        seen: Arc::default(),
    };
    let dir = tempfile::tempdir().unwrap();
    let (result, _) = download(
        &source(&hub, &files),
        &dir.path().join("model"),
        &AtomicBool::new(false),
        None,
    );
    assert_eq!(result.unwrap_err().code(), "ENGRAM_DOWNLOAD");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}
