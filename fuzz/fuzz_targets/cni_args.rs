//! CNI_ARGS (`K=V;K=V`). What it accepts must come back the same when joined
//! again, and never hold a control character.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::cni::env::parse_args;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(pairs) = parse_args(text) {
        for (k, v) in &pairs {
            assert!(!k.is_empty() && !k.contains('=') && !k.contains(';'));
            assert!(!v.contains(';'));
            assert!(!k.chars().chain(v.chars()).any(char::is_control));
        }
        let joined: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(parse_args(&joined.join(";")).ok(), Some(pairs));
    }
});
