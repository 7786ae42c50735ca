//! NRI's multiplexer (containerd/nri `pkg/net/multiplex/mux.go`, v0.12.2):
//! one unix stream, the trunk, carries frames `u32 BE conn id | u32 BE
//! payload length | payload` (`headerLen = 8`, mux.go:140). Each conn id is
//! a byte stream of its own; frame edges need not match the ttrpc messages
//! inside (docs/design.md, "NRI").

use std::io::{self, Read, Write};

pub const HEADER: usize = 8;
/// The conn on which the plugin serves the ttrpc `Plugin` service
/// (`PluginServiceConn`, multiplex/ttrpc.go:19-24).
pub const PLUGIN_CONN: u32 = 1;
/// The conn on which the plugin is a client of the runtime's `Runtime`
/// service (`RuntimeServiceConn`).
pub const RUNTIME_CONN: u32 = 2;
/// The largest payload the runtime's writer sends: a ttrpc header and its
/// largest message (`maxPayloadSize`, mux.go:142). A header announcing more
/// is not a frame the runtime could have sent.
pub const MAX_PAYLOAD: usize = 10 + (4 << 20);
/// The largest payload sent to the runtime: its reader queues whole frames
/// and hands them to a 4096-byte `bufio.Reader`, and `conn.Read` fails with
/// ENOMEM on a frame larger than the read buffer, which kills that conn's
/// ttrpc endpoint without a word (mux.go `conn.Read`; ../shared/nri
/// PROTOCOL.md, section 1).
pub const MAX_SEND: usize = 4096;

/// Why the trunk cannot be read on: each closes the connection (the
/// runtime's reader closes the trunk on a short read too, mux.go:305-342).
#[derive(Debug)]
pub enum MuxError {
    /// The stream ended inside a frame: `got` of `want` bytes of the header
    /// or the payload.
    Truncated {
        part: &'static str,
        got: usize,
        want: usize,
    },
    Oversized {
        len: usize,
    },
    Io(io::Error),
}

impl std::fmt::Display for MuxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MuxError::Truncated { part, got, want } => write!(
                f,
                "the connection ended inside a frame's {part} ({got} of {want} bytes)"
            ),
            MuxError::Oversized { len } => write!(
                f,
                "a frame announces {len} bytes, more than the {MAX_PAYLOAD} a runtime sends"
            ),
            MuxError::Io(e) => write!(f, "reading the NRI socket: {e}"),
        }
    }
}

impl std::error::Error for MuxError {}

/// The conn id and payload length a header announces.
pub fn parse_header(h: &[u8; HEADER]) -> Result<(u32, usize), MuxError> {
    let conn = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(MuxError::Oversized { len });
    }
    Ok((conn, len))
}

/// Read as much of `buf` as the stream holds: the count read, short only at
/// the stream's end.
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The next frame, `None` when the stream ends cleanly between frames.
pub fn read_frame(r: &mut impl Read) -> Result<Option<(u32, Vec<u8>)>, MuxError> {
    let mut h = [0u8; HEADER];
    let got = fill(r, &mut h).map_err(MuxError::Io)?;
    if got == 0 {
        return Ok(None);
    }
    if got < HEADER {
        return Err(MuxError::Truncated {
            part: "header",
            got,
            want: HEADER,
        });
    }
    let (conn, len) = parse_header(&h)?;
    let mut payload = vec![0u8; len];
    let got = fill(r, &mut payload).map_err(MuxError::Io)?;
    if got < len {
        return Err(MuxError::Truncated {
            part: "payload",
            got,
            want: len,
        });
    }
    Ok(Some((conn, payload)))
}

/// The trunk's frames cut from its bytes as they come, whatever the reads
/// that gave them: each piece of a payload goes on at once, with its conn
/// id, so no frame (up to [`MAX_PAYLOAD`]) is ever held whole here; the
/// conn's own reader (`ttrpc::Assembler`) puts its messages together.
#[derive(Debug, Default)]
pub struct Deframer {
    header: [u8; HEADER],
    /// Bytes of the next header held so far.
    have: usize,
    /// The frame under way: its conn, its length and what is still to come.
    conn: u32,
    len: usize,
    left: usize,
}

