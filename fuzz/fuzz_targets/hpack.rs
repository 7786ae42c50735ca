//! HPACK header blocks (RFC 7541) as a PodResources server might send them,
//! the input split into up to four blocks of one connection (the dynamic
//! table carried over). A block that decodes stays within the list limit,
//! and its fields, written as the client's encoder writes them, decode to
//! the same fields on a fresh decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::podresources::fuzz::{hpack_blocks, hpack_encode};

/// The client's SETTINGS_MAX_HEADER_LIST_SIZE (`wire::h2_connection::HEADER_LIST_MAX`).
const LIST_LIMIT: usize = 16 * 1024;

fuzz_target!(|data: &[u8]| {
    // 0xff bytes split the input: a block rarely needs one.
    let blocks: Vec<&[u8]> = data.splitn(4, |b| *b == 0xff).collect();
    for fields in hpack_blocks(&blocks, LIST_LIMIT).into_iter().flatten() {
        let size: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
        assert!(size <= LIST_LIMIT, "{size}");
        let again = hpack_blocks(&[&hpack_encode(&fields)], usize::MAX);
        assert_eq!(again, vec![Ok(fields)]);
    }
});
