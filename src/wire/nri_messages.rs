//! The NRI messages this plugin reads and writes (containerd/nri
//! `pkg/api/api.proto` at v0.12.2, package `nri.pkg.api.v1alpha1`; field
//! numbers as ../shared/nri PROTOCOL.md, section 3, lists them). Only the
//! fields the plugin uses are decoded; every other field, and whatever a
//! newer NRI adds, is skipped by its wire type. Strings borrow from the
//! request, so a Synchronize of many pods copies nothing.
//!
//! No count bounds a decode: a pod's annotations and a container's env are
//! checked once and then walked for the few keys the plugin looks up, never
//! collected, so the only bound is the message's size as ttrpc bounds it (4
//! MiB, `ttrpc::MAX_MESSAGE`). Kubernetes bounds a pod's annotations by
//! their total size (256 KiB), not their count, and an env by nothing
//! (docs/design.md, "NRI").

use super::protobuf::{self as pw, Fields, WireError, Writer};

/// `ConfigureRequest{1 config, 2 runtime_name, 3 runtime_version,
/// 4 registration_timeout, 5 request_timeout, 6 NRI_version}` (timeouts in
/// ms; field 6 from v0.12).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Configure<'a> {
    pub config: &'a str,
    pub runtime_name: &'a str,
    pub runtime_version: &'a str,
    pub registration_timeout_ms: i64,
    pub request_timeout_ms: i64,
    pub nri_version: &'a str,
}

pub fn configure(b: &[u8]) -> Result<Configure<'_>, WireError> {
    let mut c = Configure::default();
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => c.config = pw::text(n, v, "ConfigureRequest.config")?,
            2 => c.runtime_name = pw::text(n, v, "ConfigureRequest.runtime_name")?,
            3 => c.runtime_version = pw::text(n, v, "ConfigureRequest.runtime_version")?,
            4 => {
                c.registration_timeout_ms =
                    pw::varint(n, v, "ConfigureRequest.registration_timeout")? as i64
            }
            5 => {
                c.request_timeout_ms = pw::varint(n, v, "ConfigureRequest.request_timeout")? as i64
            }
            6 => c.nri_version = pw::text(n, v, "ConfigureRequest.NRI_version")?,
            _ => {}
        }
    }
    Ok(c)
}

/// `PodSandbox{1 id, 2 name, 3 uid, 4 namespace, 6 annotations,
/// 8 linux: LinuxPodSandbox{5 namespaces: LinuxNamespace{1 type, 2 path}}}`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pod<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub namespace: &'a str,
    pub annotations: Annotations<'a>,
    /// The path of the pod's network namespace, `None` when it has none of
    /// its own (a hostNetwork pod) or, from containerd 2.3, once it is gone
    /// (PROTOCOL.md, section 3).
    pub netns: Option<&'a str>,
}

impl<'a> Pod<'a> {
    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.annotations.get(key)
    }
}

/// A pod's annotations: the bytes of its `PodSandbox`, whose annotation
/// entries [`pod`] checked (each a `{1 key, 2 value}` of UTF-8 texts),
/// walked for each key looked up. The plugin reads two
/// (`roce-tune.io/nccl-env`, `roce-tune.io/traffic-class`) of however many
/// a pod carries: collecting them would cost a pod of 4 MiB of annotations
/// a vector as large, for nothing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Annotations<'a>(&'a [u8]);

impl<'a> Annotations<'a> {
    /// The value of `key`: the last entry's, as a protobuf map keeps the
    /// last of a repeated key (protobuf.dev, "Maps").
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.iter()
            .filter(|(k, _)| *k == key)
            .last()
            .map(|(_, v)| v)
    }

    /// Every entry, in wire order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let mut f = Fields::new(self.0);
        std::iter::from_fn(move || loop {
            // Checked by `pod`: an error cannot come, and ends the walk.
            match f.next().ok()?? {
                (6, v) => {
                    let entry = pw::bytes(6, v, "").ok()?;
                    return map_entry(entry, "").ok();
                }
                _ => continue,
            }
        })
    }
}

/// A `map<string,string>` entry: `{1 key, 2 value}`.
fn map_entry<'a>(b: &'a [u8], what: &str) -> Result<(&'a str, &'a str), WireError> {
    let (mut k, mut val) = ("", "");
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next().map_err(|e| pw::err(format!("{what}: {}", e.0)))? {
        match n {
            1 => k = pw::text(n, v, what)?,
            2 => val = pw::text(n, v, what)?,
            _ => {}
        }
    }
    Ok((k, val))
}

