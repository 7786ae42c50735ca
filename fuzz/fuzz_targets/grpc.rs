//! The DATA of a unary gRPC response (PROTOCOL-HTTP2.md,
//! "Length-Prefixed-Message"), as a server might send it: byte 0 sets the
//! message bound, byte 1 the sizes of the frames the rest arrives in, byte
//! 2 whether a grpc-message follows in the trailers. The call
//! (`wire::grpc::Call`) ends the same however the bytes are cut, never
//! keeps more than the bound, and a status message it keeps is short
//! printable ASCII.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::grpc::{Call, Error, Headers};

fn run(data: &[u8], max: usize, step: usize, message: Option<&[u8]>) -> Result<Vec<u8>, bool> {
    let mut call = Call::default();
    let mut h = Headers::default();
    h.field(b":status", b"200");
    h.field(b"content-type", b"application/grpc");
    assert!(matches!(call.headers(h, false), Ok(None)));
    for piece in data.chunks(step) {
        call.data(piece, max).map_err(|_| false)?;
    }
    let mut t = Headers::default();
    match message {
        Some(m) => {
            t.field(b"grpc-status", b"2");
            t.field(b"grpc-message", m);
        }
        None => t.field(b"grpc-status", b"0"),
    }
    match call.headers(t, true) {
        Ok(Some(Ok(msg))) => Ok(msg),
        Ok(Some(Err(Error::Status { code, message }))) => {
            assert_eq!(code, 2);
            if let Some(m) = message {
                assert!(m.len() <= 200 && m.bytes().all(|b| (0x20..0x7f).contains(&b)));
            }
            Err(true)
        }
        Ok(other) => panic!("trailers ended nothing: {other:?}"),
        Err(_) => Err(false),
    }
}

fuzz_target!(|data: &[u8]| {
    let [bound, step, with_message, rest @ ..] = data else {
        return;
    };
    let max = usize::from(*bound) * 8;
    let (body, message) = match *with_message % 2 {
        0 => (rest, None),
        _ => {
            let (m, b) = rest.split_at(rest.len() / 2);
            (b, Some(m))
        }
    };
    let whole = run(body, max, body.len().max(1), message);
    if let Ok(msg) = &whole {
        assert!(msg.len() <= max);
    }
    let cut = run(body, max, usize::from(*step % 16) + 1, message);
    assert_eq!(cut, whole);
});
