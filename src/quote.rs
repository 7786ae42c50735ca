//! The one rule of what a message may quote. A value the tenant or the
//! runtime gave (a config value, an environment variable) is echoed back,
//! cut short so a hostile one cannot flood a log: they already know it. A
//! file's content never is, but for a short printable value that parsed as
//! what it should be; anything else is described by its size, so no error
//! can disclose what a file holds (a planted link to a secret, say).

use serde_json::Value;

/// How many characters of a given string a message shows.
pub const INPUT_CHARS: usize = 64;
/// How many characters of a given JSON value (a wrong type) a message shows.
pub const INPUT_JSON_CHARS: usize = 40;

/// A value the caller gave, as a JSON string, cut short.
pub fn input(s: &str) -> String {
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(INPUT_CHARS).collect();
    let mut q = Value::String(head).to_string();
    if chars.next().is_some() {
        q.push_str("...");
    }
    q
}

/// A JSON value the caller gave, as JSON, cut short.
pub fn input_json(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(INPUT_JSON_CHARS - 3) {
        Some((i, _)) if s.len() > INPUT_JSON_CHARS => format!("{}...", &s[..i]),
        _ => s,
    }
}

/// A file's content, fit to quote only as a short printable ASCII value of
/// at most `max` bytes; anything else by its size.
pub fn file(s: &str, max: usize) -> String {
    let t = s.trim();
    if !t.is_empty() && t.len() <= max && t.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        format!("{t:?}")
    } else {
        format!("{} bytes that are not a short printable value", s.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn files_are_quoted_only_as_short_printable_values() {
        assert_eq!(file("41\n", 16), "\"41\"");
        assert!(file("root:$6$abc:19000:0:99999:7:::", 16).contains("bytes"));
        assert!(file("a\u{1b}[2J", 16).contains("bytes"));
        assert!(file("", 16).contains("0 bytes"));
    }

    #[test]
    fn input_is_echoed_cut_short() {
        assert_eq!(input("0.2.0"), "\"0.2.0\"");
        let long = "x".repeat(100);
        assert_eq!(input(&long), format!("\"{}\"...", "x".repeat(INPUT_CHARS)));
        assert_eq!(input_json(&json!(41)), "41");
        let long = json!({"a": "y".repeat(100)});
        assert!(input_json(&long).ends_with("...") && input_json(&long).len() <= INPUT_JSON_CHARS);
    }
}
