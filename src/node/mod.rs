//! The node config: every host path roce-tune uses, set by the node's admin,
//! never by a network config. A NetworkAttachmentDefinition is namespaced and
//! often writable by any namespace admin, while roce-tune runs as root on the
//! node, so host paths (state dir, sysfs root, log file, device-info dir) and
//! the sysctl allowlist come from this file alone (docs/design.md, "Who
//! writes what").
//!
//! The file is `/etc/cni/roce-tune/node.json`, or the path in
//! `ROCE_TUNE_NODE_CONFIG` (tests and `make demo`; a runtime passes its own
//! environment to plugins, and kubelet and Multus set no such variable). A
//! missing file at the default path means the defaults; a file named
//! elsewhere must exist: a misspelt name would otherwise tune every rail
//! with the defaults' state dir and sysfs root, without a word. It must be
//! a regular file owned by root and not writable by group or others.

use crate::cni::json;
use serde_json::{Map, Value};
use std::fmt;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

mod patterns;
mod rail_counters;
pub use patterns::{pattern_matches, validate_pattern};
pub use rail_counters::*;

pub const DEFAULT_PATH: &str = "/etc/cni/roce-tune/node.json";
pub const PATH_ENV: &str = "ROCE_TUNE_NODE_CONFIG";
pub const DEFAULT_STATE_DIR: &str = "/run/cni/roce-tune";
pub const DEFAULT_SYSFS_ROOT: &str = "/sys";
/// Where Multus and the device-info spec keep device-info files.
pub const DEFAULT_DEVICE_INFO_DIR: &str = "/var/run/k8s.cni.cncf.io/devinfo/cni";
/// The kubelet's PodResources socket (k8s.io/kubelet pkg/apis/podresources,
/// what Multus's kubeletclient reads too).
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// The kubelet's device manager checkpoint: an internal format, read only
/// where the socket is absent, as Multus falls back to it.
pub const DEFAULT_POD_RESOURCES_CHECKPOINT: &str =
    "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint";
/// An ADD must not wait on a slow kubelet: the PodResources call is bounded
/// by this, then ADD goes on without the placement check (`make bench`: a
/// call answers in about 0.5 ms).
pub const DEFAULT_POD_RESOURCES_TIMEOUT: Duration = Duration::from_millis(250);
const MAX_POD_RESOURCES_TIMEOUT_MS: u64 = 10_000;
/// The device-plugin resources whose devices are GPUs.
pub const DEFAULT_GPU_RESOURCES: &[&str] = &["nvidia.com/gpu", "amd.com/gpu"];
/// NVIDIA's driver's per-GPU directory (`<bdf>/information`).
pub const DEFAULT_NVIDIA_GPUS_DIR: &str = "/proc/driver/nvidia/gpus";
/// The agent's metrics: loopback only unless the node admin says otherwise
/// (pod and namespace names are not for every tenant on the node); the
/// shipped manifests put kube-rbac-proxy in front of it.
pub const DEFAULT_METRICS_ADDRESS: &str = "127.0.0.1:9662";
/// The runtime's NRI socket (containerd/nri `pkg/api/plugin.go`,
/// `DefaultSocketPath`).
pub const DEFAULT_NRI_SOCKET: &str = "/var/run/nri/nri.sock";
/// After dranet's `00` and dra-driver-sriov's `42`: their RunPodSandbox has
/// moved the netdevs in by the time this plugin's runs.
pub const DEFAULT_NRI_INDEX: &str = "50";
/// A node config is a few hundred bytes.
const MAX_BYTES: u64 = 64 * 1024;
const MAX_PATTERNS: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// Where the config came from, or the default path when it is missing.
    pub source: PathBuf,
    pub state_dir: PathBuf,
    pub sysfs_root: PathBuf,
    pub log_file: Option<PathBuf>,
    /// `None`: every key under `net.` is allowed.
    pub sysctl_allowlist: Option<Vec<String>>,
    pub device_info_dir: PathBuf,
    /// `deviceInfoDir` as the node config (or the default) names it, before
    /// its links were resolved: Multus names each file by this path.
    pub device_info_dir_named: PathBuf,
    pub pod_resources_socket: PathBuf,
    /// `None`: no fallback to the kubelet's checkpoint.
    pub pod_resources_checkpoint: Option<PathBuf>,
    pub pod_resources_timeout: Duration,
    pub gpu_resources: Vec<String>,
    pub nvidia_gpus_dir: PathBuf,
    pub metrics_address: SocketAddr,
    pub drift_policy: DriftPolicy,
    /// Where `roce-tune-agent nri` connects (`nriSocket`): as written until
    /// that command resolves it (`resolve_nri_socket`).
    pub nri_socket: PathBuf,
    /// The plugin's index among the node's NRI plugins: two digits.
    pub nri_index: String,
    /// Which pods' containers get the job environment (`ncclEnv`).
    pub nccl_env: NcclEnv,
    /// `jobEnvFamilies`: the variable families a pod's job environment gets.
    pub job_env_families: Vec<EnvFamily>,
    /// `jobEnvOmit`: variables never injected (another NRI plugin sets them).
    pub job_env_omit: Vec<String>,
    /// `draRails`: the profile the NRI plugin tunes the rails a DRA driver
    /// moved into a pod with (a network config's keys, `profile_keys`),
    /// validated as the node config is read; `None`: no DRA rails.
    pub dra_rails: Option<Value>,
    /// `railPriority`, `railLossless`, `qosCheck`: what the fabric expects
    /// of a rail's class on its PF, and what a verdict other than ok does.
    pub qos: crate::qos::QosConfig,
    /// `railCounters` and `railCountersMax`: which RDMA counters of each
    /// live rail the agent exports, and how many at most per rail.
    pub rail_counters: RailCounters,
}

