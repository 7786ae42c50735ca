//! One HTTP/2 connection with prior knowledge (h2c) to a gRPC server, as a
//! client: RFC 9113 framing, one stream per call, calls one after another.
//! The bytes go through a [`Transport`], so this is the protocol and
//! nothing else: the caller opens the stream (a unix socket, for the
//! kubelet) and says how to wait on it; a test or the fuzz target hands it
//! bytes from memory.
//!
//! Every wait is against the one deadline of the whole call, so a server
//! that accepts and never answers, or trickles a byte at a time, costs at
//! most the caller's timeout. The bounds of a call, each checked before the
//! loop turn or the allocation it guards (a server that kept sending valid
//! frames was never waited on, so a deadline checked only before a
//! blocking read held an ADD for 2.6 to 8.0 s):
//! - the deadline, on every turn of every loop (`read_frame`, `fill`,
//!   `send`, `wait`), whether or not a read would block;
//! - [`OTHER_FRAMES_MAX`] and [`OTHER_BYTES_MAX`]: the frames that are not
//!   the answer, in count and in payload bytes;
//! - [`MAX_FRAME`] a frame, [`HEADER_FRAMES_MAX`] and [`HEADER_BLOCK_MAX`]
//!   a header block, [`HEADER_LIST_MAX`] its decoded fields;
//! - the caller's `max_message` the one response message, checked from its
//!   length prefix before its buffer is reserved.

use super::grpc::{
    protocol, request_headers, reset_status, Call, Error, Headers, DEADLINE_EXCEEDED, UNAVAILABLE,
};
use super::h2_frames::*;
use super::hpack::{self, Decoder};
use std::io;
use std::time::{Duration, Instant};

/// The stream under a connection. Neither call blocks: each moves what it
/// can now, and [`Transport::wait`] is how the connection waits for more.
pub trait Transport {
    /// Append what has arrived to `buf` (at most `want` bytes, more is
    /// fine): `Some(n)` bytes, `Some(0)` at the end of the stream, `None`
    /// when nothing has arrived yet.
    fn recv(&mut self, buf: &mut Vec<u8>, want: usize) -> io::Result<Option<usize>>;
    /// Write a prefix of `data`: `Some(n)` bytes written, `None` when the
    /// stream takes nothing now. A closed peer is an error, never a signal.
    fn send(&mut self, data: &[u8]) -> io::Result<Option<usize>>;
    /// Wait until the stream can be read (or written, `write`): `false`
    /// when `deadline` passed first.
    fn wait(&mut self, write: bool, deadline: Instant) -> io::Result<bool>;
    /// Best effort, never waiting: the GOAWAY of a connection dropped.
    fn send_now(&mut self, data: &[u8]);
}

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

/// One HTTP/2 connection to a gRPC server, over `io`.
pub struct Conn<T: Transport> {
    io: T,
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

impl<T: Transport> Conn<T> {
    /// Start a connection on `io`, connected to a peer the caller trusts:
    /// the preface, SETTINGS and the window go out now; the server's
    /// preface is read with the first answer.
    pub fn over(
        io: T,
        timeout: Duration,
        deadline: Instant,
        max_message: usize,
    ) -> Result<Conn<T>, Error> {
        // Room for one whole response (the 5-byte gRPC prefix and padding
        // included), so the server never waits for a WINDOW_UPDATE mid-call.
        let window = (max_message + 64 * 1024).min(i32::MAX as usize) as u32;
        let mut c = Conn {
            io,
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
            match self.io.recv(&mut self.buf, want) {
                Ok(Some(0)) => {
                    return Err(protocol(format!(
                        "the server closed the connection ({} bytes unread, {n} needed)",
                        self.buf.len() - self.start
                    )));
                }
                Ok(Some(_)) => continue,
                Ok(None) => self.wait(false, deadline, "the answer")?,
                Err(err) => return Err(Error::Io { op: "receive", err }),
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
            match self.io.send(data) {
                Ok(Some(n)) => data = &data[n..],
                Ok(None) => self.wait(true, deadline, "send")?,
                Err(err) => return Err(Error::Io { op: "send", err }),
            }
        }
        Ok(())
    }

    /// Wait until the stream can be read (or written, `write`), or the
    /// deadline passes.
    fn wait(&mut self, write: bool, deadline: Instant, stage: &'static str) -> Result<(), Error> {
        match self.io.wait(write, deadline) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::Timeout {
                timeout: self.timeout,
                stage,
            }),
            Err(err) => Err(Error::Io { op: "poll", err }),
        }
    }
}

impl<T: Transport> Drop for Conn<T> {
    /// §6.8: tell the server the connection is done; best effort, never
    /// waiting.
    fn drop(&mut self) {
        let mut bye = Vec::with_capacity(17);
        frame(&mut bye, GOAWAY, 0, 0, &[0; 8]);
        self.io.send_now(&bye);
    }
}
/// `Timeout` once the deadline has passed: checked on every turn of a loop.
fn before(deadline: Instant, timeout: Duration, stage: &'static str) -> Result<(), Error> {
    if Instant::now() >= deadline {
        return Err(Error::Timeout { timeout, stage });
    }
    Ok(())
}
