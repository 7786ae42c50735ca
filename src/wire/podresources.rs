//! The protobuf wire format (protobuf.dev, "Encoding") of the few PodResources
//! messages this client reads, and the one it writes. Field numbers are those
//! of k8s.io/kubelet `pkg/apis/podresources/v1/api.proto` (at 63b3249, lines
//! 29-69 and 111-120):
//!
//! ```text
//! ListPodResourcesResponse { repeated PodResources pod_resources = 1; }
//! GetPodResourcesResponse  { PodResources pod_resources = 1; }
//! PodResources       { string name = 1; string namespace = 2; repeated ContainerResources containers = 3; }
//! ContainerResources { string name = 1; repeated ContainerDevices devices = 2; ... }
//! ContainerDevices   { string resource_name = 1; repeated string device_ids = 2; TopologyInfo topology = 3; }
//! GetPodResourcesRequest { string pod_name = 1; string pod_namespace = 2; }
//! ```
//!
//! Every other field (cpu_ids, memory, dynamic_resources, topology, and
//! whatever a newer kubelet adds, such as 1.36's pod-level cpu_ids = 4) is
//! skipped by its wire type, as the format requires of unknown fields.
//!
//! The bounds of a decode, each checked before the loop it guards
//! (without them, a 1.4 MB answer of 100,000 GPUs took 1.46 s to judge, and a 16 MiB
//! List was decoded whole, every pod collected): a List is scanned for the
//! one pod, no other pod is kept, and
//! - [`LIST_PODS_MAX`] pods in a List, [`POD_BYTES_MAX`] bytes a pod;
//! - [`CONTAINERS_MAX`] containers a pod, and the pod's device IDs and the
//!   length of each name and ID as the checkpoint bounds them
//!   ([`POD_DEVICES_MAX`], [`ID_MAX`]).

use super::protobuf::{bytes, err, text, Fields, Value, WireError};

/// Device IDs of one pod, in an answer or the checkpoint: a pod of 8 GPUs
/// and 32 VFs has 40, and a device plugin's shared replicas a few more
/// each. The placement check takes fewer still (`placement`).
pub const POD_DEVICES_MAX: usize = 1024;
/// A resource name or a device ID, in bytes: Kubernetes caps a resource
/// name at 253 + 63 with its prefix; device IDs are PCI addresses, GPU and
/// MIG UUIDs (at most 60).
pub const ID_MAX: usize = 320;

/// Pods in a List: the kubelet's default maxPods is 110 and nodes that raise
/// it stay in the hundreds; a List of more is no node's.
pub const LIST_PODS_MAX: usize = 2048;
/// One PodResources message: a pod of a hundred containers, each with its
/// CPU IDs, memory and devices, is tens of KiB.
pub const POD_BYTES_MAX: usize = 1 << 20;
/// Containers of one pod (init and sidecar containers included).
pub const CONTAINERS_MAX: usize = 256;
/// A GetPodResourcesResponse: the one pod, its tag and length.
pub const GET_RESPONSE_MAX: usize = POD_BYTES_MAX + 16;

/// Why a message could not be decoded: the rule, and sizes, never the
/// bytes. The wire itself is `crate::wire::protobuf`'s, shared with the NRI codec.
pub type ProtoError = WireError;

/// A PodResources message, its containers left encoded until asked for:
/// List answers every pod of the node and only one is wanted.
#[derive(Debug)]
pub struct Pod<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    msg: &'a [u8],
}

fn pod(msg: &[u8]) -> Result<Pod<'_>, ProtoError> {
    if msg.len() > POD_BYTES_MAX {
        return Err(err(format!(
            "a pod of {} bytes, over the {POD_BYTES_MAX} allowed",
            msg.len()
        )));
    }
    let mut p = Pod {
        name: "",
        namespace: "",
        msg,
    };
    let mut f = Fields::new(msg);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => p.name = text(n, v, "PodResources.name")?,
            2 => p.namespace = text(n, v, "PodResources.namespace")?,
            _ => {}
        }
    }
    Ok(p)
}

impl<'a> Pod<'a> {
    /// Each (resource_name, device_id) of every container, in wire order:
    /// at most [`POD_DEVICES_MAX`] of them, each at most [`ID_MAX`] bytes.
    pub fn devices(&self, mut each: impl FnMut(&'a str, &'a str)) -> Result<(), ProtoError> {
        let mut pod = Fields::new(self.msg);
        let (mut containers, mut devices) = (0, 0);
        while let Some((n, v)) = pod.next()? {
            if n != 3 {
                continue;
            }
            containers += 1;
            if containers > CONTAINERS_MAX {
                return Err(err(format!(
                    "a pod of more than {CONTAINERS_MAX} containers"
                )));
            }
            let mut container = Fields::new(bytes(n, v, "PodResources.containers")?);
            while let Some((n, v)) = container.next()? {
                if n != 2 {
                    continue;
                }
                // resource_name may follow the ids on the wire: read it first.
                let devs = bytes(n, v, "ContainerResources.devices")?;
                let mut resource = "";
                let mut f = Fields::new(devs);
                while let Some((n, v)) = f.next()? {
                    if n == 1 {
                        resource = short_text(n, v, "ContainerDevices.resource_name")?;
                    }
                }
                let mut f = Fields::new(devs);
                while let Some((n, v)) = f.next()? {
                    if n == 2 {
                        devices += 1;
                        if devices > POD_DEVICES_MAX {
                            return Err(err(format!(
                                "a pod of more than {POD_DEVICES_MAX} device IDs"
                            )));
                        }
                        each(resource, short_text(n, v, "ContainerDevices.device_ids")?);
                    }
                }
            }
        }
        Ok(())
    }
}