/// Which pods the NRI plugin gives the job environment at CreateContainer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NcclEnv {
    /// Pods annotated `roce-tune.io/nccl-env: "true"`.
    Annotated,
    /// Every pod with live rails, unless annotated `"false"`.
    All,
    /// None: the plugin asks for no CreateContainer.
    Off,
}

/// A family of job environment variables (`jobEnvFamilies`), computed from
/// a pod's rails by `crate::job_env`. Here because the node config names
/// them and what may be left out (`jobEnvOmit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvFamily {
    /// NCCL's IB transport (NVIDIA/nccl `src/transport/net_ib/`).
    Nccl,
    /// UCX (Open MPI, UCC): `UCX_NET_DEVICES` and the IB transport's.
    Ucx,
}

impl EnvFamily {
    pub const ALL: [EnvFamily; 2] = [EnvFamily::Nccl, EnvFamily::Ucx];

    pub fn name(self) -> &'static str {
        match self {
            EnvFamily::Nccl => "nccl",
            EnvFamily::Ucx => "ucx",
        }
    }

    /// Every variable of the family, in injection order: what `jobEnvOmit`
    /// may name (docs/design.md, "NCCL's and UCX's variables").
    pub fn variables(self) -> &'static [&'static str] {
        match self {
            EnvFamily::Nccl => &[
                "NCCL_IB_HCA",
                "NCCL_IB_GID_INDEX",
                "NCCL_IB_ROCE_VERSION_NUM",
                "NCCL_IB_ADDR_FAMILY",
                "NCCL_IB_TC",
            ],
            EnvFamily::Ucx => &[
                "UCX_NET_DEVICES",
                "UCX_IB_GID_INDEX",
                "UCX_IB_TRAFFIC_CLASS",
            ],
        }
    }
}

/// What the agent does with a live rail whose owned file no longer holds
/// what roce-tune wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftPolicy {
    /// Write the value back (under the device's lock), log and count it.
    Repair,
    /// Log and count it only.
    Report,
}

/// The node config is refused (code 104 at the CNI edge): the message names
/// the file and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeError(pub String);

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NodeError {}

pub type NodeResult<T> = Result<T, NodeError>;

impl NodeConfig {
    pub fn defaults(source: PathBuf) -> NodeConfig {
        NodeConfig {
            source,
            state_dir: DEFAULT_STATE_DIR.into(),
            sysfs_root: DEFAULT_SYSFS_ROOT.into(),
            log_file: None,
            sysctl_allowlist: None,
            device_info_dir: DEFAULT_DEVICE_INFO_DIR.into(),
            device_info_dir_named: DEFAULT_DEVICE_INFO_DIR.into(),
            pod_resources_socket: DEFAULT_POD_RESOURCES_SOCKET.into(),
            pod_resources_checkpoint: Some(DEFAULT_POD_RESOURCES_CHECKPOINT.into()),
            pod_resources_timeout: DEFAULT_POD_RESOURCES_TIMEOUT,
            gpu_resources: DEFAULT_GPU_RESOURCES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            nvidia_gpus_dir: DEFAULT_NVIDIA_GPUS_DIR.into(),
            metrics_address: DEFAULT_METRICS_ADDRESS.parse().expect("a socket address"),
            drift_policy: DriftPolicy::Repair,
            nri_socket: DEFAULT_NRI_SOCKET.into(),
            nri_index: DEFAULT_NRI_INDEX.into(),
            nccl_env: NcclEnv::Annotated,
            job_env_families: vec![EnvFamily::Nccl],
            job_env_omit: Vec::new(),
            dra_rails: None,
            qos: crate::qos::QosConfig::default(),
            rail_counters: RailCounters::default(),
        }
    }

    /// The path this process reads: `ROCE_TUNE_NODE_CONFIG` or the default.
    pub fn path_from_env() -> PathBuf {
        std::env::var_os(PATH_ENV)
            .filter(|v| !v.is_empty())
            .map_or_else(|| DEFAULT_PATH.into(), PathBuf::from)
    }

    /// Load the node config this process should use.
    pub fn load() -> NodeResult<NodeConfig> {
        Self::load_from(&Self::path_from_env())
    }

