//! gRPC's mapping onto HTTP/2 (grpc/grpc `doc/PROTOCOL-HTTP2.md`), a unary
//! call's side of it: the request's header block, the one
//! Length-Prefixed-Message of a response, the response headers and
//! trailers as a status, and the status codes (`doc/statuscodes.md`). The
//! frames around them are `h2_connection`'s.

use super::h2_frames::FrameError;
use super::hpack;
use std::fmt;
use std::io;
use std::time::{Duration, Instant};

/// gRPC status codes this module synthesizes (grpc/grpc `doc/statuscodes.md`).
pub const CANCELLED: u32 = 1;
pub const UNKNOWN: u32 = 2;
pub const DEADLINE_EXCEEDED: u32 = 4;
pub const RESOURCE_EXHAUSTED: u32 = 8;
pub const PERMISSION_DENIED: u32 = 7;
pub const UNIMPLEMENTED: u32 = 12;
pub const INTERNAL: u32 = 13;
pub const UNAVAILABLE: u32 = 14;
pub const UNAUTHENTICATED: u32 = 16;

/// Why a call gave no message. The caller names the peer: nothing here
/// quotes what the server sent beyond a short printable status message.
#[derive(Debug)]
pub enum Error {
    /// The whole call (every send and read) took longer than allowed.
    Timeout {
        timeout: Duration,
        stage: &'static str,
    },
    /// Not gRPC, or a framing or HPACK error.
    Protocol(String),
    /// The server answered with a non-OK gRPC status (or an HTTP/2 reset or
    /// HTTP status, mapped as gRPC documents).
    Status { code: u32, message: Option<String> },
    /// A response over the caller's bound.
    TooLarge { size: u64, limit: u64 },
    /// The stream failed (ECONNRESET, ...).
    Io { op: &'static str, err: io::Error },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Timeout { timeout, stage } => write!(
                f,
                "no complete answer within {} ms (waiting for {stage})",
                timeout.as_millis()
            ),
            Error::Protocol(m) => f.write_str(m),
            Error::Status { code, message } => {
                write!(f, "gRPC status {code}")?;
                match message {
                    Some(m) => write!(f, ": {m}"),
                    None => Ok(()),
                }
            }
            Error::TooLarge { size, limit } => {
                write!(f, "an answer of {size} bytes, over the {limit}-byte limit")
            }
            Error::Io { op, err } => write!(f, "{op}: {err}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<FrameError> for Error {
    fn from(e: FrameError) -> Error {
        Error::Protocol(e.0)
    }
}

pub(crate) fn protocol(what: impl Into<String>) -> Error {
    Error::Protocol(what.into())
}

/// What one call's response has shown so far.
#[derive(Default)]
pub struct Call {
    /// The response headers were read: what comes next is data or trailers.
    pub headers: bool,
    /// The Length-Prefixed-Message's prefix (Compressed-Flag, 4-byte
    /// big-endian length), `have` bytes of it so far.
    prefix: [u8; 5],
    pub have: usize,
    /// The message, reserved whole once its length is known and allowed.
    pub body: Vec<u8>,
    expect: Option<usize>,
}

impl Call {
    pub fn data(&mut self, mut data: &[u8], max: usize) -> Result<(), Error> {
        if self.have < 5 {
            let n = (5 - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == 5 {
                if self.prefix[0] != 0 {
                    return Err(protocol(format!(
                        "a message with compressed-flag {}, and no encoding was offered",
                        self.prefix[0]
                    )));
                }
                let p = &self.prefix;
                let len = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
                if len > max {
                    return Err(Error::TooLarge {
                        size: len as u64,
                        limit: max as u64,
                    });
                }
                self.expect = Some(len);
                self.body.reserve_exact(len);
            }
        }
        if let Some(len) = self.expect {
            let after = (self.body.len() + data.len()).saturating_sub(len);
            if after > 0 {
                return Err(protocol(format!(
                    "more than one message in a unary response ({after} bytes after a {len}-byte message)"
                )));
            }
        }
        self.body.extend_from_slice(data);
        Ok(())
    }

    /// A decoded header block: the response headers, or the trailers. Some
    /// result when the call is over.
    pub fn headers(
        &mut self,
        h: Headers,
        end: bool,
    ) -> Result<Option<Result<Vec<u8>, Error>>, Error> {
        if !self.headers {
            let status = h
                .status
                .ok_or_else(|| protocol("response headers without :status"))?;
            if (100..200).contains(&status) {
                // RFC 9113 §8.1: an informational block; the real one follows.
                if end {
                    return Err(protocol(format!("HTTP status {status} ended the stream")));
                }
                return Ok(None);
            }
            self.headers = true;
            if status != 200 {
                // grpc/grpc doc/http-grpc-status-mapping.md: only "for
                // clients that received a response that did not include
                // grpc-status. If grpc-status was provided, it must be used."
                let code = match (end, h.grpc_status, status) {
                    (true, Some(code), _) => code,
                    (_, _, 400 | 431) => INTERNAL,
                    (_, _, 401) => UNAUTHENTICATED,
                    (_, _, 403) => PERMISSION_DENIED,
                    (_, _, 404) => UNIMPLEMENTED,
                    (_, _, 429 | 502 | 503 | 504) => UNAVAILABLE,
                    _ => UNKNOWN,
                };
                return Ok(Some(Err(Error::Status {
                    code,
                    message: Some(format!("HTTP status {status}")),
                })));
            }
            if !h.grpc_content_type {
                return Err(protocol(
                    "a response whose content-type is not application/grpc",
                ));
            }
            if !end {
                return Ok(None);
            }
            // Trailers-Only: the status is in this same block.
        } else if !end {
            return Err(protocol(
                "a third header block, or trailers without END_STREAM",
            ));
        }
        let code = h
            .grpc_status
            .ok_or_else(|| protocol("trailers without a valid grpc-status"))?;
        if code != 0 {
            return Ok(Some(Err(Error::Status {
                code,
                message: h.grpc_message,
            })));
        }
        match self.expect {
            Some(len) if self.body.len() == len => Ok(Some(Ok(std::mem::take(&mut self.body)))),
            _ => Err(protocol(format!(
                "status OK after {} data bytes, not one whole message",
                self.have + self.body.len()
            ))),
        }
    }
}

/// The fields of a header block that gRPC gives meaning to.
#[derive(Default)]
pub struct Headers {
    pub status: Option<u16>,
    grpc_content_type: bool,
    grpc_status: Option<u32>,
    grpc_message: Option<String>,
}

impl Headers {
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        match name {
            b":status" => {
                self.status = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok())
            }
            // "application/grpc" [("+proto" / "+json" / {custom})]
            b"content-type" => {
                self.grpc_content_type = value == b"application/grpc"
                    || value.starts_with(b"application/grpc+")
                    || value.starts_with(b"application/grpc;")
            }
            b"grpc-status" => {
                self.grpc_status = Some(value)
                    .filter(|v| !v.is_empty() && v.len() <= 9 && v.iter().all(u8::is_ascii_digit))
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
            }
            b"grpc-message" => self.grpc_message = status_message(value),
            _ => {}
        }
    }
}

