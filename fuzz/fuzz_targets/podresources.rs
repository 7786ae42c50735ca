//! The PodResources protobuf messages (ListPodResourcesResponse,
//! GetPodResourcesResponse) as a kubelet, or anything on its socket, might
//! send them. What decodes keeps the decoders' bounds: at most 1024 device
//! IDs of at most 320 bytes a pod, and a List's match counted once per pod.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_tune::podresources::fuzz::{get, list};
use roce_tune::podresources::{ID_MAX, LIST_PODS_MAX, POD_DEVICES_MAX};

fn bounded(devices: &[(String, String)]) {
    assert!(devices.len() <= POD_DEVICES_MAX);
    for (r, id) in devices {
        assert!(r.len() <= ID_MAX && id.len() <= ID_MAX);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok((found, n)) = list(data, "team-a", "trainer") {
        assert!(n <= LIST_PODS_MAX);
        assert_eq!(found.is_some(), n > 0);
        if let Some(d) = found {
            bounded(&d);
        }
    }
    if let Ok(Some((_, _, d))) = get(data) {
        bounded(&d);
    }
});
