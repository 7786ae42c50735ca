//! The traffic class file as sysfs (or a tampered test tree) gives it. A
//! value it reads must survive the write form unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::rdma::traffic_class::{parse, write_form};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(tc) = parse(text) {
        assert_eq!(parse(&write_form(tc)), Ok(tc), "{text:?}");
    }
});
