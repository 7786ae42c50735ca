//! HPACK (RFC 7541) as far as a gRPC client needs it.
//!
//! Decoding is complete: a real server (grpc-go in the kubelet, gRPC C-core)
//! indexes `content-type` and `grpc-status` in its dynamic table and
//! Huffman-codes their values, so the second call on a connection already
//! reads back table entries. Encoding is the least the RFC allows: every
//! field a literal without indexing (§6.2.2), no Huffman, so the server's
//! view of our (empty) dynamic table never changes.
//!
//! The bounds of a decode, each a real one (a peer's bytes never size a
//! loop or an allocation past it): the block itself,
//! which the caller bounds before it is decoded (`h2_connection::HEADER_BLOCK_MAX`),
//! so every loop here and every string runs over at most its bytes; the
//! decoded list, `list_limit` (SETTINGS_MAX_HEADER_LIST_SIZE), checked field
//! by field before the field is handed on; the dynamic table, [`TABLE_SIZE`]
//! (a size update above it is refused); an integer, 2^28.

use std::collections::VecDeque;
use std::fmt;

/// The decoder's dynamic table limit: SETTINGS_HEADER_TABLE_SIZE's initial
/// value (RFC 9113 §6.5.2), which this client never changes.
pub const TABLE_SIZE: usize = 4096;

/// Why a header block could not be decoded. The text names the rule, never
/// the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HpackError(pub &'static str);

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HPACK: {}", self.0)
    }
}

/// RFC 7541 Appendix A, index 1 to 61.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Static table indices the encoder uses (Appendix A).
pub const AUTHORITY: usize = 1;
pub const METHOD_POST: usize = 3;
pub const PATH: usize = 4;
pub const SCHEME_HTTP: usize = 6;
pub const CONTENT_TYPE: usize = 31;
pub const USER_AGENT: usize = 58;

/// One connection's decoding context: the dynamic table lives as long as the
/// connection and is shared by every header block on it, trailers included.
pub struct Decoder {
    /// Newest first: index 62 is `table[0]` (§2.3.3).
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
    /// The most a size update may ask for: what this side advertised.
    limit: usize,
}

impl Decoder {
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: limit,
            limit,
        }
    }

    /// The dynamic table's size in the RFC's accounting (§4.1).
    #[cfg(test)]
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// Decode one complete header block, handing each field to `field` in
    /// order. The decoded header list may hold at most `list_limit` bytes,
    /// counted as SETTINGS_MAX_HEADER_LIST_SIZE counts them (name + value +
    /// 32 a field).
    pub fn decode(
        &mut self,
        block: &[u8],
        list_limit: usize,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut p = 0;
        let mut list = 0usize;
        let mut fields_seen = false;
        while p < block.len() {
            let b = block[p];
            let (name, value, index) = if b & 0x80 != 0 {
                // §6.1 Indexed Header Field.
                let i = integer(block, &mut p, 7)?;
                let (n, v) = self.get(i)?;
                (n.to_vec(), v.to_vec(), false)
            } else if b & 0x40 != 0 {
                // §6.2.1 Literal Header Field with Incremental Indexing.
                let (n, v) = self.literal(block, &mut p, 6)?;
                (n, v, true)
            } else if b & 0x20 != 0 {
                // §6.3 Dynamic Table Size Update: "MUST occur at the beginning
                // of the first header block following the change" (§4.2).
                if fields_seen {
                    return Err(HpackError("table size update after a header field"));
                }
                let size = integer(block, &mut p, 5)?;
                if size > self.limit {
                    return Err(HpackError("table size update over the advertised limit"));
                }
                self.max = size;
                self.evict(0);
                continue;
            } else {
                // §6.2.2 without indexing (0000) and §6.2.3 never indexed (0001).
                let (n, v) = self.literal(block, &mut p, 4)?;
                (n, v, false)
            };
            fields_seen = true;
            list = list.saturating_add(name.len() + value.len() + 32);
            if list > list_limit {
                return Err(HpackError("header list over the limit"));
            }
            field(&name, &value);
            if index {
                self.insert(name, value);
            }
        }
        Ok(())
    }

    fn literal(
        &self,
        block: &[u8],
        p: &mut usize,
        prefix: u8,
    ) -> Result<(Vec<u8>, Vec<u8>), HpackError> {
        let i = integer(block, p, prefix)?;
        let name = if i == 0 {
            string(block, p)?
        } else {
            self.get(i)?.0.to_vec()
        };
        Ok((name, string(block, p)?))
    }

    fn get(&self, i: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match i {
            0 => Err(HpackError("index 0")),
            1..=61 => {
                let (n, v) = STATIC[i - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(i - 62)
                .map(|(n, v)| (n.as_slice(), v.as_slice()))
                .ok_or(HpackError("index beyond the dynamic table")),
        }
    }

    /// §4.4: an entry larger than the whole table empties it and is not added.
    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + 32;
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front((name, value));
    }

    /// Evict the oldest entries until `room` more octets fit (§4.3, §4.4).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + 32,
                None => break,
            }
        }
    }
}

