//! Logging: what engram does, for a person debugging it, through `tracing`; off by default.
//!
//! The core emits `tracing` events (targets are module paths: `engram::sync`,
//! `engram::code::indexer`, `engram::store::migrations`...). Nothing receives them until the
//! host asks: [`init_from_env`] (called by the Node addon when it loads) installs one
//! process-wide subscriber when `ENGRAM_LOG` holds a filter (`tracing`'s `EnvFilter` syntax,
//! e.g. `info,engram::sync=debug`), which writes one line per event to stderr; [`set_sink`]
//! (the JS `Engram.setLogger`) adds a receiver with a filter of its own, and may be set,
//! replaced and removed at any time. A Rust program using the crate decides for itself: it may
//! install its own subscriber and get the same events; the crate's own tests install nothing.
//!
//! Off costs nothing measurable: without `ENGRAM_LOG` and without a sink no subscriber exists,
//! so every callsite's interest is `never` and an event is one relaxed load and a branch. Once
//! installed, a disabled output's filter says `never` for the callsites it does not want
//! (the sink's filter is reloaded through `tracing_subscriber::reload`, which rebuilds the
//! callsite interest cache), and the global max level skips finer levels before any callsite
//! is consulted.
//!
//! Invariant: no secret reaches a log line. Every message and every string field value goes
//! through the privacy filter ([`crate::memory::privacy::redact`]) before it is written to
//! stderr or handed to the sink, and a field whose name names a secret (`api_key`, `token`)
//! is replaced whole ([`crate::memory::privacy::redact_under`]); numbers and booleans pass as
//! they are. Field names and targets are the code's own (static) text.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::{reload, Registry};

use crate::error::{Error, Result};
use crate::memory::privacy::{redact, redact_under};

/// The environment variable holding the stderr filter (`EnvFilter` syntax); absent or empty
/// means no stderr output.
pub const ENV_VAR: &str = "ENGRAM_LOG";

/// The environment variable holding the slow-operation threshold in milliseconds (default
/// [`DEFAULT_SLOW_MS`]): a store read, a write transaction or a wait for the writer that takes
/// longer is logged at `warn`.
pub const SLOW_ENV_VAR: &str = "ENGRAM_SLOW_MS";

/// The slow-operation threshold when `ENGRAM_SLOW_MS` is not set.
pub const DEFAULT_SLOW_MS: u64 = 250;

/// A field's value as it leaves the process: strings are already redacted.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// Text (redacted).
    Str(String),
    /// A signed integer.
    I64(i64),
    /// An unsigned integer.
    U64(u64),
    /// A float.
    F64(f64),
    /// A boolean.
    Bool(bool),
}

/// One event, redacted, as a sink receives it.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// Severity.
    pub level: Level,
    /// Where it comes from: a module path such as `engram::sync`.
    pub target: &'static str,
    /// The message (redacted).
    pub message: String,
    /// The event's fields other than the message, in the order they were written.
    pub fields: Vec<(&'static str, FieldValue)>,
}

/// A receiver of log records (the JS logger). Called on the thread that logged: it must not
/// block, and must not log through `tracing` itself.
pub trait LogSink: Send + Sync {
    /// Receives one record.
    fn log(&self, record: LogRecord);
}

/// `level` as written in filters and in the JS API: `error`, `warn`, `info`, `debug`,
/// `trace`.
pub fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// Milliseconds of `d`, rounded to 0.01 ms: durations in log fields.
pub(crate) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 100.0
}

/// The slow-operation threshold (`ENGRAM_SLOW_MS`, read once per process).
pub(crate) fn slow_threshold() -> Duration {
    static SLOW: OnceLock<Duration> = OnceLock::new();
    *SLOW.get_or_init(|| {
        let raw = std::env::var(SLOW_ENV_VAR).unwrap_or_default();
        let ms = match raw.trim() {
            "" => DEFAULT_SLOW_MS,
            text => text.parse::<u64>().unwrap_or_else(|_| {
                warn_stderr(&format!(
                    "ignoring {SLOW_ENV_VAR}={raw:?}: not a whole number of milliseconds; \
                     using {DEFAULT_SLOW_MS}"
                ));
                DEFAULT_SLOW_MS
            }),
        };
        Duration::from_millis(ms)
    })
}