/// A name or ID of at most [`ID_MAX`] bytes.
fn short_text<'a>(number: u64, v: Value<'a>, what: &str) -> Result<&'a str, ProtoError> {
    let t = text(number, v, what)?;
    if t.len() > ID_MAX {
        return Err(err(format!(
            "{what} of {} bytes, over the {ID_MAX} allowed",
            t.len()
        )));
    }
    Ok(t)
}

/// The pod of `namespace` and `name` in a ListPodResourcesResponse, and how
/// many pods of the List have them (more than one: a pod and its
/// terminating namesake). Every pod is looked at, none kept but the first
/// match.
pub fn list_find<'m>(
    msg: &'m [u8],
    namespace: &str,
    name: &str,
) -> Result<(Option<Pod<'m>>, usize), ProtoError> {
    let (mut pods, mut matches, mut found) = (0, 0, None);
    let mut f = Fields::new(msg);
    while let Some((n, v)) = f.next()? {
        if n != 1 {
            continue;
        }
        pods += 1;
        if pods > LIST_PODS_MAX {
            return Err(err(format!("a List of more than {LIST_PODS_MAX} pods")));
        }
        let p = pod(bytes(n, v, "pod_resources")?)?;
        if p.name == name && p.namespace == namespace {
            matches += 1;
            found.get_or_insert(p);
        }
    }
    Ok((found, matches))
}

/// The pod of a GetPodResourcesResponse; `None` when the field is absent.
/// A second copy of the field (which the format would merge) is refused: no
/// kubelet writes one, and merging two pods is not a thing to guess at.
pub fn get_response(msg: &[u8]) -> Result<Option<Pod<'_>>, ProtoError> {
    let mut found = None;
    let mut f = Fields::new(msg);
    while let Some((n, v)) = f.next()? {
        if n == 1 {
            if found.is_some() {
                return Err(err("GetPodResourcesResponse holds pod_resources twice"));
            }
            found = Some(pod(bytes(n, v, "pod_resources")?)?);
        }
    }
    Ok(found)
}

