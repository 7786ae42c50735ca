//! Netlink datagrams of any family, as anything on the socket might send
//! them: the framing every codec stands on (`wire::netlink`). The decoder
//! and an exchange's `Gather` fed the same bytes agree on the messages and
//! how the answer ended; every attribute lies within its message; an error
//! says sizes and offsets, never the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::netlink::{attrs, decode, Gather};

fuzz_target!(|data: &[u8]| {
    let seq = data
        .get(8..12)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(1);
    let decoded = decode(data, seq, |m| {
        let mut n = 0;
        for a in attrs(m.payload, m.offset) {
            match a {
                Ok((_, v)) => {
                    assert!(v.len() + 4 <= m.payload.len());
                    n += 1;
                }
                Err(e) => assert!(e.to_string().is_ascii()),
            }
        }
        assert!(n <= m.payload.len() / 4);
        Ok((m.kind, m.flags, m.payload.len()))
    });
    let mut seen = Vec::new();
    let fed = Gather::new(seq).feed(data, |m| {
        seen.push((m.kind, m.flags, m.payload.len()));
        Ok(())
    });
    match (&decoded, fed) {
        (Ok(b), Ok(end)) => assert_eq!((&b.replies, b.end), (&seen, end)),
        (Err(a), Err(b)) => {
            assert_eq!(*a, b);
            assert!(a.to_string().is_ascii());
        }
        (d, f) => panic!("decoder {d:?}, exchange {f:?}"),
    }
});
