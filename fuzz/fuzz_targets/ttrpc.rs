//! One conn's bytes, pushed in pieces of the sizes the first bytes say:
//! the messages and oversized headers that come out must not depend on
//! where the pieces were cut; each message's Request and Response decode
//! or fail without a panic, and a decoded Request re-encodes to one that
//! decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::ttrpc::{Assembler, Item, Request, Response};

fn items(data: &[u8], cuts: &[u8]) -> Vec<Item> {
    let mut asm = Assembler::default();
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = (usize::from(*cuts.get(i).unwrap_or(&255)) + 1).min(rest.len());
        i += 1;
        asm.push(&rest[..n]);
        rest = &rest[n..];
        while let Some(item) = asm.next_item() {
            out.push(item);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let (cuts, data) = data.split_at(data.len().min(8));
    let whole = items(data, &[255; 0]);
    assert_eq!(items(data, cuts), whole);
    for item in whole {
        if let Item::Message(_, body) = item {
            if let Ok(r) = Request::decode(&body) {
                assert_eq!(Request::decode(&r.encode()).unwrap(), r);
            }
            let _ = Response::decode(&body);
        }
    }
});