impl Deframer {
    /// The next piece of a payload in `input` (which is advanced past it
    /// and past any header before it), with its conn; `None` once `input`
    /// is spent. An empty frame is an empty piece.
    pub fn next<'a>(&mut self, input: &mut &'a [u8]) -> Result<Option<(u32, &'a [u8])>, MuxError> {
        loop {
            if self.left > 0 {
                if input.is_empty() {
                    return Ok(None);
                }
                let (piece, rest) = input.split_at(self.left.min(input.len()));
                *input = rest;
                self.left -= piece.len();
                return Ok(Some((self.conn, piece)));
            }
            if input.is_empty() {
                return Ok(None);
            }
            let n = (HEADER - self.have).min(input.len());
            self.header[self.have..self.have + n].copy_from_slice(&input[..n]);
            *input = &input[n..];
            self.have += n;
            if self.have < HEADER {
                return Ok(None);
            }
            self.have = 0;
            let (conn, len) = parse_header(&self.header)?;
            (self.conn, self.len, self.left) = (conn, len, len);
            if len == 0 {
                return Ok(Some((conn, &[])));
            }
        }
    }

    /// The stream ended here: inside a frame, how far into it.
    pub fn cut_short(&self) -> Option<MuxError> {
        if self.have > 0 {
            Some(MuxError::Truncated {
                part: "header",
                got: self.have,
                want: HEADER,
            })
        } else if self.left > 0 {
            Some(MuxError::Truncated {
                part: "payload",
                got: self.len - self.left,
                want: self.len,
            })
        } else {
            None
        }
    }
}

/// `bytes` on `conn`, as frames of at most [`MAX_SEND`] payload bytes, each
/// frame one write (header and payload together: a frame is never
/// interleaved, and a reader that gets a header also gets its payload).
pub fn write_frames(w: &mut impl Write, conn: u32, bytes: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(HEADER + MAX_SEND.min(bytes.len()));
    for chunk in bytes.chunks(MAX_SEND) {
        frame.clear();
        frame.extend_from_slice(&conn.to_be_bytes());
        frame.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        frame.extend_from_slice(chunk);
        w.write_all(&frame)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_never_exceed_4096_bytes_of_payload() {
        let msg: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut wire = Vec::new();
        write_frames(&mut wire, PLUGIN_CONN, &msg).unwrap();
        let mut r = &wire[..];
        let mut back = Vec::new();
        let mut sizes = Vec::new();
        while let Some((conn, p)) = read_frame(&mut r).unwrap() {
            assert_eq!(conn, PLUGIN_CONN);
            sizes.push(p.len());
            back.extend(p);
        }
        assert_eq!(back, msg);
        assert_eq!(sizes, [4096, 4096, 1808]);
    }

    #[test]
    fn the_deframer_gives_the_same_payloads_however_the_bytes_are_cut() {
        let mut wire = Vec::new();
        write_frames(&mut wire, PLUGIN_CONN, &[7u8; 5000]).unwrap();
        write_frames(&mut wire, 9, b"").unwrap();
        wire.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 0]);
        write_frames(&mut wire, RUNTIME_CONN, b"abc").unwrap();
        for cut in [1, 3, 8, 9, 4104, wire.len()] {
            let mut d = Deframer::default();
            let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
            for chunk in wire.chunks(cut) {
                let mut input = chunk;
                while let Some((conn, piece)) = d.next(&mut input).unwrap() {
                    match got.last_mut() {
                        Some((c, p)) if *c == conn && !piece.is_empty() => p.extend(piece),
                        _ => got.push((conn, piece.to_vec())),
                    }
                }
            }
            assert!(d.cut_short().is_none(), "{cut}");
            let conns: Vec<u32> = got.iter().map(|(c, _)| *c).collect();
            assert_eq!(conns, [PLUGIN_CONN, 9, RUNTIME_CONN], "{cut}");
            assert_eq!(got[0].1, [7u8; 5000]);
            assert_eq!(got[2].1, b"abc");
        }
        let mut d = Deframer::default();
        let mut input = &[0u8, 0, 0, 1, 0, 0, 0, 40, 1, 2, 3][..];
        while d.next(&mut input).unwrap().is_some() {}
        let e = d.cut_short().unwrap();
        assert_eq!(
            e.to_string(),
            "the connection ended inside a frame's payload (3 of 40 bytes)"
        );
        let mut input = &[0u8, 0, 0, 1, 0xff, 0xff, 0xff, 0xff][..];
        assert!(matches!(
            Deframer::default().next(&mut input),
            Err(MuxError::Oversized { .. })
        ));
    }

    #[test]
    fn a_short_or_oversized_frame_is_an_error() {
        let mut r = &[0u8, 0, 0, 1, 0][..];
        assert!(matches!(
            read_frame(&mut r),
            Err(MuxError::Truncated {
                part: "header",
                got: 5,
                ..
            })
        ));
        let mut r = &[0u8, 0, 0, 1, 0, 0, 0, 4, 1, 2][..];
        assert!(matches!(
            read_frame(&mut r),
            Err(MuxError::Truncated {
                part: "payload",
                got: 2,
                want: 4
            })
        ));
        let mut r = &[0u8, 0, 0, 1, 0xff, 0xff, 0xff, 0xff][..];
        let e = read_frame(&mut r).unwrap_err();
        assert!(matches!(e, MuxError::Oversized { len: 0xffff_ffff }), "{e}");
        let mut r = &[][..];
        assert!(read_frame(&mut r).unwrap().is_none());
    }
}