/// §5.1: an integer with an `n`-bit prefix, starting at `block[*p]`.
fn integer(block: &[u8], p: &mut usize, n: u8) -> Result<usize, HpackError> {
    let mask = (1u16 << n) as usize - 1;
    let first = *block.get(*p).ok_or(HpackError("truncated integer"))?;
    *p += 1;
    let mut v = first as usize & mask;
    if v < mask {
        return Ok(v);
    }
    let mut shift = 0u32;
    loop {
        let b = *block.get(*p).ok_or(HpackError("truncated integer"))?;
        *p += 1;
        v += ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
        // Nothing in a header block this client accepts needs more than
        // 2^28; a longer run is garbage, and would overflow on 32-bit.
        if shift > 21 {
            return Err(HpackError("integer too large"));
        }
    }
}

/// §5.2: a string literal, Huffman-coded when its H bit is set.
fn string(block: &[u8], p: &mut usize) -> Result<Vec<u8>, HpackError> {
    let huffman = block.get(*p).ok_or(HpackError("truncated string"))? & 0x80 != 0;
    let len = integer(block, p, 7)?;
    let raw = block
        .get(*p..p.saturating_add(len))
        .ok_or(HpackError("string beyond the header block"))?;
    *p += len;
    if huffman {
        huffman_decode(raw)
    } else {
        Ok(raw.to_vec())
    }
}

/// Code lengths of the Huffman code (RFC 7541 Appendix B), symbols 0 to 255
/// and EOS (256). The code is canonical: codes of one length are consecutive
/// and ordered by symbol, each length starting where the previous one ended,
/// doubled. So the lengths alone define it (the unit tests check this
/// against codes printed in the table).
const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0-15
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 16-31
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // 32-47 ' '../
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // 48-63 0..?
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 64-79 @..O
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 80-95 P.._
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // 96-111 `..o
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 112-127 p..DEL
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128-143
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144-159
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160-175
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176-191
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192-207
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208-223
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224-239
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240-255
    30, // EOS
];

const MAX_LEN: usize = 30;
const EOS: u16 = 256;

/// The canonical code in decoding form, built at compile time.
struct Canonical {
    /// Codes of each length.
    count: [u16; MAX_LEN + 1],
    /// The first code of each length.
    first: [u32; MAX_LEN + 1],
    /// Where each length's symbols start in `symbols`.
    offset: [u16; MAX_LEN + 1],
    /// Symbols ordered by (length, symbol).
    symbols: [u16; 257],
}

const fn canonical() -> Canonical {
    let mut c = Canonical {
        count: [0; MAX_LEN + 1],
        first: [0; MAX_LEN + 1],
        offset: [0; MAX_LEN + 1],
        symbols: [0; 257],
    };
    let mut s = 0;
    while s < 257 {
        c.count[HUFFMAN_LENGTHS[s] as usize] += 1;
        s += 1;
    }
    let mut code = 0u32;
    let mut at = 0u16;
    let mut len = 1;
    while len <= MAX_LEN {
        code = (code + c.count[len - 1] as u32) << 1;
        c.first[len] = code;
        c.offset[len] = at;
        let mut s = 0;
        while s < 257 {
            if HUFFMAN_LENGTHS[s] as usize == len {
                c.symbols[at as usize] = s as u16;
                at += 1;
            }
            s += 1;
        }
        len += 1;
    }
    c
}

