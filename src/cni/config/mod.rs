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

mod fields;
mod rail;
mod strays;
#[cfg(test)]
mod tests;

use fields::{
    get, node_key, opt_int, opt_pci, opt_str, parse_attachments, parse_sysctls, wrong_type,
};
pub use fields::{validate_name, validate_sysctl_key};
pub use rail::profile_keys;
use rail::{parse_owned, pod_class, PodPick};

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
    /// Every owned setting the config asks for (the two above among them),
    /// by its declared key, in `Key::ALL`'s order: what `owned()` gives ADD.
    owned: Vec<(Key, u32)>,
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

        // A pod's pick is judged first: its refusal is what a pod sees.
        let pick = pod_class(obj, asked)?;
        let owned = parse_owned(obj, pick)?;
        let value_of = |key: Key| {
            owned
                .iter()
                .find(|(k, _)| *k == key)
                // Both are bound to 0..=255 by their declarations.
                .map(|&(_, v)| v as u8)
        };
        let (traffic_class, rdma_cm_tos) = (value_of(Key::TrafficClass), value_of(Key::RdmaCmTos));
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
            owned,
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
            owned: Vec::new(),
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

    /// The RDMA device is needed only to write to it or to check a GID.
    pub fn needs_rdma(&self) -> bool {
        !self.owned().is_empty() || self.gid_check != GidCheck::Off
    }
}
