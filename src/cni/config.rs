//! The plugin's network config (one element of a conflist's `plugins`, with the
//! `name`, `cniVersion` and `prevResult` libcni injects). Every key of the
//! config reference (docs/config.md) is validated here, before anything on the node is
//! touched. The keys are `keys::Key`'s, read through it alone; a key it does
//! not know is kept in `NetConf::strays`, for the command to refuse as a typo
//! (ADD) or to warn about (`keys`: libcni and Multus add their own).
//!
//! This is tenant input: a namespace user may write the NetworkAttachmentDefinition
//! it comes from. So it names no host path (those are the node config's,
//! `crate::node`), and a config that tries is refused.

use super::error::{code, CniError, CniResult};
use super::keys::{self, Key, Stray, Whose};
use super::{json, version};
use serde_json::{Map, Value};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// Stdin larger than this is not a network config; refuse it before decoding.
pub const MAX_STDIN_BYTES: usize = 1 << 20;

pub const DEFAULT_GID_INDEX: u32 = 3;
/// A CNI ADD runs inside no NRI request (dra-driver-sriov runs one plugin,
/// never a chain, from its RunPodSandbox: docs/design.md, "DRA drivers"),
/// so the wait keeps the room a slow kernel may need; a DRA rail's wait is
/// cut to its RunPodSandbox budget whatever this says (`nri::dra`).
pub const DEFAULT_GID_TIMEOUT_MS: u64 = 3000;
/// A runtime gives a plugin minutes at most; a longer wait is a typo.
pub const MAX_GID_TIMEOUT_MS: u64 = 60_000;
/// The kernel keeps at most a few hundred GIDs per port.
pub const MAX_GID_INDEX: u32 = 1023;

/// The rail sysctls of a multi-rail RoCE pod (the seed's SriovNetwork; see
/// docs/design.md, "The sysctls"), applied when `sysctl` is absent.
/// rp_filter is the max of `all` and the interface, hence the `all` key.
pub const DEFAULT_SYSCTLS: &[(&str, &str)] = &[
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.IFNAME.arp_announce", "2"),
    ("net.ipv4.conf.IFNAME.arp_filter", "1"),
    ("net.ipv4.conf.IFNAME.arp_ignore", "1"),
    ("net.ipv4.conf.IFNAME.rp_filter", "0"),
    ("net.ipv4.conf.IFNAME.accept_local", "1"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidCheck {
    Enforce,
    /// The RoCE v2 GID of the address at any index (NCCL 2.21+ picks it).
    Present,
    Warn,
    Off,
}

/// `placementCheck`: what a rail's ADD does when the pod's GPUs lack near
/// rails (docs/placement.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementCheck {
    /// Log one line that names the rail, the starved GPUs and the fix.
    Warn,
    /// Fail the ADD (code 106); nothing is changed.
    Enforce,
    Off,
}

/// `gdrLevel`: NCCL_NET_GDR_LEVEL, the farthest path at which NCCL still
/// uses GPUDirect RDMA (docs/topology.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GdrLevel {
    Pix,
    Pxb,
    Phb,
    Sys,
}

impl GdrLevel {
    pub fn name(self) -> &'static str {
        match self {
            GdrLevel::Pix => "PIX",
            GdrLevel::Pxb => "PXB",
            GdrLevel::Phb => "PHB",
            GdrLevel::Sys => "SYS",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

impl FromStr for LogLevel {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "error" | "panic" => LogLevel::Error,
            "warn" | "warning" => LogLevel::Warn,
            "info" => LogLevel::Info,
            "debug" => LogLevel::Debug,
            _ => return Err(()),
        })
    }
}

/// A PCI address in the only form sysfs uses: `DDDD:BB:DD.F` (lower-case hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PciAddr(String);

