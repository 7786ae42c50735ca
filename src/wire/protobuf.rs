//! The protobuf wire format (protobuf.dev, "Encoding"): the primitives every
//! hand-written message codec of the crate shares. A decoder walks a
//! message's fields in wire order ([`Fields`]) and skips what it does not
//! know by its wire type, as proto3 requires of unknown fields; an encoder
//! ([`Writer`]) writes fields and nested messages, leaving out a field that
//! holds its default, as proto3 encoders do.
//!
//! Its users: the kubelet's PodResources messages (`podresources`)
//! and NRI's (`nri_messages`).

use std::fmt;

/// Why a message could not be decoded: the rule and the sizes, never the
/// bytes (they come from a peer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "protobuf: {}", self.0)
    }
}

impl std::error::Error for WireError {}

pub fn err(what: impl Into<String>) -> WireError {
    WireError(what.into())
}

/// One field's value by wire type: varints as read, fixed-size values
/// skipped unread (no message this crate reads has one it needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of one message, in wire order.
pub struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// The largest field number the format allows (2^29 - 1).
const MAX_FIELD: u64 = (1 << 29) - 1;

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Fields<'a> {
        Fields { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| err("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(err("varint longer than 10 bytes"))
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], WireError> {
        let left = self.buf.len() - self.pos;
        if n > left as u64 {
            return Err(err(format!(
                "a field of {n} bytes in the {left} left of its message"
            )));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// The next field: its number and value, `None` at the message's end.
    #[allow(clippy::should_implement_trait)] // fallible: not an Iterator
    pub fn next(&mut self) -> Result<Option<(u64, Value<'a>)>, WireError> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > MAX_FIELD {
            return Err(err(format!("field number {number}")));
        }
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed
            }
            2 => {
                let n = self.varint()?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed
            }
            // 3 and 4 are proto2 groups, which no proto3 message holds.
            t => return Err(err(format!("wire type {t} in field {number}"))),
        };
        Ok(Some((number, value)))
    }
}

/// A length-delimited field the schema fixes (string, bytes or message).
pub fn bytes<'a>(number: u64, v: Value<'a>, what: &str) -> Result<&'a [u8], WireError> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(err(format!(
            "{what} (field {number}) is not length-delimited"
        ))),
    }
}

/// A string field: length-delimited and UTF-8 (proto3 requires it).
pub fn text<'a>(number: u64, v: Value<'a>, what: &str) -> Result<&'a str, WireError> {
    let b = bytes(number, v, what)?;
    std::str::from_utf8(b).map_err(|_| err(format!("{what} is not UTF-8 ({} bytes)", b.len())))
}

/// A varint field (int32, int64, uint32, bool, enum).
pub fn varint(number: u64, v: Value<'_>, what: &str) -> Result<u64, WireError> {
    match v {
        Value::Varint(n) => Ok(n),
        _ => Err(err(format!("{what} (field {number}) is not a varint"))),
    }
}

/// A message being encoded.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    fn raw_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, number: u32, wire_type: u8) {
        self.raw_varint(u64::from(number) << 3 | u64::from(wire_type));
    }

    /// A varint field; 0 is the default and is left out.
    pub fn varint(&mut self, number: u32, v: u64) -> &mut Writer {
        if v != 0 {
            self.key(number, 0);
            self.raw_varint(v);
        }
        self
    }

    /// A string or bytes field; empty is the default and is left out.
    pub fn bytes(&mut self, number: u32, b: &[u8]) -> &mut Writer {
        if !b.is_empty() {
            self.key(number, 2);
            self.raw_varint(b.len() as u64);
            self.buf.extend_from_slice(b);
        }
        self
    }

    pub fn text(&mut self, number: u32, s: &str) -> &mut Writer {
        self.bytes(number, s.as_bytes())
    }

    /// A nested message, written even when empty (a present message is not
    /// its default: `adjust` with nothing in it still says "adjusted").
    pub fn message(&mut self, number: u32, m: &Writer) -> &mut Writer {
        self.key(number, 2);
        self.raw_varint(m.buf.len() as u64);
        self.buf.extend_from_slice(&m.buf);
        self
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_and_unknown_fields_are_skipped() {
        let mut inner = Writer::new();
        inner.text(1, "NCCL_IB_TC").text(2, "41");
        let mut w = Writer::new();
        w.varint(2, 0x62f)
            .message(4, &inner)
            .varint(3, 0)
            .text(7, "")
            .varint(9, u64::MAX);
        let bytes = w.into_bytes();
        // Field 3 and 7 hold defaults: not on the wire.
        let mut f = Fields::new(&bytes);
        assert_eq!(f.next().unwrap(), Some((2, Value::Varint(0x62f))));
        let (n, v) = f.next().unwrap().unwrap();
        assert_eq!(n, 4);
        let mut g = Fields::new(bytes_of(v));
        assert_eq!(
            text(1, g.next().unwrap().unwrap().1, "key").unwrap(),
            "NCCL_IB_TC"
        );
        assert_eq!(f.next().unwrap(), Some((9, Value::Varint(u64::MAX))));
        assert_eq!(f.next().unwrap(), None);
    }

    fn bytes_of(v: Value<'_>) -> &[u8] {
        bytes(0, v, "x").unwrap()
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        for (bytes, why) in [
            (&[0x08][..], "truncated varint"),
            (
                &[
                    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                ],
                "longer",
            ),
            (&[0x0a, 0x05, b'a'], "a field of 5 bytes"),
            (&[0x00, 0x00], "field number 0"),
            (&[0x0b], "wire type 3"),
            (&[0x09, 1, 2, 3], "a field of 8 bytes"),
        ] {
            let mut f = Fields::new(bytes);
            let e = loop {
                match f.next() {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("{bytes:?} decoded"),
                    Err(e) => break e,
                }
            };
            assert!(e.0.contains(why), "{bytes:?}: {e}");
        }
        assert!(text(1, Value::Bytes(&[0xff]), "name").is_err());
        assert!(varint(1, Value::Bytes(b""), "n").is_err());
        assert!(bytes(1, Value::Varint(1), "m").is_err());
    }
}
