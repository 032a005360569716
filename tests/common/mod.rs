//! What several test crates share: a tiny HTTP/1.1 server speaking JSON, the stand-in for
//! model servers that cannot run here (OpenAI, Ollama, Cohere-style rerankers), and the check
//! for the local model.

// Each test crate uses its own part of this module.
#![allow(dead_code)]

pub mod sqld;

/// splitmix64: deterministic and dependency-free, so that a failing seed replays.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// Copies the directory tree `from` into `to` (a fixture project into a temp dir).
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Whether the local embedding model is installed; without it a test returns early (and says
/// why), except under CI, which must provide it.
pub fn model_available() -> bool {
    match engram::embed::locate(None) {
        Ok(_) => true,
        Err(err) if std::env::var_os("CI").is_some() => panic!("CI must provide the model: {err}"),
        Err(err) => {
            eprintln!("skipping: {err}");
            false
        }
    }
}

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status, extra headers, JSON body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

pub fn ok(body: Value) -> Answer {
    Answer {
        status: 200,
        headers: Vec::new(),
        body,
    }
}

pub type Handler = dyn Fn(&Seen, usize) -> Answer + Send + Sync;

/// A server on a free loopback port answering with `handler(request, index of the request)`.
pub struct Server {
    pub url: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub fn start(handler: impl Fn(&Seen, usize) -> Answer + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let handler: Arc<Handler> = Arc::new(handler);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, handler) = (log.clone(), handler.clone());
                std::thread::spawn(move || serve(stream, &log, &*handler));
            }
        });
        Server { url, seen }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Reads one HTTP/1.1 request's line and headers: the path and the headers as sent, or `None`
/// when the client closed the connection.
pub fn read_head(reader: &mut impl BufRead) -> Option<(String, Vec<(String, String)>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            return Some((path, headers));
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
}

/// Serves one connection: requests until the client closes it.
fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>, handler: &Handler) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let Some((path, headers)) = read_head(&mut reader) else {
            return;
        };
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .expect("requests carry a Content-Length");
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let seen = Seen {
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap(),
        };
        let index = {
            let mut log = log.lock().unwrap();
            log.push(seen.clone());
            log.len() - 1
        };
        let answer = handler(&seen, index);
        let body = answer.body.to_string();
        let mut head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            answer.status,
            body.len()
        );
        for (name, value) in answer.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(body.as_bytes()).is_err()
        {
            return;
        }
    }
}