impl PciAddr {
    pub fn parse(s: &str) -> Option<PciAddr> {
        let b = s.as_bytes();
        let hex = |r: std::ops::Range<usize>| b[r].iter().all(|c| c.is_ascii_hexdigit());
        let ok = b.len() == 12
            && b[4] == b':'
            && b[7] == b':'
            && b[10] == b'.'
            && hex(0..4)
            && hex(5..7)
            && hex(8..10)
            && (b'0'..=b'7').contains(&b[11])
            // device number is 5 bits
            && u8::from_str_radix(&s[8..10], 16).is_ok_and(|d| d < 32);
        ok.then(|| PciAddr(s.to_ascii_lowercase()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One sysctl as configured: dotted key (may hold the `IFNAME` placeholder) and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlSetting {
    pub key: String,
    pub value: String,
}

/// An attachment named in GC's stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub container_id: String,
    pub ifname: String,
}

#[derive(Debug, Clone)]
pub struct NetConf {
    pub cni_version: String,
    pub name: String,
    pub sysctls: Vec<SysctlSetting>,
    /// The class to write: a pod's `args.cni.trafficClass` when the network
    /// allows it (`podTrafficClasses`), else the network's `trafficClass`.
    pub traffic_class: Option<u8>,
    /// `rdmaCmTos`: the rdma_cm default ToS to write.
    pub rdma_cm_tos: Option<u8>,
    /// `runtimeConfig.CNIDeviceInfoFile`: where the runtime wants the device
    /// info; honoured only inside the node's deviceInfoDir (`device_info`).
    pub device_info_file: Option<String>,
    pub gid_index: u32,
    pub gid_check: GidCheck,
    pub gid_timeout_ms: u64,
    pub placement_check: PlacementCheck,
    pub gdr_level: GdrLevel,
    /// A cross-check of the port RDMA netlink reports; the port to use when
    /// RDMA netlink is unavailable (default 1).
    pub rdma_port: Option<u32>,
    pub device_id: Option<PciAddr>,
    pub log_level: LogLevel,
    /// Raw prevResult; parsed by the command that needs it (DEL may get a broken one).
    pub prev_result: Option<Value>,
    /// GC's `cni.dev/valid-attachments` (or the older `cni.dev/attachments`).
    pub valid_attachments: Option<Vec<Attachment>>,
    /// The keys roce-tune does not know (`keys::strays`), judged: a typo
    /// refuses ADD (`refuse_typos`), the rest are a warning
    /// (`strays_warning`).
    pub strays: Vec<Stray>,
}

/// Stdin as one JSON value, decoded once (the command, the version an error
/// speaks and the config all come from it): too large is 7; empty, not
/// UTF-8 or not JSON (duplicate keys and too deep included) is 6.
pub fn decode(bytes: &[u8]) -> CniResult<Value> {
    if bytes.len() > MAX_STDIN_BYTES {
        return Err(CniError::config(format!(
            // The reader stops one byte past the limit, so the real size is unknown.
            "network config on stdin is more than the {MAX_STDIN_BYTES} bytes a config can be: check what the runtime sends"
        )));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(CniError::new(
            code::DECODE_FAILED,
            "network config on stdin is empty: the runtime must send the plugin's config",
        ));
    }
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(CniError::new(
            code::DECODE_FAILED,
            format!(
                "network config on stdin is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        ));
    }
    json::from_slice(bytes).map_err(|e| {
        CniError::new(
            code::DECODE_FAILED,
            format!("network config on stdin is not valid JSON: {e}"),
        )
    })
}

impl NetConf {
    /// Decode and validate stdin. Malformed JSON is code 6, a bad key code 7,
    /// an unsupported cniVersion code 1. `node_config` is the file a refused
    /// host-path key belongs in: the node config this node reads.
    pub fn parse(bytes: &[u8], node_config: &Path) -> CniResult<NetConf> {
        Self::from_value(&decode(bytes)?, node_config)
    }

    pub fn from_value(v: &Value, node_config: &Path) -> CniResult<NetConf> {
        let obj = v
            .as_object()
            .ok_or_else(|| CniError::config("network config must be a JSON object"))?;
        // Multus's `args.cni` holds the pod's cni-args, named as the keys.
        let asked = get(obj, Key::Args)
            .and_then(|a| a.get("cni"))
            .and_then(|c| c.get(Key::TrafficClass.name()))
            .map(|v| PodPick {
                what: "args.cni.trafficClass",
                value: v.clone(),
                of: "network",
                fix: "remove it from the pod's cni-args",
            });
        Self::from_object(obj, node_config, asked)
    }

    /// A rail profile (the node config's `draRails`) as the config a rail
    /// is tuned with: the same keys as a network config's, each by the same
    /// rule (`PROFILE_KEYS`; any other key is refused), and `pod_class`, a
    /// pod's pick of its class (the annotation `roce-tune.io/traffic-class`),
    /// judged against the profile's `podTrafficClasses` as
    /// `args.cni.trafficClass` is against a network's. `network` names what
    /// tuned the rail in its state entry.
    pub fn from_profile(
        profile: &Value,
        network: &str,
        pod_class: Option<(&'static str, &str)>,
    ) -> CniResult<NetConf> {
        let obj = profile
            .as_object()
            .ok_or_else(|| CniError::config("a rail profile must be a JSON object"))?;
        if let Some(k) = obj
            .keys()
            .find(|k| !Key::named(k).is_some_and(|k| PROFILE_KEYS.contains(&k)))
        {
            let meant = keys::meant(k)
                .filter(|m| PROFILE_KEYS.contains(m))
                .map_or_else(String::new, |m| {
                    format!(" (did you mean \"{}\"?)", m.name())
                });
            return Err(CniError::config(format!(
                "unknown key {}{meant}: a rail profile's keys are {}",
                crate::quote::input(k),
                names(PROFILE_KEYS)
            )));
        }
        let mut whole = obj.clone();
        // What a network config has and a profile does not: the version its
        // rules are read at, a name (replaced below: `network` is no CNI
        // network's name), and no placement check (no kubelet answer
        // names a DRA rail's VF).
        whole.insert(Key::CniVersion.name().into(), Value::from("1.1.0"));
        whole.insert(Key::Name.name().into(), Value::from("rail-profile"));
        whole.insert(Key::PlacementCheck.name().into(), Value::from("off"));
        let asked = pod_class.map(|(what, v)| PodPick {
            what,
            // A number is judged as one; anything else is refused as not one.
            value: v
                .parse::<u64>()
                .ok()
                .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
                .map_or_else(|| Value::from(v), Value::from),
            of: "profile",
            fix: "remove it from the pod's annotations",
        });
        let mut conf = Self::from_object(&whole, Path::new(""), asked)?;
        conf.name = network.to_owned();
        Ok(conf)
    }

    fn from_object(
        obj: &Map<String, Value>,
        node_config: &Path,
        asked: Option<PodPick>,
    ) -> CniResult<NetConf> {
        let cni_version = opt_str(obj, Key::CniVersion)?.ok_or_else(|| {
            CniError::config(
                "cniVersion is missing: set it to one of 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0",
            )
        })?;
        if !version::is_supported(&cni_version) {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!(
                    "cniVersion {cni_version:?} is not supported: roce-tune speaks {}",
                    version::SUPPORTED_VERSIONS.join(", ")
                ),
            ));
        }
        // `type` is the executable's name: a binary installed under another
        // name is still this plugin, so it is not checked.
        if let Some(key) = Key::ALL
            .iter()
            .find(|k| k.whose() == Whose::Node && obj.contains_key(k.name()))
        {
            return Err(node_key(key.name(), node_config));
        }
        let name = opt_str(obj, Key::Name)?.ok_or_else(|| {
            CniError::config("name is missing: a network config needs its network's name")
        })?;
        validate_name(&name)?;

        let sysctls = match get(obj, Key::Sysctl) {
            None | Some(Value::Null) => DEFAULT_SYSCTLS
                .iter()
                .map(|(k, v)| SysctlSetting {
                    key: k.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            Some(Value::Object(m)) => parse_sysctls(m)?,
            Some(other) => {
                return Err(wrong_type(
                    Key::Sysctl.name(),
                    "an object of string to string",
                    other,
                ))
            }
        };

        let traffic_class =
            pod_class(obj, asked)?.or(opt_int(obj, Key::TrafficClass, 0, 255)?.map(|n| n as u8));
        let rdma_cm_tos = opt_int(obj, Key::RdmaCmTos, 0, 255)?.map(|n| n as u8);
        // Tenant input like the rest (a network config can carry its own
        // runtimeConfig): only read here, judged against the node's dir.
        let device_info_file = get(obj, Key::RuntimeConfig)
            .and_then(|r| r.get("CNIDeviceInfoFile"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let gid_index = opt_int(obj, Key::GidIndex, 0, MAX_GID_INDEX as u64)?
            .unwrap_or(DEFAULT_GID_INDEX as u64) as u32;
        let gid_check = match opt_str(obj, Key::GidCheck)?.as_deref() {
            None | Some("enforce") => GidCheck::Enforce,
            Some("present") => GidCheck::Present,
            Some("warn") => GidCheck::Warn,
            Some("off") => GidCheck::Off,
            Some(o) => {
                return Err(CniError::config(format!(
                    "gidCheck {o:?} is not one of \"enforce\", \"present\", \"warn\", \"off\""
                )))
            }
        };
        let gid_timeout_ms = opt_int(obj, Key::GidTimeoutMs, 0, MAX_GID_TIMEOUT_MS)?
            .unwrap_or(DEFAULT_GID_TIMEOUT_MS);
        let rdma_port = opt_int(obj, Key::RdmaPort, 1, 255)?.map(|p| p as u32);
        let placement_check = match opt_str(obj, Key::PlacementCheck)?.as_deref() {
            None | Some("warn") => PlacementCheck::Warn,
            Some("enforce") => PlacementCheck::Enforce,
            Some("off") => PlacementCheck::Off,
            Some(o) => {
                return Err(CniError::config(format!(
                    "placementCheck {:?} is not one of \"warn\", \"enforce\", \"off\"",
                    o.chars().take(32).collect::<String>()
                )))
            }
        };
        let gdr_level = match opt_str(obj, Key::GdrLevel)?.as_deref() {
            Some("PIX") => GdrLevel::Pix,
            None | Some("PXB") => GdrLevel::Pxb,
            Some("PHB") => GdrLevel::Phb,
            Some("SYS") => GdrLevel::Sys,
            Some(o) => {
                return Err(CniError::config(format!(
                    "gdrLevel {:?} is not one of \"PIX\", \"PXB\", \"PHB\", \"SYS\" (NCCL_NET_GDR_LEVEL)",
                    o.chars().take(32).collect::<String>()
                )))
            }
        };

        let device_id = opt_pci(obj, Key::DeviceId)?;
        let pci_bus_id = opt_pci(obj, Key::PciBusId)?;
        let device_id = match (device_id, pci_bus_id) {
            (Some(a), Some(b)) if a != b => {
                return Err(CniError::config(format!(
                    "deviceID {a} and pciBusID {b} name different devices: give one, or the same VF in both"
                )))
            }
            (a, b) => a.or(b),
        };

        let log_level = match opt_str(obj, Key::LogLevel)? {
            None => LogLevel::Info,
            Some(l) => l.parse().map_err(|_| {
                CniError::config(format!(
                    "logLevel {l:?} is not one of \"error\", \"warn\", \"info\", \"debug\""
                ))
            })?,
        };

        let prev_result = match get(obj, Key::PrevResult) {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(other) => return Err(wrong_type(Key::PrevResult.name(), "an object", other)),
        };

        let valid_attachments =
            match get(obj, Key::ValidAttachments).or_else(|| get(obj, Key::Attachments)) {
                None | Some(Value::Null) => None,
                Some(v) => Some(parse_attachments(v)?),
            };

        Ok(NetConf {
            cni_version,
            name,
            sysctls,
            traffic_class,
            rdma_cm_tos,
            device_info_file,
            gid_index,
            gid_check,
            gid_timeout_ms,
            placement_check,
            gdr_level,
            rdma_port,
            device_id,
            log_level,
            prev_result,
            valid_attachments,
            strays: keys::strays(obj),
        })
    }

    /// What DEL runs with when the network config itself is refused: DEL
    /// needs only the node's settings and the attachment.
    pub fn for_del(cni_version: &str) -> NetConf {
        NetConf {
            cni_version: cni_version.to_owned(),
            name: String::new(),
            sysctls: Vec::new(),
            traffic_class: None,
            rdma_cm_tos: None,
            device_info_file: None,
            gid_index: DEFAULT_GID_INDEX,
            gid_check: GidCheck::Off,
            gid_timeout_ms: 0,
            placement_check: PlacementCheck::Off,
            gdr_level: GdrLevel::Pxb,
            rdma_port: None,
            device_id: None,
            log_level: LogLevel::Info,
            prev_result: None,
            valid_attachments: None,
            strays: Vec::new(),
        }
    }

    /// The device settings this config asks ADD to own, by their keys
    /// (`crate::settings`): each is recorded, written and given back.
    pub fn owned(&self) -> Vec<(&'static str, u32)> {
        [
            (Key::TrafficClass, self.traffic_class),
            (Key::RdmaCmTos, self.rdma_cm_tos),
        ]
        .map(|(k, v)| v.map(|v| (k.name(), u32::from(v))))
        .into_iter()
        .flatten()
        .collect()
    }

    /// The RDMA device is needed only to write to it or to check a GID.
    pub fn needs_rdma(&self) -> bool {
        !self.owned().is_empty() || self.gid_check != GidCheck::Off
    }

    /// ADD's rule for a key one edit from one of roce-tune's: refused (7),
    /// since ignoring it would apply the default the key was meant to
    /// change (`"gidindex": 1` enforcing index 3). Every typo is named, so
    /// one round of fixes is enough.
    pub fn refuse_typos(&self) -> CniResult<()> {
        let typos: Vec<String> = self
            .strays
            .iter()
            .filter_map(|s| {
                let meant = s.meant?;
                let note = match meant.whose() {
                    Whose::Node => format!(
                        "; {} is a node setting too, which a network config may not name",
                        meant.name()
                    ),
                    _ => String::new(),
                };
                Some(format!(
                    "{}: did you mean \"{}\"{note}",
                    crate::quote::input(&s.key),
                    meant.name()
                ))
            })
            .collect();
        if typos.is_empty() {
            return Ok(());
        }
        Err(CniError::config(format!(
            "network config {} roce-tune does not know, one edit (or a letter's case) from one it does: {}; fix the key (ignored, it would leave that setting at its default)",
            if typos.len() == 1 { "key" } else { "keys" },
            typos.join("; ")
        )))
    }

    /// The one warning line for the keys neither roce-tune nor the runtime
    /// uses (another tool's, or a typo a command other than ADD only warns
    /// about), or `None` when there are none. At most `MAX_STRAYS_NAMED`
    /// are named: a config can hold thousands.
    pub fn strays_warning(&self) -> Option<String> {
        if self.strays.is_empty() {
            return None;
        }
        let mut named: Vec<String> = self
            .strays
            .iter()
            .take(MAX_STRAYS_NAMED)
            .map(|s| match s.meant {
                Some(m) => format!(
                    "{} (did you mean \"{}\"?)",
                    crate::quote::input(&s.key),
                    m.name()
                ),
                None => crate::quote::input(&s.key),
            })
            .collect();
        if self.strays.len() > MAX_STRAYS_NAMED {
            named.push(format!("and {} more", self.strays.len() - MAX_STRAYS_NAMED));
        }
        let (keys, are) = match self.strays.len() {
            1 => ("key", "is neither roce-tune's nor one"),
            _ => ("keys", "are neither roce-tune's nor ones"),
        };
        let own: Vec<Key> = Key::ALL
            .iter()
            .copied()
            .filter(|k| k.whose() == Whose::RoceTune)
            .collect();
        Some(format!(
            "network config {keys} {} {are} the runtime adds: ignored (roce-tune's keys: {})",
            named.join(", "),
            names(&own)
        ))
    }
}

/// How many stray keys the warning names before it counts the rest.
const MAX_STRAYS_NAMED: usize = 8;

/// The keys of a rail profile (node config `draRails`): a network config's,
/// with the same types, bounds and defaults.
pub const PROFILE_KEYS: &[Key] = &[
    Key::Sysctl,
    Key::TrafficClass,
    Key::RdmaCmTos,
    Key::GidIndex,
    Key::GidCheck,
    Key::GidTimeoutMs,
    Key::PodTrafficClasses,
];

/// Keys as a message lists them.
fn names(keys: &[Key]) -> String {
    keys.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// A host-path key in a network config: where it belongs instead.
fn node_key(key: &str, node_config: &Path) -> CniError {
    CniError::config(format!(
        "{key} is a node setting, and a network config may not name host paths (any namespace user may write one); set {key} in the node config, {}, and remove it here",
        node_config.display()
    ))
}

/// A pod's pick of its class: what carried it, its value, whose list it is
/// judged against, and what the pod does instead.
struct PodPick {
    what: &'static str,
    value: Value,
    of: &'static str,
    fix: &'static str,
}

/// A pod's class: `args.cni.trafficClass` (Multus fills `args.cni` from the
/// pod's cni-args) or a DRA rail's annotation, allowed only when it is one
/// of the network's (or profile's) `podTrafficClasses`: a tenant must not
/// pick its own priority unless the network's owner allows it.
fn pod_class(obj: &Map<String, Value>, asked: Option<PodPick>) -> CniResult<Option<u8>> {
    let allowed: Option<Vec<u8>> = match get(obj, Key::PodTrafficClasses) {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) if a.len() <= 256 => Some(
            a.iter()
                .map(|v| match v.as_u64() {
                    Some(n) if n <= 255 => Ok(n as u8),
                    _ => Err(wrong_type(
                        Key::PodTrafficClasses.name(),
                        "a list of whole numbers from 0 to 255",
                        v,
                    )),
                })
                .collect::<CniResult<_>>()?,
        ),
        Some(other) => {
            return Err(wrong_type(
                Key::PodTrafficClasses.name(),
                "a list of whole numbers from 0 to 255",
                other,
            ))
        }
    };
    let Some(PodPick {
        what,
        value,
        of,
        fix,
    }) = asked
    else {
        return Ok(None);
    };
    let asked = match value.as_u64() {
        Some(n) if n <= 255 => n as u8,
        _ => return Err(wrong_type(what, "a whole number from 0 to 255", &value)),
    };
    match allowed {
        Some(list) if list.contains(&asked) => Ok(Some(asked)),
        Some(list) => Err(CniError::config(format!(
            "{what} {asked} is not one of the {of}'s podTrafficClasses {list:?}: the pod may pick only those; ask the {of}'s owner"
        ))),
        None => Err(CniError::config(format!(
            "{what} {asked} is not allowed: the {of} lists no podTrafficClasses, so a pod may not pick its own class; {fix}, or ask the {of}'s owner to list it"
        ))),
    }
}

/// The CNI spec's rule for a network name (SPEC.md, "Network configuration"):
/// `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`. It also keeps the name, which reaches
/// every log line and state entry, free of anything that could forge a line.
pub fn validate_name(name: &str) -> CniResult<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && name.len() <= 253;
    if ok {
        Ok(())
    } else {
        Err(CniError::config(format!(
            "name {:?} is not a network name: it must start with a letter or digit and hold only letters, digits, '_', '.', '-' (at most 253)",
            name.chars().take(64).collect::<String>()
        )))
    }
}

fn wrong_type(key: &str, want: &str, got: &Value) -> CniError {
    CniError::config(format!(
        "{key} must be {want}, got {}",
        crate::quote::input_json(got)
    ))
}

/// The value of `key`: the parser reads no key but through this (or the
/// helpers below), so every key it reads is one of `Key::ALL`.
fn get(obj: &Map<String, Value>, key: Key) -> Option<&Value> {
    obj.get(key.name())
}

/// A config string: an empty one is kept (and judged by its key's rules).
fn opt_str(obj: &Map<String, Value>, key: Key) -> CniResult<Option<String>> {
    let key = key.name();
    json::str_field(obj, key)
        .map(|s| s.map(str::to_owned))
        .map_err(|v| wrong_type(key, "a string", v))
}

fn opt_int(obj: &Map<String, Value>, key: Key, min: u64, max: u64) -> CniResult<Option<u64>> {
    let key = key.name();
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(x) if (min..=max).contains(&x) => Ok(Some(x)),
            _ => Err(CniError::config(format!(
                "{key} is {n}: it must be a whole number from {min} to {max}"
            ))),
        },
        Some(other) => Err(wrong_type(
            key,
            &format!("a whole number from {min} to {max}"),
            other,
        )),
    }
}

fn opt_pci(obj: &Map<String, Value>, key: Key) -> CniResult<Option<PciAddr>> {
    match opt_str(obj, key)? {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => PciAddr::parse(&s).map(Some).ok_or_else(|| {
            CniError::config(format!(
                "{} {:?} is not a PCI address of the form DDDD:BB:DD.F (e.g. 0000:0c:00.2)",
                key.name(),
                s.chars().take(64).collect::<String>()
            ))
        }),
    }
}

/// The most sysctls one rail could want; more is a config bug.
const MAX_SYSCTLS: usize = 64;

fn parse_sysctls(m: &Map<String, Value>) -> CniResult<Vec<SysctlSetting>> {
    if m.len() > MAX_SYSCTLS {
        return Err(CniError::config(format!(
            "sysctl has {} keys, more than {MAX_SYSCTLS}",
            m.len()
        )));
    }
    let mut out = Vec::with_capacity(m.len());
    for (key, value) in m {
        let value = match value {
            Value::String(s) => s.clone(),
            other => return Err(wrong_type(&format!("sysctl {key:?}"), "a string", other)),
        };
        validate_sysctl_key(key)?;
        validate_sysctl_value(key, &value)?;
        out.push(SysctlSetting {
            key: key.clone(),
            value,
        });
    }
    Ok(out)
}

/// Keys are dotted and must stay under `net.` (the netns's own sysctls): each
/// component is non-empty, holds no '/' and is not '.' or '..', so the key can
/// only name a file below /proc/sys/net of the pod's netns.
pub fn validate_sysctl_key(key: &str) -> CniResult<()> {
    let bad = |why: &str| {
        CniError::config(format!(
            "sysctl key {:?} {why}: keys are dotted names under net., e.g. net.ipv4.conf.IFNAME.arp_ignore",
            key.chars().take(128).collect::<String>()
        ))
    };
    if key.len() > 256 {
        return Err(bad("is too long"));
    }
    let mut parts = key.split('.');
    if parts.next() != Some("net") {
        return Err(bad("is outside net."));
    }
    let mut n = 1;
    for p in parts {
        n += 1;
        if p.is_empty() {
            return Err(bad("has an empty component (\"..\" or a trailing dot)"));
        }
        if p.contains('/') {
            return Err(bad("has a '/' in a component"));
        }
        if p.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(bad("has a space, control or non-ASCII character"));
        }
    }
    if n < 2 {
        return Err(bad("names no setting"));
    }
    Ok(())
}

fn validate_sysctl_value(key: &str, value: &str) -> CniResult<()> {
    // Multi-word values ("4096 87380 6291456") are legal; control characters
    // would let one setting write a second line.
    if value.is_empty() || value.len() > 256 || value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(CniError::config(format!(
            "sysctl {key:?} has value {:?}: give 1 to 256 printable characters",
            value.chars().take(64).collect::<String>()
        )));
    }
    Ok(())
}

fn parse_attachments(v: &Value) -> CniResult<Vec<Attachment>> {
    let arr = v
        .as_array()
        .ok_or_else(|| wrong_type(Key::ValidAttachments.name(), "an array", v))?;
    arr.iter()
        .enumerate()
        .map(|(i, a)| {
            let field = |k: &str| {
                a.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        CniError::config(format!(
                            "cni.dev/valid-attachments[{i}] has no string {k}"
                        ))
                    })
            };
            Ok(Attachment {
                container_id: field("containerID")?,
                ifname: field("ifname")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NODE: &str = "/etc/cni/roce-tune/node.json";

    fn parse(v: Value) -> CniResult<NetConf> {
        NetConf::parse(v.to_string().as_bytes(), Path::new(NODE))
    }

    fn base() -> Value {
        json!({"cniVersion": "1.0.0", "name": "rdma-vf", "type": "roce-tune"})
    }

    fn with(key: &str, val: Value) -> Value {
        let mut b = base();
        b[key] = val;
        b
    }

    #[test]
    fn defaults_match_design() {
        let c = parse(base()).unwrap();
        assert_eq!(c.sysctls.len(), 6);
        assert_eq!(c.sysctls[0].key, "net.ipv4.conf.all.rp_filter");
        assert_eq!(c.traffic_class, None);
        assert_eq!(c.gid_index, 3);
        assert_eq!(c.gid_check, GidCheck::Enforce);
        assert_eq!(c.gid_timeout_ms, 3000);
        assert_eq!(c.rdma_port, None);
        assert_eq!(c.log_level, LogLevel::Info);
        assert!(c.needs_rdma(), "gidCheck enforce needs the device");
    }

    #[test]
    fn fixture_stdin_parses() {
        let c = NetConf::parse(
            include_bytes!("../../tests/data/roce-tune-add-stdin.json"),
            Path::new(NODE),
        )
        .unwrap();
        assert_eq!(c.traffic_class, Some(41));
        assert_eq!(c.device_id.unwrap().as_str(), "0000:0c:00.2");
        assert!(c.prev_result.is_some());
    }

    #[test]
    fn empty_sysctl_map_sets_none_and_given_map_replaces_defaults() {
        assert!(parse(with("sysctl", json!({}))).unwrap().sysctls.is_empty());
        let c = parse(with(
            "sysctl",
            json!({"net.ipv4.conf.IFNAME.arp_ignore": "2"}),
        ))
        .unwrap();
        assert_eq!(
            c.sysctls,
            vec![SysctlSetting {
                key: "net.ipv4.conf.IFNAME.arp_ignore".into(),
                value: "2".into()
            }]
        );
    }

    #[test]
    fn unknown_keys_parse_and_are_kept_for_the_command_to_judge() {
        let mut v = base();
        v["runtimeConfig"] = json!({"x": 1});
        v["somethingNew"] = json!([1, 2]);
        let c = parse(v).unwrap();
        assert_eq!(c.strays.len(), 1);
        assert_eq!(c.strays[0].key, "somethingNew");
        assert!(c.refuse_typos().is_ok(), "another tool's key is no typo");
        let w = c.strays_warning().unwrap();
        assert!(
            w.starts_with("network config key \"somethingNew\" is neither roce-tune's nor one the runtime adds: ignored (roce-tune's keys: sysctl, trafficClass,"),
            "{w}"
        );
        // The runtime's keys, the spec's reserved prefix and the fixtures
        // of the field warn about nothing.
        let c = NetConf::parse(
            include_bytes!("../../tests/data/roce-tune-add-stdin.json"),
            Path::new(NODE),
        )
        .unwrap();
        assert_eq!((c.strays.len(), c.strays_warning()), (0, None));
        let mut v = base();
        for (k, val) in [
            ("capabilities", json!({"CNIDeviceInfoFile": true})),
            ("args", json!({"cni": {}})),
            ("cni.dev/valid-attachments", json!([])),
            ("cni.dev/a-later-one", json!(1)),
        ] {
            v[k] = val;
        }
        assert_eq!(parse(v).unwrap().strays, []);
    }

    #[test]
    fn a_typo_of_a_key_is_refused_naming_every_typo_and_what_was_meant() {
        let mut v = base();
        v["trafficclass"] = json!(41);
        v["gidindex"] = json!(1);
        v["vlan"] = json!(0);
        let c = parse(v).unwrap();
        assert_eq!(c.traffic_class, None, "the typo is not read");
        assert_eq!(c.gid_index, DEFAULT_GID_INDEX);
        let e = c.refuse_typos().unwrap_err();
        assert_eq!(e.code, 7);
        assert_eq!(
            e.msg,
            "network config keys roce-tune does not know, one edit (or a letter's case) from one it does: \"gidindex\": did you mean \"gidIndex\"; \"trafficclass\": did you mean \"trafficClass\"; fix the key (ignored, it would leave that setting at its default)"
        );
        // Where only a warning is due, it says the same, beside the rest.
        let w = c.strays_warning().unwrap();
        assert!(
            w.starts_with("network config keys \"gidindex\" (did you mean \"gidIndex\"?), \"trafficclass\" (did you mean \"trafficClass\"?), \"vlan\" are neither"),
            "{w}"
        );
        // A host-path key misspelt is a typo too, and still a node setting.
        let e = parse(with("statedir", json!("/run/x")))
            .unwrap()
            .refuse_typos()
            .unwrap_err();
        assert!(
            e.msg
                .contains("\"statedir\": did you mean \"stateDir\"; stateDir is a node setting"),
            "{}",
            e.msg
        );
    }

    #[test]
    fn the_warning_names_a_few_strays_and_counts_the_rest() {
        let mut v = base();
        for i in 0..20 {
            v[format!("x-{i:02}")] = json!(i);
        }
        let w = parse(v).unwrap().strays_warning().unwrap();
        assert!(w.contains("\"x-07\", and 12 more are neither"), "{w}");
        assert!(!w.contains("x-08"), "{w}");
    }

    #[test]
    fn a_profile_names_the_key_a_typo_meant() {
        let e = NetConf::from_profile(&json!({"trafficclass": 41}), "draRails", None).unwrap_err();
        assert!(
            e.msg.starts_with("unknown key \"trafficclass\" (did you mean \"trafficClass\"?): a rail profile's keys are sysctl, trafficClass,"),
            "{}",
            e.msg
        );
        // A network config's key a profile may not carry is no typo there.
        let e = NetConf::from_profile(&json!({"deviceId": "x"}), "draRails", None).unwrap_err();
        assert!(e.msg.starts_with("unknown key \"deviceId\": "), "{}", e.msg);
    }

    #[test]
    fn bad_values_are_code_7_and_name_the_key() {
        let cases: Vec<(&str, Value)> = vec![
            ("trafficClass", json!(256)),
            ("trafficClass", json!(-1)),
            ("trafficClass", json!("41")),
            ("trafficClass", json!(4.5)),
            ("gidIndex", json!(-3)),
            ("gidIndex", json!(5000)),
            ("gidCheck", json!("maybe")),
            ("gidTimeoutMs", json!(600000)),
            ("placementCheck", json!("strict")),
            ("gdrLevel", json!("NVL")),
            ("gdrLevel", json!("pxb")),
            ("rdmaPort", json!(0)),
            ("deviceID", json!("0c:00.2")),
            ("pciBusID", json!("0000:0c:00.9")),
            ("deviceID", json!(12)),
            ("stateDir", json!("/run/cni/roce-tune")),
            ("sysfsRoot", json!("/sys")),
            ("logFile", json!("/var/log/x")),
            ("stateDir", json!(null)),
            ("name", json!("a\nb")),
            ("name", json!("-x")),
            ("name", json!("")),
            ("name", json!(7)),
            ("logLevel", json!("loud")),
            ("sysctl", json!(["a"])),
            ("sysctl", json!({"net.ipv4.ip_forward": 1})),
            ("prevResult", json!("x")),
        ];
        for (key, val) in cases {
            let e = parse(with(key, val.clone())).unwrap_err();
            assert_eq!(e.code, 7, "{key}={val}: {e}");
            assert!(
                e.msg.contains(key),
                "{key}={val}: message {:?} does not name the key",
                e.msg
            );
        }
    }

    #[test]
    fn host_path_keys_say_where_they_go_and_type_is_not_checked() {
        let e = parse(with("stateDir", json!("/run/x"))).unwrap_err();
        assert!(
            e.msg.contains("node setting") && e.msg.contains("/etc/cni/roce-tune/node.json"),
            "{}",
            e.msg
        );
        assert!(parse(with("type", json!("roce-tune-v2"))).is_ok());
        let mut v = base();
        v.as_object_mut().unwrap().remove("name");
        assert_eq!(parse(v).unwrap_err().code, 7);
        assert!(parse(with("name", json!("rail-1.a_b"))).is_ok());
    }

    #[test]
    fn version_and_decode_errors() {
        assert_eq!(
            parse(with("cniVersion", json!("0.2.0"))).unwrap_err().code,
            1
        );
        let mut v = base();
        v.as_object_mut().unwrap().remove("cniVersion");
        assert_eq!(parse(v).unwrap_err().code, 7);
        assert_eq!(
            NetConf::parse(b"{not json", Path::new(NODE))
                .unwrap_err()
                .code,
            6
        );
        assert_eq!(
            NetConf::parse(
                br#"{"cniVersion":"1.0.0","cniVersion":"1.0.0"}"#,
                Path::new(NODE)
            )
            .unwrap_err()
            .code,
            6
        );
        assert_eq!(NetConf::parse(b"[]", Path::new(NODE)).unwrap_err().code, 7);
        assert_eq!(
            NetConf::parse(&vec![b' '; MAX_STDIN_BYTES + 1], Path::new(NODE))
                .unwrap_err()
                .code,
            7
        );
    }

    #[test]
    fn device_id_and_pci_bus_id_must_agree() {
        let mut v = with("deviceID", json!("0000:0c:00.2"));
        v["pciBusID"] = json!("0000:0C:00.2");
        assert_eq!(
            parse(v.clone()).unwrap().device_id.unwrap().as_str(),
            "0000:0c:00.2"
        );
        v["pciBusID"] = json!("0000:0c:00.3");
        assert_eq!(parse(v).unwrap_err().code, 7);
        assert_eq!(
            parse(with("pciBusID", json!("0000:3b:01.7")))
                .unwrap()
                .device_id
                .unwrap()
                .as_str(),
            "0000:3b:01.7"
        );
    }

    #[test]
    fn sysctl_keys() {
        for ok in [
            "net.ipv4.conf.all.rp_filter",
            "net.ipv4.conf.IFNAME.arp_filter",
            "net.core.somaxconn",
        ] {
            assert!(validate_sysctl_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "kernel.panic",
            "net",
            "net.",
            "net..ipv4",
            "net.ipv4/../../kernel/x",
            "net.ipv4.conf.a/b.x",
            "net.ipv4. .x",
            "vm.swappiness",
            "netx.y",
            "",
        ] {
            let e = validate_sysctl_key(bad).unwrap_err();
            assert_eq!(e.code, 7, "{bad:?}");
        }
    }

    #[test]
    fn sysctl_values() {
        assert!(parse(with(
            "sysctl",
            json!({"net.core.rmem": "4096 87380\t6291456"})
        ))
        .is_ok());
        for bad in ["", "1\n2", "\u{0}"] {
            assert_eq!(
                parse(with("sysctl", json!({"net.core.x": bad})))
                    .unwrap_err()
                    .code,
                7,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn gc_attachments_both_keys() {
        let a = json!([{"containerID": "c1", "ifname": "net1"}]);
        assert_eq!(
            parse(with("cni.dev/valid-attachments", a.clone()))
                .unwrap()
                .valid_attachments
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            parse(with("cni.dev/attachments", a))
                .unwrap()
                .valid_attachments
                .unwrap()[0]
                .ifname,
            "net1"
        );
        assert_eq!(
            parse(with(
                "cni.dev/valid-attachments",
                json!([{"containerID": 1}])
            ))
            .unwrap_err()
            .code,
            7
        );
    }

    #[test]
    fn pci_addr_forms() {
        assert!(PciAddr::parse("0000:0c:00.2").is_some());
        assert!(PciAddr::parse("0000:af:1f.7").is_some());
        for bad in [
            "0000:0c:20.0",
            "000:0c:00.2",
            "0000:0c:00.8",
            "0000-0c-00.2",
            "0000:0g:00.2",
            "../../x/y.z",
        ] {
            assert!(PciAddr::parse(bad).is_none(), "{bad}");
        }
    }
}
