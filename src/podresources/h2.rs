//! A gRPC unary call over HTTP/2 with prior knowledge (h2c) on a unix
//! socket: RFC 9113 framing, gRPC's mapping onto it (grpc/grpc
//! `doc/PROTOCOL-HTTP2.md`), one stream per call, calls one after another
//! on one connection.
//!
//! The socket is non-blocking and every wait is a `poll` against the one
//! deadline of the whole call, so a server that accepts and never answers,
//! or trickles a byte at a time, costs at most the caller's timeout.
//!
//! The bounds of a call, each checked before the loop turn or the
//! allocation it guards (without them, a server that kept sending valid frames
//! was never waited on, so a deadline checked only before a blocking read
//! held an ADD for 2.6 to 8.0 s):
//! - the deadline, on every turn of every loop (`read_frame`, `fill`,
//!   `send`, `wait`), whether or not a read would block;
//! - [`OTHER_FRAMES_MAX`] and [`OTHER_BYTES_MAX`]: the frames that are not
//!   the answer, in count and in payload bytes;
//! - [`MAX_FRAME`] a frame, [`HEADER_FRAMES_MAX`] and [`HEADER_BLOCK_MAX`]
//!   a header block, [`HEADER_LIST_MAX`] its decoded fields;
//! - the caller's `max_message` the one response message, checked from its
//!   length prefix before its buffer is reserved.

use super::hpack::{self, Decoder};
use super::Error;
use nix::errno::Errno;
use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// RFC 9113 §3.4: the client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

// Flags.
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

// SETTINGS identifiers (§6.5.2).
const SETTINGS_ENABLE_PUSH: u16 = 0x2;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// SETTINGS_MAX_FRAME_SIZE's initial value, which this client keeps: a peer
/// must not send a larger frame (§4.2).
const MAX_FRAME: usize = 16_384;
/// The initial flow-control window of a stream and of the connection (§6.9.2).
const DEFAULT_WINDOW: u32 = 65_535;
/// Response headers and trailers: gRPC suggests clients limit each to 8 KiB
/// (PROTOCOL-HTTP2.md, "Responses"); this allows twice that, advertised in
/// SETTINGS_MAX_HEADER_LIST_SIZE.
pub const HEADER_LIST_MAX: usize = 16 * 1024;
/// A header block's encoded size is bounded too, before it is decoded.
pub const HEADER_BLOCK_MAX: usize = 4 * HEADER_LIST_MAX;
/// Frames of one header block (a HEADERS and its CONTINUATIONs): a server
/// splits a block only where it passes SETTINGS_MAX_FRAME_SIZE, so a block
/// within HEADER_BLOCK_MAX takes 5; empty CONTINUATIONs are no excuse for more.
pub const HEADER_FRAMES_MAX: usize = 16;
/// Frames on a connection that are not the answer: SETTINGS and their
/// ACKs, PING, WINDOW_UPDATE, PRIORITY, GOAWAY, unknown types (RFC 9113
/// §5.5), 1xx header blocks (§8.1), DATA that carries no byte of the
/// message (all padding), frames of a stream already finished. A gRPC
/// server sends a handful a call (the fake kubelet's grpcio: its SETTINGS,
/// a WINDOW_UPDATE, the ACK of ours, at times a PING of its BDP probe);
/// a server that keeps sending them is cut off here, whatever the time left.
pub const OTHER_FRAMES_MAX: u32 = 64;
/// Their payload bytes in all, padding of the answer's DATA included.
pub const OTHER_BYTES_MAX: usize = 64 * 1024;

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

fn protocol(what: impl Into<String>) -> Error {
    Error::Protocol(what.into())
}

/// One HTTP/2 connection to a gRPC server.
pub struct Conn {
    fd: OwnedFd,
    buf: Vec<u8>,
    start: usize,
    hpack: Decoder,
    next_stream: u32,
    /// Connection-level DATA octets received and not yet given back with a
    /// WINDOW_UPDATE.
    consumed: u32,
    /// The server's SETTINGS, which must be its first frame, was read.
    preface_seen: bool,
    /// False once the server sent GOAWAY or a call ended mid-stream: the
    /// connection is not used for another call.
    pub reusable: bool,
    goaway: bool,
    timeout: Duration,
    max_message: usize,
    /// Frames and payload bytes so far that were not the answer.
    other_frames: u32,
    other_bytes: usize,
}

impl Conn {
    /// Connect to `path` and send the preface. The server's preface is read
    /// with the first answer.
    pub fn open(
        path: &Path,
        timeout: Duration,
        deadline: Instant,
        max_message: usize,
    ) -> Result<Conn, Error> {
        let fd = connect(path, timeout, deadline)?;
        peer_is_root(&fd, path)?;
        Conn::over(fd, timeout, deadline, max_message)
    }