/// grpc-message is percent-encoded UTF-8. Kept only when short and
/// printable ASCII once decoded: it ends up in logs.
fn status_message(raw: &[u8]) -> Option<String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'%' && i + 2 < raw.len() {
            let hex = std::str::from_utf8(&raw[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    if out.is_empty() || out.len() > 200 || !out.iter().all(|b| (0x20..0x7f).contains(b)) {
        return None;
    }
    String::from_utf8(out).ok()
}

/// PROTOCOL-HTTP2.md, "Errors": the RST_STREAM error code as a gRPC status.
pub fn reset_status(h2: u32) -> u32 {
    match h2 {
        0x7 => UNAVAILABLE,        // REFUSED_STREAM
        0x8 => CANCELLED,          // CANCEL
        0xb => RESOURCE_EXHAUSTED, // ENHANCE_YOUR_CALM
        0xc => PERMISSION_DENIED,  // INADEQUATE_SECURITY
        _ => INTERNAL,
    }
}

/// PROTOCOL-HTTP2.md, "Requests": pseudo-headers first, then grpc-timeout,
/// then the rest of the call definition.
pub fn request_headers(path: &str, deadline: Instant) -> Vec<u8> {
    let mut b = Vec::with_capacity(128);
    hpack::put_indexed(&mut b, hpack::METHOD_POST);
    hpack::put_indexed(&mut b, hpack::SCHEME_HTTP);
    hpack::put_literal(&mut b, Ok(hpack::PATH), path);
    // grpc-go names a unix socket's authority "localhost".
    hpack::put_literal(&mut b, Ok(hpack::AUTHORITY), "localhost");
    // The server may give up when the client will: at most 8 digits,
    // rounded up so that it never gives up first (rounded down, a call with
    // 100 ms left ended after 99.9 ms with the server's DEADLINE_EXCEEDED).
    let left = deadline.saturating_duration_since(Instant::now());
    let ms = left.as_micros().div_ceil(1000).clamp(1, 99_999_999);
    hpack::put_literal(&mut b, Err("grpc-timeout"), &format!("{ms}m"));
    hpack::put_literal(&mut b, Ok(hpack::CONTENT_TYPE), "application/grpc");
    // "Used to detect incompatible proxies".
    hpack::put_literal(&mut b, Err("te"), "trailers");
    hpack::put_literal(
        &mut b,
        Ok(hpack::USER_AGENT),
        concat!("roce-tune/", env!("CARGO_PKG_VERSION")),
    );
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_are_kept_only_when_printable() {
        assert_eq!(
            status_message(b"pod a in namespace b not found").as_deref(),
            Some("pod a in namespace b not found")
        );
        assert_eq!(
            status_message(b"100%25 sure%21").as_deref(),
            Some("100% sure!")
        );
        assert_eq!(
            status_message(b"bad %zz kept").as_deref(),
            Some("bad %zz kept")
        );
        assert_eq!(status_message(b"line%0Abreak"), None);
        assert_eq!(status_message(&[b'x'; 201]), None);
        assert_eq!(status_message(b"caf%C3%A9"), None);
    }
}
