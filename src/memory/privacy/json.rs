//! The privacy filter over JSON (memory metadata, graph node and edge metadata): every string
//! and every key through [`redact`], and a string stored under a key that *names* a secret
//! (`apiKey`, `password`, `client_secret`, `PGPASSWORD`...) replaced whole.
//!
//! Why the key rule: in text, a secret is found by its shape or by the assignment that carries
//! it (`PASSWORD=...`). In a JSON object the key is the assignment, but [`redact`] only sees the
//! bare value (`"hunter2"`), which has no shape to find. So the key decides, with the same
//! vocabulary as the assignment rule (plus `authorization`) and the same look-alike exclusion:
//! a key whose last word says the value is *about* a secret (`password_reset_url`,
//! `privateKeyPath`, `token_type`, `secretName`) names no secret.
//!
//! Values kept under a secret-named key, because they are obviously not a secret: empty
//! strings, placeholders and variables (`${API_KEY}`, `<your token>`, `process.env.X`, `null`,
//! `true`...), the words `yes`/`no`/`on`/`off`/`enabled`/`disabled`/`required`, and paths of at
//! least two segments (`~/.ssh/id_rsa`, `/run/secrets/db`): a key file's location is not the key.
//! Numbers and booleans are never secrets here.
//!
//! Nesting: a secret-named key's whole subtree is secret (`"credentials": {"value": "..."}`,
//! `"apiKeys": ["...", "..."]`), except members whose own key is descriptive or says who/where
//! (`name`, `url`, `user`, `host`...), which only pass through [`redact`].

use serde_json::Value;

use super::{is_placeholder, redact, Redacted, DESCRIPTIVE_KEY_ENDINGS, REDACTED};

/// A key word ending with one of these names a secret (`dbPassword`, `PGPASSWORD`, `authToken`,
/// `client_secret`): the assignment rule's vocabulary, as words.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwords",
    "passwd",
    "passphrase",
    "secret",
    "secrets",
    "token",
    "credential",
    "credentials",
    "apikey",
    "accesskey",
    "privatekey",
    "authkey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    // An `Authorization` header's value: `Basic ...`, `Bearer ...`.
    "authorization",
];

/// Words that make the next `key` (or `keys`) a secret: `api_key`, `privateKey`, `signing-key`.
const KEY_QUALIFIERS: &[&str] = &[
    "api",
    "access",
    "private",
    "auth",
    "signing",
    "encryption",
    "master",
    // Azure's storage `AccountKey`.
    "account",
];

/// Members of a secret-named object that say who or where, not what: kept (after [`redact`]).
const IDENTITY_WORDS: &[&str] = &[
    "user",
    "username",
    "login",
    "email",
    "host",
    "hostname",
    "port",
    "region",
    "account",
    "id",
    "kind",
    "version",
    "description",
    "label",
    "scope",
    "scopes",
    "issuer",
    "audience",
    "algorithm",
    "provider",
];

/// Values that are obviously not a secret whatever the key says.
const PLAIN_WORDS: &[&str] = &["yes", "no", "on", "off", "enabled", "disabled", "required"];

