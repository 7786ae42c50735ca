//! Label values as a scrape would carry them (the netdev, device and pod
//! names the agent reports), written by `wire::exposition::Writer`: byte 0
//! is a sample's value, the rest two values split at the first 0xff. Every
//! line of the text is one HELP, TYPE or sample line, and the label values
//! read back, unescaped (exposition_formats.md: `\\`, `\"`, `\n`), as
//! written; a duration written as seconds reads back as that duration,
//! to the nanosecond.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::exposition::{format_seconds, Kind, Value, Writer};
use std::time::Duration;

/// The label values of one sample line, unescaped.
fn values(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Some(open) = line.find('{') else {
        return out;
    };
    let mut chars = line[open + 1..].chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut v = String::new();
        loop {
            match chars.next().expect("a value ends") {
                '"' => break,
                '\\' => match chars.next().expect("an escape ends") {
                    'n' => v.push('\n'),
                    c @ ('\\' | '"') => v.push(c),
                    c => panic!("unknown escape \\{c}"),
                },
                c => v.push(c),
            }
        }
        out.push(v);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let (a, b) = text.split_once('\u{fffd}').unwrap_or((&text, ""));
    let mut w = Writer::new();
    w.family(
        "roce_tune_fuzz",
        Kind::Gauge,
        "a help\\ text\n",
        &["netdev", "pod"],
    );
    w.sample(&[a, b], Value::Uint(u64::from(n)));
    w.sample(&[b, a], Value::Seconds(Duration::from_millis(u64::from(n))));
    let out = w.finish();
    assert!(out.ends_with('\n'));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out:?}");
    assert!(lines[0].starts_with("# HELP roce_tune_fuzz "));
    assert_eq!(lines[1], "# TYPE roce_tune_fuzz gauge");
    assert_eq!(values(lines[2]), [a, b]);
    assert_eq!(values(lines[3]), [b, a]);
    let d = Duration::from_nanos(
        u64::from_le_bytes(data.get(..8).map_or([0; 8], |s| s.try_into().unwrap())) >> 8,
    );
    let shown = format_seconds(d);
    let (secs, frac) = shown.split_once('.').unwrap_or((&shown, ""));
    assert!(frac.len() <= 9 && !frac.ends_with('0'), "{shown}");
    assert_eq!(secs.parse::<u64>().unwrap(), d.as_secs(), "{shown}");
    assert_eq!(
        format!("{frac:0<9}").parse::<u32>().unwrap(),
        d.subsec_nanos(),
        "{shown}"
    );
});
