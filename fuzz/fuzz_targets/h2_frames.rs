//! HTTP/2 frame payloads (RFC 9113 §6): byte 0 is the flags, the rest a
//! payload. A padded payload's content lies within it, its pad length
//! before and its padding after accounting for every byte; a 32-bit field
//! is read only from a payload long enough; a frame written reads back
//! with its length, type, flags and stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::h2_frames::{frame, frame_name, u32_at, unpad, PADDED};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, payload)) = data.split_first() else {
        return;
    };
    match unpad(payload, flags) {
        Ok(inner) if flags & PADDED != 0 => {
            let pad = usize::from(payload[0]);
            assert_eq!(1 + inner.len() + pad, payload.len());
            assert_eq!(inner, &payload[1..1 + inner.len()]);
        }
        Ok(inner) => assert_eq!(inner, payload),
        Err(e) => {
            assert!(flags & PADDED != 0);
            assert!(e.to_string().is_ascii());
        }
    }
    match u32_at(payload, 0, 4, "a field") {
        Ok(v) => assert_eq!(v.to_be_bytes(), payload[..4]),
        Err(_) => assert!(payload.len() < 4),
    }
    let stream = u32::from(flags) << 8 | 1;
    let mut out = Vec::new();
    frame(&mut out, flags, flags, stream, payload);
    let len = usize::from(out[0]) << 16 | usize::from(out[1]) << 8 | usize::from(out[2]);
    assert_eq!(len, payload.len() & 0xff_ffff);
    assert_eq!((out[3], out[4]), (flags, flags));
    assert_eq!(u32::from_be_bytes([out[5], out[6], out[7], out[8]]), stream);
    assert_eq!(&out[9..], payload);
    assert!(!frame_name(flags).is_empty());
});