    /// `open` on a connected, non-blocking stream whose peer is trusted
    /// (the fuzz target's socketpair).
    pub fn over(
        fd: OwnedFd,
        timeout: Duration,
        deadline: Instant,
        max_message: usize,
    ) -> Result<Conn, Error> {
        // Room for one whole response (the 5-byte gRPC prefix and padding
        // included), so the server never waits for a WINDOW_UPDATE mid-call.
        let window = (max_message + 64 * 1024).min(i32::MAX as usize) as u32;
        let mut c = Conn {
            fd,
            buf: Vec::with_capacity(16 * 1024),
            start: 0,
            hpack: Decoder::new(hpack::TABLE_SIZE),
            next_stream: 1,
            consumed: 0,
            preface_seen: false,
            reusable: true,
            goaway: false,
            timeout,
            max_message,
            other_frames: 0,
            other_bytes: 0,
        };
        let mut out = Vec::with_capacity(96);
        out.extend_from_slice(PREFACE);
        let mut settings = Vec::with_capacity(18);
        for (id, v) in [
            (SETTINGS_ENABLE_PUSH, 0),
            (SETTINGS_INITIAL_WINDOW_SIZE, window),
            (SETTINGS_MAX_HEADER_LIST_SIZE, HEADER_LIST_MAX as u32),
        ] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&v.to_be_bytes());
        }
        frame(&mut out, SETTINGS, 0, 0, &settings);
        // SETTINGS cannot change the connection's window: only WINDOW_UPDATE.
        frame(
            &mut out,
            WINDOW_UPDATE,
            0,
            0,
            &(window - DEFAULT_WINDOW).to_be_bytes(),
        );
        c.send(&out, deadline)?;
        Ok(c)
    }

    /// One unary call: `message` (one protobuf message) to `path`
    /// (`/service/method`); the response message, or the call's non-OK
    /// status. The response may be at most `max_message` bytes (and never
    /// more than the connection's window, `open`'s `max_message`).
    pub fn unary(
        &mut self,
        path: &str,
        message: &[u8],
        max_message: usize,
        deadline: Instant,
    ) -> Result<Vec<u8>, Error> {
        let max_message = max_message.min(self.max_message);
        let id = self.next_stream;
        self.next_stream += 2;
        self.reusable = false;
        let mut out = Vec::with_capacity(256 + message.len());
        if self.consumed > 0 {
            frame(&mut out, WINDOW_UPDATE, 0, 0, &self.consumed.to_be_bytes());
            self.consumed = 0;
        }
        let block = request_headers(path, deadline);
        let mut body = Vec::with_capacity(5 + message.len());
        body.push(0);
        body.extend_from_slice(&(message.len() as u32).to_be_bytes());
        body.extend_from_slice(message);
        if block.len() > MAX_FRAME || body.len() > MAX_FRAME {
            return Err(protocol(format!(
                "request of {} header and {} data bytes does not fit one frame",
                block.len(),
                body.len()
            )));
        }
        frame(&mut out, HEADERS, END_HEADERS, id, &block);
        frame(&mut out, DATA, END_STREAM, id, &body);
        self.send(&out, deadline)?;

        let mut call = Call::default();
        let mut payload = Vec::new();
        loop {
            let (ty, flags, stream) = self.read_frame(&mut payload, deadline)?;
            match ty {
                DATA => {
                    self.consumed = self.consumed.saturating_add(payload.len() as u32);
                    if stream != id {
                        // Only a stream this connection finished can still
                        // send (RFC 9113 §5.1, "closed").
                        if stream == 0 || stream > id || stream % 2 == 0 {
                            return Err(protocol(format!("DATA on stream {stream}")));
                        }
                        self.not_answer(1, payload.len(), "DATA of a finished stream")?;
                        continue;
                    }
                    if !call.headers {
                        return Err(protocol("DATA before the response headers"));
                    }
                    let data = unpad(&payload, flags)?;
                    // Padding is not the answer; a frame of nothing else
                    // counts as a frame that is not.
                    let frames = u32::from(data.is_empty() && flags & END_STREAM == 0);
                    self.not_answer(frames, payload.len() - data.len(), "padding")?;
                    call.data(data, max_message)?;
                    if flags & END_STREAM != 0 {
                        return Err(protocol(format!(
                            "the stream ended after {} data bytes without trailers",
                            call.have + call.body.len()
                        )));
                    }
                }
                HEADERS => {
                    let block = self.header_block(&payload, flags, stream, deadline)?;
                    let mut h = Headers::default();
                    self.hpack
                        .decode(&block, HEADER_LIST_MAX, |n, v| h.field(n, v))
                        .map_err(|e| protocol(format!("{e} ({} byte block)", block.len())))?;
                    if stream != id {
                        if stream == 0 || stream > id || stream % 2 == 0 {
                            return Err(protocol(format!("HEADERS on stream {stream}")));
                        }
                        self.not_answer(1, block.len(), "HEADERS of a finished stream")?;
                        continue;
                    }
                    if !call.headers && h.status.is_some_and(|s| (100..200).contains(&s)) {
                        self.not_answer(1, block.len(), "an informational (1xx) header block")?;
                    }
                    let end = flags & END_STREAM != 0;
                    if let Some(done) = call.headers(h, end)? {
                        self.reusable = !self.goaway;
                        return match done {
                            // The server gave up at the deadline this client
                            // sent it in grpc-timeout: the same timeout.
                            Err(Error::Status {
                                code: DEADLINE_EXCEEDED,
                                ..
                            }) => Err(Error::Timeout {
                                timeout: self.timeout,
                                stage: "the answer (the server's DEADLINE_EXCEEDED)",
                            }),
                            other => other,
                        };
                    }
                }
                RST_STREAM if stream == id => {
                    let code = u32_at(&payload, 0, 4, "RST_STREAM")?;
                    self.reusable = !self.goaway;
                    return Err(Error::Status {
                        code: reset_status(code),
                        message: Some(format!("stream reset by the server (HTTP/2 error {code})")),
                    });
                }
                PUSH_PROMISE => return Err(protocol("PUSH_PROMISE, which SETTINGS disabled")),
                CONTINUATION => return Err(protocol("CONTINUATION outside a header block")),
                GOAWAY => {
                    let last = u32_at(&payload, 0, 8, "GOAWAY")? & 0x7fff_ffff;
                    // §6.8: no new stream on this connection.
                    self.goaway = true;
                    if last < id {
                        return Err(Error::Status {
                            code: UNAVAILABLE,
                            message: Some("the server sent GOAWAY before taking the call".into()),
                        });
                    }
                    // The call was taken: the server finishes it, then closes.
                    self.not_answer(1, payload.len(), "GOAWAY")?;
                }
                // SETTINGS and PING were answered by read_frame; the
                // server's WINDOW_UPDATE and PRIORITY change nothing for a
                // request already sent whole; unknown types are ignored (§5.5).
                _ => self.not_answer(1, payload.len(), frame_name(ty))?,
            }
        }
    }

    /// Count `frames` frames and `bytes` payload bytes that are not the
    /// answer, refusing the server past either bound.
    fn not_answer(&mut self, frames: u32, bytes: usize, last: &str) -> Result<(), Error> {
        self.other_frames = self.other_frames.saturating_add(frames);
        self.other_bytes = self.other_bytes.saturating_add(bytes);
        if self.other_frames > OTHER_FRAMES_MAX || self.other_bytes > OTHER_BYTES_MAX {
            return Err(protocol(format!(
                "the server sent {} frames ({} payload bytes) that are not the answer, over the {OTHER_FRAMES_MAX} frames ({OTHER_BYTES_MAX} bytes) allowed; the last: {last}",
                self.other_frames, self.other_bytes
            )));
        }
        Ok(())
    }

    /// The header block of a HEADERS frame and its CONTINUATION frames.
    fn header_block(
        &mut self,
        first: &[u8],
        flags: u8,
        stream: u32,
        deadline: Instant,
    ) -> Result<Vec<u8>, Error> {
        let mut frag = unpad(first, flags)?;
        if flags & PRIORITY_FLAG != 0 {
            frag = frag
                .get(5..)
                .ok_or_else(|| protocol("HEADERS too short for its priority"))?;
        }
        let mut block = frag.to_vec();
        let mut end = flags & END_HEADERS != 0;
        let mut payload = Vec::new();
        let mut frames = 1;
        while !end {
            frames += 1;
            if frames > HEADER_FRAMES_MAX {
                return Err(protocol(format!(
                    "a header block of more than {HEADER_FRAMES_MAX} frames"
                )));
            }
            let (ty, f, s) = self.read_frame(&mut payload, deadline)?;
            // §6.10: nothing may come between a HEADERS and its CONTINUATIONs.
            if ty != CONTINUATION || s != stream {
                return Err(protocol(format!(
                    "frame type {ty} inside the header block of stream {stream}"
                )));
            }
            block.extend_from_slice(&payload);
            if block.len() > HEADER_BLOCK_MAX {
                return Err(protocol(format!(
                    "header block over {HEADER_BLOCK_MAX} bytes"
                )));
            }
            end = f & END_HEADERS != 0;
        }
        Ok(block)
    }

    /// The next frame for the call: connection-level frames (SETTINGS, PING)
    /// are answered here and still returned; `payload` holds its payload.
    fn read_frame(
        &mut self,
        payload: &mut Vec<u8>,
        deadline: Instant,
    ) -> Result<(u8, u8, u32), Error> {
        // Every frame, buffered or not: a server that keeps the socket full
        // would otherwise never let a read block, where the time is checked.
        before(deadline, self.timeout, "the answer")?;
        self.fill(9, deadline)?;
        let h = &self.buf[self.start..self.start + 9];
        let len = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
        let (ty, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        // §3.4: "the first frame the server sends" is SETTINGS; anything else
        // is not an HTTP/2 server, or not one speaking h2c.
        if !self.preface_seen {
            if ty != SETTINGS || flags & ACK != 0 || stream != 0 || len % 6 != 0 || len > MAX_FRAME
            {
                return Err(protocol(format!(
                    "not an HTTP/2 server: its first {} bytes are not a SETTINGS frame",
                    self.buf.len() - self.start
                )));
            }
            self.preface_seen = true;
        }
        if len > MAX_FRAME {
            return Err(protocol(format!(
                "a frame of {len} bytes, over SETTINGS_MAX_FRAME_SIZE {MAX_FRAME}"
            )));
        }
        self.start += 9;
        self.fill(len, deadline)?;
        payload.clear();
        payload.extend_from_slice(&self.buf[self.start..self.start + len]);
        self.start += len;
        match ty {
            SETTINGS if stream != 0 => return Err(protocol("SETTINGS on a stream")),
            SETTINGS if flags & ACK != 0 && len != 0 => {
                return Err(protocol("SETTINGS ACK with a payload"))
            }
            SETTINGS if flags & ACK != 0 => {}
            SETTINGS => {
                if len % 6 != 0 {
                    return Err(protocol(format!("SETTINGS of {len} bytes")));
                }
                // Nothing the server may set changes what this client sends:
                // its frames are far below any SETTINGS_MAX_FRAME_SIZE and
                // its encoder indexes nothing.
                let mut ack = Vec::with_capacity(9);
                frame(&mut ack, SETTINGS, ACK, 0, &[]);
                self.send_control(&ack, deadline)?;
            }
            PING => {
                if len != 8 || stream != 0 {
                    return Err(protocol(format!("PING of {len} bytes on stream {stream}")));
                }
                if flags & ACK == 0 {
                    let mut pong = Vec::with_capacity(17);
                    frame(&mut pong, PING, ACK, 0, payload);
                    self.send_control(&pong, deadline)?;
                }
            }
            _ => {}
        }
        Ok((ty, flags, stream))
    }

    /// Make `n` unread bytes available in `buf[start..]`.
    fn fill(&mut self, n: usize, deadline: Instant) -> Result<(), Error> {
        if self.start == self.buf.len() {
            self.start = 0;
            self.buf.clear();
        } else if self.start > 0 && self.buf.len() - self.start < n {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        while self.buf.len() - self.start < n {
            before(deadline, self.timeout, "the answer")?;
            let want = (n - (self.buf.len() - self.start)).max(16 * 1024);
            self.buf.reserve(want);
            let spare = self.buf.spare_capacity_mut();
            // SAFETY: recv writes at most spare.len() bytes into the spare
            // capacity, and the length is advanced by what it wrote.
            let r = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    0,
                )
            };
            if r > 0 {
                // SAFETY: the kernel initialised r bytes of the spare capacity.
                unsafe { self.buf.set_len(self.buf.len() + r as usize) };
                continue;
            }
            if r == 0 {
                return Err(protocol(format!(
                    "the server closed the connection ({} bytes unread, {n} needed)",
                    self.buf.len() - self.start
                )));
            }
            match Errno::last() {
                Errno::EAGAIN | Errno::EINTR => wait(
                    &self.fd,
                    PollFlags::POLLIN,
                    self.timeout,
                    deadline,
                    "the answer",
                )?,
                e => {
                    return Err(Error::Io {
                        op: "receive",
                        err: e.into(),
                    })
                }
            }
        }
        Ok(())
    }

    /// An ACK the server asked for. A server that already closed its side
    /// (EPIPE) may still have sent the whole answer, which is in the buffer:
    /// read on, and retire the connection.
    fn send_control(&mut self, data: &[u8], deadline: Instant) -> Result<(), Error> {
        match self.send(data, deadline) {
            Err(Error::Io { .. }) => {
                self.goaway = true;
                Ok(())
            }
            r => r,
        }
    }

    fn send(&mut self, mut data: &[u8], deadline: Instant) -> Result<(), Error> {
        while !data.is_empty() {
            before(deadline, self.timeout, "send")?;
            // MSG_NOSIGNAL: a closed peer is an EPIPE, not a SIGPIPE.
            // SAFETY: send reads at most data.len() bytes from data.
            let r = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    data.as_ptr().cast(),
                    data.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if r >= 0 {
                data = &data[r as usize..];
                continue;
            }
            match Errno::last() {
                Errno::EAGAIN | Errno::EINTR => {
                    wait(&self.fd, PollFlags::POLLOUT, self.timeout, deadline, "send")?
                }
                e => {
                    return Err(Error::Io {
                        op: "send",
                        err: e.into(),
                    })
                }
            }
        }
        Ok(())
    }
}

