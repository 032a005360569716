//! The HTTP plumbing the embedding servers share: one blocking agent per provider, JSON POSTs with
//! timeouts and a response-size cap, retries of rate limits and overloaded servers that honour
//! the server's `Retry-After`, and the server's own error message pulled out of its error body.
//!
//! Calls block: providers run on the blocking pool, never on the JS thread or an async worker.

use std::time::Duration;

use serde_json::Value;

use crate::text::clip_bytes;

/// Timeouts and retries of one provider.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Whole-request limit, from connecting to the last byte of the answer (default 60 s: a
    /// local server may load the model on its first request).
    pub timeout: Duration,
    /// Retries of a request answered 408, 429, 500, 502, 503 or 504 (default 3). Connection
    /// failures are not retried: a server that is down stays down for longer than a retry.
    pub max_retries: u32,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            max_retries: 3,
        }
    }
}

/// A server may ask for a pause this long before a retry at most; a longer ask ends the call
/// (a background run retries on its next start instead of holding a thread for minutes).
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// First back-off when the server does not say how long to wait; doubled per retry.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// Largest answer read (a batch of 2048 vectors of 3072 floats in JSON is ~120 MB; our batches
/// are far smaller, so this only stops a runaway server).
const MAX_RESPONSE_BYTES: u64 = 128 * 1024 * 1024;

/// How much of an unparseable error body goes into a message.
const MAX_ERROR_TEXT: usize = 300;

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum HttpFailure {
    /// No answer: refused, unresolvable, TLS, timed out, or a malformed URL.
    Transport(String),
    /// An answer with an error status (after retries); `message` is the server's own words.
    Status {
        /// The HTTP status.
        status: u16,
        /// The server's error message, or the start of its body.
        message: String,
    },
    /// A success status whose body was not the JSON expected.
    Body(String),
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpFailure::Transport(why) => write!(f, "no answer ({why})"),
            HttpFailure::Status { status, message } => write!(f, "HTTP {status}: {message}"),
            HttpFailure::Body(why) => write!(f, "unreadable answer ({why})"),
        }
    }
}

/// A blocking JSON client for one server.
#[derive(Clone)]
pub(crate) struct JsonClient {
    agent: ureq::Agent,
    bearer: Option<String>,
    max_retries: u32,
}

impl std::fmt::Debug for JsonClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("JsonClient")
            .field("authorized", &self.bearer.is_some())
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl JsonClient {
    /// A client with `options`, sending `Authorization: Bearer <bearer>` when given.
    pub(crate) fn new(options: &HttpOptions, bearer: Option<String>) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(options.timeout))
            .timeout_connect(Some(options.timeout.min(Duration::from_secs(10))))
            // Error statuses are answers to read (they carry the server's message).
            .http_status_as_error(false)
            // A redirected POST turns into a GET and drops the token: report it instead.
            .max_redirects(0)
            .user_agent(concat!("engram/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self {
            agent,
            bearer,
            max_retries: options.max_retries,
        }
    }

    /// POSTs `body` to `url` and parses the answer, retrying rate limits and overloads.
    pub(crate) fn post(&self, url: &str, body: &Value) -> Result<Value, HttpFailure> {
        let mut attempt = 0;
        loop {
            let mut request = self.agent.post(url);
            if let Some(token) = &self.bearer {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
            let mut response = request.send_json(body).map_err(transport_failure)?;
            let status = response.status().as_u16();
            if (200..300).contains(&status) {
                return response
                    .body_mut()
                    .with_config()
                    .limit(MAX_RESPONSE_BYTES)
                    .read_json::<Value>()
                    .map_err(|e| HttpFailure::Body(e.to_string()));
            }
            let wait = retry_wait(response.headers(), attempt);
            // Read the body even when retrying, so the connection can be reused.
            let text = response
                .body_mut()
                .with_config()
                .limit(1024 * 1024)
                .lossy_utf8(true)
                .read_to_string()
                .unwrap_or_default();
            if (300..400).contains(&status) {
                let to = response
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("nowhere");
                return Err(HttpFailure::Status {
                    status,
                    message: format!("redirected to {to}: use that as the base URL"),
                });
            }
            let retryable = matches!(status, 408 | 429 | 500 | 502 | 503 | 504);
            match wait {
                Some(wait) if retryable && attempt < self.max_retries => {
                    std::thread::sleep(wait);
                    attempt += 1;
                }
                _ => {
                    let mut message = error_message(&text);
                    if retryable && wait.is_none() {
                        message.push_str(" (the server asked to wait more than 60 s)");
                    } else if retryable && self.max_retries > 0 {
                        message.push_str(&format!(" (after {} retries)", self.max_retries));
                    }
                    return Err(HttpFailure::Status { status, message });
                }
            }
        }
    }
}

