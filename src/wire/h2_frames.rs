//! HTTP/2 frames (RFC 9113 §4 and §6): the preface, the frame types, flags
//! and SETTINGS a gRPC client uses, a frame written, a padded payload and a
//! 32-bit field read. Pure functions over byte slices; the connection that
//! orders them is `h2_connection`.

use std::fmt;

/// RFC 9113 §3.4: the client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (RFC 9113 §6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

// SETTINGS identifiers (§6.5.2).
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// SETTINGS_MAX_FRAME_SIZE's initial value, which this client keeps: a peer
/// must not send a larger frame (§4.2).
pub const MAX_FRAME: usize = 16_384;
/// The initial flow-control window of a stream and of the connection (§6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;
/// A frame that breaks RFC 9113: what is wrong, in sizes and numbers,
/// never the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The payload of a frame that may carry PADDED (DATA, HEADERS; §6.1, §6.2).
pub fn unpad(payload: &[u8], flags: u8) -> Result<&[u8], FrameError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let pad = *payload
        .first()
        .ok_or_else(|| FrameError("a padded frame without its pad length".into()))?
        as usize;
    if pad >= payload.len() {
        return Err(FrameError(format!(
            "padding of {pad} bytes in a {}-byte frame",
            payload.len()
        )));
    }
    Ok(&payload[1..payload.len() - pad])
}

pub fn u32_at(payload: &[u8], at: usize, min_len: usize, what: &str) -> Result<u32, FrameError> {
    if payload.len() < min_len {
        return Err(FrameError(format!("{what} of {} bytes", payload.len())));
    }
    Ok(u32::from_be_bytes([
        payload[at],
        payload[at + 1],
        payload[at + 2],
        payload[at + 3],
    ]))
}

/// §4.1: a frame header and its payload.
pub fn frame(out: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(ty);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A frame type, for a message (§6; 0x2 PRIORITY, deprecated by §5.3.2).
pub fn frame_name(ty: u8) -> &'static str {
    match ty {
        SETTINGS => "SETTINGS",
        PING => "PING",
        WINDOW_UPDATE => "WINDOW_UPDATE",
        0x2 => "PRIORITY",
        RST_STREAM => "RST_STREAM of another stream",
        _ => "a frame of an unknown type",
    }
}