/// GetPodResourcesRequest { pod_name = 1, pod_namespace = 2 }.
pub fn get_request(name: &str, namespace: &str) -> Vec<u8> {
    let mut w = crate::wire::protobuf::Writer::new();
    w.text(1, name).text(2, namespace);
    w.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-built wire bytes: tag, length (a varint), payload.
    fn ld(number: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![number << 3 | 2];
        let mut n = payload.len();
        while n >= 0x80 {
            v.push(0x80 | (n & 0x7f) as u8);
            n >>= 7;
        }
        v.push(n as u8);
        v.extend_from_slice(payload);
        v
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    fn all(p: &Pod) -> Vec<(String, String)> {
        let mut out = Vec::new();
        p.devices(|r, id| out.push((r.to_string(), id.to_string())))
            .unwrap();
        out
    }

    #[test]
    fn get_request_bytes() {
        assert_eq!(
            get_request("p", "ns"),
            vec![0x0a, 1, b'p', 0x12, 2, b'n', b's']
        );
        assert_eq!(get_request("", ""), Vec::<u8>::new());
        // A 200-byte name takes a two-byte length: 200 = 0xc8 0x01.
        let long = "a".repeat(200);
        assert_eq!(&get_request(&long, "")[..3], &[0x0a, 0xc8, 0x01]);
    }

    #[test]
    fn list_with_unknown_fields_and_ids_before_resource() {
        // ContainerDevices with the ids before resource_name and a topology (3).
        let devs = cat(&[
            &ld(2, b"0000:17:00.2"),
            &ld(3, &ld(1, &[0x08, 0x01])),
            &ld(1, b"nvidia.com/rdma_vf"),
            &ld(2, b"0000:17:00.3"),
        ]);
        let gpu = cat(&[&ld(1, b"nvidia.com/gpu"), &ld(2, b"GPU-1")]);
        let container = cat(&[
            &ld(1, b"main"),
            &ld(2, &devs),
            // cpu_ids = 3, packed varints; memory = 4.
            &ld(3, &[0x02, 0x03]),
            &ld(4, &ld(1, b"memory")),
            &ld(2, &gpu),
        ]);
        let pod_a = cat(&[
            &ld(1, b"a"),
            &ld(2, b"ns1"),
            &ld(3, &container),
            // A field this client does not know: varint field 9, fixed64 10, fixed32 11.
            &[0x48, 0x96, 0x01],
            &[0x51, 1, 2, 3, 4, 5, 6, 7, 8],
            &[0x5d, 1, 2, 3, 4],
        ]);
        let pod_b = cat(&[&ld(2, b"ns2"), &ld(1, b"a")]);
        let msg = cat(&[&ld(1, &pod_a), &ld(1, &pod_b), &ld(7, b"x")]);
        assert!(pod_a.len() >= 128, "a two-byte length is exercised");
        let (a, n) = list_find(&msg, "ns1", "a").unwrap();
        let a = a.unwrap();
        assert_eq!(((a.name, a.namespace), n), (("a", "ns1"), 1));
        let (b, n) = list_find(&msg, "ns2", "a").unwrap();
        let b = b.unwrap();
        assert_eq!(((b.name, b.namespace), n), (("a", "ns2"), 1));
        let pods = [a, b];
        let want: Vec<(String, String)> = [
            ("nvidia.com/rdma_vf", "0000:17:00.2"),
            ("nvidia.com/rdma_vf", "0000:17:00.3"),
            ("nvidia.com/gpu", "GPU-1"),
        ]
        .iter()
        .map(|(r, i)| (r.to_string(), i.to_string()))
        .collect();
        assert_eq!(all(&pods[0]), want);
        assert!(all(&pods[1]).is_empty());
    }

    #[test]
    fn get_response_present_absent_twice() {
        let pod = cat(&[&ld(1, b"p"), &ld(2, b"n")]);
        let msg = ld(1, &pod);
        let got = get_response(&msg).unwrap().unwrap();
        assert_eq!((got.name, got.namespace), ("p", "n"));
        assert!(get_response(&[]).unwrap().is_none());
        assert!(get_response(&cat(&[&ld(1, &pod), &ld(1, &pod)])).is_err());
    }

    #[test]
    fn every_bound_of_a_decode_is_checked() {
        let pod = |name: &[u8], rest: &[u8]| ld(1, &cat(&[&ld(1, name), &ld(2, b"ns"), rest]));
        // A List of LIST_PODS_MAX pods is taken, one more is not.
        let one = pod(b"x", &[]);
        let full = one.repeat(LIST_PODS_MAX);
        assert_eq!(list_find(&full, "ns", "x").unwrap().1, LIST_PODS_MAX);
        let over = [full, one].concat();
        let e = list_find(&over, "ns", "x").unwrap_err();
        assert!(e.0.contains("more than 2048 pods"), "{e}");
        // A pod over POD_BYTES_MAX, even one not asked for.
        let fat = pod(b"y", &ld(9, &vec![0; POD_BYTES_MAX]));
        assert!(list_find(&fat, "ns", "x")
            .unwrap_err()
            .0
            .contains("over the"));
        // Containers, device IDs and their length.
        let container = ld(3, &ld(1, b"c"));
        let many = pod(b"x", &container.repeat(CONTAINERS_MAX + 1));
        let (p, _) = list_find(&many, "ns", "x").unwrap();
        assert!(p
            .unwrap()
            .devices(|_, _| {})
            .unwrap_err()
            .0
            .contains("containers"));
        let ids = |n: usize, len: usize| {
            let devs = cat(&[&ld(1, b"r"), &ld(2, &vec![b'i'; len]).repeat(n)]);
            pod(b"x", &ld(3, &ld(2, &devs)))
        };
        let count = |msg: &[u8]| {
            let (p, _) = list_find(msg, "ns", "x").unwrap();
            let mut n = 0;
            p.unwrap().devices(|_, _| n += 1).map(|()| n)
        };
        assert_eq!(count(&ids(POD_DEVICES_MAX, 12)).unwrap(), POD_DEVICES_MAX);
        assert!(count(&ids(POD_DEVICES_MAX + 1, 12))
            .unwrap_err()
            .0
            .contains("1024"));
        assert_eq!(count(&ids(1, ID_MAX)).unwrap(), 1);
        assert!(count(&ids(1, ID_MAX + 1))
            .unwrap_err()
            .0
            .contains("over the 320"));
    }

    #[test]
    fn malformed_messages_are_refused() {
        for (bad, why) in [
            (vec![0x0a, 5, b'a'], "length beyond the message"),
            (vec![0x0a], "truncated length"),
            (vec![0x0b], "wire type 3 (group)"),
            (vec![0x02, 0], "field number 0"),
            (
                vec![0x08; 1].into_iter().chain([0xff; 11]).collect(),
                "11-byte varint",
            ),
            (vec![0x08, 1], "pod_resources as a varint"),
        ] {
            assert!(list_find(&bad, "n", "a").is_err(), "{why}");
        }
        // name as a varint, and a name that is not UTF-8.
        assert!(list_find(&ld(1, &[0x08, 0x01]), "n", "a").is_err());
        assert!(list_find(&ld(1, &ld(1, &[0xff, 0xfe])), "n", "a").is_err());
        // The error names sizes, not content.
        let e = list_find(&[0x0a, 100, b's', b'e', b'c'], "n", "a").unwrap_err();
        assert!(e.to_string().contains("100 bytes"), "{e}");
        assert!(!e.to_string().contains("sec"), "{e}");
    }
}