static CODE: Canonical = canonical();

/// §5.2: decode, refusing EOS in the string, padding longer than 7 bits, and
/// padding that is not the most significant bits of EOS (all ones).
fn huffman_decode(raw: &[u8]) -> Result<Vec<u8>, HpackError> {
    let mut out = Vec::with_capacity(raw.len() * 8 / 5);
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in raw {
        for bit in (0..8).rev() {
            code = (code << 1) | u32::from(byte >> bit & 1);
            len += 1;
            let k = code.wrapping_sub(CODE.first[len]);
            if k < u32::from(CODE.count[len]) {
                let sym = CODE.symbols[(CODE.offset[len] as u32 + k) as usize];
                if sym == EOS {
                    return Err(HpackError("EOS inside a Huffman string"));
                }
                out.push(sym as u8);
                code = 0;
                len = 0;
            } else if len == MAX_LEN {
                return Err(HpackError("invalid Huffman code"));
            }
        }
    }
    if len > 7 {
        return Err(HpackError("Huffman padding longer than 7 bits"));
    }
    if code != (1 << len) - 1 {
        return Err(HpackError("Huffman padding is not EOS's prefix"));
    }
    Ok(out)
}

/// §5.1, for the encoder: `v` with an `n`-bit prefix, `flags` in the bits
/// above it.
fn put_integer(out: &mut Vec<u8>, mut v: usize, n: u8, flags: u8) {
    let mask = (1u16 << n) as usize - 1;
    if v < mask {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | mask as u8);
    v -= mask;
    while v >= 0x80 {
        out.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    put_integer(out, s.len(), 7, 0);
    out.extend_from_slice(s.as_bytes());
}

/// §6.1: a field the static table holds whole.
pub fn put_indexed(out: &mut Vec<u8>, index: usize) {
    put_integer(out, index, 7, 0x80);
}

/// `put_literal` of bytes, both name and value literal.
pub fn put_literal_bytes(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0);
    put_integer(out, name.len(), 7, 0);
    out.extend_from_slice(name);
    put_integer(out, value.len(), 7, 0);
    out.extend_from_slice(value);
}

