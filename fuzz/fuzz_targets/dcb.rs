//! DCB answers (RTM_GETDCB, DCB_CMD_IEEE_GET), as the kernel (or anything
//! else on the socket) might send them. Whatever decodes must re-encode, in
//! the kernel's layout, to an answer that decodes to the same state; no
//! error message may carry anything but ASCII text (it describes bytes by
//! size, never quotes them); and the QoS rules take any decoded state.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::dcb::{encode_answer, encode_request, Answer, Exchange};
use roce_tune::qos::{verdict, Class, Fabric};

fuzz_target!(|data: &[u8]| {
    // The first header's nlmsg_seq, so the fuzzer's messages count as ours.
    let seq = data
        .get(8..12)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(1);
    match Exchange::new(seq).feed(data) {
        Ok(Some(Answer::State(state))) => {
            let wire = encode_answer(&state, seq);
            let again = Exchange::new(seq).feed(&wire);
            assert_eq!(again, Ok(Some(Answer::State(state.clone()))));
            for class in [0u8, 41, 106, 255] {
                for lossless in [false, true] {
                    let fabric = Fabric {
                        priority: Some(class % 8),
                        lossless,
                    };
                    let v = verdict(Class(class), Some(&Answer::State(state.clone())), fabric);
                    assert!(v.to_string().is_ascii());
                }
            }
        }
        Ok(_) => {}
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.chars().all(|c| c == ' ' || c.is_ascii_graphic()),
                "an error message quotes input: {msg:?}"
            );
        }
    }
    // Any name: refused or encoded, never a panic.
    if let Ok(name) = std::str::from_utf8(data) {
        if let Ok(request) = encode_request(name, seq) {
            assert!(request.len() <= 16 + 4 + 4 + 16);
        }
    }
});