/// Parses a filter in `EnvFilter` syntax, keeping the directives that parse. Returns `None`
/// when nothing valid remains (the output stays off), and one warning per directive dropped.
pub fn parse_filter(text: &str) -> (Option<EnvFilter>, Vec<String>) {
    let mut valid = Vec::new();
    let mut warnings = Vec::new();
    for directive in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match directive.parse::<tracing_subscriber::filter::Directive>() {
            Ok(_) => valid.push(directive),
            Err(e) => warnings.push(format!("ignoring `{directive}`: {e}")),
        }
    }
    if valid.is_empty() {
        return (None, warnings);
    }
    match EnvFilter::builder().parse(valid.join(",")) {
        Ok(filter) => (Some(filter), warnings),
        Err(e) => {
            warnings.push(format!("ignoring the whole filter: {e}"));
            (None, warnings)
        }
    }
}

/// A filter that enables nothing.
fn off() -> EnvFilter {
    EnvFilter::builder()
        .parse("off")
        .expect("`off` is a valid filter")
}

/// Written straight to stderr (never through `tracing`): problems with the logging setup
/// itself.
fn warn_stderr(text: &str) {
    eprintln!("engram: {text}");
}

/// The registry and its two outputs: lines (stderr in production) when `lines` is given, and
/// the sink; returns the handle that reloads the sink's filter (which starts as `sink_filter`).
fn subscriber(
    lines: Option<(EnvFilter, Box<dyn std::io::Write + Send>)>,
    sink_filter: EnvFilter,
) -> (
    impl Subscriber + Send + Sync + 'static,
    reload::Handle<EnvFilter, Registry>,
) {
    let (sink_filter, handle) = reload::Layer::new(sink_filter);
    let subscriber = Registry::default()
        .with(SinkLayer.with_filter(sink_filter))
        .with(lines.map(|(filter, out)| {
            LineLayer {
                out: Mutex::new(out),
            }
            .with_filter(filter)
        }));
    (subscriber, handle)
}

/// The process-wide subscriber, once installed.
struct Installed {
    sink_filter: reload::Handle<EnvFilter, Registry>,
}

/// `None` inside when another subscriber was already the global default (a Rust host that
/// installed its own).
static INSTALLED: OnceLock<Option<Installed>> = OnceLock::new();

/// The sink and its id (see [`set_sink`]).
static SINK: RwLock<Option<(u64, Arc<dyn LogSink>)>> = RwLock::new(None);

fn installed() -> Option<&'static Installed> {
    INSTALLED
        .get_or_init(|| {
            let lines = match std::env::var(ENV_VAR) {
                Ok(text) if !text.trim().is_empty() => {
                    let (filter, warnings) = parse_filter(&text);
                    for warning in &warnings {
                        warn_stderr(&format!("{ENV_VAR}={text:?}: {warning}"));
                    }
                    if filter.is_none() {
                        warn_stderr(&format!(
                            "{ENV_VAR}={text:?} has no valid directive; logging to stderr is \
                             off (example: {ENV_VAR}=info,engram::sync=debug)"
                        ));
                    }
                    filter
                }
                _ => None,
            };
            let lines = lines.map(|f| (f, Box::new(std::io::stderr()) as Box<_>));
            let (subscriber, sink_filter) = subscriber(lines, off());
            match tracing::subscriber::set_global_default(subscriber) {
                Ok(()) => {
                    // The privacy filter compiles its patterns on first use (milliseconds):
                    // do it now, beside the host's startup, rather than inside the first event
                    // (a migration line in the middle of `open`).
                    let _ = std::thread::Builder::new()
                        .name("engram-log-warmup".into())
                        .spawn(|| drop(redact("")));
                    Some(Installed { sink_filter })
                }
                Err(_) => None,
            }
        })
        .as_ref()
}

/// Installs the process's subscriber if `ENGRAM_LOG` asks for stderr output; otherwise does
/// nothing (a later [`set_sink`] installs it). Idempotent: the variable is read when the
/// subscriber is installed, once per process. A filter that does not parse is reported on
/// stderr (each bad directive; the valid ones are kept), never a panic.
pub fn init_from_env() {
    if std::env::var(ENV_VAR).is_ok_and(|v| !v.trim().is_empty()) {
        installed();
    }
}

