//! ttrpc, containerd's small RPC protocol (containerd/ttrpc `channel.go`,
//! `request.proto`, `PROTOCOL.md`; ttrpc v1.2.9 in NRI v0.12.2): messages
//! `u32 BE length | u32 BE stream id | u8 type | u8 flags | length bytes`
//! on each mux conn, a protobuf `Request` or `Response` inside. NRI uses
//! unary calls only.

use super::protobuf::{self as pw, Fields, WireError, Writer};

pub const HEADER: usize = 10;
/// `messageLengthMax` (channel.go): 4 MiB.
pub const MAX_MESSAGE: usize = 4 << 20;
pub const TYPE_REQUEST: u8 = 1;
pub const TYPE_RESPONSE: u8 = 2;

/// The gRPC status codes this plugin answers with (google.golang.org/grpc
/// `codes`).
pub mod code {
    pub const OK: u32 = 0;
    /// What a handler's own error gets (ttrpc services.go: an error that
    /// is not a status).
    pub const UNKNOWN: u32 = 2;
    pub const INVALID_ARGUMENT: u32 = 3;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    /// An unknown service or method (ttrpc services.go:108, 163).
    pub const UNIMPLEMENTED: u32 = 12;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub length: usize,
    pub stream: u32,
    pub kind: u8,
    pub flags: u8,
}

impl Header {
    pub fn parse(b: &[u8; HEADER]) -> Header {
        Header {
            length: u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize,
            stream: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            kind: b[8],
            flags: b[9],
        }
    }
}

/// What one conn's bytes hold next.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    Message(Header, Vec<u8>),
    /// A message longer than [`MAX_MESSAGE`]: its bytes are discarded as they
    /// come, and the stream is answered RESOURCE_EXHAUSTED, as the Go
    /// channel does (channel.go `recv`: `Discard`, then
    /// `codes.ResourceExhausted`); the connection stays.
    Oversized(Header),
}

/// A conn's byte stream cut back into ttrpc messages (a message may span
/// frames, a frame may hold several messages).
#[derive(Debug, Default)]
pub struct Assembler {
    buf: Vec<u8>,
    /// Where the bytes not yet handed out begin in `buf`: taking a message
    /// moves it on, and the bytes before it go at the next compaction, so
    /// a run of small messages costs no copy of what follows each.
    start: usize,
    /// Bytes of an oversized message still to drop.
    discard: usize,
}