    pub fn load_from(path: &Path) -> NodeResult<NodeConfig> {
        let refused = |why: String| {
            NodeError(format!(
                "node config {} is refused: {why}; it holds the node's host paths, so only root may write it (chown root, chmod 644)",
                path.display()
            ))
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(path);
        let file = match file {
            Ok(f) => f,
            Err(e) if crate::is_missing(&e) && path == Path::new(DEFAULT_PATH) => {
                return Self::defaults(path.to_owned()).resolve_host_paths()
            }
            Err(e) if crate::is_missing(&e) => {
                return Err(NodeError(format!(
                    "node config {} does not exist: a node config named by {PATH_ENV} or --node-config must exist (only the default, {DEFAULT_PATH}, may be missing and mean the defaults); create it, or name the right file",
                    path.display()
                )))
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
                return Err(refused("it is a symbolic link".into()))
            }
            Err(e) => return Err(refused(format!("it cannot be opened ({e})"))),
        };
        let meta = file
            .metadata()
            .map_err(|e| refused(format!("it cannot be examined ({e})")))?;
        if !meta.file_type().is_file() {
            return Err(refused("it is not a regular file".into()));
        }
        if meta.uid() != 0 {
            return Err(refused(format!(
                "it is owned by uid {}, not root",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(refused(format!(
                "it is writable by group or others (mode {:o})",
                meta.mode() & 0o777
            )));
        }
        if meta.len() > MAX_BYTES {
            return Err(refused(format!(
                "it is {} bytes, more than {MAX_BYTES}",
                meta.len()
            )));
        }
        let bytes = crate::fs_read::whole(&file, meta.len(), MAX_BYTES)
            .map_err(|e| refused(format!("it cannot be read ({e})")))?;
        Self::parse(path, &bytes)?.resolve_host_paths()
    }

    /// Every host path with the links above its last component resolved,
    /// once, as the node config is read: each later use opens the real path
    /// with the no-follow rules (`safe_dir::Resolver`, docs/design.md, "Who
    /// writes what"). A new host path key gets its line here.
    fn resolve_host_paths(mut self) -> NodeResult<NodeConfig> {
        let mut paths = HostPaths::new(&self.source);
        self.state_dir = paths.resolve("stateDir", &self.state_dir)?;
        self.sysfs_root = paths.resolve("sysfsRoot", &self.sysfs_root)?;
        if let Some(p) = &self.log_file {
            self.log_file = Some(paths.resolve("logFile", p)?);
        }
        self.device_info_dir = paths.resolve("deviceInfoDir", &self.device_info_dir)?;
        self.pod_resources_socket =
            paths.resolve("podResourcesSocket", &self.pod_resources_socket)?;
        if let Some(p) = &self.pod_resources_checkpoint {
            self.pod_resources_checkpoint = Some(paths.resolve("podResourcesCheckpoint", p)?);
        }
        self.nvidia_gpus_dir = paths.resolve("nvidiaGpusDir", &self.nvidia_gpus_dir)?;
        // Not nriSocket: only the NRI plugin connects to it
        // (`resolve_nri_socket`), and a CNI ADD or DEL would otherwise walk
        // its path, and refuse every pod's rail when it is refused.
        Ok(self)
    }

    /// `nriSocket` with its links resolved by the rule of every host path,
    /// and its directory held to the state dir's rule, for the NRI plugin's
    /// command alone (`roce-tune-agent nri`, `agent --nri`): refused, it
    /// stops that command and nothing else.
    ///
    /// The directory, because the runtime makes its socket there: anyone
    /// who may write it may delete the socket, or bind their own first,
    /// and so keep the plugin from the runtime (SO_PEERCRED already refuses
    /// a peer that is not root). A directory not made yet is the runtime's
    /// to make (the adaptation creates it, 0700) below parents proven here.
    pub fn resolve_nri_socket(&mut self) -> NodeResult<()> {
        let socket = HostPaths::new(&self.source).resolve("nriSocket", &self.nri_socket)?;
        if let Some(dir) = socket.parent() {
            crate::safe_dir::check_chain(dir, false).map_err(|why| {
                NodeError(format!(
                    "node config {}: nriSocket {} is refused: its directory {} must be root's and writable by no one else, as the state dir is (a local user could delete or replace the runtime's socket): {why}",
                    self.source.display(),
                    self.nri_socket.display(),
                    dir.display()
                ))
            })?;
        }
        self.nri_socket = socket;
        Ok(())
    }

    /// Decode and validate the file's content.
    pub fn parse(source: &Path, bytes: &[u8]) -> NodeResult<NodeConfig> {
        let bad = |why: String| NodeError(format!("node config {}: {why}", source.display()));
        let v = json::from_slice(bytes).map_err(|e| {
            bad(format!(
                "not valid JSON (line {}, column {}): fix the file",
                e.line(),
                e.column()
            ))
        })?;
        let obj = v
            .as_object()
            .ok_or_else(|| bad("must be a JSON object".into()))?;
        const KEYS: &[&str] = &[
            "stateDir",
            "sysfsRoot",
            "logFile",
            "sysctlAllowlist",
            "deviceInfoDir",
            "podResourcesSocket",
            "podResourcesCheckpoint",
            "podResourcesTimeoutMs",
            "gpuResources",
            "nvidiaGpusDir",
            "metricsAddress",
            "driftPolicy",
            "nriSocket",
            "nriIndex",
            "ncclEnv",
            "jobEnvFamilies",
            "jobEnvOmit",
            "draRails",
            "railCounters",
            "railCountersMax",
        ];
        let known = |k: &str| KEYS.contains(&k) || crate::qos::NODE_KEYS.contains(&k);
        if let Some(k) = obj.keys().find(|k| !known(k)) {
            // A typo here would silently fall back to a default host path.
            let all: Vec<&str> = KEYS.iter().chain(&crate::qos::NODE_KEYS).copied().collect();
            return Err(bad(format!(
                "unknown key {:?}: the keys are {}",
                k,
                all.join(", ")
            )));
        }
        let mut node = Self::defaults(source.to_owned());
        if let Some(p) = abs_path(obj, "stateDir").map_err(&bad)? {
            node.state_dir = p;
        }
        if let Some(p) = abs_path(obj, "sysfsRoot").map_err(&bad)? {
            node.sysfs_root = p;
        }
        node.log_file = abs_path(obj, "logFile").map_err(&bad)?;
        if let Some(p) = abs_path(obj, "deviceInfoDir").map_err(&bad)? {
            node.device_info_dir_named = p.clone();
            node.device_info_dir = p;
        }
        if let Some(p) = abs_path(obj, "podResourcesSocket").map_err(&bad)? {
            node.pod_resources_socket = p;
        }
        match obj.get("podResourcesCheckpoint") {
            // null: the node admin turns the fallback off.
            Some(Value::Null) => node.pod_resources_checkpoint = None,
            _ => {
                if let Some(p) = abs_path(obj, "podResourcesCheckpoint").map_err(&bad)? {
                    node.pod_resources_checkpoint = Some(p);
                }
            }
        }
        if let Some(p) = abs_path(obj, "nvidiaGpusDir").map_err(&bad)? {
            node.nvidia_gpus_dir = p;
        }
        match obj.get("podResourcesTimeoutMs") {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_u64() {
                Some(ms) if (1..=MAX_POD_RESOURCES_TIMEOUT_MS).contains(&ms) => {
                    node.pod_resources_timeout = Duration::from_millis(ms)
                }
                _ => {
                    return Err(bad(format!(
                        "podResourcesTimeoutMs must be a whole number of milliseconds from 1 to {MAX_POD_RESOURCES_TIMEOUT_MS}"
                    )))
                }
            },
        }
        match obj.get("gpuResources") {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.len() <= 64 => {
                node.gpu_resources = a
                    .iter()
                    .map(|r| match r.as_str() {
                        Some(s) if is_resource_name(s) => Ok(s.to_owned()),
                        _ => Err(bad(
                            "gpuResources holds something that is not a resource name like nvidia.com/gpu".into(),
                        )),
                    })
                    .collect::<NodeResult<_>>()?;
            }
            Some(_) => {
                return Err(bad(
                    "gpuResources must be an array of at most 64 resource names".into(),
                ))
            }
        }
        match obj.get("metricsAddress") {
            None | Some(Value::Null) => {}
            Some(Value::String(a)) => {
                node.metrics_address = a.parse().map_err(|_| {
                    bad("metricsAddress must be IP:port (e.g. 127.0.0.1:9662), no host name".into())
                })?
            }
            Some(_) => return Err(bad("metricsAddress must be a string IP:port".into())),
        }
        node.drift_policy = match obj.get("driftPolicy").and_then(Value::as_str) {
            None if obj.get("driftPolicy").is_none_or(Value::is_null) => DriftPolicy::Repair,
            Some("repair") => DriftPolicy::Repair,
            Some("report") => DriftPolicy::Report,
            _ => return Err(bad("driftPolicy must be \"repair\" or \"report\"".into())),
        };
        if let Some(p) = abs_path(obj, "nriSocket").map_err(&bad)? {
            node.nri_socket = p;
        }
        match obj.get("nriIndex") {
            None | Some(Value::Null) => {}
            // pkg/api/plugin.go CheckPluginIndex: exactly two digits.
            Some(Value::String(i)) if i.len() == 2 && i.bytes().all(|b| b.is_ascii_digit()) => {
                node.nri_index = i.clone()
            }
            Some(_) => {
                return Err(bad(
                    "nriIndex must be two digits as a string, e.g. \"50\"".into()
                ))
            }
        }
        node.nccl_env = match obj.get("ncclEnv").and_then(Value::as_str) {
            None if obj.get("ncclEnv").is_none_or(Value::is_null) => NcclEnv::Annotated,
            Some("annotated") => NcclEnv::Annotated,
            Some("all") => NcclEnv::All,
            Some("off") => NcclEnv::Off,
            _ => {
                return Err(bad(
                    "ncclEnv must be \"annotated\", \"all\" or \"off\"".into()
                ))
            }
        };
        job_env(obj, &mut node).map_err(&bad)?;
        // The QoS keys: `qos` validates them and names the key it refuses.
        node.qos = crate::qos::QosConfig::from_node_config(obj).map_err(&bad)?;
        node.dra_rails = match obj.get("draRails") {
            None | Some(Value::Null) => None,
            // The network config's rules, key for key (`NetConf::from_profile`).
            Some(v) => {
                crate::cni::config::NetConf::from_profile(v, "draRails", None)
                    .map_err(|e| bad(format!("draRails: {}", e.msg)))?;
                Some(v.clone())
            }
        };
        node.rail_counters = RailCounters::from_node_config(obj).map_err(&bad)?;
        node.sysctl_allowlist = match obj.get("sysctlAllowlist") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) if a.len() <= MAX_PATTERNS => Some(
                a.iter()
                    .map(|p| match p.as_str() {
                        Some(s) => validate_pattern(s).map(|()| s.to_owned()).map_err(&bad),
                        None => Err(bad("sysctlAllowlist holds a non-string".into())),
                    })
                    .collect::<NodeResult<_>>()?,
            ),
            Some(_) => {
                return Err(bad(format!(
                    "sysctlAllowlist must be an array of at most {MAX_PATTERNS} patterns"
                )))
            }
        };
        Ok(node)
    }
}

/// `jobEnvFamilies` and `jobEnvOmit`: names from the lists above only, so a
/// typo cannot leave in a variable another NRI plugin sets (the runtime then
/// fails the container: two plugins adjusting one variable).
fn job_env(obj: &Map<String, Value>, node: &mut NodeConfig) -> Result<(), String> {
    let names = |key: &str| -> Result<Option<Vec<&str>>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) if a.len() <= 64 => a
                .iter()
                .map(|v| v.as_str().ok_or(format!("{key} holds a non-string")))
                .collect::<Result<_, _>>()
                .map(Some),
            Some(_) => Err(format!("{key} must be an array of at most 64 names")),
        }
    };
    if let Some(list) = names("jobEnvFamilies")? {
        let mut families = Vec::new();
        for name in list {
            let f = EnvFamily::ALL
                .into_iter()
                .find(|f| f.name() == name)
                .ok_or_else(|| {
                    format!(
                        "jobEnvFamilies: {} is not a family: the families are \"nccl\" and \"ucx\"",
                        crate::quote::input(name)
                    )
                })?;
            if !families.contains(&f) {
                families.push(f);
            }
        }
        if families.is_empty() {
            return Err("jobEnvFamilies names no family: list \"nccl\", \"ucx\" or both (to inject nothing, turn the NRI plugin's environment off)".into());
        }
        node.job_env_families = families;
    }
    if let Some(list) = names("jobEnvOmit")? {
        let known = || {
            EnvFamily::ALL
                .into_iter()
                .flat_map(|f| f.variables().iter())
        };
        for name in list {
            if !known().any(|v| *v == name) {
                let all: Vec<&str> = known().copied().collect();
                return Err(format!(
                    "jobEnvOmit: {} is not a variable roce-tune sets: they are {}",
                    crate::quote::input(name),
                    all.join(", ")
                ));
            }
            node.job_env_omit.push(name.to_owned());
        }
    }
    Ok(())
}

