//! A GID file's content. A GID it reads must read the same in sysfs's form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::rdma::gid::{format_gid, parse_gid};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(g) = parse_gid(text) {
        assert_eq!(parse_gid(&format_gid(&g)), Some(g), "{text:?}");
    }
});
