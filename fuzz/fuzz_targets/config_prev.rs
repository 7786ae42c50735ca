//! stdin as a runtime sends it: the config, then its prevResult, printed in
//! every supported version. What roce-tune prints must parse again: it is the
//! prevResult of the next plugin in the chain (sbr).
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::cni::config::NetConf;
use roce_tune::cni::result::NetResult;
use roce_tune::cni::version::SUPPORTED_VERSIONS;

fuzz_target!(|data: &[u8]| {
    let Ok(conf) = NetConf::parse(data, std::path::Path::new("/etc/cni/roce-tune/node.json")) else {
        return;
    };
    let Some(prev) = conf.prev_result.as_ref() else {
        return;
    };
    let Ok(result) = NetResult::parse(prev, &conf.cni_version) else {
        return;
    };
    for v in SUPPORTED_VERSIONS {
        if let Ok(out) = result.to_value(v) {
            if let Err(e) = NetResult::parse(&out, v) {
                panic!("our own {v} output does not parse: {e:?}\n{out}");
            }
        }
    }
});
