//! rtnetlink answers, as the kernel (or anything else on the socket) might
//! send them. Whatever decodes must re-encode, in the kernel's layout, to
//! messages that decode to the same values; the exchange's Gather fed the
//! same bytes must agree with the decoder; and no error message may carry
//! anything but ASCII text (it describes bytes by size, never quotes them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::netlink::Error;
use roce_tune::wire::netlink::{decode, DecodeError, Gather};
use roce_tune::wire::rtnetlink::{
    decode_address, decode_addresses, decode_default_route, decode_link, decode_links,
    encode_addresses, encode_links,
};

fn plain(e: &DecodeError) {
    let msg = Error::Decode(e.clone()).to_string();
    assert!(
        msg.chars().all(|c| c == ' ' || c.is_ascii_graphic()),
        "an error message quotes input: {msg:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    // The first header's nlmsg_seq, so the fuzzer's messages count as ours.
    let seq = data
        .get(8..12)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(1);

    let links = decode_links(data, seq);
    match &links {
        Ok(b) => {
            let wire = encode_links(&b.replies, b.end, seq);
            let again = decode_links(&wire, seq).expect("re-encoded links must decode");
            assert_eq!((&again.replies, again.end), (&b.replies, b.end));
        }
        Err(e) => plain(e),
    }
    let mut n = 0;
    let fed = Gather::new(seq).feed(data, |m| decode_link(m).map(|_| n += 1));
    match (&links, fed) {
        (Ok(b), Ok(end)) => assert_eq!((b.end, b.replies.len()), (end, n)),
        (Err(a), Err(b)) => assert_eq!(*a, b),
        (l, f) => panic!("decoder {l:?}, exchange {f:?}"),
    }

    let addrs = decode_addresses(data, seq);
    match &addrs {
        Ok(b) => {
            let wire = encode_addresses(&b.replies, b.end, seq);
            let again = decode_addresses(&wire, seq).expect("re-encoded addresses must decode");
            assert_eq!((&again.replies, again.end), (&b.replies, b.end));
        }
        Err(e) => plain(e),
    }
    let mut n = 0;
    let fed = Gather::new(seq).feed(data, |m| decode_address(m).map(|_| n += 1));
    match (&addrs, fed) {
        (Ok(b), Ok(end)) => assert_eq!((b.end, b.replies.len()), (end, n)),
        (Err(a), Err(b)) => assert_eq!(*a, b),
        (a, f) => panic!("decoder {a:?}, exchange {f:?}"),
    }

    // The route dump: only the links of default routes are read; whatever
    // decodes here must decode the same through the exchange.
    let routes = decode(data, seq, decode_default_route);
    if let Err(e) = &routes {
        plain(e);
    }
    let mut n = 0;
    let fed = Gather::new(seq).feed(data, |m| decode_default_route(m).map(|_| n += 1));
    match (&routes, fed) {
        (Ok(b), Ok(end)) => assert_eq!((b.end, b.replies.len()), (end, n)),
        (Err(a), Err(b)) => assert_eq!(*a, b),
        (r, f) => panic!("decoder {r:?}, exchange {f:?}"),
    }
});
