//! The NRI session's state machine (`nri::session::Session`) driven with
//! whole conversations: what a runtime's end of the socket sends (frames
//! for any conn, cut anywhere; ttrpc messages split across frames or
//! several in one; RegisterPlugin's answer; requests on any stream, in any
//! order; Synchronize parts with and without `more`, with pods and
//! containers), fed in pieces of the sizes the first bytes say.
//!
//! Input: byte 0 says whether the plugin wants a Synchronize's pods (bit
//! 0: a `draRails` node keeps them), bytes 1 to 8 the piece sizes (each +1,
//! taken in turn), the rest the runtime's bytes. What must hold:
//! - the session says the same (answers, events, the end) however the
//!   bytes are cut;
//! - every answer is whole frames of at most 4096 bytes on the Plugin conn,
//!   each a ttrpc Response that decodes;
//! - what a Synchronize keeps never passes its budget, a finished one
//!   comes right after an answer, and each part it hands over decodes as a
//!   SynchronizeRequest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::cni::config::LogLevel;
use roce_tune::wire::nri_messages::{self as msg, Container, Pod, PodEvent};
use roce_tune::wire::nri_mux::{read_frame, MAX_SEND, PLUGIN_CONN};
use roce_tune::nri::session::{Answers, Output, Session};
use roce_tune::wire::ttrpc::{Assembler, Item, Response, TYPE_RESPONSE};
use roce_tune::nri::Stats;
use std::time::Duration;

/// Small, so 8 KiB of input can pass it.
const BUDGET: usize = 1024;

/// The plugin's side, answering from what the request says.
struct StandIn {
    wants: bool,
}

impl Answers for StandIn {
    fn events(&self) -> u32 {
        0xf
    }
    fn configure(&mut self, _: &msg::Configure<'_>) {}
    fn synchronized(&mut self, _: &msg::Synchronize, _: Duration) {}
    fn wants_synchronized_pods(&self) -> bool {
        self.wants
    }
    fn synchronized_pods(&mut self, _: Vec<Vec<u8>>) {}
    fn create_container(&mut self, pod: &Pod<'_>, ctr: &Container<'_>, _: &Stats) -> Vec<(String, String)> {
        // Whatever the runtime named comes back as a variable: the answer's
        // encoder meets tenant bytes too.
        vec![(format!("POD_{}", ctr.name), pod.name.to_owned())]
    }
    fn pod_event(&mut self, _: PodEvent, pod: &Pod<'_>) -> Result<(), String> {
        match pod.id.strip_prefix('x') {
            Some(why) => Err(why.to_owned()),
            None => Ok(()),
        }
    }
    fn pod_event_budget(&self) -> Duration {
        Duration::from_millis(1500)
    }
}

/// What one conversation came to: each output in order (an answer as its
/// bytes), and how it ended.
fn converse(wire: &[u8], cuts: &[u8], wants: bool) -> (Vec<String>, String) {
    let mut s = Session::with_sync_budget(BUDGET);
    let mut answers = StandIn { wants };
    let stats = Stats::default();
    let mut said = Vec::new();
    let mut out = Vec::new();
    let mut rest = wire;
    let mut i = 0;
    loop {
        if rest.is_empty() {
            return (said, s.end().to_string());
        }
        let n = match cuts {
            [] => rest.len(),
            _ => (usize::from(cuts[i % cuts.len()]) + 1).min(rest.len()),
        };
        i += 1;
        let received = s.receive(&rest[..n], &mut answers, &stats, &mut out);
        rest = &rest[n..];
        assert!(s.sync_bytes() <= BUDGET, "{} kept", s.sync_bytes());
        let mut after_answer = false;
        for o in out.drain(..) {
            match &o {
                Output::Send(bytes) => {
                    check_answer(bytes);
                    after_answer = true;
                    said.push(format!("{bytes:?}"));
                    continue;
                }
                Output::Synchronized(parts) => {
                    assert!(after_answer, "a Synchronize handed over before its answer");
                    assert!(parts.iter().map(Vec::len).sum::<usize>() <= BUDGET);
                    for p in parts {
                        msg::synchronize(p).expect("a kept part decodes");
                    }
                }
                Output::Registered | Output::Configured => {}
            }
            after_answer = false;
            said.push(format!("{o:?}"));
        }
        if let Err(e) = received {
            return (said, e.to_string());
        }
    }
}

/// One answer: whole frames of at most 4096 bytes on the Plugin conn,
/// holding ttrpc Responses.
fn check_answer(bytes: &[u8]) {
    let mut r = bytes;
    let mut asm = Assembler::default();
    while let Some((conn, payload)) = read_frame(&mut r).expect("whole frames") {
        assert_eq!(conn, PLUGIN_CONN);
        assert!(payload.len() <= MAX_SEND);
        asm.push(&payload);
    }
    let mut n = 0;
    while let Some(item) = asm.next_item() {
        let Item::Message(h, body) = item else {
            panic!("an answer over 4 MiB")
        };
        assert_eq!(h.kind, TYPE_RESPONSE);
        Response::decode(&body).expect("a Response");
        n += 1;
    }
    assert_eq!((n, asm.pending()), (1, 0), "one whole message per answer");
}

fuzz_target!(|data: &[u8]| {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| roce_tune::log::init(LogLevel::Error, "fuzz".into(), None));
    let (head, wire) = data.split_at(data.len().min(9));
    let wants = head.first().is_some_and(|b| b & 1 == 1);
    let cuts = head.get(1..).unwrap_or(&[]);
    let whole = converse(wire, &[], wants);
    assert_eq!(converse(wire, cuts, wants), whole);
});
