//! HTTP/2 frames (RFC 9113) as a server on the kubelet's socket might send
//! them: the client connection (`wire::h2_connection`) runs a whole unary
//! call against them over a transport in memory (its preface and request go
//! out; these come back, then the end of the stream). It ends, never with
//! more than the message bound, and the same way twice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::h2_connection::{Conn, Transport};
use std::io;
use std::time::{Duration, Instant};

const MAX: usize = 64 * 1024;

/// The server's bytes, then the end of the stream; what the client sends is
/// taken whole.
struct Memory<'a>(&'a [u8]);

impl Transport for Memory<'_> {
    fn recv(&mut self, buf: &mut Vec<u8>, want: usize) -> io::Result<Option<usize>> {
        let n = want.min(self.0.len());
        buf.extend_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(Some(n))
    }
    fn send(&mut self, data: &[u8]) -> io::Result<Option<usize>> {
        Ok(Some(data.len()))
    }
    fn wait(&mut self, _write: bool, _deadline: Instant) -> io::Result<bool> {
        Ok(true)
    }
    fn send_now(&mut self, _data: &[u8]) {}
}

fn call(server: &[u8]) -> Result<Vec<u8>, String> {
    let timeout = Duration::from_secs(2);
    let deadline = Instant::now() + timeout;
    Conn::over(Memory(server), timeout, deadline, MAX)
        .and_then(|mut c| c.unary("/v1.PodResourcesLister/List", b"", MAX, deadline))
        .map_err(|e| format!("{e:?}"))
}

fuzz_target!(|data: &[u8]| {
    let first = call(data);
    if let Ok(msg) = &first {
        assert!(msg.len() <= MAX);
    }
    assert_eq!(call(data), first);
});