impl Drop for Conn {
    /// §6.8: tell the server the connection is done; best effort, never
    /// waiting.
    fn drop(&mut self) {
        let mut bye = Vec::with_capacity(17);
        frame(&mut bye, GOAWAY, 0, 0, &[0; 8]);
        // SAFETY: as in send; MSG_DONTWAIT never blocks.
        unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                bye.as_ptr().cast(),
                bye.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }
}

/// What one call's response has shown so far.
#[derive(Default)]
struct Call {
    headers: bool,
    /// The Length-Prefixed-Message's prefix (Compressed-Flag, 4-byte
    /// big-endian length), `have` bytes of it so far.
    prefix: [u8; 5],
    have: usize,
    /// The message, reserved whole once its length is known and allowed.
    body: Vec<u8>,
    expect: Option<usize>,
}

impl Call {
    fn data(&mut self, mut data: &[u8], max: usize) -> Result<(), Error> {
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
    fn headers(&mut self, h: Headers, end: bool) -> Result<Option<Result<Vec<u8>, Error>>, Error> {
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
struct Headers {
    status: Option<u16>,
    grpc_content_type: bool,
    grpc_status: Option<u32>,
    grpc_message: Option<String>,
}

impl Headers {
    fn field(&mut self, name: &[u8], value: &[u8]) {
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
fn reset_status(h2: u32) -> u32 {
    match h2 {
        0x7 => UNAVAILABLE,        // REFUSED_STREAM
        0x8 => CANCELLED,          // CANCEL
        0xb => RESOURCE_EXHAUSTED, // ENHANCE_YOUR_CALM
        0xc => PERMISSION_DENIED,  // INADEQUATE_SECURITY
        _ => INTERNAL,
    }
}

/// The payload of a frame that may carry PADDED (DATA, HEADERS; §6.1, §6.2).
fn unpad(payload: &[u8], flags: u8) -> Result<&[u8], Error> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload
        .first()
        .ok_or_else(|| protocol("a padded frame without its pad length"))? as usize;
    if pad >= payload.len() {
        return Err(protocol(format!(
            "padding of {pad} bytes in a {}-byte frame",
            payload.len()
        )));
    }
    Ok(&payload[1..payload.len() - pad])
}

fn u32_at(payload: &[u8], at: usize, min_len: usize, what: &str) -> Result<u32, Error> {
    if payload.len() < min_len {
        return Err(protocol(format!("{what} of {} bytes", payload.len())));
    }
    Ok(u32::from_be_bytes([
        payload[at],
        payload[at + 1],
        payload[at + 2],
        payload[at + 3],
    ]))
}

/// §4.1: a frame header and its payload.
fn frame(out: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(ty);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// PROTOCOL-HTTP2.md, "Requests": pseudo-headers first, then grpc-timeout,
/// then the rest of the call definition.
fn request_headers(path: &str, deadline: Instant) -> Vec<u8> {
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

/// `Timeout` once the deadline has passed: checked on every turn of a loop.
fn before(deadline: Instant, timeout: Duration, stage: &'static str) -> Result<(), Error> {
    if Instant::now() >= deadline {
        return Err(Error::Timeout { timeout, stage });
    }
    Ok(())
}

/// A frame type, for a message (§6; 0x2 PRIORITY, deprecated by §5.3.2).
fn frame_name(ty: u8) -> &'static str {
    match ty {
        SETTINGS => "SETTINGS",
        PING => "PING",
        WINDOW_UPDATE => "WINDOW_UPDATE",
        0x2 => "PRIORITY",
        RST_STREAM => "RST_STREAM of another stream",
        _ => "a frame of an unknown type",
    }
}

/// Wait until `fd` is ready for `what`, or the deadline passes.
fn wait(
    fd: &OwnedFd,
    flags: PollFlags,
    timeout: Duration,
    deadline: Instant,
    stage: &'static str,
) -> Result<(), Error> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Timeout { timeout, stage });
        }
        // Rounded up: a poll of 0 ms would spin until the deadline.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        let mut fds = [PollFd::new(fd.as_fd(), flags)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(e) => {
                return Err(Error::Io {
                    op: "poll",
                    err: e.into(),
                })
            }
        }
    }
}

