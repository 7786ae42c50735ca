//! Which devices a pod holds, from the kubelet's PodResources API
//! (k8s.io/kubelet `pkg/apis/podresources/v1/api.proto`, service
//! `v1.PodResourcesLister`), with the device manager checkpoint as the
//! fallback where the API's socket is not there.
//!
//! roce-tune is a one-shot process per ADD, so this is a small synchronous
//! gRPC client on one unix-socket connection (`h2`; the bytes are
//! `crate::wire`'s HTTP/2, HPACK, gRPC and messages), no async runtime, and
//! nothing runs unless a caller asks. The socket path is
//! the node config's: nothing here takes a path from tenant input.
//!
//! The kubelet's answers (kubernetes `pkg/kubelet/apis/podresources/
//! server_v1.go`): `List` (GA in 1.28) returns every active pod; `Get`
//! (feature gate KubeletPodResourcesGet: alpha and off from 1.27, beta and on
//! from 1.34) returns one pod, and fails with a plain Go error, which gRPC
//! sends as status UNKNOWN, both when the gate is off ("PodResources API Get
//! method disabled") and when the pod is not found ("pod %s in namespace %s
//! not found"). A kubelet older than 1.27 has no such method: UNIMPLEMENTED.
//! So any error status from `Get` is answered by a `List` on the same
//! connection, which tells "not found" apart from "no Get".

mod checkpoint;
#[doc(hidden)]
pub mod fuzz;
mod h2;

pub use crate::wire::podresources::{
    CONTAINERS_MAX, GET_RESPONSE_MAX, ID_MAX, LIST_PODS_MAX, POD_BYTES_MAX, POD_DEVICES_MAX,
};
pub use checkpoint::from_checkpoint;

use crate::wire::podresources as proto;

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where the kubelet serves the API (kubernetes `pkg/kubelet/apis/
/// podresources`; Multus `pkg/kubeletclient/kubeletclient.go` at 95a0932,
/// lines 38-41).
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// Multus `pkg/checkpoint/checkpoint.go` line 28.
pub const DEFAULT_CHECKPOINT: &str = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";
/// The largest response taken: Multus's `defaultPodResourcesMaxSize`
/// (kubeletclient.go line 40, passed as grpc.MaxCallRecvMsgSize on line 85),
/// which node-feature-discovery uses too.
pub const MAX_RESPONSE: usize = 16 * 1024 * 1024;

const GET: &str = "/v1.PodResourcesLister/Get";
const LIST: &str = "/v1.PodResourcesLister/List";

/// The pod to look up: its namespace and name (CNI_ARGS `K8S_POD_NAMESPACE`,
/// `K8S_POD_NAME`), and its UID (`K8S_POD_UID`) for the checkpoint.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
}

/// One device ID of one resource, as the device plugin named it: a PCI
/// address for SR-IOV VFs, a `GPU-<uuid>` for NVIDIA GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Device {
    pub resource: String,
    pub id: String,
}

/// Every container's devices, each (resource, ID) once, in the kubelet's
/// order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDevices {
    pub devices: Vec<Device>,
}

/// Which answer the devices came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Get,
    List,
    Checkpoint,
}

