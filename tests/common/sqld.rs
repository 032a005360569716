//! A real libSQL server for the sync tests: a `sqld` the test starts itself from
//! `ENGRAM_SQLD_BIN` (one per test, restartable), or the running server of
//! `ENGRAM_TEST_SYNC_URL`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback port nothing listens on.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A `sqld` the test started (killed on drop), or the external one of `ENGRAM_TEST_SYNC_URL`.
pub struct Server {
    pub url: String,
    child: Option<Child>,
    bin: Option<PathBuf>,
    data: Option<tempfile::TempDir>,
    port: u16,
}

impl Server {
    /// `None` (with a note on stderr) when no server is available.
    pub fn start(test: &str) -> Option<Server> {
        if let Some(bin) = std::env::var_os("ENGRAM_SQLD_BIN") {
            let data = tempfile::tempdir().unwrap();
            let mut server = Server {
                url: String::new(),
                child: None,
                bin: Some(PathBuf::from(bin)),
                data: Some(data),
                port: closed_port(),
            };
            server.url = format!("http://127.0.0.1:{}", server.port);
            server.spawn();
            return Some(server);
        }
        if let Ok(url) = std::env::var("ENGRAM_TEST_SYNC_URL") {
            return Some(Server {
                url,
                child: None,
                bin: None,
                data: None,
                port: 0,
            });
        }
        eprintln!(
            "skipping {test}: set ENGRAM_SQLD_BIN (a sqld binary) or ENGRAM_TEST_SYNC_URL to run it"
        );
        None
    }

    pub fn spawn(&mut self) {
        let bin = self.bin.as_ref().expect("own server");
        let data = self.data.as_ref().unwrap().path().join("data.sqld");
        let child = Command::new(bin)
            .arg("--db-path")
            .arg(&data)
            .arg("--http-listen-addr")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--no-welcome")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting sqld");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "sqld did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server and deletes its database: the next `spawn` serves a new, empty one
    /// at the same URL.
    pub fn wipe(&mut self) {
        self.stop();
        let data = self
            .data
            .as_ref()
            .expect("own server")
            .path()
            .join("data.sqld");
        std::fs::remove_dir_all(&data).unwrap();
    }

    pub fn owned(&self) -> bool {
        self.bin.is_some()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A project id no other test run uses on a shared server.
pub fn project(name: &str) -> String {
    format!("{name}-{}", uuid_like())
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}
