//! HTTP/2 frames (RFC 9113) as a server on the kubelet's socket might send
//! them: the client's whole unary call runs against them (its preface and
//! request go out; these come back, then the end of the stream). It ends,
//! never with more than the message bound, and the same way twice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::podresources::fuzz::h2_call;

const MAX: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let first = h2_call(data, MAX);
    if let Ok(msg) = &first {
        assert!(msg.len() <= MAX);
    }
    assert_eq!(h2_call(data, MAX), first);
});