/// Names a transport error without the noise of its debug form.
fn transport_failure(error: ureq::Error) -> HttpFailure {
    HttpFailure::Transport(match error {
        ureq::Error::ConnectionFailed => "connection refused".to_owned(),
        ureq::Error::HostNotFound => "host not found".to_owned(),
        ureq::Error::Timeout(which) => format!("timed out ({which})"),
        other => other.to_string(),
    })
}

/// How long to wait before retry number `attempt + 1`: the server's `retry-after-ms` (OpenAI) or
/// `Retry-After` in seconds, else exponential back-off. `None` when the server asks for more
/// than [`MAX_RETRY_WAIT`].
fn retry_wait(headers: &ureq::http::HeaderMap, attempt: u32) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    // Seconds; an HTTP-date Retry-After does not parse as a number and falls back to back-off.
    let asked = header("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| header("retry-after"));
    match asked {
        // Compared before converting: a huge number would overflow a Duration.
        Some(secs) if secs > MAX_RETRY_WAIT.as_secs_f64() => None,
        Some(secs) => Some(Duration::from_secs_f64(secs)),
        None => Some(FIRST_BACKOFF * 2u32.saturating_pow(attempt.min(6))),
    }
}

/// The server's error message: `{"error": "..."}` (Ollama), `{"error": {"message": ...}}`
/// (OpenAI and most compatible servers), `{"message": ...}` or `{"detail": ...}` (others), else
/// the start of the body.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        let text = |v: &Value| v.as_str().map(str::to_owned);
        v.get("error")
            .and_then(|e| text(e).or_else(|| e.get("message").and_then(text)))
            .or_else(|| v.get("message").and_then(text))
            .or_else(|| v.get("detail").and_then(text))
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        "(empty body)".to_owned()
    } else {
        clip_bytes(&text, MAX_ERROR_TEXT).to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_of_each_wire_format() {
        assert_eq!(
            error_message(r#"{"error":"model \"x\" not found, try pulling it first"}"#),
            "model \"x\" not found, try pulling it first"
        );
        assert_eq!(
            error_message(
                r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}"#
            ),
            "Incorrect API key"
        );
        assert_eq!(
            error_message(r#"{"object":"error","message":"too long","code":400}"#),
            "too long"
        );
        assert_eq!(error_message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(error_message("  "), "(empty body)");
        assert_eq!(error_message(&"x".repeat(1000)).len(), MAX_ERROR_TEXT);
        let long = serde_json::json!({"error": {"message": "y".repeat(5000)}}).to_string();
        assert_eq!(error_message(&long).len(), MAX_ERROR_TEXT);
    }

    #[test]
    fn retry_waits_honour_the_server_within_a_cap() {
        let mut headers = ureq::http::HeaderMap::new();
        assert_eq!(retry_wait(&headers, 0), Some(FIRST_BACKOFF));
        assert_eq!(retry_wait(&headers, 2), Some(FIRST_BACKOFF * 4));
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_wait(&headers, 0), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "25".parse().unwrap());
        assert_eq!(retry_wait(&headers, 0), Some(Duration::from_millis(25)));
        headers.remove("retry-after-ms");
        headers.insert("retry-after", "3600".parse().unwrap());
        assert_eq!(retry_wait(&headers, 0), None);
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2026 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_wait(&headers, 1), Some(FIRST_BACKOFF * 2));
        // Numbers no Duration holds are a long wait, not a panic.
        headers.insert("retry-after", "1e20".parse().unwrap());
        assert_eq!(retry_wait(&headers, 0), None);
        headers.insert("retry-after-ms", "99999999999999999999999".parse().unwrap());
        assert_eq!(retry_wait(&headers, 0), None);
    }
}