/// The words of a key, lower case: split at non-alphanumerics and at camelCase boundaries
/// (`apiKeyHeaderName` -> api, key, header, name; `APIKey` -> api, key).
fn words(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

fn ends_descriptive(words: &[String]) -> bool {
    words.len() > 1
        && words
            .last()
            .is_some_and(|last| DESCRIPTIVE_KEY_ENDINGS.contains(&last.as_str()))
}

/// Whether a JSON key (or any identifier) names a secret: one of its words ends with a secret
/// word, or is `key` after a qualifier (`api`, `private`...), and its last word is not
/// descriptive (`password_reset_url`, `tokenType`, `secretName` name none).
pub fn key_names_a_secret(key: &str) -> bool {
    let words = words(key);
    if ends_descriptive(&words) {
        return false;
    }
    words.iter().enumerate().any(|(i, w)| {
        SECRET_WORDS.iter().any(|s| w.ends_with(s))
            || (matches!(w.as_str(), "key" | "keys")
                && i > 0
                && KEY_QUALIFIERS.contains(&words[i - 1].as_str()))
    })
}

/// Whether a member of a secret-named object only says who or where (or what the secret is).
fn key_is_not_the_secret(key: &str) -> bool {
    let words = words(key);
    ends_descriptive(&words)
        || (words.len() == 1 && DESCRIPTIVE_KEY_ENDINGS.contains(&words[0].as_str()))
        || words
            .last()
            .is_some_and(|w| IDENTITY_WORDS.contains(&w.as_str()))
}

/// A value under a secret-named key that is obviously not a secret (see the module doc).
fn obviously_not_a_secret(value: &str) -> bool {
    let v = value.trim();
    v.is_empty()
        || v == REDACTED
        || is_placeholder(v)
        || PLAIN_WORDS.contains(&v.to_ascii_lowercase().as_str())
        || is_key_file_path(v)
}

/// `~/.ssh/id_rsa`, `/etc/ssl/private/server.key`, `./config/creds.json`, `C:\keys\a.pem`:
/// a path of two segments or more, without spaces.
fn is_key_file_path(v: &str) -> bool {
    let rest = ["~/", "./", "../", "/"]
        .iter()
        .find_map(|p| v.strip_prefix(p))
        .or_else(|| {
            let b = v.as_bytes();
            (b.len() > 3 && b[0].is_ascii_alphabetic() && &b[1..3] == b":\\").then(|| &v[3..])
        });
    rest.is_some_and(|rest| {
        !v.contains(char::is_whitespace)
            && rest.trim_start_matches(['/', '\\']).contains(['/', '\\'])
    })
}

/// A string stored (or logged) under the name `key`: replaced whole when the key names a secret
/// and the value is not obviously harmless, else through [`redact`].
pub fn redact_under(key: &str, value: &str) -> Redacted {
    if key_names_a_secret(key) && !obviously_not_a_secret(value) {
        return Redacted {
            text: REDACTED.to_owned(),
            count: 1,
            kinds: vec!["secret_named_field"],
        };
    }
    redact(value)
}

/// Filters `value` in place (see the module doc); returns how many secrets were replaced.
pub fn redact_json(value: &mut Value) -> u32 {
    walk(value, false)
}

fn walk(value: &mut Value, secret: bool) -> u32 {
    match value {
        Value::String(s) if secret && !obviously_not_a_secret(s) => {
            *s = REDACTED.to_owned();
            1
        }
        Value::String(s) => {
            let r = redact(s);
            if r.count > 0 {
                *s = r.text;
            }
            r.count
        }
        Value::Array(items) => items.iter_mut().map(|v| walk(v, secret)).sum(),
        Value::Object(map) => {
            let mut count = 0;
            let mut renamed = Vec::new();
            for (key, member) in map.iter_mut() {
                let member_secret =
                    key_names_a_secret(key) || (secret && !key_is_not_the_secret(key));
                count += walk(member, member_secret);
                let r = redact(key);
                if r.count > 0 {
                    count += r.count;
                    renamed.push((key.clone(), r.text));
                }
            }
            // A key that holds a secret is renamed (keys rarely do: the cost is paid then).
            for (old, new) in renamed {
                if let Some(member) = map.remove(&old) {
                    map.insert(new, member);
                }
            }
            count
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_split_into_words() {
        assert_eq!(words("apiKeyHeaderName"), ["api", "key", "header", "name"]);
        assert_eq!(words("APIKey"), ["api", "key"]);
        assert_eq!(words("client_secret"), ["client", "secret"]);
        assert_eq!(words("DB_PASSWORD"), ["db", "password"]);
        assert_eq!(words("x-api-key"), ["x", "api", "key"]);
        assert_eq!(words("oauth2Token"), ["oauth2", "token"]);
    }

    #[test]
    fn keys_that_name_secrets() {
        for key in [
            "apiKey",
            "api_key",
            "x-api-key",
            "password",
            "DB_PASSWORD",
            "PGPASSWORD",
            "privateKey",
            "private_key",
            "token",
            "accessToken",
            "refresh_token",
            "secret",
            "client_secret",
            "clientSecret",
            "credentials",
            "passphrase",
            "authorization",
            "signingKey",
            "awsSecretAccessKey",
            "storageAccountKey",
            "apiKeys",
            "passwordHash",
        ] {
            assert!(key_names_a_secret(key), "{key}");
        }
    }

    #[test]
    fn keys_that_only_mention_secrets() {
        for key in [
            "password_reset_url",
            "private_key_path",
            "privateKeyPath",
            "api_key_header_name",
            "apiKeyHeader",
            "token_type",
            "tokenType",
            "secret_name",
            "secretName",
            "tokenizer",
            "max_tokens",
            "tokens",
            "passwordMinLength",
            "token_ttl",
            "tokenEndpoint",
            "credentials_file",
            "clientSecretEnv",
            "key",
            "cacheKey",
            "keyboard",
            "monkey",
            "author",
        ] {
            assert!(!key_names_a_secret(key), "{key}");
        }
    }

    #[test]
    fn bare_values_under_secret_keys_are_replaced() {
        let mut v = json!({
            "apiKey": "abc",
            "password": "hunter2",
            "nested": { "client_secret": "Zr8kq", "list": [{ "token": "t0k" }] },
            "credentials": { "user": "bob", "value": "s3", "url": "https://x" },
            "apiKeys": ["k1", "k2"],
            "count": 3,
            "token": 12345,
        });
        let n = redact_json(&mut v);
        assert_eq!(
            v,
            json!({
                "apiKey": REDACTED,
                "password": REDACTED,
                "nested": { "client_secret": REDACTED, "list": [{ "token": REDACTED }] },
                "credentials": { "user": "bob", "value": REDACTED, "url": "https://x" },
                "apiKeys": [REDACTED, REDACTED],
                "count": 3,
                "token": 12345,
            })
        );
        assert_eq!(n, 7);
    }

    #[test]
    fn obvious_non_secrets_under_secret_keys_stay() {
        let original = json!({
            "password": "",
            "apiKey": "${OPENAI_API_KEY}",
            "token": "<paste your token>",
            "secret": "none",
            "requiresPassword": "true",
            "privateKey": "~/.ssh/id_ed25519",
            "signingKey": "/run/secrets/signing.pem",
            "tls_private_key": "C:\\keys\\server.pem",
            "password_reset_url": "/account/reset",
            "token_type": "bearer",
            "passwordRequired": "yes",
        });
        let mut v = original.clone();
        assert_eq!(redact_json(&mut v), 0);
        assert_eq!(v, original);
        // One segment is not a path: a password may start with a slash.
        let mut v = json!({ "password": "/Tr0ub4dor" });
        assert_eq!(redact_json(&mut v), 1);
    }

    #[test]
    fn a_value_under_a_name() {
        assert_eq!(redact_under("api_key", "hunter2").text, REDACTED);
        assert_eq!(redact_under("token", "").text, "");
        assert_eq!(redact_under("path", "src/a.ts").text, "src/a.ts");
        assert_eq!(
            redact_under("note", "PASSWORD=x1y2").text,
            "PASSWORD=[REDACTED]"
        );
    }

    #[test]
    fn every_string_and_key_passes_the_filter() {
        let mut v = json!({
            "note": "PASSWORD=hunter2",
            "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8": "as a key",
            "list": ["AKIAIOSFODNN7EXAMPLE"],
        });
        assert_eq!(redact_json(&mut v), 3);
        assert_eq!(
            v,
            json!({
                "note": "PASSWORD=[REDACTED]",
                REDACTED: "as a key",
                "list": [REDACTED],
            })
        );
        // Idempotent.
        assert_eq!(redact_json(&mut v), 0);
    }
}
