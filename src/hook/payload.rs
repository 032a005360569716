//! Reading Claude Code's hook payloads: a tool's answer as the text the agent read, whether it
//! failed, the call's input, and the assistant's words from the session transcript (payloads
//! carry no model text; self-corrections and dead ends are read from it).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use serde_json::{Map, Value};

use super::state::HookState;
use crate::error::{Error, Result};

/// Most transcript bytes read at one turn's end.
const MAX_TRANSCRIPT_BYTES: u64 = 8 << 20;

/// JSON text as `JSON.parse` reads it: a lone UTF-16 surrogate escape (`"\\ud83d"`, what cutting
/// a string in the middle of an emoji leaves) becomes U+FFFD instead of failing the whole text.
pub(super) fn parse_json(text: &[u8]) -> Option<Value> {
    serde_json::from_slice(text)
        .ok()
        .or_else(|| serde_json::from_slice(&without_lone_surrogates(text)).ok())
}

/// `text` with every `\\uXXXX` escape of an unpaired surrogate replaced by `\\ufffd`.
fn without_lone_surrogates(text: &[u8]) -> Vec<u8> {
    let escape_at = |i: usize| -> Option<u16> {
        let hex = text.get(i..i + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'\\' {
            out.push(text[i]);
            i += 1;
            continue;
        }
        match escape_at(i) {
            Some(0xD800..=0xDBFF) if matches!(escape_at(i + 6), Some(0xDC00..=0xDFFF)) => {
                out.extend_from_slice(&text[i..i + 12]);
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.extend_from_slice(b"\\ufffd");
                i += 6;
            }
            // Any other escape, kept whole (so an escaped backslash is not read as the start
            // of another escape).
            _ => {
                let end = (i + 2).min(text.len());
                out.extend_from_slice(&text[i..end]);
                i = end;
            }
        }
    }
    out
}

/// The payload's string field `key`, when it is a non-empty string.
pub(super) fn str_field<'a>(payload: &'a Value, key: &str) -> Option<&'a str> {
    payload
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The call's id (`tool_use_id`), when the payload has one.
pub(super) fn tool_use_id(payload: &Value) -> Option<&str> {
    str_field(payload, "tool_use_id")
}

/// The call's input object (`{}` when it is missing or not an object).
pub(super) fn tool_input(payload: &Value) -> Value {
    match payload.get("tool_input") {
        Some(Value::Object(map)) => Value::Object(map.clone()),
        _ => Value::Object(Map::new()),
    }
}

