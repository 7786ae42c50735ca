//! RDMA netlink answers, as the kernel (or anything else on the socket) might
//! send them. Whatever decodes must re-encode, in the kernel's layout, to
//! messages that decode to the same values; an Exchange fed the same bytes
//! must agree with the decoder on how the answer ended.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::netlink::nldev::{decode_replies, encode_batch, End, Error, Exchange, Request};

fuzz_target!(|data: &[u8]| {
    // The first header's nlmsg_seq, so the fuzzer's messages count as ours.
    let seq = data
        .get(8..12)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(1);
    let decoded = decode_replies(data, seq);
    if let Ok(batch) = &decoded {
        let wire = encode_batch(batch, seq);
        let again = decode_replies(&wire, seq).expect("a re-encoded answer must decode");
        assert_eq!(again.replies, batch.replies);
        assert_eq!(again.end, batch.end);
    }
    for request in [
        Request::Devices,
        Request::Ports { dev_index: 1 },
        Request::System,
    ] {
        let mut ex = Exchange::new(request, seq);
        let fed = ex.feed(data);
        match (&decoded, &fed) {
            (Err(_), Ok(_)) => panic!("the Exchange took what the decoder refused"),
            (Ok(b), Err(Error::Kernel { errno, .. })) => {
                assert_eq!(b.end, Some(End::Failed(*errno)))
            }
            (Ok(b), Ok(true)) => assert!(matches!(b.end, Some(End::Done | End::Ack))),
            (Ok(b), Ok(false)) => assert_eq!(b.end, None),
            _ => {}
        }
    }
});
