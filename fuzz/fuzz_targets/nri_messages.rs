//! Each NRI message the plugin decodes, chosen by the first byte, from
//! whatever bytes a runtime might send: decode or fail, never panic; the
//! env a CreateContainer answer encodes reads back as written, and a
//! container's env is walked whole (every entry its decode checked).
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::wire::nri_messages as m;

fuzz_target!(|data: &[u8]| {
    let Some((&which, b)) = data.split_first() else {
        return;
    };
    match which % 8 {
        0 => drop(m::configure(b)),
        1 => {
            // Counted on the request path, then each pod decoded alone on
            // the catch-up thread: no pod's bytes panic the walk.
            drop(m::synchronize(b));
            for pod in m::synchronize_pods(b).flatten() {
                let _ = pod.annotation("roce-tune.io/traffic-class");
            }
        }
        2 => {
            if let Ok((pod, ctr)) = m::create_container(b) {
                // What a container sets and an annotation hold are looked
                // up by key: no key panics.
                let _ = pod.annotation("roce-tune.io/nccl-env");
                let _ = ctr.sets_each(&["NCCL_IB_HCA", "NCCL_IB_TC"]);
                let env: Vec<(String, String)> =
                    ctr.env.iter().filter_map(|e| e.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
                let wire = m::create_container_response(&env);
                let back = m::adjusted_env(&wire).unwrap();
                assert_eq!(back.len(), env.len());
                for ((k, v), (bk, bv)) in env.iter().zip(back) {
                    assert_eq!((k.as_str(), v.as_str()), (bk, bv));
                }
            }
        }
        3 => drop(m::pod_request(b)),
        4 => drop(m::state_change(b)),
        5 => drop(m::pod(b)),
        6 => drop(m::container(b)),
        _ => drop(m::adjusted_env(b)),
    }
});
