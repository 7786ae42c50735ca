//! HTTP/1.1 (RFC 9112) as the agent's server speaks it: a request head fed
//! read by read until its empty line ([`feed`]), parsed into the one kind of
//! request it answers ([`parse_head`]: GET or HEAD of a path), and a
//! response's head written. The server's loop, its bounds and its routes are
//! `agent::http`'s.

use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    HeaderFieldsTooLarge,
    ServiceUnavailable,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::HeaderFieldsTooLarge => 431,
            Status::ServiceUnavailable => 503,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::RequestTimeout => "Request Timeout",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::ServiceUnavailable => "Service Unavailable",
        }
    }
}

#[derive(Clone, Debug)]
pub enum Body {
    Static(&'static str),
    Shared(Arc<String>),
}

impl Body {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Static(s) => s.as_bytes(),
            Body::Shared(s) => s.as_bytes(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Response {
    pub status: Status,
    pub content_type: &'static str,
    pub body: Body,
}

impl Response {
    pub fn text(status: Status, body: &'static str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Body::Static(body),
        }
    }

    /// The status line and header fields, up to the empty line: every
    /// response is `Connection: close`, a 405 says what is allowed.
    pub fn head(&self) -> Vec<u8> {
        let body = self.body.as_bytes();
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status.code(),
            self.status.reason(),
            self.content_type,
            body.len()
        );
        if self.status == Status::MethodNotAllowed {
            head.push_str("Allow: GET, HEAD\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    }

    pub fn metrics(body: Arc<String>) -> Response {
        Response {
            status: Status::Ok,
            content_type: super::exposition::CONTENT_TYPE,
            body: Body::Shared(body),
        }
    }
}

/// What a read added to a request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fed {
    /// No end yet, and within the cap.
    More,
    /// The head ends just before this offset (past its empty line); bytes
    /// after it (a body the client sent anyway) are not the head's.
    Head(usize),
    /// Past `max_head_bytes` with no end: 431.
    TooLarge,
}

/// Add `chunk`, one read's bytes, to `head` and say whether the head is
/// whole. Only the bytes the chunk can complete a terminator with are
/// searched again, so a head read a byte at a time costs linear time.
pub fn feed(head: &mut Vec<u8>, chunk: &[u8], max_head_bytes: usize) -> Fed {
    let from = head.len().saturating_sub(3);
    head.extend_from_slice(chunk);
    match head_end(head, from) {
        Some(end) => Fed::Head(end),
        None if head.len() > max_head_bytes => Fed::TooLarge,
        None => Fed::More,
    }
}

/// The end of the head (just past its empty line), searching from `from`.
/// CRLF is the terminator; a bare LF is accepted too (RFC 9112, 2.2).
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf[i + 1..].starts_with(b"\n") {
                return Some(i + 2);
            }
            if buf[i + 1..].starts_with(b"\r\n") {
                return Some(i + 3);
            }
        }
        i += 1;
    }
    None
}

/// RFC 9110 5.6.2: tchar.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A request head the server answers: GET or HEAD of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The target without its query: starts with `/`, visible ASCII only.
    pub path: &'a str,
    /// GET; HEAD gets the headers of GET alone.
    pub with_body: bool,
}

/// Read a whole head (request line and header fields, up to its empty
/// line): the request, or the status that refuses it (400 for anything
/// that is not HTTP/1.x, 405 for a method but GET and HEAD).
pub fn parse_head(head: &[u8]) -> Result<Request<'_>, Status> {
    let text = std::str::from_utf8(head).map_err(|_| Status::BadRequest)?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Status::BadRequest);
    };
    if !is_token(method)
        || !matches!(version, "HTTP/1.1" | "HTTP/1.0")
        || !target.starts_with('/')
        || !target.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(Status::BadRequest);
    }
    for field in lines.filter(|l| !l.is_empty()) {
        let ok = field.split_once(':').is_some_and(|(name, value)| {
            is_token(name)
                && value
                    .bytes()
                    .all(|b| b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80)
        });
        if !ok {
            return Err(Status::BadRequest);
        }
    }
    let with_body = match method {
        "GET" => true,
        "HEAD" => false,
        _ => return Err(Status::MethodNotAllowed),
    };
    Ok(Request {
        path: target.split_once('?').map_or(target, |(p, _)| p),
        with_body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two functions the fuzz target `http1` drives (fuzz/run.sh).
    #[test]
    fn feed_and_parse_head_as_the_fuzz_target_drives_them() {
        let mut head = Vec::new();
        assert_eq!(
            feed(&mut head, b"GET /metrics?x HTTP/1.1\r\nA: b\r", 64),
            Fed::More
        );
        assert_eq!(feed(&mut head, b"\n\r", 64), Fed::More);
        assert_eq!(feed(&mut head, b"\nbody", 64), Fed::Head(33));
        assert_eq!(
            parse_head(&head[..33]),
            Ok(Request {
                path: "/metrics",
                with_body: true
            })
        );
        let mut big = Vec::new();
        assert_eq!(feed(&mut big, &[b'a'; 65], 64), Fed::TooLarge);
        assert_eq!(
            parse_head(b"HEAD / HTTP/1.0\n\n").map(|r| r.with_body),
            Ok(false)
        );
        assert_eq!(
            parse_head(b"PUT / HTTP/1.1\r\n\r\n"),
            Err(Status::MethodNotAllowed)
        );
        assert_eq!(parse_head(b"GET /\r\n\r\n"), Err(Status::BadRequest));
    }

    #[test]
    fn head_end_finds_crlf_and_lf_terminators_across_reads() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\n", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
        // Searching from 3 bytes before the new data finds a terminator split
        // across two reads.
        let buf = b"GET / HTTP/1.1\r\n\r\n";
        assert_eq!(head_end(buf, buf.len() - 4), Some(18));
    }
}