/// The host paths of one node config, resolved through the links root owns
/// in directories only root can write (`safe_dir::Resolver`, one for all of
/// them: they share their first directories). A path that passes through
/// any other link refuses the node config (104), naming the key, the link
/// or directory, its owner and the fix.
pub struct HostPaths<'a> {
    source: &'a Path,
    resolver: crate::safe_dir::Resolver,
}

impl<'a> HostPaths<'a> {
    pub fn new(source: &'a Path) -> HostPaths<'a> {
        HostPaths {
            source,
            resolver: crate::safe_dir::Resolver::new(),
        }
    }

    /// `path`, the value of `key`, with its links resolved.
    pub fn resolve(&mut self, key: &str, path: &Path) -> NodeResult<PathBuf> {
        self.resolver.resolve(path).map_err(|why| {
            NodeError(format!(
                "node config {}: {key} {} is refused: {why}",
                self.source.display(),
                path.display()
            ))
        })
    }
}

fn abs_path(obj: &Map<String, Value>, key: &str) -> Result<Option<PathBuf>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let p = PathBuf::from(s);
            let clean = p.is_absolute()
                && !s.contains('\0')
                && p.components().all(|c| !matches!(c, Component::ParentDir));
            if clean {
                Ok(Some(p))
            } else {
                Err(format!(
                    "{key} {:?} must be an absolute path without '..'",
                    s
                ))
            }
        }
        Some(_) => Err(format!("{key} must be a string")),
    }
}

