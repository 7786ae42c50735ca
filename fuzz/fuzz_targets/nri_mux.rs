//! The bytes of NRI's socket as a runtime (or anything on its end) might
//! send them: frames read until the stream ends or breaks, each conn's
//! payload cut back into ttrpc messages. Whatever is read must come out of
//! the writer as frames of at most 4096 bytes that read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::nri_mux::{read_frame, write_frames, MAX_SEND};
use roce_tune::wire::ttrpc::{Assembler, Item, Request};

fuzz_target!(|data: &[u8]| {
    let mut r = data;
    let mut conns: [Assembler; 3] = Default::default();
    while let Ok(Some((conn, payload))) = read_frame(&mut r) {
        let mut wire = Vec::new();
        write_frames(&mut wire, conn, &payload).unwrap();
        let mut back = &wire[..];
        let mut joined = Vec::new();
        while let Some((c, p)) = read_frame(&mut back).unwrap() {
            assert_eq!(c, conn);
            assert!(p.len() <= MAX_SEND);
            joined.extend(p);
        }
        assert_eq!(joined, payload);
        let asm = &mut conns[(conn as usize).min(2)];
        asm.push(&payload);
        while let Some(item) = asm.next_item() {
            if let Item::Message(_, body) = item {
                let _ = Request::decode(&body);
            }
        }
    }
});
