//! Any bytes as a protobuf message (protobuf.dev, "Encoding"): the fields
//! `wire::protobuf::Fields` walks end or fail without a panic, and the
//! varint and length-delimited ones it read, written again by the
//! `Writer` (defaults left out, as proto3 does), read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::protobuf::{Fields, Value, Writer};

fn fields(buf: &[u8]) -> Vec<(u64, Value<'_>)> {
    let mut f = Fields::new(buf);
    let mut out = Vec::new();
    while let Ok(Some(field)) = f.next() {
        out.push(field);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let read: Vec<(u64, Value)> = fields(data)
        .into_iter()
        .filter(|(n, v)| {
            *n <= u64::from(u32::MAX)
                && match v {
                    Value::Varint(x) => *x != 0,
                    Value::Bytes(b) => !b.is_empty(),
                    Value::Fixed => false,
                }
        })
        .collect();
    let mut w = Writer::new();
    for (n, v) in &read {
        match v {
            Value::Varint(x) => w.varint(*n as u32, *x),
            Value::Bytes(b) => w.bytes(*n as u32, b),
            Value::Fixed => unreachable!(),
        };
    }
    let again = w.into_bytes();
    assert_eq!(fields(&again), read);
});