/// A device-plugin resource name: `<domain>/<name>` of letters, digits and
/// `.-_` (k8s.io/kubelet's extended resource names).
fn is_resource_name(s: &str) -> bool {
    let Some((domain, name)) = s.split_once('/') else {
        return false;
    };
    // Each part starts and ends with a letter or digit (a DNS label's rule).
    let ok = |p: &str| {
        let b = p.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
    };
    ok(domain) && ok(name)
}

#[cfg(test)]
mod tests {
    use super::patterns::glob;
    use super::*;

    fn parse(s: &str) -> NodeResult<NodeConfig> {
        NodeConfig::parse(Path::new("/etc/cni/roce-tune/node.json"), s.as_bytes())
    }

    #[test]
    fn defaults_and_keys() {
        let n = parse("{}").unwrap();
        assert_eq!(n.state_dir, Path::new("/run/cni/roce-tune"));
        assert_eq!(n.sysfs_root, Path::new("/sys"));
        assert_eq!(n.log_file, None);
        assert_eq!(n.sysctl_allowlist, None);
        let n = parse(
            r#"{"stateDir":"/run/x","sysfsRoot":"/tmp/t","logFile":"/var/log/rt.log",
                "sysctlAllowlist":["net.ipv4.conf.*.arp_*"],"deviceInfoDir":"/run/d"}"#,
        )
        .unwrap();
        assert_eq!(n.sysfs_root, Path::new("/tmp/t"));
        assert_eq!(n.log_file.as_deref(), Some(Path::new("/var/log/rt.log")));
        assert_eq!(n.device_info_dir, Path::new("/run/d"));
        let n = parse("{}").unwrap();
        assert_eq!(n.metrics_address.to_string(), "127.0.0.1:9662");
        assert_eq!(n.drift_policy, DriftPolicy::Repair);
        assert_eq!(n.gpu_resources, ["nvidia.com/gpu", "amd.com/gpu"]);
        assert_eq!(n.pod_resources_timeout, Duration::from_millis(250));
        let n = parse(
            r#"{"metricsAddress":"[::1]:9999","driftPolicy":"report","podResourcesCheckpoint":null,
                "gpuResources":["example.com/gpu"],"podResourcesTimeoutMs":1000,
                "podResourcesSocket":"/run/k.sock","nvidiaGpusDir":"/tmp/gpus"}"#,
        )
        .unwrap();
        assert_eq!(n.metrics_address.to_string(), "[::1]:9999");
        assert_eq!(n.drift_policy, DriftPolicy::Report);
        assert_eq!(n.pod_resources_checkpoint, None);
        assert_eq!(n.gpu_resources, ["example.com/gpu"]);
        assert_eq!(n.job_env_families, [EnvFamily::Nccl], "the default");
        assert!(n.job_env_omit.is_empty());
        let n = parse(r#"{"jobEnvFamilies":["ucx","nccl","ucx"],"jobEnvOmit":["NCCL_IB_TC"]}"#)
            .unwrap();
        assert_eq!(n.job_env_families, [EnvFamily::Ucx, EnvFamily::Nccl]);
        assert_eq!(n.job_env_omit, ["NCCL_IB_TC"]);
    }

    #[test]
    fn the_qos_keys_are_read_and_a_bad_value_names_its_key() {
        use crate::qos::{Fabric, QosCheck, QosConfig};
        assert_eq!(parse("{}").unwrap().qos, QosConfig::default());
        let n = parse(r#"{"railPriority":3,"railLossless":true,"qosCheck":"enforce"}"#).unwrap();
        assert_eq!(
            n.qos,
            QosConfig {
                fabric: Fabric {
                    priority: Some(3),
                    lossless: true
                },
                check: QosCheck::Enforce
            }
        );
        for (text, key) in [
            (r#"{"railPriority":8}"#, "railPriority"),
            (r#"{"railPriority":-1}"#, "railPriority"),
            (r#"{"railPriority":"3"}"#, "railPriority"),
            (r#"{"qosCheck":"strict"}"#, "qosCheck"),
            (r#"{"railLossless":"true"}"#, "railLossless"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            // The file, then the key (the CNI edge makes it code 104).
            assert!(
                e.starts_with("node config /etc/cni/roce-tune/node.json: ") && e.contains(key),
                "{text}: {e}"
            );
        }
        // A misspelt QoS key is an unknown key, and the list names the right ones.
        let e = parse(r#"{"railPrio":3}"#).unwrap_err().to_string();
        assert!(
            e.contains("unknown key") && e.contains("railPriority, railLossless, qosCheck"),
            "{e}"
        );
    }

    #[test]
    fn bad_node_configs_are_code_104_and_name_the_problem() {
        for (text, needle) in [
            (r#"{"stateDir":"relative"}"#, "stateDir"),
            (r#"{"stateDir":"/run/../etc"}"#, "stateDir"),
            (r#"{"statedir":"/run/x"}"#, "unknown key"),
            (r#"{"sysctlAllowlist":"net.*"}"#, "array"),
            (r#"{"sysctlAllowlist":["net..x"]}"#, "pattern"),
            (r#"{"sysctlAllowlist":["net.a/b"]}"#, "pattern"),
            ("[]", "object"),
            ("{", "JSON"),
            (r#"{"logFile":"/a","logFile":"/b"}"#, "JSON"),
            (r#"{"metricsAddress":"localhost:9662"}"#, "metricsAddress"),
            (r#"{"metricsAddress":9662}"#, "metricsAddress"),
            (r#"{"driftPolicy":"fix"}"#, "driftPolicy"),
            (r#"{"podResourcesTimeoutMs":0}"#, "podResourcesTimeoutMs"),
            (
                r#"{"podResourcesTimeoutMs":600000}"#,
                "podResourcesTimeoutMs",
            ),
            (
                r#"{"gpuResources":["nvidia.com/gpu","../etc"]}"#,
                "gpuResources",
            ),
            (
                r#"{"podResourcesSocket":"kubelet.sock"}"#,
                "podResourcesSocket",
            ),
            (r#"{"jobEnvFamilies":["mpi"]}"#, "not a family"),
            (r#"{"jobEnvFamilies":[]}"#, "names no family"),
            (r#"{"jobEnvFamilies":"nccl"}"#, "array"),
            (r#"{"jobEnvFamilies":[1]}"#, "non-string"),
            (r#"{"jobEnvOmit":["NCCL_IB_TCX"]}"#, "NCCL_IB_TC,"),
            (r#"{"jobEnvOmit":["PATH"]}"#, "not a variable"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.0.contains(needle), "{text}: {}", e.0);
        }
    }

    #[test]
    fn the_nri_keys() {
        let n = parse("{}").unwrap();
        assert_eq!(n.nri_socket, Path::new("/var/run/nri/nri.sock"));
        assert_eq!(
            (n.nri_index.as_str(), n.nccl_env),
            ("50", NcclEnv::Annotated)
        );
        let n =
            parse(r#"{"nriSocket":"/run/x/nri.sock","nriIndex":"07","ncclEnv":"all"}"#).unwrap();
        assert_eq!(n.nri_socket, Path::new("/run/x/nri.sock"));
        assert_eq!((n.nri_index.as_str(), n.nccl_env), ("07", NcclEnv::All));
        assert_eq!(
            parse(r#"{"ncclEnv":"off"}"#).unwrap().nccl_env,
            NcclEnv::Off
        );
        for (text, needle) in [
            (r#"{"nriIndex":"5"}"#, "nriIndex"),
            (r#"{"nriIndex":50}"#, "nriIndex"),
            (r#"{"nriIndex":"5a"}"#, "nriIndex"),
            (r#"{"ncclEnv":"true"}"#, "ncclEnv"),
            (r#"{"nriSocket":"nri.sock"}"#, "nriSocket"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.0.contains(needle), "{text}: {}", e.0);
        }
    }

    #[test]
    fn dra_rails_is_a_profile_with_the_network_configs_rules() {
        assert_eq!(parse("{}").unwrap().dra_rails, None);
        assert_eq!(parse(r#"{"draRails":null}"#).unwrap().dra_rails, None);
        let n = parse(
            r#"{"draRails":{"trafficClass":41,"rdmaCmTos":106,"gidIndex":3,"gidCheck":"present",
                "gidTimeoutMs":1000,"podTrafficClasses":[41,106],"sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1"}}}"#,
        )
        .unwrap();
        let conf = crate::cni::config::NetConf::from_profile(
            n.dra_rails.as_ref().unwrap(),
            "nri:dra-rails",
            Some(("annotation", "106")),
        )
        .unwrap();
        assert_eq!(conf.traffic_class, Some(106));
        assert_eq!(conf.name, "nri:dra-rails");
        for (text, needle) in [
            (r#"{"draRails":{"trafficClas":41}}"#, "unknown key"),
            (r#"{"draRails":{"trafficClass":256}}"#, "trafficClass"),
            (r#"{"draRails":{"gidCheck":"always"}}"#, "gidCheck"),
            (r#"{"draRails":{"gidTimeoutMs":60001}}"#, "gidTimeoutMs"),
            (r#"{"draRails":{"gidIndex":1024}}"#, "gidIndex"),
            (
                r#"{"draRails":{"podTrafficClasses":[300]}}"#,
                "podTrafficClasses",
            ),
            (r#"{"draRails":{"sysctl":{"kernel.panic":"1"}}}"#, "sysctl"),
            (r#"{"draRails":{"deviceID":"0000:0c:00.2"}}"#, "unknown key"),
            (r#"{"draRails":{"name":"x"}}"#, "unknown key"),
            (r#"{"draRails":[]}"#, "object"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(
                e.0.contains(needle) && e.0.contains("draRails"),
                "{text}: {}",
                e.0
            );
        }
    }

    #[test]
    fn rail_counters_keys() {
        let n = parse("{}").unwrap();
        assert_eq!(n.rail_counters, RailCounters::default());
        assert!(n.rail_counters.picks("out_of_sequence") && n.rail_counters.picks("sent_pkts"));
        assert!(!n.rail_counters.picks("rx_write_requests") && !n.rail_counters.picks("lifespan"));
        let n = parse(r#"{"railCounters":"*","railCountersMax":1024}"#).unwrap();
        assert_eq!(n.rail_counters.pick, CounterPick::All);
        assert_eq!(n.rail_counters.max, 1024);
        assert!(n.rail_counters.picks("rx_write_requests") && !n.rail_counters.picks("lifespan"));
        let n =
            parse(r#"{"railCounters":["a_b","a_b","VL15_dropped"],"railCountersMax":1}"#).unwrap();
        assert_eq!(
            n.rail_counters.pick,
            CounterPick::Named(vec!["a_b".into(), "VL15_dropped".into()])
        );
        assert!(n.rail_counters.picks("VL15_dropped") && !n.rail_counters.picks("sent_pkts"));
        assert_eq!(
            parse(r#"{"railCounters":[]}"#).unwrap().rail_counters.pick,
            CounterPick::Named(vec![])
        );
        for text in [
            r#"{"railCounters":"all"}"#,
            r#"{"railCounters":{"sent_pkts":1}}"#,
            r#"{"railCounters":5}"#,
            r#"{"railCounters":["../../etc/shadow"]}"#,
            r#"{"railCounters":["a/b"]}"#,
            r#"{"railCounters":[".."]}"#,
            r#"{"railCounters":[""]}"#,
            r#"{"railCounters":[7]}"#,
            r#"{"railCounters":["lifespan"]}"#,
            r#"{"railCountersMax":0}"#,
            r#"{"railCountersMax":1025}"#,
            r#"{"railCountersMax":"64"}"#,
            r#"{"railCountersMax":2.5}"#,
        ] {
            let e = parse(text).unwrap_err();
            let key = if text.contains("Max") {
                "railCountersMax"
            } else {
                "railCounters"
            };
            assert!(e.0.contains(key), "{text}: {}", e.0);
        }
        let long: Vec<String> = (0..=MAX_RAIL_COUNTER_NAMES)
            .map(|i| format!("c{i}"))
            .collect();
        let text = serde_json::json!({ "railCounters": long }).to_string();
        assert!(parse(&text).unwrap_err().0.contains("railCounters"));
    }

    /// The one default list, filtered by what each driver has, is that
    /// driver's list: the names of docs/design.md's "RDMA counters".
    #[test]
    fn the_default_is_each_drivers_list() {
        let rxe = [
            "sent_pkts",
            "rcvd_pkts",
            "duplicate_request",
            "out_of_seq_request",
            "rcvd_rnr_err",
            "send_rnr_err",
            "rcvd_seq_err",
            "ack_deferred",
            "retry_exceeded_err",
            "retry_rnr_exceeded_err",
            "completer_retry_err",
            "send_err",
            "link_downed",
            "rdma_sends",
            "rdma_recvs",
            "lifespan",
        ];
        let mlx5 = [
            "rx_write_requests",
            "rx_read_requests",
            "rx_atomic_requests",
            "out_of_buffer",
            "out_of_sequence",
            "duplicate_request",
            "rnr_nak_retry_err",
            "packet_seq_err",
            "implied_nak_seq_err",
            "local_ack_timeout_err",
            "resp_local_length_error",
            "req_remote_access_errors",
            "req_transport_retries_exceeded",
            "roce_adp_retrans",
            "roce_adp_retrans_to",
            "roce_slow_restart",
            "rp_cnp_ignored",
            "rp_cnp_handled",
            "np_ecn_marked_roce_packets",
            "np_cnp_sent",
            "rx_icrc_encapsulated",
            "lifespan",
        ];
        let d = RailCounters::default();
        let picked = |names: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = names
                .iter()
                .filter(|n| d.picks(n))
                .map(|n| n.to_string())
                .collect();
            v.sort();
            v
        };
        let mut want_rxe = vec![
            "out_of_seq_request",
            "duplicate_request",
            "rcvd_seq_err",
            "completer_retry_err",
            "retry_exceeded_err",
            "rcvd_rnr_err",
            "send_err",
            "sent_pkts",
            "rcvd_pkts",
        ];
        want_rxe.sort();
        assert_eq!(picked(&rxe), want_rxe);
        let mut want_mlx5 = vec![
            "out_of_sequence",
            "packet_seq_err",
            "implied_nak_seq_err",
            "local_ack_timeout_err",
            "duplicate_request",
            "rnr_nak_retry_err",
            "out_of_buffer",
            "req_transport_retries_exceeded",
            "roce_adp_retrans",
            "np_cnp_sent",
            "np_ecn_marked_roce_packets",
            "rp_cnp_handled",
        ];
        want_mlx5.sort();
        assert_eq!(picked(&mlx5), want_mlx5);
    }

    #[test]
    fn globs_stay_within_a_component() {
        let m = |p, k| pattern_matches(p, k, "net1");
        assert!(m(
            "net.ipv4.conf.*.arp_ignore",
            "net.ipv4.conf.IFNAME.arp_ignore"
        ));
        assert!(m(
            "net.ipv4.conf.IFNAME.*",
            "net.ipv4.conf.IFNAME.rp_filter"
        ));
        assert!(m("net.ipv4.conf.IFNAME.*", "net.ipv4.conf.net1.rp_filter"));
        assert!(!m("net.ipv4.conf.IFNAME.*", "net.ipv4.conf.all.rp_filter"));
        assert!(m("net.ipv4.conf.*.arp_*", "net.ipv4.conf.all.arp_filter"));
        assert!(
            !m("net.ipv4.*", "net.ipv4.conf.all.rp_filter"),
            "one component only"
        );
        assert!(!m("net.core.*", "net.ipv4.ip_forward"));
        assert!(m("net.*.*.*.*", "net.ipv4.conf.all.rp_filter"));
        assert!(pattern_matches(
            "net.ipv4.conf.*.arp_ignore",
            "net.ipv4.conf.IFNAME.arp_ignore",
            "net1.100"
        ));
        assert!(glob(b"a*b*c", b"aXXbYYc"));
        assert!(!glob(b"a*b*c", b"aXXbYY"));
        assert!(glob(b"*", b""));
    }
}