pub fn pod(b: &[u8]) -> Result<Pod<'_>, WireError> {
    let mut p = Pod {
        annotations: Annotations(b),
        ..Pod::default()
    };
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => p.id = pw::text(n, v, "PodSandbox.id")?,
            2 => p.name = pw::text(n, v, "PodSandbox.name")?,
            3 => p.uid = pw::text(n, v, "PodSandbox.uid")?,
            4 => p.namespace = pw::text(n, v, "PodSandbox.namespace")?,
            6 => {
                // Checked, not kept: `Annotations` walks them again for a key.
                map_entry(
                    pw::bytes(n, v, "PodSandbox.annotations")?,
                    "PodSandbox.annotations",
                )?;
            }
            8 => {
                let mut linux = Fields::new(pw::bytes(n, v, "PodSandbox.linux")?);
                while let Some((n, v)) = linux.next()? {
                    if n != 5 {
                        continue;
                    }
                    let (mut kind, mut path) = ("", "");
                    let mut ns = Fields::new(pw::bytes(n, v, "LinuxPodSandbox.namespaces")?);
                    while let Some((n, v)) = ns.next()? {
                        match n {
                            1 => kind = pw::text(n, v, "LinuxNamespace.type")?,
                            2 => path = pw::text(n, v, "LinuxNamespace.path")?,
                            _ => {}
                        }
                    }
                    // The first network entry: containerd builds one
                    // (internal/cri/nri/nri_api_linux.go GetLinuxNamespaces).
                    if kind == "network" && !path.is_empty() && p.netns.is_none() {
                        p.netns = Some(path);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(p)
}

/// `Container{1 id, 2 pod_sandbox_id, 3 name, 8 env: repeated "K=V"}`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Container<'a> {
    pub id: &'a str,
    pub pod_sandbox_id: &'a str,
    pub name: &'a str,
    pub env: Env<'a>,
}

impl Container<'_> {
    /// Whether the container sets `key` itself (`KEY=...`, or a bare `KEY`).
    pub fn sets(&self, key: &str) -> bool {
        self.sets_each(&[key])[0]
    }

    /// For each of `keys`, whether the container sets it: one walk of its
    /// env, however long (an `envFrom` of a large ConfigMap).
    pub fn sets_each(&self, keys: &[&str]) -> Vec<bool> {
        let mut set = vec![false; keys.len()];
        for e in self.env.iter() {
            let k = e.split_once('=').map_or(e, |(k, _)| k);
            for (i, key) in keys.iter().enumerate() {
                set[i] |= k == *key;
            }
        }
        set
    }
}

/// A container's env: the bytes of its `Container`, whose env entries
/// [`container`] checked (UTF-8 texts), walked, never collected (the plugin
/// asks only whether the container sets the few variables it injects).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Env<'a>(&'a [u8]);

impl<'a> Env<'a> {
    /// Every entry (`K=V`), in the container's order.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> {
        let mut f = Fields::new(self.0);
        std::iter::from_fn(move || loop {
            // Checked by `container`: an error cannot come, and ends it.
            match f.next().ok()?? {
                (8, v) => return pw::text(8, v, "").ok(),
                _ => continue,
            }
        })
    }
}

pub fn container(b: &[u8]) -> Result<Container<'_>, WireError> {
    let mut c = Container {
        env: Env(b),
        ..Container::default()
    };
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => c.id = pw::text(n, v, "Container.id")?,
            2 => c.pod_sandbox_id = pw::text(n, v, "Container.pod_sandbox_id")?,
            3 => c.name = pw::text(n, v, "Container.name")?,
            8 => {
                pw::text(n, v, "Container.env")?;
            }
            _ => {}
        }
    }
    Ok(c)
}

/// `CreateContainerRequest{1 pod, 2 container}`.
pub fn create_container(b: &[u8]) -> Result<(Pod<'_>, Container<'_>), WireError> {
    let (mut p, mut c) = (Pod::default(), Container::default());
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => p = pod(pw::bytes(n, v, "CreateContainerRequest.pod")?)?,
            2 => c = container(pw::bytes(n, v, "CreateContainerRequest.container")?)?,
            _ => {}
        }
    }
    Ok((p, c))
}

/// `RunPodSandboxRequest`, `StopPodSandboxRequest`,
/// `RemovePodSandboxRequest`: `{1 pod}` (v0.12).
pub fn pod_request(b: &[u8]) -> Result<Pod<'_>, WireError> {
    let mut p = Pod::default();
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        if n == 1 {
            p = pod(pw::bytes(n, v, "PodSandboxRequest.pod")?)?;
        }
    }
    Ok(p)
}