/// §6.2.2 Literal Header Field without Indexing, the name from the static
/// table (`Some(index)`) or a literal.
pub fn put_literal(out: &mut Vec<u8>, name: Result<usize, &str>, value: &str) {
    match name {
        Ok(index) => put_integer(out, index, 4, 0),
        Err(name) => {
            out.push(0);
            put_string(out, name);
        }
    }
    put_string(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decode(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut out = Vec::new();
        d.decode(block, 1 << 20, |n, v| {
            out.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })?;
        Ok(out)
    }

    fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// The table, newest (index 62) first, as the RFC prints it.
    fn table(d: &Decoder) -> Vec<(String, String)> {
        d.table
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8(n.clone()).unwrap(),
                    String::from_utf8(v.clone()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn c1_integers() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix;
        // C.1.3: 42 starting at an octet boundary.
        for (v, n, bytes) in [
            (10, 5, vec![0x0a]),
            (1337, 5, vec![0x1f, 0x9a, 0x0a]),
            (42, 8, vec![0x2a]),
        ] {
            let mut out = Vec::new();
            put_integer(&mut out, v, n, 0);
            assert_eq!(out, bytes, "encode {v}");
            let mut p = 0;
            assert_eq!(integer(&bytes, &mut p, n), Ok(v), "decode {v}");
            assert_eq!(p, bytes.len());
        }
        let mut p = 0;
        assert!(integer(&[0x1f, 0x9a], &mut p, 5).is_err(), "truncated");
        let mut p = 0;
        assert!(
            integer(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0x0f], &mut p, 5).is_err(),
            "over 2^28"
        );
    }

    #[test]
    fn c2_literals_and_indexed() {
        // C.2.1 Literal Header Field with Indexing.
        let mut d = Decoder::new(TABLE_SIZE);
        let got = decode(
            &mut d,
            &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
        )
        .unwrap();
        assert_eq!(got, fields(&[("custom-key", "custom-header")]));
        assert_eq!(d.table_size(), 55);
        // C.2.2 Literal Header Field without Indexing: the table is untouched.
        let mut d = Decoder::new(TABLE_SIZE);
        let got = decode(&mut d, &hex("040c 2f73 616d 706c 652f 7061 7468")).unwrap();
        assert_eq!(got, fields(&[(":path", "/sample/path")]));
        assert_eq!(d.table_size(), 0);
        // C.2.3 Literal Header Field Never Indexed.
        let got = decode(&mut d, &hex("1008 7061 7373 776f 7264 0673 6563 7265 74")).unwrap();
        assert_eq!(got, fields(&[("password", "secret")]));
        assert_eq!(d.table_size(), 0);
        // C.2.4 Indexed Header Field.
        assert_eq!(
            decode(&mut d, &[0x82]).unwrap(),
            fields(&[(":method", "GET")])
        );
    }

    #[test]
    fn c3_requests_without_huffman() {
        let mut d = Decoder::new(TABLE_SIZE);
        let first = fields(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ]);
        let got = decode(
            &mut d,
            &hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
        )
        .unwrap();
        assert_eq!(got, first);
        assert_eq!(d.table_size(), 57);
        let got = decode(&mut d, &hex("8286 84be 5808 6e6f 2d63 6163 6865")).unwrap();
        let mut second = first.clone();
        second.push(("cache-control".into(), "no-cache".into()));
        assert_eq!(got, second);
        assert_eq!(d.table_size(), 110);
        let got = decode(
            &mut d,
            &hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"),
        )
        .unwrap();
        assert_eq!(
            got,
            fields(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ])
        );
        assert_eq!(d.table_size(), 164);
        assert_eq!(
            table(&d),
            fields(&[
                ("custom-key", "custom-value"),
                ("cache-control", "no-cache"),
                (":authority", "www.example.com"),
            ])
        );
    }

    #[test]
    fn c4_requests_with_huffman() {
        let mut d = Decoder::new(TABLE_SIZE);
        let got = decode(&mut d, &hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")).unwrap();
        assert_eq!(
            got,
            fields(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ])
        );
        assert_eq!(d.table_size(), 57);
        let got = decode(&mut d, &hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
        assert_eq!(got[4], ("cache-control".into(), "no-cache".into()));
        assert_eq!(d.table_size(), 110);
        let got = decode(
            &mut d,
            &hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
        )
        .unwrap();
        assert_eq!(got[4], ("custom-key".into(), "custom-value".into()));
        assert_eq!(d.table_size(), 164);
    }

    fn responses() -> [Vec<(String, String)>; 3] {
        [
            fields(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ]),
            fields(&[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ]),
            fields(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                ("location", "https://www.example.com"),
                ("content-encoding", "gzip"),
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
                ),
            ]),
        ]
    }

    /// C.5 and C.6 use a 256-octet table, so entries are evicted.
    fn check_responses(blocks: [&str; 3]) {
        let mut d = Decoder::new(256);
        let want = responses();
        for (i, (block, want)) in blocks.iter().zip(want.iter()).enumerate() {
            assert_eq!(&decode(&mut d, &hex(block)).unwrap(), want, "response {i}");
            assert_eq!(d.table_size(), [222, 222, 215][i], "table after {i}");
        }
        assert_eq!(
            table(&d),
            fields(&[
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
                ),
                ("content-encoding", "gzip"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ])
        );
    }

    #[test]
    fn c5_responses_without_huffman() {
        check_responses([
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
             6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
             3d31",
        ]);
    }

    #[test]
    fn c6_responses_with_huffman() {
        check_responses([
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ]);
    }

    #[test]
    fn huffman_lengths_make_the_rfc_code() {
        // A complete prefix code: the Kraft sum is exactly 1.
        let kraft: u64 = HUFFMAN_LENGTHS
            .iter()
            .map(|&l| 1u64 << (MAX_LEN - l as usize))
            .sum();
        assert_eq!(kraft, 1 << MAX_LEN);
        let code_of = |sym: usize| {
            let len = HUFFMAN_LENGTHS[sym] as usize;
            let rank = CODE.symbols[CODE.offset[len] as usize..]
                .iter()
                .position(|&s| s as usize == sym)
                .unwrap() as u32;
            (CODE.first[len] + rank, len)
        };
        // Codes printed in Appendix B, at each end and across lengths.
        for (sym, code, len) in [
            (0, 0x1ff8, 13),
            (1, 0x7fffd8, 23),
            (10, 0x3ffffffc, 30),
            (32, 0x14, 6),
            (48, 0x0, 5),
            (58, 0x5c, 7),
            (92, 0x7fff0, 19),
            (122, 0x7b, 7),
            (127, 0xffffffc, 28),
            (128, 0xfffe6, 20),
            (199, 0x1ffffec, 25),
            (211, 0x7ffffe0, 27),
            (254, 0x7fffff0, 27),
            (255, 0x3ffffee, 26),
            (256, 0x3fffffff, 30),
        ] {
            assert_eq!(code_of(sym), (code, len), "symbol {sym}");
        }
    }

    #[test]
    fn huffman_refuses_bad_padding_and_eos() {
        // 'a' is 00011: padded with ones it is "a", with zeros it is refused.
        assert_eq!(huffman_decode(&[0b0001_1111]).unwrap(), b"a");
        assert!(huffman_decode(&[0b0001_1000]).is_err());
        // 16 one-bits: a prefix of EOS longer than 7 bits.
        assert!(huffman_decode(&[0xff, 0xff]).is_err());
        // EOS itself (30 ones) then two padding ones.
        assert!(huffman_decode(&[0xff, 0xff, 0xff, 0xff]).is_err());
        assert_eq!(huffman_decode(&[]).unwrap(), b"");
    }

    #[test]
    fn decoder_refuses_bad_indices_and_updates() {
        let mut d = Decoder::new(TABLE_SIZE);
        assert!(decode(&mut d, &[0x80]).is_err(), "index 0");
        assert!(decode(&mut d, &[0xbe]).is_err(), "index 62, empty table");
        assert!(
            decode(&mut d, &[0x3f, 0xe2, 0x1f]).is_err(),
            "update to 4097"
        );
        assert!(
            decode(&mut d, &[0x82, 0x20]).is_err(),
            "update after a field"
        );
        // An update to 0 at the start empties the table.
        decode(&mut d, &hex("400a 6375 7374 6f6d 2d6b 6579 0161")).unwrap();
        assert_eq!(d.table_size(), 43);
        decode(&mut d, &[0x20, 0x3f, 0xe1, 0x1f]).unwrap();
        assert_eq!(d.table_size(), 0);
        assert!(decode(&mut d, &[0x41, 0x05, b'a']).is_err(), "short string");
        // The header list limit counts name + value + 32.
        let mut n = 0;
        assert!(d.decode(&[0x82, 0x82], 70, |_, _| n += 1).is_err());
        assert_eq!(n, 1);
    }

    #[test]
    fn encoder_output_decodes() {
        let mut out = Vec::new();
        put_indexed(&mut out, METHOD_POST);
        put_indexed(&mut out, SCHEME_HTTP);
        put_literal(&mut out, Ok(PATH), "/v1.PodResourcesLister/List");
        put_literal(&mut out, Ok(CONTENT_TYPE), "application/grpc");
        put_literal(&mut out, Err("te"), "trailers");
        let long = "x".repeat(300);
        put_literal(&mut out, Err("grpc-timeout"), &long);
        let mut d = Decoder::new(TABLE_SIZE);
        assert_eq!(
            decode(&mut d, &out).unwrap(),
            fields(&[
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/v1.PodResourcesLister/List"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-timeout", &long),
            ])
        );
        assert_eq!(d.table_size(), 0, "nothing indexed");
    }
}