/// The server must be root: the kubelet runs as root, and any other uid that
/// could bind the socket path first (or is handed its directory) would
/// decide the placement verdict. SO_PEERCRED gives the credentials the
/// server had when it called listen(2) (unix(7)), which no later setuid of
/// that process changes.
fn peer_is_root(fd: &OwnedFd, path: &Path) -> Result<(), Error> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for getsockopt to write.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(Error::Io {
            op: "ask who serves the socket (SO_PEERCRED)",
            err: io::Error::last_os_error(),
        });
    }
    if cred.uid != 0 {
        return Err(Error::Untrusted(format!(
            "the kubelet's PodResources socket {} is served by uid {}, not root (pid {})",
            path.display(),
            cred.uid,
            cred.pid
        )));
    }
    Ok(())
}

/// A non-blocking connect bounded by the deadline. ENOENT (no socket file)
/// and ECONNREFUSED (a file, nobody listening: a stopped kubelet leaves its
/// socket behind) mean there is no PodResources API here.
fn connect(path: &Path, timeout: Duration, deadline: Instant) -> Result<OwnedFd, Error> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(Error::Io {
            op: "connect",
            err: io::Error::from_raw_os_error(libc::ENAMETOOLONG),
        });
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: a plain syscall; the descriptor is owned right after.
    let raw = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if raw < 0 {
        return Err(Error::Io {
            op: "socket",
            err: io::Error::last_os_error(),
        });
    }
    // SAFETY: raw is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    loop {
        // SAFETY: addr is a valid sockaddr_un of the length given.
        let r = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(fd);
        }
        let e = io::Error::last_os_error();
        match Errno::last() {
            Errno::EINTR => continue,
            Errno::ENOENT | Errno::ENOTDIR | Errno::ECONNREFUSED => return Err(Error::NoSocket(e)),
            // A full listen backlog: Linux answers a non-blocking unix
            // connect with EAGAIN and queues nothing, so try again until
            // the deadline.
            Errno::EAGAIN => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::Timeout {
                        timeout,
                        stage: "connect",
                    });
                }
                std::thread::sleep(left.min(Duration::from_millis(2)));
            }
            Errno::EINPROGRESS => {
                wait(&fd, PollFlags::POLLOUT, timeout, deadline, "connect")?;
                let mut err: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: err and len are valid for getsockopt to write.
                let r = unsafe {
                    libc::getsockopt(
                        fd.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut libc::c_int).cast(),
                        &mut len,
                    )
                };
                return match (r, err) {
                    (0, 0) => Ok(fd),
                    (0, libc::ECONNREFUSED) => {
                        Err(Error::NoSocket(io::Error::from_raw_os_error(err)))
                    }
                    (0, e) => Err(Error::Io {
                        op: "connect",
                        err: io::Error::from_raw_os_error(e),
                    }),
                    _ => Err(Error::Io {
                        op: "connect",
                        err: io::Error::last_os_error(),
                    }),
                };
            }
            _ => {
                return Err(Error::Io {
                    op: "connect",
                    err: e,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::thread;

    /// A scripted server: reads the client's preface, SETTINGS, WINDOW_UPDATE
    /// and request, then writes `answer` and holds the connection until the
    /// client closes it. Returns the socket path and what the client sent.
    fn server(answer: Vec<u8>) -> (std::path::PathBuf, thread::JoinHandle<Vec<u8>>) {
        let dir = std::env::temp_dir().join(format!(
            "rt-h2-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let l = UnixListener::bind(&path).unwrap();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got = vec![0u8; 4096];
            let n = s.read(&mut got).unwrap();
            got.truncate(n);
            s.write_all(&answer).unwrap();
            // EOF after the answer: a client waiting for more fails at once.
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            got.extend(rest);
            let _ = std::fs::remove_dir_all(dir);
            got
        });
        (path, h)
    }

    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    fn f(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        frame(&mut v, ty, flags, stream, payload);
        v
    }

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (n, v) in fields {
            hpack::put_literal(&mut b, Err(n), v);
        }
        b
    }

    fn grpc_message(m: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&(m.len() as u32).to_be_bytes());
        v.extend_from_slice(m);
        v
    }

    fn ok_headers() -> Vec<u8> {
        block(&[(":status", "200"), ("content-type", "application/grpc")])
    }

    fn call(answer: Vec<u8>) -> (Result<Vec<u8>, Error>, Vec<u8>) {
        let (path, h) = server(answer);
        let deadline = Instant::now() + Duration::from_secs(3);
        let r = Conn::open(&path, Duration::from_secs(3), deadline, 1 << 20)
            .and_then(|mut c| c.unary("/v1.PodResourcesLister/List", b"", 1 << 20, deadline));
        (r, h.join().unwrap())
    }

    #[test]
    fn unary_call_with_padding_continuation_ping_and_settings() {
        let hb = ok_headers();
        let (a, b) = hb.split_at(10);
        let mut padded_data = vec![3];
        padded_data.extend(grpc_message(b"hello"));
        padded_data.extend([0, 0, 0]);
        let mut answer = Vec::new();
        answer.extend(f(SETTINGS, 0, 0, &[0, 4, 0, 0, 0xff, 0xff]));
        answer.extend(f(SETTINGS, ACK, 0, &[]));
        answer.extend(f(PING, 0, 0, b"12345678"));
        answer.extend(f(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
        answer.extend(f(0xfe, 0, 0, b"an unknown type is ignored"));
        answer.extend(f(HEADERS, 0, 1, a));
        answer.extend(f(CONTINUATION, END_HEADERS, 1, b));
        answer.extend(f(DATA, PADDED, 1, &padded_data));
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[("grpc-status", "0")]),
        ));
        let (r, sent) = call(answer);
        assert_eq!(r.unwrap(), b"hello");
        assert!(sent.starts_with(PREFACE));
        // The client acked the server's SETTINGS and answered its PING.
        let has = |needle: &[u8]| sent.windows(needle.len()).any(|w| w == needle);
        assert!(has(&f(SETTINGS, ACK, 0, &[])));
        assert!(has(&f(PING, ACK, 0, b"12345678")));
        // and said goodbye.
        assert!(sent.ends_with(&f(GOAWAY, 0, 0, &[0; 8])));
    }

    #[test]
    fn trailers_only_status_is_returned() {
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[
                (":status", "200"),
                ("content-type", "application/grpc"),
                ("grpc-status", "12"),
                (
                    "grpc-message",
                    "unknown method Get for service v1.PodResourcesLister",
                ),
            ]),
        ));
        match call(answer).0 {
            Err(Error::Status {
                code: 12,
                message: Some(m),
            }) => {
                assert_eq!(m, "unknown method Get for service v1.PodResourcesLister")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rst_stream_and_http_status_map_to_grpc_codes() {
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(RST_STREAM, 0, 1, &7u32.to_be_bytes()));
        assert!(matches!(
            call(answer).0,
            Err(Error::Status {
                code: UNAVAILABLE,
                ..
            })
        ));
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[(":status", "404")]),
        ));
        assert!(matches!(
            call(answer).0,
            Err(Error::Status {
                code: UNIMPLEMENTED,
                ..
            })
        ));
        // A grpc-status beside a non-200 status wins; 1xx blocks are skipped.
        let mut answer = f(SETTINGS, 0, 0, &[]);
        answer.extend(f(HEADERS, END_HEADERS, 1, &block(&[(":status", "100")])));
        answer.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[(":status", "503"), ("grpc-status", "9")]),
        ));
        assert!(matches!(call(answer).0, Err(Error::Status { code: 9, .. })));
    }

    #[test]
    fn broken_servers_are_protocol_errors() {
        let settings = f(SETTINGS, 0, 0, &[]);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("first frame not SETTINGS", f(PING, 0, 0, b"12345678")),
            ("HTTP/1.1", b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec()),
            (
                "oversized frame",
                [settings.clone(), f(DATA, 0, 1, &vec![0; MAX_FRAME + 1])].concat(),
            ),
            (
                "DATA first",
                [settings.clone(), f(DATA, 0, 1, &grpc_message(b"x"))].concat(),
            ),
            (
                "not grpc",
                [
                    settings.clone(),
                    f(
                        HEADERS,
                        END_HEADERS,
                        1,
                        &block(&[(":status", "200"), ("content-type", "text/html")]),
                    ),
                ]
                .concat(),
            ),
            (
                "no trailers",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(DATA, END_STREAM, 1, &grpc_message(b"x")),
                ]
                .concat(),
            ),
            (
                "two messages",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(
                        DATA,
                        0,
                        1,
                        &[grpc_message(b"x"), grpc_message(b"y")].concat(),
                    ),
                ]
                .concat(),
            ),
            (
                "half a message",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(DATA, 0, 1, &grpc_message(b"xyz")[..6]),
                    f(
                        HEADERS,
                        END_STREAM | END_HEADERS,
                        1,
                        &block(&[("grpc-status", "0")]),
                    ),
                ]
                .concat(),
            ),
            (
                "bad padding",
                [
                    settings.clone(),
                    f(HEADERS, END_HEADERS, 1, &ok_headers()),
                    f(DATA, PADDED, 1, &[9, 0]),
                ]
                .concat(),
            ),
            (
                "interleaved header block",
                [
                    settings.clone(),
                    f(HEADERS, 0, 1, &ok_headers()),
                    f(PING, 0, 0, b"12345678"),
                ]
                .concat(),
            ),
            (
                "push",
                [
                    settings.clone(),
                    f(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]),
                ]
                .concat(),
            ),
            (
                "bad hpack",
                [settings.clone(), f(HEADERS, END_HEADERS, 1, &[0x80])].concat(),
            ),
            ("closed", settings.clone()),
        ];
        for (what, answer) in cases {
            match call(answer).0 {
                Err(Error::Protocol(m)) => assert!(!m.is_empty(), "{what}"),
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_call_taken_before_goaway_completes_and_the_connection_retires() {
        let answer = [
            f(SETTINGS, 0, 0, &[]),
            f(GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]),
            f(HEADERS, END_HEADERS, 1, &ok_headers()),
            f(DATA, 0, 1, &grpc_message(b"ok")),
            f(
                HEADERS,
                END_STREAM | END_HEADERS,
                1,
                &block(&[("grpc-status", "0")]),
            ),
        ]
        .concat();
        let (path, h) = server(answer);
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut c = Conn::open(&path, Duration::from_secs(3), deadline, 1 << 20).unwrap();
        assert_eq!(c.unary("/s/m", b"", 1 << 20, deadline).unwrap(), b"ok");
        assert!(!c.reusable);
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn an_answer_from_a_server_that_closed_at_once_is_read() {
        let dir = std::env::temp_dir().join(format!("rt-h2close-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let l = UnixListener::bind(&path).unwrap();
        let answer = [
            f(SETTINGS, 0, 0, &[]),
            f(PING, 0, 0, b"87654321"),
            f(
                HEADERS,
                END_STREAM | END_HEADERS,
                1,
                &block(&[
                    (":status", "200"),
                    ("content-type", "application/grpc"),
                    ("grpc-status", "5"),
                ]),
            ),
        ]
        .concat();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // Up to the request's last frame: DATA, END_STREAM, stream 1, an
            // empty message.
            let end = f(DATA, END_STREAM, 1, &[0; 5]);
            let mut got = Vec::new();
            while !got.ends_with(&end) {
                let mut b = [0u8; 4096];
                let n = s.read(&mut b).unwrap();
                assert!(n > 0);
                got.extend_from_slice(&b[..n]);
            }
            s.write_all(&answer).unwrap();
            // Closed whole: the client's SETTINGS ACK and PING ACK may fail.
        });
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut c = Conn::open(&path, Duration::from_secs(3), deadline, 1 << 20).unwrap();
        let r = c.unary("/s/m", b"", 1 << 20, deadline);
        h.join().unwrap();
        // Whether the ACKs met EPIPE depends on who ran first; the status
        // must come through either way.
        assert!(matches!(r, Err(Error::Status { code: 5, .. })), "{r:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A whole answer after `others` (each counted once) and `before` bytes.
    fn answer_after(others: &[Vec<u8>]) -> Vec<u8> {
        let mut a = f(SETTINGS, 0, 0, &[]);
        for o in others {
            a.extend_from_slice(o);
        }
        a.extend(f(HEADERS, END_HEADERS, 1, &ok_headers()));
        a.extend(f(DATA, 0, 1, &grpc_message(b"ok")));
        a.extend(f(
            HEADERS,
            END_STREAM | END_HEADERS,
            1,
            &block(&[("grpc-status", "0")]),
        ));
        a
    }

    #[test]
    fn frames_that_are_not_the_answer_are_bounded_in_count_and_bytes() {
        // The server's SETTINGS is the first of them: 63 more are allowed.
        let wu = f(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]);
        let ok = vec![wu.clone(); OTHER_FRAMES_MAX as usize - 1];
        assert_eq!(call(answer_after(&ok)).0.unwrap(), b"ok");
        let mut over = ok.clone();
        over.push(f(0xfa, 0, 0, b""));
        match call(answer_after(&over)).0 {
            Err(Error::Protocol(m)) => assert!(
                m.contains("65 frames") && m.contains("a frame of an unknown type"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        // Every kind counts: 1xx blocks, PING, PRIORITY, frames of no bytes
        // of the message (all padding).
        let mut padded = vec![200u8];
        padded.extend([0u8; 200]);
        let headers = f(HEADERS, END_HEADERS, 1, &ok_headers());
        for (first, one) in [
            (
                vec![],
                f(HEADERS, END_HEADERS, 1, &block(&[(":status", "100")])),
            ),
            (vec![], f(PING, 0, 0, b"12345678")),
            (vec![], f(0x2, 0, 1, &[0, 0, 0, 0, 15])),
            (headers, f(DATA, PADDED, 1, &padded)),
        ] {
            let flood: Vec<u8> = one.repeat(OTHER_FRAMES_MAX as usize + 1);
            let (r, _) = call([f(SETTINGS, 0, 0, &[]), first, flood].concat());
            assert!(
                matches!(&r, Err(Error::Protocol(m)) if m.contains("not the answer")),
                "{r:?}"
            );
        }
        // Bytes: four unknown frames of 16 KiB pass the bound of 64 KiB.
        let big = f(0xfa, 0, 0, &vec![0; MAX_FRAME]);
        let (r, _) = call(answer_after(&vec![big; 5]));
        assert!(
            matches!(&r, Err(Error::Protocol(m)) if m.contains("payload bytes")),
            "{r:?}"
        );
    }

    #[test]
    fn a_header_block_of_endless_empty_continuations_is_refused() {
        let mut a = f(SETTINGS, 0, 0, &[]);
        a.extend(f(HEADERS, 0, 1, &ok_headers()));
        for _ in 0..HEADER_FRAMES_MAX {
            a.extend(f(CONTINUATION, 0, 1, &[]));
        }
        match call(a).0 {
            Err(Error::Protocol(m)) => assert!(m.contains("more than 16 frames"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_deadline_ends_a_call_whose_answer_is_all_buffered() {
        // Everything the server says is in the socket before the call reads
        // it: the deadline is already past, so no frame is taken.
        let (path, h) = server(answer_after(&[]));
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut c = Conn::open(&path, Duration::from_millis(300), deadline, 1 << 20).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let r = c.unary("/s/m", b"", 1 << 20, deadline);
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn oversized_message_is_too_large_from_its_prefix() {
        let mut data = vec![0];
        data.extend_from_slice(&((1u32 << 20) + 1).to_be_bytes());
        let answer = [
            f(SETTINGS, 0, 0, &[]),
            f(HEADERS, END_HEADERS, 1, &ok_headers()),
            f(DATA, 0, 1, &data),
        ]
        .concat();
        match call(answer).0 {
            Err(Error::TooLarge { size, limit }) => {
                assert_eq!((size, limit), ((1 << 20) + 1, 1 << 20))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn request_frames() {
        let (r, sent) = call([f(SETTINGS, 0, 0, &[]), f(GOAWAY, 0, 0, &[0; 8])].concat());
        assert!(
            matches!(
                r,
                Err(Error::Status {
                    code: UNAVAILABLE,
                    ..
                })
            ),
            "{r:?}"
        );
        // Preface, SETTINGS (3 settings), WINDOW_UPDATE, HEADERS, DATA.
        let mut p = PREFACE.len();
        let mut frames = Vec::new();
        while p + 9 <= sent.len() {
            let len = (sent[p] as usize) << 16 | (sent[p + 1] as usize) << 8 | sent[p + 2] as usize;
            frames.push((sent[p + 3], sent[p + 4], sent[p + 9..p + 9 + len].to_vec()));
            p += 9 + len;
        }
        assert_eq!(frames[0].0, SETTINGS);
        assert_eq!(frames[0].2.len(), 18);
        assert_eq!(&frames[0].2[..6], &[0, 2, 0, 0, 0, 0], "ENABLE_PUSH 0");
        assert_eq!(frames[1].0, WINDOW_UPDATE);
        assert_eq!(frames[2].0, HEADERS);
        assert_eq!(frames[2].1, END_HEADERS);
        let mut d = Decoder::new(4096);
        let mut h = Vec::new();
        d.decode(&frames[2].2, 1 << 16, |n, v| {
            h.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })
        .unwrap();
        let names: Vec<&str> = h.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                ":method",
                ":scheme",
                ":path",
                ":authority",
                "grpc-timeout",
                "content-type",
                "te",
                "user-agent"
            ]
        );
        assert_eq!(h[0].1, "POST");
        assert_eq!(h[2].1, "/v1.PodResourcesLister/List");
        assert!(h[4].1.ends_with('m'));
        assert_eq!(
            (h[5].1.as_str(), h[6].1.as_str()),
            ("application/grpc", "trailers")
        );
        assert_eq!(frames[3], (DATA, END_STREAM, vec![0, 0, 0, 0, 0]));
    }

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

    #[test]
    fn connect_errors() {
        let dir = std::env::temp_dir().join(format!("rt-h2c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        let t = Duration::from_secs(1);
        assert!(matches!(
            connect(&dir.join("none"), t, deadline),
            Err(Error::NoSocket(_))
        ));
        // A socket file nobody listens on: what a stopped kubelet leaves.
        let stale = dir.join("stale.sock");
        drop(UnixListener::bind(&stale).unwrap());
        assert!(matches!(
            connect(&stale, t, deadline),
            Err(Error::NoSocket(_))
        ));
        let long = dir.join("x".repeat(120));
        assert!(matches!(connect(&long, t, deadline), Err(Error::Io { .. })));
        let _ = UnixStream::connect(&stale);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