/// The pod events of both protocol generations: v0.12's own RPCs and the
/// `StateChange` events of v0.11 (`Event` numbers, `pkg/api/event.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodEvent {
    Run = 1,
    Stop = 2,
    Remove = 3,
}

impl PodEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            PodEvent::Run => "RunPodSandbox",
            PodEvent::Stop => "StopPodSandbox",
            PodEvent::Remove => "RemovePodSandbox",
        }
    }
}

/// `StateChangeEvent{1 event, 2 pod, 3 container}`: the event number and
/// the pod (a container event's container is not read: the plugin asks for
/// none).
pub fn state_change(b: &[u8]) -> Result<(u64, Pod<'_>), WireError> {
    let (mut event, mut p) = (0, Pod::default());
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => event = pw::varint(n, v, "StateChangeEvent.event")?,
            2 => p = pod(pw::bytes(n, v, "StateChangeEvent.pod")?)?,
            _ => {}
        }
    }
    Ok((event, p))
}

/// What a `SynchronizeRequest{1 pods, 2 containers, 3 more}` holds: how
/// many of each, not what. The answer decodes no pod (it answers from the
/// state dir, not from the runtime's picture): a Synchronize of 10,000 pods
/// is a walk over 20,000 fields. The pods are decoded later, off the
/// request path, by [`synchronize_pods`] (the DRA rails' catch-up).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Synchronize {
    pub pods: usize,
    pub containers: usize,
    pub more: bool,
}

pub fn synchronize(b: &[u8]) -> Result<Synchronize, WireError> {
    let mut s = Synchronize::default();
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        match n {
            1 => {
                pw::bytes(n, v, "SynchronizeRequest.pods")?;
                s.pods += 1;
            }
            2 => {
                pw::bytes(n, v, "SynchronizeRequest.containers")?;
                s.containers += 1;
            }
            3 => s.more = pw::varint(n, v, "SynchronizeRequest.more")? != 0,
            _ => {}
        }
    }
    Ok(s)
}

/// The pods of a `SynchronizeRequest`, one at a time, each decoded by
/// [`pod`] (the one PodSandbox decoder RunPodSandbox uses too), so a pod
/// that does not decode is one `Err` and the pods after it come still;
/// containers are not read. A request whose own fields do not decode ends
/// the walk with its `Err`.
pub fn synchronize_pods(b: &[u8]) -> impl Iterator<Item = Result<Pod<'_>, Undecodable<'_>>> {
    let mut f = Fields::new(b);
    let mut ended = false;
    std::iter::from_fn(move || loop {
        if ended {
            return None;
        }
        let (n, v) = match f.next() {
            Ok(Some(field)) => field,
            Ok(None) => return None,
            Err(error) => {
                ended = true;
                return Some(Err(Undecodable { id: None, error }));
            }
        };
        if n != 1 {
            continue;
        }
        let bytes = match pw::bytes(n, v, "SynchronizeRequest.pods") {
            Ok(b) => b,
            Err(error) => return Some(Err(Undecodable { id: None, error })),
        };
        return Some(pod(bytes).map_err(|error| Undecodable {
            id: pod_id(bytes),
            error,
        }));
    })
}

/// A pod of a Synchronize that does not decode: why, and its id when the
/// bytes before the fault hold one (for the line that says it is skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable<'a> {
    pub id: Option<&'a str>,
    pub error: WireError,
}

/// The `id` of a `PodSandbox` that does not decode, read up to the fault.
fn pod_id(b: &[u8]) -> Option<&str> {
    let mut f = Fields::new(b);
    while let Ok(Some((n, v))) = f.next() {
        if n == 1 {
            return pw::text(n, v, "PodSandbox.id").ok();
        }
    }
    None
}

/// `RegisterPluginRequest{1 plugin_name, 2 plugin_idx, 3 NRI_version}`. A
/// v0.11 runtime skips field 3 as unknown.
pub fn register_plugin(name: &str, index: &str, nri_version: &str) -> Vec<u8> {
    let mut w = Writer::new();
    w.text(1, name).text(2, index).text(3, nri_version);
    w.into_bytes()
}

/// `ConfigureResponse{2 events}`.
pub fn configure_response(events: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.varint(2, u64::from(events));
    w.into_bytes()
}