impl Assembler {
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.discard > 0 {
            let n = self.discard.min(bytes.len());
            self.discard -= n;
            bytes = &bytes[n..];
        }
        if let Some(h) = self.head() {
            // A message under way: room for all of it at once, not by
            // doubling (a 4 MiB one would take up to 8).
            let end = self.start + HEADER + h.length;
            if h.length <= MAX_MESSAGE && end > self.buf.capacity() {
                self.buf.reserve_exact(end - self.buf.len());
            }
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The header of the next message, once its 10 bytes are here.
    fn head(&self) -> Option<Header> {
        let held = &self.buf[self.start..];
        (held.len() >= HEADER).then(|| Header::parse(held[..HEADER].try_into().expect("10 bytes")))
    }

    /// The next complete item, `None` until more bytes come.
    pub fn next_item(&mut self) -> Option<Item> {
        let item = self.take();
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        item
    }

    fn take(&mut self) -> Option<Item> {
        if self.discard > 0 {
            return None;
        }
        let h = self.head()?;
        let held = self.buf.len() - self.start;
        if h.length > MAX_MESSAGE {
            let here = (held - HEADER).min(h.length);
            self.discard = h.length - here;
            self.start += HEADER + here;
            return Some(Item::Oversized(h));
        }
        let end = HEADER + h.length;
        if held < end {
            return None;
        }
        let body = if self.start == 0 && held == end {
            // The buffer is this message alone, as a large one arrives:
            // handed over, not copied (the header's 10 bytes move down).
            let mut b = std::mem::take(&mut self.buf);
            b.drain(..HEADER);
            b
        } else {
            let b = self.buf[self.start + HEADER..self.start + end].to_vec();
            self.start += end;
            b
        };
        Some(Item::Message(h, body))
    }

    /// Bytes held of a message not complete yet.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

/// A message on the wire: header then body.
pub fn encode(stream: u32, kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&stream.to_be_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(body);
    out
}

/// `Request{1 service, 2 method, 3 payload, 4 timeout_nano, 5 metadata}`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Request<'a> {
    pub service: &'a str,
    pub method: &'a str,
    pub payload: &'a [u8],
    pub timeout_nano: i64,
}

impl<'a> Request<'a> {
    pub fn decode(b: &'a [u8]) -> Result<Request<'a>, WireError> {
        let mut r = Request::default();
        let mut f = Fields::new(b);
        while let Some((n, v)) = f.next()? {
            match n {
                1 => r.service = pw::text(n, v, "Request.service")?,
                2 => r.method = pw::text(n, v, "Request.method")?,
                3 => r.payload = pw::bytes(n, v, "Request.payload")?,
                4 => r.timeout_nano = pw::varint(n, v, "Request.timeout_nano")? as i64,
                _ => {}
            }
        }
        Ok(r)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.text(1, self.service)
            .text(2, self.method)
            .bytes(3, self.payload)
            .varint(4, self.timeout_nano as u64);
        w.into_bytes()
    }
}

/// A `Response{1 status: google.rpc.Status{1 code, 2 message}, 2 payload}`:
/// an OK answer leaves the status out.
pub fn response(payload: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(2, payload);
    w.into_bytes()
}

pub fn error_response(code: u32, message: &str) -> Vec<u8> {
    let mut status = Writer::new();
    status.varint(1, u64::from(code)).text(2, message);
    let mut w = Writer::new();
    w.message(1, &status);
    w.into_bytes()
}

/// A decoded `Response`: the status code (0 when absent) and message, and
/// the payload.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Response<'a> {
    pub code: u32,
    pub message: &'a str,
    pub payload: &'a [u8],
}

impl<'a> Response<'a> {
    pub fn decode(b: &'a [u8]) -> Result<Response<'a>, WireError> {
        let mut r = Response::default();
        let mut f = Fields::new(b);
        while let Some((n, v)) = f.next()? {
            match n {
                1 => {
                    let mut s = Fields::new(pw::bytes(n, v, "Response.status")?);
                    while let Some((n, v)) = s.next()? {
                        match n {
                            1 => r.code = pw::varint(n, v, "Status.code")? as u32,
                            2 => r.message = pw::text(n, v, "Status.message")?,
                            _ => {}
                        }
                    }
                }
                2 => r.payload = pw::bytes(n, v, "Response.payload")?,
                _ => {}
            }
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_across_pushes_come_out_whole_and_in_order() {
        let a = encode(1, TYPE_REQUEST, b"first");
        let b = encode(3, TYPE_REQUEST, b"");
        let wire: Vec<u8> = [a, b].concat();
        let mut asm = Assembler::default();
        let mut out = Vec::new();
        for byte in &wire {
            asm.push(std::slice::from_ref(byte));
            while let Some(i) = asm.next_item() {
                out.push(i);
            }
        }
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Item::Message(h, body) if h.stream == 1 && body == b"first"));
        assert!(matches!(&out[1], Item::Message(h, body) if h.stream == 3 && body.is_empty()));
        assert_eq!(asm.pending(), 0);
    }

    #[test]
    fn an_oversized_message_is_dropped_and_the_next_one_read() {
        let mut asm = Assembler::default();
        let mut big = Vec::new();
        big.extend_from_slice(&((MAX_MESSAGE + 1) as u32).to_be_bytes());
        big.extend_from_slice(&5u32.to_be_bytes());
        big.extend_from_slice(&[1, 0]);
        asm.push(&big);
        asm.push(&vec![7u8; 1000]);
        assert!(matches!(asm.next_item(), Some(Item::Oversized(h)) if h.stream == 5));
        assert_eq!(asm.next_item(), None);
        asm.push(&vec![7u8; MAX_MESSAGE + 1 - 1000]);
        asm.push(&encode(7, TYPE_REQUEST, b"x"));
        assert!(matches!(asm.next_item(), Some(Item::Message(h, b)) if h.stream == 7 && b == b"x"));
    }

    #[test]
    fn requests_and_responses_round_trip() {
        let r = Request {
            service: "nri.pkg.api.v1alpha1.Plugin",
            method: "Configure",
            payload: b"\x08\x01",
            timeout_nano: 2_000_000_000,
        };
        assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        let e = error_response(code::UNIMPLEMENTED, "no method Shutdown");
        let d = Response::decode(&e).unwrap();
        assert_eq!((d.code, d.message), (12, "no method Shutdown"));
        // An OK response with an empty payload is 0 bytes (PROTOCOL.md, section 2).
        assert!(response(b"").is_empty());
        assert_eq!(Response::decode(b"").unwrap(), Response::default());
    }
}
