//! Every codec of a peer's bytes, apart from the rules that use them: what
//! the kernel, the kubelet, the runtime or a scraper sends is decoded here,
//! and what roce-tune answers encoded here. Nothing in this module imports
//! the rest of the crate (only std, its own files and external crates), so
//! each codec is read, tested and fuzzed on bytes alone; the sockets and
//! files the bytes travel through, and what the answers mean, are the
//! callers' (`tests/it/layers.rs` holds both: no import out of `wire`, and
//! a fuzz target named after each file, `fuzz/fuzz_targets/<file>.rs`).

pub mod checkpoint;
pub mod dcb;
pub mod exposition;
pub mod grpc;
pub mod h2_connection;
pub mod h2_frames;
pub mod hpack;
pub mod http1;
pub mod netlink;
pub mod nldev;
pub mod nri_messages;
pub mod nri_mux;
pub mod podresources;
pub mod protobuf;
pub mod rtnetlink;
pub mod ttrpc;

/// A captured message as the tests keep it: hex, two digits a byte.
#[cfg(test)]
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