/// Sends every event that `filter` (`EnvFilter` syntax) enables to `sink`, replacing the
/// previous sink; returns an id for [`remove_sink`]. `ENGRAM_INVALID_ARG` when the filter does
/// not parse; `ENGRAM_INTERNAL` when another `tracing` subscriber is this process's global
/// default (a Rust host that installed its own receives the events there).
pub fn set_sink(sink: Arc<dyn LogSink>, filter: &str) -> Result<u64> {
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let filter = EnvFilter::builder()
        .parse(filter)
        .map_err(|e| Error::invalid(format!("log filter {filter:?}: {e}")))?;
    let installed = installed().ok_or_else(|| {
        Error::Internal(
            "another tracing subscriber is this process's global default; engram's events go \
             there"
                .into(),
        )
    })?;
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let previous = SINK
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .replace((id, sink));
    installed
        .sink_filter
        .reload(filter)
        .map_err(|e| Error::Internal(format!("reloading the log filter: {e}")))?;
    drop(previous);
    Ok(id)
}

/// Stops sending events to the sink: the one with `id`, or any when `id` is `None`. Returns
/// whether a sink was removed. The sink is dropped here, after its filter was turned off.
pub fn remove_sink(id: Option<u64>) -> bool {
    let current = SINK
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|(i, _)| *i);
    let Some(current) = current.filter(|c| id.is_none_or(|id| id == *c)) else {
        return false;
    };
    if let Some(Some(installed)) = INSTALLED.get() {
        // Cannot fail: the subscriber is the global default, which lives as long as the process.
        let _ = installed.sink_filter.reload(off());
    }
    let mut slot = SINK.write().unwrap_or_else(|p| p.into_inner());
    if slot.as_ref().is_some_and(|(i, _)| *i == current) {
        let removed = slot.take();
        drop(slot);
        drop(removed);
        true
    } else {
        // Replaced meanwhile by another `set_sink`, whose filter is in force: leave it.
        false
    }
}

/// Forwards events to the registered sink.
struct SinkLayer;

impl<S: Subscriber> Layer<S> for SinkLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let sink = SINK
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(_, sink)| Arc::clone(sink));
        if let Some(sink) = sink {
            sink.log(record(event));
        }
    }
}

/// Writes one line per event (stderr in production).
struct LineLayer {
    out: Mutex<Box<dyn std::io::Write + Send>>,
}

impl<S: Subscriber> Layer<S> for LineLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let line = format_line(SystemTime::now(), &record(event));
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // A closed stderr loses the line; logging never fails the work it describes.
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

/// The event as a redacted record.
pub(crate) fn record(event: &Event<'_>) -> LogRecord {
    let meta = event.metadata();
    let mut collect = Collect {
        message: String::new(),
        fields: Vec::new(),
    };
    event.record(&mut collect);
    LogRecord {
        level: *meta.level(),
        target: meta.target(),
        message: collect.message,
        fields: collect.fields,
    }
}