/// Why no answer. Callers branch on the variant, never on the text; no text
/// quotes what the server sent beyond a short printable status message.
#[derive(Debug)]
pub enum Error {
    /// No API on this node: no socket file (ENOENT, ENOTDIR), or nobody
    /// listening on it (ECONNREFUSED). Skip what needed it, and log.
    NoSocket(io::Error),
    /// The whole call (connect, send, every read) took longer than allowed.
    Timeout {
        timeout: Duration,
        stage: &'static str,
    },
    /// Not gRPC, or a framing, HPACK, protobuf or checkpoint format error.
    Protocol(String),
    /// The server answered with a non-OK gRPC status (or an HTTP/2 reset or
    /// HTTP status, mapped as gRPC documents).
    Status { code: u32, message: Option<String> },
    /// A response (or checkpoint) over [`MAX_RESPONSE`].
    TooLarge { size: u64, limit: u64 },
    /// List holds more than one pod of that namespace and name (a pod and
    /// its terminating namesake): whose devices these are cannot be told.
    Ambiguous { pods: usize },
    /// The query has an empty name or namespace.
    InvalidQuery,
    /// Another OS error (EACCES on the socket, ECONNRESET, ...).
    Io { op: &'static str, err: io::Error },
    /// Whoever provides the answer is not root (the socket's peer), or the
    /// checkpoint is not a file only root could have written: nothing it
    /// says is believed. The text names the input and why.
    Untrusted(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoSocket(e) => write!(f, "no PodResources API on this node: {e}"),
            Error::Timeout { timeout, stage } => write!(
                f,
                "PodResources: no complete answer within {} ms (waiting for {stage})",
                timeout.as_millis()
            ),
            Error::Protocol(m) => write!(f, "PodResources: {m}"),
            Error::Status { code, message } => {
                write!(f, "PodResources: gRPC status {code}")?;
                match message {
                    Some(m) => write!(f, ": {m}"),
                    None => Ok(()),
                }
            }
            Error::TooLarge { size, limit } => write!(
                f,
                "PodResources: an answer of {size} bytes, over the {limit}-byte limit"
            ),
            Error::Ambiguous { pods } => write!(
                f,
                "PodResources: {pods} pods of that namespace and name are listed"
            ),
            Error::InvalidQuery => write!(f, "PodResources: the pod's name or namespace is empty"),
            Error::Io { op, err } => write!(f, "PodResources: {op}: {err}"),
            Error::Untrusted(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {}

impl From<proto::ProtoError> for Error {
    fn from(e: proto::ProtoError) -> Error {
        Error::Protocol(e.to_string())
    }
}

/// The devices of pod `q` from the kubelet at `socket`, within `timeout` in
/// all. `Get` first; any error status from it (an older kubelet, the gate
/// off, or the pod not found) is followed by `List`, matched on namespace
/// and name both. `Ok(None)`: the kubelet answered and does not know the pod.
pub fn pod_devices(
    socket: &Path,
    timeout: Duration,
    q: &Query,
) -> Result<Option<(PodDevices, Source)>, Error> {
    if q.name.is_empty() || q.namespace.is_empty() {
        return Err(Error::InvalidQuery);
    }
    let deadline = Instant::now() + timeout;
    let mut conn = h2::Conn::open(socket, timeout, deadline, MAX_RESPONSE)?;
    let get = proto::get_request(q.name, q.namespace);
    match conn.unary(GET, &get, proto::GET_RESPONSE_MAX, deadline) {
        Ok(msg) => match proto::get_response(&msg)? {
            Some(pod) if pod.name == q.name && pod.namespace == q.namespace => {
                return Ok(Some((devices(&pod)?, Source::Get)));
            }
            Some(pod) => {
                return Err(Error::Protocol(format!(
                    "Get answered with another pod (a {}-byte name in a {}-byte namespace)",
                    pod.name.len(),
                    pod.namespace.len()
                )))
            }
            // An OK without a pod is no kubelet's answer; List will tell.
            None => {}
        },
        Err(Error::Status { .. }) => {}
        Err(e) => return Err(e),
    }
    if !conn.reusable() {
        drop(conn);
        conn = h2::Conn::open(socket, timeout, deadline, MAX_RESPONSE)?;
    }
    let msg = conn.unary(LIST, &[], MAX_RESPONSE, deadline)?;
    match proto::list_find(&msg, q.namespace, q.name)? {
        (None, _) => Ok(None),
        (Some(pod), 1) => Ok(Some((devices(&pod)?, Source::List))),
        (Some(_), pods) => Err(Error::Ambiguous { pods }),
    }
}

/// [`pod_devices`], and where there is no socket, the checkpoint by the
/// pod's UID: Multus's order (kubeletclient.go lines 64-72). Without a UID,
/// a checkpoint file, or with neither there, the error stays `NoSocket`.
pub fn lookup(
    socket: &Path,
    checkpoint: Option<&Path>,
    timeout: Duration,
    q: &Query,
) -> Result<Option<(PodDevices, Source)>, Error> {
    match pod_devices(socket, timeout, q) {
        Err(Error::NoSocket(e)) => match (checkpoint, q.uid.filter(|u| !u.is_empty())) {
            (Some(file), Some(uid)) => match from_checkpoint(file, uid) {
                Ok(found) => Ok(found.map(|d| (d, Source::Checkpoint))),
                Err(Error::Io { err, .. }) if err.kind() == io::ErrorKind::NotFound => {
                    Err(Error::NoSocket(e))
                }
                Err(other) => Err(other),
            },
            _ => Err(Error::NoSocket(e)),
        },
        r => r,
    }
}

fn devices(pod: &proto::Pod) -> Result<PodDevices, Error> {
    let mut pairs = Vec::new();
    pod.devices(|r, id| pairs.push((r, id)))?;
    Ok(dedup(pairs))
}

/// A device two containers list (a restartable init container and the main
/// one, say) is one device.
fn dedup(pairs: Vec<(&str, &str)>) -> PodDevices {
    let mut seen = HashSet::with_capacity(pairs.len());
    let devices = pairs
        .into_iter()
        .filter(|p| seen.insert(*p))
        .map(|(r, id)| Device {
            resource: r.to_owned(),
            id: id.to_owned(),
        })
        .collect();
    PodDevices { devices }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_first_order_and_resource() {
        let got = dedup(vec![("a", "1"), ("b", "1"), ("a", "1"), ("a", "2")]);
        let ids: Vec<(&str, &str)> = got
            .devices
            .iter()
            .map(|d| (d.resource.as_str(), d.id.as_str()))
            .collect();
        assert_eq!(ids, [("a", "1"), ("b", "1"), ("a", "2")]);
    }

    #[test]
    fn empty_query_is_refused_before_connecting() {
        let q = Query {
            namespace: "",
            name: "p",
            uid: None,
        };
        let r = pod_devices(Path::new("/nonexistent"), Duration::from_secs(1), &q);
        assert!(matches!(r, Err(Error::InvalidQuery)), "{r:?}");
    }

    #[test]
    fn lookup_falls_back_to_the_checkpoint_only_without_a_socket() {
        if !crate::process::test_runs_as_root(
            "podresources::lookup_falls_back_to_the_checkpoint_only_without_a_socket",
            "a checkpoint is read only when root wrote it",
        ) {
            return;
        }
        let dir = std::env::temp_dir().join(format!("rt-lookup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ckpt = dir.join("ckpt");
        std::fs::write(
            &ckpt,
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u1","ResourceName":"r","DeviceIDs":{"-1":["d"]}}]}}"#,
        )
        .unwrap();
        let q = |uid| Query {
            namespace: "ns",
            name: "p",
            uid,
        };
        let none = dir.join("no.sock");
        let t = Duration::from_millis(200);
        let (d, s) = lookup(&none, Some(&ckpt), t, &q(Some("u1")))
            .unwrap()
            .unwrap();
        assert_eq!(s, Source::Checkpoint);
        assert_eq!(
            d.devices,
            [Device {
                resource: "r".into(),
                id: "d".into()
            }]
        );
        assert!(lookup(&none, Some(&ckpt), t, &q(Some("u2")))
            .unwrap()
            .is_none());
        assert!(matches!(
            lookup(&none, Some(&ckpt), t, &q(None)),
            Err(Error::NoSocket(_))
        ));
        assert!(matches!(
            lookup(&none, Some(&dir.join("no-ckpt")), t, &q(Some("u1"))),
            Err(Error::NoSocket(_))
        ));
        assert!(matches!(
            lookup(&none, None, t, &q(Some("u1"))),
            Err(Error::NoSocket(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
