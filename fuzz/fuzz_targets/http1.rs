//! The request head the agent's metrics server reads (`agent::http`), as
//! any local process may send it. Byte 0 picks the head's cap and byte 1 how
//! the rest arrives (read sizes); the rest is the bytes. Fed in those reads,
//! the head must end where it ends fed at once (or be too large at once);
//! its end is its first empty line; and what parses is a GET or HEAD of a
//! path that reads back the same from a request line of its own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::http1::{feed, parse_head, Fed};

fuzz_target!(|data: &[u8]| {
    let [cap, reads, bytes @ ..] = data else {
        return;
    };
    let max = 16 + usize::from(*cap) * 32;
    // As the server reads: never past one byte over the cap.
    let mut head = Vec::new();
    let mut fed = Fed::More;
    let mut rest = bytes;
    let mut size = usize::from(*reads % 16) + 1;
    while fed == Fed::More && !rest.is_empty() {
        let room = max + 1 - head.len();
        let n = size.min(room).min(rest.len());
        fed = feed(&mut head, &rest[..n], max);
        rest = &rest[n..];
        size = size * 7 % 23 + 1;
    }
    let mut whole = Vec::new();
    let at_once = feed(&mut whole, &bytes[..bytes.len().min(max + 1)], max);
    assert_eq!(fed, at_once, "fed in reads and at once");
    let Fed::Head(end) = fed else {
        return;
    };
    let h = &head[..end];
    assert!(h.ends_with(b"\n\n") || h.ends_with(b"\n\r\n"), "{h:?}");
    assert_eq!(
        feed(&mut Vec::new(), &h[..end - 1], usize::MAX),
        Fed::More,
        "an earlier empty line"
    );
    if let Ok(r) = parse_head(h) {
        assert!(
            r.path.starts_with('/') && !r.path.contains('?'),
            "{:?}",
            r.path
        );
        assert!(r.path.bytes().all(|b| b.is_ascii_graphic()), "{:?}", r.path);
        let method = if r.with_body { "GET " } else { "HEAD " };
        assert!(h.starts_with(method.as_bytes()), "{h:?}");
        let line = format!("{method}{} HTTP/1.1\r\n\r\n", r.path);
        assert_eq!(parse_head(line.as_bytes()), Ok(r));
    }
});
