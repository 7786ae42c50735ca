//! NVIDIA's `/proc/driver/nvidia/gpus/<bdf>/information`. What parses names
//! the GPU it was read for, a UUID only in its canonical lowercase form,
//! and reads the same when written back as the driver writes it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::topology::gpu::parse_information;
use roce_tune::topology::Bdf;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let pci = Bdf::parse("0000:8c:00.0").unwrap();
    let Some(e) = parse_information(pci, text) else {
        return;
    };
    assert_eq!(e.pci, pci);
    if let Some(u) = &e.uuid {
        assert!(u.len() == 40 && u.starts_with("GPU-"), "{u}");
        assert_eq!(u[4..].to_ascii_lowercase(), u[4..]);
    }
    let mut again = format!("Model: \t\t NVIDIA\nBus Location: \t {pci}\n");
    if let Some(u) = &e.uuid {
        again.push_str(&format!("GPU UUID: \t {u}\n"));
    }
    if let Some(m) = e.minor {
        again.push_str(&format!("Device Minor: \t {m}\n"));
    }
    assert_eq!(parse_information(pci, &again), Some(e));
});
