//! Error fingerprints: the same failure reported twice must get the same fingerprint even
//! when the numbers, paths, addresses and quoted names in its message differ, so that
//! "the build failed the same way again" can be counted within and across sessions.

/// Most bytes of an error message that are fingerprinted (the first lines identify it).
pub const FINGERPRINT_BYTES: usize = 512;

/// The line of an error message that says what went wrong: the first line naming an error,
/// else the first non-empty line. Clipped to 200 characters.
pub fn headline(message: &str) -> String {
    let mut first = None;
    for line in message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(40)
    {
        first.get_or_insert(line);
        let lower = line.to_ascii_lowercase();
        const MARKERS: &[&str] = &["error", "err!", "exception", "failed", "fatal", "panicked"];
        if MARKERS.iter().any(|m| lower.contains(m)) {
            return line.chars().take(200).collect();
        }
    }
    first.unwrap_or("").chars().take(200).collect()
}

/// The normalised form of an error's headline: digits, hex, quoted text and path-like words
/// replaced by placeholders, whitespace collapsed, lower case.
pub fn normalise(message: &str) -> String {
    let head = headline(message);
    let mut out = String::with_capacity(head.len());
    let mut last_space = false;
    for word in head.split_whitespace() {
        if !out.is_empty() && !last_space {
            out.push(' ');
        }
        last_space = false;
        if word.contains('/') || word.contains('\\') {
            out.push_str("<path>");
            continue;
        }
        let mut in_quote: Option<char> = None;
        let mut prev_digit = false;
        for c in word.chars() {
            if let Some(q) = in_quote {
                if c == q {
                    in_quote = None;
                    out.push(c);
                }
                continue;
            }
            match c {
                '"' | '\'' | '`' => {
                    in_quote = Some(c);
                    out.push(c);
                    out.push('…');
                }
                c if c.is_ascii_digit() => {
                    if !prev_digit {
                        out.push('#');
                    }
                    prev_digit = true;
                    continue;
                }
                c => out.extend(c.to_lowercase()),
            }
            prev_digit = false;
        }
    }
    if out.len() > FINGERPRINT_BYTES {
        out.truncate(crate::text::floor_char_boundary(&out, FINGERPRINT_BYTES));
    }
    out
}

/// A stable 64-bit fingerprint of an error of a tool kind (FNV-1a over the normalised text).
pub fn fingerprint(tool: &str, message: &str) -> u64 {
    fnv1a(
        fnv1a(0xcbf2_9ce4_8422_2325, tool.as_bytes()),
        normalise(message).as_bytes(),
    )
}

/// FNV-1a, continued from `hash` (stable across builds and platforms, unlike `DefaultHasher`).
pub fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A text's FNV-1a hash from the standard offset basis.
pub fn hash_text(text: &str) -> u64 {
    fnv1a(0xcbf2_9ce4_8422_2325, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_failure_with_other_numbers_and_paths_has_one_fingerprint() {
        let a = "error[E0308]: mismatched types\n --> src/lib.rs:10:5";
        let b = "   Compiling x v0.1\nerror[E0308]: mismatched types\n --> src/main.rs:99:1";
        assert_eq!(fingerprint("bash", a), fingerprint("bash", b));
        let c = "TypeError: Cannot read properties of undefined (reading 'id') at /a/b.js:3";
        let d = "TypeError: Cannot read properties of undefined (reading 'name') at /c/d.js:9";
        assert_eq!(normalise(c), normalise(d));
        assert_ne!(fingerprint("bash", a), fingerprint("bash", c));
        assert_ne!(fingerprint("bash", a), fingerprint("read", a));
    }

    #[test]
    fn headline_prefers_the_line_naming_the_error() {
        assert_eq!(
            headline("\n  > build\nnpm ERR! missing script: x\n"),
            "npm ERR! missing script: x"
        );
        assert_eq!(headline("just text"), "just text");
        assert_eq!(headline(""), "");
    }
}