/// `SynchronizeResponse{1 update, 2 more}`: no updates, and `more` as the
/// request said (plugin.go `synchronize` closes a plugin that answers
/// otherwise).
pub fn synchronize_response(more: bool) -> Vec<u8> {
    let mut w = Writer::new();
    w.varint(2, u64::from(more));
    w.into_bytes()
}

/// `CreateContainerResponse{1 adjust: ContainerAdjustment{4 env: KeyValue{1
/// key, 2 value}}}`; no variables, no adjustment.
pub fn create_container_response(env: &[(String, String)]) -> Vec<u8> {
    let mut w = Writer::new();
    if !env.is_empty() {
        let mut adjust = Writer::new();
        for (k, v) in env {
            let mut kv = Writer::new();
            kv.text(1, k).text(2, v);
            adjust.message(4, &kv);
        }
        w.message(1, &adjust);
    }
    w.into_bytes()
}

/// The env of a `CreateContainerResponse`, for tests and the fuzz target's
/// round trip.
pub fn adjusted_env(b: &[u8]) -> Result<Vec<(&str, &str)>, WireError> {
    let mut env = Vec::new();
    let mut f = Fields::new(b);
    while let Some((n, v)) = f.next()? {
        if n != 1 {
            continue;
        }
        let mut a = Fields::new(pw::bytes(n, v, "CreateContainerResponse.adjust")?);
        while let Some((n, v)) = a.next()? {
            if n == 4 {
                env.push(map_entry(
                    pw::bytes(n, v, "ContainerAdjustment.env")?,
                    "KeyValue",
                )?);
            }
        }
    }
    Ok(env)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A PodSandbox as the runtime encodes it.
    pub(crate) fn pod_bytes(id: &str, netns: Option<&str>, annotations: &[(&str, &str)]) -> Writer {
        let mut p = Writer::new();
        p.text(1, id)
            .text(2, "train-0")
            .text(3, "uid-1")
            .text(4, "team-a");
        for (k, v) in annotations {
            let mut e = Writer::new();
            e.text(1, k).text(2, v);
            p.message(6, &e);
        }
        if let Some(path) = netns {
            let mut ipc = Writer::new();
            ipc.text(1, "ipc").text(2, "/proc/1/ns/ipc");
            let mut net = Writer::new();
            net.text(1, "network").text(2, path);
            let mut linux = Writer::new();
            linux.text(3, "kubepods").message(5, &ipc).message(5, &net);
            p.message(8, &linux);
        }
        p.varint(99, 7); // a field from a newer NRI
        p
    }

    #[test]
    fn the_captured_create_container_request_decodes() {
        // examples/wire/wire-0.12.txt: the payload of CreateContainer.
        let hex = "0a420a05706f642d3112037765621a057569642d31220764656661756c7442242a220a076e6574776f726b12172f7661722f72756e2f6e65746e732f636e692d3132333412290a056374722d311205706f642d311a03617070200152005a061a040a00120070c3c7c7f6dd99cdf618";
        let b: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let (p, c) = create_container(&b).unwrap();
        assert_eq!(
            (p.id, p.name, p.uid, p.namespace),
            ("pod-1", "web", "uid-1", "default")
        );
        assert_eq!(p.netns, Some("/var/run/netns/cni-1234"));
        assert_eq!((c.id, c.pod_sandbox_id, c.name), ("ctr-1", "pod-1", "app"));
    }

    #[test]
    fn pods_annotations_env_and_unknown_fields() {
        let p = pod_bytes(
            "p1",
            Some("/var/run/netns/x"),
            &[("roce-tune.io/nccl-env", "true")],
        );
        let got = pod(p.as_bytes()).unwrap();
        assert_eq!(got.netns, Some("/var/run/netns/x"));
        assert_eq!(got.annotation("roce-tune.io/nccl-env"), Some("true"));
        assert_eq!(got.annotation("other"), None);
        let host = pod_bytes("p2", None, &[]);
        assert_eq!(pod(host.as_bytes()).unwrap().netns, None);
        let mut c = Writer::new();
        c.text(1, "c1")
            .text(8, "NCCL_IB_HCA=mlx5_9")
            .text(8, "PATH=/bin")
            .text(8, "BARE");
        let c = container(c.as_bytes()).unwrap();
        assert!(c.sets("NCCL_IB_HCA") && c.sets("BARE") && !c.sets("NCCL_IB_TC"));
    }

    #[test]
    fn a_synchronize_is_counted_not_kept() {
        let mut w = Writer::new();
        for i in 0..3 {
            w.message(1, &pod_bytes(&format!("p{i}"), None, &[]));
        }
        w.message(2, &Writer::new()).varint(3, 1).text(9, "newer");
        let s = synchronize(w.as_bytes()).unwrap();
        assert_eq!((s.pods, s.containers, s.more), (3, 1, true));
        assert!(synchronize(&[0x08, 0x01]).is_err(), "pods must be messages");
        let ids: Vec<&str> = synchronize_pods(w.as_bytes())
            .map(|p| p.unwrap().id)
            .collect();
        assert_eq!(ids, ["p0", "p1", "p2"]);
        let mut one = Writer::new();
        one.message(1, &pod_bytes("q", Some("/var/run/netns/q"), &[("k", "v")]));
        let q = synchronize_pods(one.as_bytes()).next().unwrap().unwrap();
        assert_eq!(
            (q.netns, q.annotation("k")),
            (Some("/var/run/netns/q"), Some("v"))
        );
        let bad: Vec<_> = synchronize_pods(&[0x08, 0x01]).collect();
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].as_ref().unwrap_err().id, None);
        // A request cut inside a field: one Err, then the walk ends.
        assert_eq!(synchronize_pods(&[0x0a, 0x05, 0x0a]).count(), 1);
    }

    #[test]
    fn a_pod_that_does_not_decode_is_skipped_alone_in_a_synchronize() {
        let mut broken = Writer::new();
        broken.text(1, "broken-1").bytes(6, &[0x0a, 0x05, b'k']);
        let mut w = Writer::new();
        w.message(1, &pod_bytes("p0", None, &[]))
            .message(1, &broken)
            .message(1, &pod_bytes("p2", None, &[("k", "v")]));
        let got: Vec<_> = synchronize_pods(w.as_bytes()).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].as_ref().unwrap().id, "p0");
        let e = got[1].as_ref().unwrap_err();
        assert_eq!(e.id, Some("broken-1"));
        assert!(
            e.error.to_string().contains("PodSandbox.annotations"),
            "{e:?}"
        );
        assert_eq!(got[2].as_ref().unwrap().annotation("k"), Some("v"));
    }

    #[test]
    fn no_count_bounds_annotations_or_env_only_the_bytes_do() {
        let keys: Vec<String> = (0..70_000).map(|i| format!("a{i:05}")).collect();
        let mut many: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "")).collect();
        many.push(("roce-tune.io/nccl-env", "false"));
        many.push(("roce-tune.io/nccl-env", "true"));
        let p = pod_bytes("p", None, &many);
        let got = pod(p.as_bytes()).unwrap();
        assert_eq!(got.annotations.iter().count(), 70_002);
        assert_eq!(got.annotation("a69999"), Some(""));
        assert_eq!(
            got.annotation("roce-tune.io/nccl-env"),
            Some("true"),
            "the last of a repeated key, as a protobuf map"
        );
        let mut c = Writer::new();
        c.text(1, "c1");
        for i in 0..70_000 {
            c.text(8, &format!("E{i}={i}"));
        }
        c.text(8, "NCCL_IB_TC=7");
        let c = container(c.as_bytes()).unwrap();
        assert_eq!(c.env.iter().count(), 70_001);
        assert_eq!(
            c.sets_each(&["NCCL_IB_HCA", "NCCL_IB_TC", "E0"]),
            [false, true, true]
        );
        // Checked whole at decode: a bad entry anywhere fails the message.
        let mut bad = Writer::new();
        bad.text(1, "c1").text(8, "A=1").bytes(8, &[0xff]);
        assert!(container(bad.as_bytes()).is_err());
        let mut bad = pod_bytes("p", None, &[("k", "v")]);
        bad.bytes(6, &[0x12, 0x01, 0xff]);
        assert!(pod(bad.as_bytes()).is_err());
    }

    #[test]
    fn answers_encode_as_the_runtime_reads_them() {
        // examples/wire/wire-0.12.txt: the smoke plugin's mask 0x62F.
        assert_eq!(configure_response(0x62f), [0x10, 0xaf, 0x0c]);
        assert!(create_container_response(&[]).is_empty());
        let env = vec![("NCCL_IB_TC".to_string(), "41".to_string())];
        let b = create_container_response(&env);
        assert_eq!(adjusted_env(&b).unwrap(), [("NCCL_IB_TC", "41")]);
        assert_eq!(synchronize_response(true), [0x10, 0x01]);
        assert!(synchronize_response(false).is_empty());
    }
}