/// Collects an event's fields, redacting text as it comes.
struct Collect {
    message: String,
    fields: Vec<(&'static str, FieldValue)>,
}

impl Collect {
    fn text(&mut self, field: &Field, text: &str) {
        if field.name() == "message" {
            self.message = redact(text).text;
        } else {
            let clean = redact_under(field.name(), text).text;
            self.fields.push((field.name(), FieldValue::Str(clean)));
        }
    }
}

impl Visit for Collect {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field, &format!("{value:?}"));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            let _ = write!(text, ": {cause}");
            source = cause.source();
        }
        self.text(field, &text);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.push((field.name(), FieldValue::I64(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.push((field.name(), FieldValue::U64(value)));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.fields.push((field.name(), FieldValue::F64(value)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields.push((field.name(), FieldValue::Bool(value)));
    }
}

/// `2026-11-26T10:41:38.123Z  INFO engram::sync: message key=value key2="two words"\n`: one
/// line per record (line breaks in text are escaped).
pub(crate) fn format_line(at: SystemTime, record: &LogRecord) -> String {
    let mut line = String::with_capacity(96 + record.message.len());
    push_timestamp(&mut line, at);
    let _ = write!(line, " {:>5} {}: ", record.level.as_str(), record.target);
    push_escaped(&mut line, &record.message);
    for (name, value) in &record.fields {
        let _ = write!(line, " {name}=");
        match value {
            FieldValue::Str(text) => {
                let bare = !text.is_empty()
                    && !text
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '=');
                if bare {
                    line.push_str(text);
                } else {
                    let _ = write!(line, "{text:?}");
                }
            }
            FieldValue::I64(v) => {
                let _ = write!(line, "{v}");
            }
            FieldValue::U64(v) => {
                let _ = write!(line, "{v}");
            }
            FieldValue::F64(v) => {
                let _ = write!(line, "{v}");
            }
            FieldValue::Bool(v) => {
                let _ = write!(line, "{v}");
            }
        }
    }
    line.push('\n');
    line
}

/// `text` with control characters escaped (a message stays on its line).
fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

/// `at` as RFC 3339 UTC with milliseconds.
pub(crate) fn push_timestamp(out: &mut String, at: SystemTime) {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    );
}

/// Test support: lines captured in memory instead of stderr, through the same layers.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// What a capturing subscriber wrote.
    #[derive(Clone, Default)]
    pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        /// The lines written so far.
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// A subscriber writing lines through `filter` (which must parse) into memory: install
    /// it for a scope with `tracing::dispatcher::with_default` or `set_default`, never
    /// globally.
    pub(crate) fn capture(filter: &str) -> (tracing::Dispatch, Captured) {
        let out = Captured::default();
        let (filter, warnings) = parse_filter(filter);
        assert!(warnings.is_empty(), "{warnings:?}");
        let (subscriber, _) = subscriber(Some((filter.unwrap(), Box::new(out.clone()))), off());
        (tracing::Dispatch::new(subscriber), out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GITHUB: &str = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    const OPENAI: &str = "sk-proj-4fG7hJ9kL2mN5pQ8rS1tU3vW6xY0zA2bC4dE6fG8hJ0kL2mN";

    /// Runs `f` under a subscriber of its own (never the global one) writing lines through
    /// `filter`, and returns what it wrote.
    fn lines_of(filter: &str, f: impl FnOnce()) -> String {
        let (dispatch, out) = testing::capture(filter);
        tracing::dispatcher::with_default(&dispatch, f);
        out.text()
    }

    #[test]
    fn no_secret_reaches_a_line_from_the_message_or_a_field() {
        #[derive(Debug)]
        #[allow(dead_code)] // read through Debug only
        struct Options {
            token: &'static str,
        }
        let err = std::io::Error::other(format!("server said: bad key {OPENAI}"));
        let text = lines_of("trace", || {
            tracing::info!(content = GITHUB, "remembered {GITHUB} and {OPENAI}");
            tracing::warn!(
                key = %OPENAI,
                options = ?Options { token: GITHUB },
                error = &err as &(dyn std::error::Error + 'static),
                "sync failed"
            );
            tracing::trace!(url = "https://admin:s3cr3tP4ss@db.internal/x", "connecting");
        });
        for secret in [GITHUB, OPENAI, "s3cr3tP4ss"] {
            assert!(!text.contains(secret), "{secret} leaked into:\n{text}");
        }
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(
            text.contains("remembered [REDACTED] and [REDACTED]"),
            "{text}"
        );
        assert!(text.contains("content=[REDACTED]"), "{text}");
        assert!(text.contains("key=[REDACTED]"), "{text}");
        assert!(
            text.contains("error=\"server said: bad key [REDACTED]\""),
            "{text}"
        );
    }

    /// The secret corpus of `tests/fixtures/secrets/`: each secret in a message, in a field, and
    /// bare in a field whose name names a secret.
    #[test]
    fn no_corpus_secret_reaches_a_line() {
        let corpus: serde_json::Value =
            serde_json::from_str(include_str!("../tests/fixtures/secrets/corpus.json")).unwrap();
        let secrets = corpus["secrets"].as_array().unwrap();
        let text = lines_of("trace", || {
            for s in secrets {
                let (text, value) = (s["text"].as_str().unwrap(), s["value"].as_str().unwrap());
                tracing::info!(note = text, api_key = value, "{text}");
                tracing::debug!(password = %value, client_secret = ?value, "stored");
            }
        });
        assert_eq!(text.lines().count(), 2 * secrets.len(), "{text}");
        for s in secrets {
            let core = s["core"].as_str().unwrap();
            assert!(!text.contains(core), "{} leaked into:\n{text}", s["kind"]);
        }
    }

    #[test]
    fn the_sink_gets_redacted_records_with_typed_fields() {
        struct Keep(Mutex<Vec<LogRecord>>);
        impl LogSink for Keep {
            fn log(&self, record: LogRecord) {
                self.0.lock().unwrap().push(record);
            }
        }
        let keep = Arc::new(Keep(Mutex::new(Vec::new())));
        // The process's sink slot: no other test touches it, and nothing global is installed.
        *SINK.write().unwrap() = Some((0, Arc::clone(&keep) as Arc<dyn LogSink>));
        let (subscriber, handle) = subscriber(None, off());
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!("dropped: the sink's filter is off");
            handle.reload(EnvFilter::new("debug")).unwrap();
            tracing::debug!(
                files = 3u64,
                failed = -1i64,
                ms = 1.5,
                full = true,
                path = "src/a.ts",
                "token={GITHUB}"
            );
            tracing::trace!("dropped: finer than the sink's filter");
        });
        SINK.write().unwrap().take();
        let records = keep.0.lock().unwrap();
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!(r.level, Level::DEBUG);
        assert_eq!(r.target, module_path!());
        assert_eq!(r.message, "token=[REDACTED]");
        assert_eq!(
            r.fields,
            vec![
                ("files", FieldValue::U64(3)),
                ("failed", FieldValue::I64(-1)),
                ("ms", FieldValue::F64(1.5)),
                ("full", FieldValue::Bool(true)),
                ("path", FieldValue::Str("src/a.ts".into())),
            ]
        );
    }

    #[test]
    fn the_filter_decides_what_is_written() {
        let text = lines_of("warn,engram::log=debug", || {
            tracing::trace!("too fine");
            tracing::debug!("kept: this module is at debug");
            tracing::info!(target: "engram::sync", "dropped: engram::sync is at warn");
            tracing::warn!(target: "engram::sync", "kept: a warning");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains(" DEBUG engram::log::tests: kept"),
            "{text}"
        );
        assert!(lines[1].contains("  WARN engram::sync: kept"), "{text}");
    }

    #[test]
    fn disabled_outputs_enable_nothing() {
        let (both_off, _) = subscriber(None, off());
        tracing::subscriber::with_default(both_off, || {
            assert!(!tracing::enabled!(Level::ERROR));
        });
        let (filter, _) = parse_filter("info");
        let (lines_at_info, _) =
            subscriber(Some((filter.unwrap(), Box::new(std::io::sink()))), off());
        tracing::subscriber::with_default(lines_at_info, || {
            assert!(tracing::enabled!(Level::INFO));
            assert!(!tracing::enabled!(Level::DEBUG));
        });
    }

    #[test]
    fn a_bad_filter_warns_and_keeps_what_parses() {
        let (filter, warnings) = parse_filter("info,engram::sync=verbose");
        assert!(filter.is_some());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("ignoring `engram::sync=verbose`"),
            "{warnings:?}"
        );
        let (filter, warnings) = parse_filter("=,[[");
        assert!(filter.is_none());
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let (filter, warnings) = parse_filter(" , ");
        assert!(filter.is_none() && warnings.is_empty());
        // Valid filters of every shape the docs show.
        for text in [
            "info",
            "off",
            "engram=debug",
            "info,engram::sync=debug",
            "trace",
        ] {
            let (filter, warnings) = parse_filter(text);
            assert!(
                filter.is_some() && warnings.is_empty(),
                "{text}: {warnings:?}"
            );
        }
    }

    #[test]
    fn a_line_is_one_line_with_quoted_text_where_needed() {
        let record = LogRecord {
            level: Level::INFO,
            target: "engram::code::indexer",
            message: "indexed\nthe project".into(),
            fields: vec![
                ("root", FieldValue::Str("/tmp/my project".into())),
                ("files", FieldValue::U64(12)),
                ("ms", FieldValue::F64(3.25)),
                ("path", FieldValue::Str("src/a.ts".into())),
                ("empty", FieldValue::Str(String::new())),
            ],
        };
        let at = UNIX_EPOCH + Duration::from_millis(1_795_000_000_123);
        assert_eq!(
            format_line(at, &record),
            "2026-11-18T11:06:40.123Z  INFO engram::code::indexer: indexed\\nthe project \
             root=\"/tmp/my project\" files=12 ms=3.25 path=src/a.ts empty=\"\"\n"
        );
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        let mut out = String::new();
        push_timestamp(&mut out, leap);
        assert_eq!(out, "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn durations_are_rounded_to_hundredths_of_a_ms() {
        assert_eq!(ms(Duration::from_micros(1_234_567)), 1234.57);
        assert_eq!(ms(Duration::ZERO), 0.0);
    }
}