/// A tool's answer as the text the agent read: a string as is; a shell's stdout and stderr; a
/// file read's content (an image's base64 is no text); a search's file list; an edit's
/// confirmation (its payload carries the whole file, which the agent never saw); MCP text
/// blocks; else the JSON.
pub(super) fn result_text(response: Option<&Value>) -> String {
    let r = match response {
        None | Some(Value::Null) => return String::new(),
        Some(Value::String(s)) => return s.clone(),
        Some(r @ (Value::Bool(_) | Value::Number(_))) => return r.to_string(),
        Some(r) => r,
    };
    let blocks = match r {
        Value::Array(items) => Some(items),
        _ => r.get("content").and_then(Value::as_array),
    };
    if let Some(blocks) = blocks {
        return blocks
            .iter()
            .map(|b| match b.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    let text = |key: &str| r.get(key).and_then(Value::as_str);
    if text("stdout").is_some() || text("stderr").is_some() {
        return [text("stdout"), text("stderr")]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
    }
    let file = r.get("file");
    if let Some(content) = file.and_then(|f| f.get("content")).and_then(Value::as_str) {
        return content.to_owned();
    }
    if file
        .and_then(|f| f.get("base64"))
        .is_some_and(Value::is_string)
    {
        let kind = text("type").unwrap_or("image");
        let path = file
            .and_then(|f| f.get("filePath"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return format!("[{kind} {path}]");
    }
    if let Some(content) = text("content") {
        if r.get("structuredPatch").is_none_or(Value::is_null) {
            return content.to_owned();
        }
    }
    if let Some(names) = r.get("filenames").and_then(Value::as_array) {
        return names
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("\n");
    }
    if let Some(path) = text("filePath") {
        return format!("The file {path} has been updated.");
    }
    if let Some(result) = text("result") {
        return result.to_owned();
    }
    r.to_string()
}

/// Whether a tool response says it failed (a failing tool usually comes as PostToolUseFailure).
pub(super) fn response_is_error(response: Option<&Value>) -> bool {
    let Some(r @ Value::Object(_)) = response else {
        return false;
    };
    let flag = |key: &str| r.get(key) == Some(&Value::Bool(true));
    if flag("is_error") || flag("isError") || flag("interrupted") {
        return true;
    }
    let exit = r.get("exit_code").or_else(|| r.get("exitCode"));
    exit.and_then(Value::as_f64).is_some_and(|code| code != 0.0)
}

/// Something the assistant wrote, with the step of the tool call it preceded (`None`: after
/// the turn's last call).
pub(super) struct Said {
    pub text: String,
    pub step: Option<u32>,
}

/// The assistant's text (and thinking) written to the transcript since the last read, each
/// with the step of the tool call it preceded; `None` when there is no transcript to read.
/// Advances `state.transcript_offset` past the whole lines read.
pub(super) fn transcript_texts(
    payload: &Value,
    state: &mut HookState,
) -> Result<Option<Vec<Said>>> {
    let path = match str_field(payload, "transcript_path") {
        Some(path) => path.to_owned(),
        None => match &state.transcript_path {
            Some(path) if !path.is_empty() => path.clone(),
            _ => return Ok(None),
        },
    };
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("opening the transcript", e)),
    };
    let size = file
        .metadata()
        .map_err(|e| Error::io("reading the transcript", e))?
        .len();
    // A transcript shorter than what was read was rewritten: read it again.
    let mut from = if state.transcript_offset <= size {
        state.transcript_offset
    } else {
        0
    };
    from = from.max(size.saturating_sub(MAX_TRANSCRIPT_BYTES));
    let mut buf = Vec::with_capacity((size - from) as usize);
    file.seek(SeekFrom::Start(from))
        .and_then(|_| file.take(size - from).read_to_end(&mut buf))
        .map_err(|e| Error::io("reading the transcript", e))?;
    // Only whole lines: the last may be being written.
    let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    state.transcript_offset = from + end as u64;
    Ok(Some(assistant_texts(
        &String::from_utf8_lossy(&buf[..end]),
        state,
    )))
}

/// The assistant text blocks of transcript lines, stepped by the tool_use they precede.
fn assistant_texts(text: &str, state: &HookState) -> Vec<Said> {
    let mut out = Vec::new();
    let mut waiting: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        // A line that does not parse was cut by the size cap.
        let Some(entry) = parse_json(line.as_bytes()) else {
            continue;
        };
        if entry.get("type").and_then(Value::as_str) != Some("assistant")
            || entry.get("isSidechain") == Some(&Value::Bool(true))
        {
            continue;
        }
        let Some(blocks) = entry
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for block in blocks {
            let kind = block.get("type").and_then(Value::as_str);
            let said = match kind {
                Some("text") => block.get("text"),
                Some("thinking") => block.get("thinking"),
                _ => None,
            };
            if let Some(said) = said
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
            {
                waiting.push(said.to_owned());
            }
            if kind == Some("tool_use") && !waiting.is_empty() {
                let step = block
                    .get("id")
                    .and_then(Value::as_str)
                    .and_then(|id| state.calls.get(id))
                    .map(|call| call.step);
                out.extend(waiting.drain(..).map(|text| Said { text, step }));
            }
        }
    }
    out.extend(waiting.into_iter().map(|text| Said { text, step: None }));
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lone_surrogates_read_as_replacement_characters_as_in_javascript() {
        let cut =
            br#"{"s": "abc\ud83d", "pair": "\ud83d\ude00", "low": "\udc00x", "esc": "\\ud83d"}"#;
        let v = parse_json(cut).unwrap();
        assert_eq!(v["s"], "abc\u{fffd}");
        assert_eq!(v["pair"], "\u{1f600}");
        assert_eq!(v["low"], "\u{fffd}x");
        assert_eq!(v["esc"], "\\ud83d", "an escaped backslash starts no escape");
        assert!(parse_json(b"{ not json").is_none());
    }

    #[test]
    fn a_tool_answer_reads_as_what_the_agent_saw() {
        let shell = json!({ "stdout": "ok", "stderr": "warn", "exit_code": 0 });
        assert_eq!(result_text(Some(&shell)), "ok\nwarn");
        assert!(!response_is_error(Some(&shell)));
        let failed = json!({ "stdout": "", "stderr": "boom", "exit_code": 2 });
        assert_eq!(result_text(Some(&failed)), "boom");
        assert!(response_is_error(Some(&failed)));
        let read =
            json!({ "type": "text", "file": { "filePath": "/a.rs", "content": "fn a() {}" } });
        assert_eq!(result_text(Some(&read)), "fn a() {}");
        let image = json!({ "type": "image", "file": { "filePath": "/a.png", "base64": "AAAA" } });
        assert_eq!(result_text(Some(&image)), "[image /a.png]");
        let edit = json!({ "filePath": "/a.rs", "content": "whole file", "structuredPatch": [] });
        assert_eq!(result_text(Some(&edit)), "The file /a.rs has been updated.");
        let mcp = json!([{ "type": "text", "text": "one" }, { "type": "text", "text": "two" }]);
        assert_eq!(result_text(Some(&mcp)), "one\ntwo");
        assert_eq!(
            result_text(Some(&json!({ "filenames": ["a", "b"] }))),
            "a\nb"
        );
        assert_eq!(result_text(None), "");
        assert!(response_is_error(Some(&json!({ "interrupted": true }))));
    }

    #[test]
    fn transcript_words_are_stepped_by_the_call_they_precede_and_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let line = |content: Value| {
            json!({ "type": "assistant", "message": { "content": content } }).to_string() + "\n"
        };
        let text = line(json!([
            { "type": "thinking", "thinking": "Try the cache first." },
            { "type": "tool_use", "id": "call-1", "name": "Bash" },
        ])) + &line(json!([{ "type": "text", "text": "Actually, that was wrong." }]))
            + "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"half";
        std::fs::write(&path, &text).unwrap();
        let mut state = HookState::default();
        state.calls.insert(
            "call-1".into(),
            super::super::state::CallNote {
                step: 4,
                at: 0,
                done: true,
            },
        );
        let payload = json!({ "transcript_path": path.to_str().unwrap() });
        let said = transcript_texts(&payload, &mut state).unwrap().unwrap();
        let got: Vec<_> = said.iter().map(|s| (s.text.as_str(), s.step)).collect();
        assert_eq!(
            got,
            [
                ("Try the cache first.", Some(4)),
                ("Actually, that was wrong.", None)
            ]
        );
        // The half-written last line stays for the next read.
        assert_eq!(
            state.transcript_offset as usize,
            text.rfind('\n').unwrap() + 1
        );
        assert!(transcript_texts(&payload, &mut state)
            .unwrap()
            .unwrap()
            .is_empty());
        let gone = json!({ "transcript_path": dir.path().join("none").to_str().unwrap() });
        assert!(transcript_texts(&gone, &mut HookState::default())
            .unwrap()
            .is_none());
    }
}
