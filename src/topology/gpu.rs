//! A device plugin's GPU ID to the GPU's PCI function, without nvidia-smi
//! (docs/topology.md, "GPU IDs").
//!
//! - AMD's plugin names a GPU by its PCI address (ROCm/k8s-device-plugin,
//!   `ListAndWatch`: `ID: id`, logged as "bus ID").
//! - NVIDIA's plugin advertises the NVML UUID (`GPU-<uuid>`), and for a MIG
//!   slice the MIG device's UUID: `MIG-<uuid>`, or with older drivers
//!   `MIG-GPU-<gpu uuid>/<gi>/<ci>` (NVIDIA/k8s-device-plugin
//!   api/config/v1/replicas.go:121-163). Shared (time-sliced) replicas carry
//!   `::<n>` (internal/rm/devices.go:242-245). With `deviceIDStrategy: index`
//!   the container sees NVML indexes, `<i>` or `<i>:<mig>`
//!   (internal/rm/nvml_devices.go:47-58).
//!
//! The NVIDIA driver lists every GPU it drives as
//! `/proc/driver/nvidia/gpus/<bdf>/information`, with `GPU UUID:` and
//! `Device Minor:` lines. A MIG UUID appears nowhere there (only NVML knows a
//! slice's parent), so `MIG-<uuid>` is reported unmapped; the old form names
//! its parent and maps. An index maps only when NVML's order (PCI bus order)
//! and the device minor agree, since nothing promises either.

use super::pci::Bdf;
use crate::sysfs::{SysfsError, View};
use std::fmt;
use std::path::Path;

/// A GPU ID in one of the forms the plugins hand out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuId {
    /// AMD: the PCI address.
    Pci(Bdf),
    /// NVIDIA: `GPU-<uuid>`, lowercase.
    Uuid(String),
    /// NVIDIA MIG: `MIG-<uuid>`.
    Mig(String),
    /// NVIDIA MIG, older form: `MIG-GPU-<uuid>/<gi>/<ci>`; the parent's UUID.
    MigOfGpu { gpu: String, gi: u32, ci: u32 },
    /// NVML index.
    Index(u32),
    /// NVML index of the parent and the MIG device's index.
    MigIndex { gpu: u32, mig: u32 },
}

impl GpuId {
    /// Parse an ID; a replica suffix `::<n>` is dropped first.
    pub fn parse(id: &str) -> Option<GpuId> {
        let id = match id.split_once("::") {
            Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
            Some(_) => return None,
            None => id,
        };
        if let Some(b) = Bdf::parse(&id.to_ascii_lowercase()) {
            return Some(GpuId::Pci(b));
        }
        if let Some(u) = id.strip_prefix("GPU-") {
            return uuid(u).map(|u| GpuId::Uuid(format!("GPU-{u}")));
        }
        if let Some(rest) = id.strip_prefix("MIG-") {
            if let Some(u) = uuid(rest) {
                return Some(GpuId::Mig(format!("MIG-{u}")));
            }
            let mut parts = rest.splitn(3, '/');
            let (g, gi, ci) = (parts.next()?, parts.next()?, parts.next()?);
            let gpu = uuid(g.strip_prefix("GPU-")?)?;
            return Some(GpuId::MigOfGpu {
                gpu: format!("GPU-{gpu}"),
                gi: number(gi)?,
                ci: number(ci)?,
            });
        }
        if let Some((g, m)) = id.split_once(':') {
            return Some(GpuId::MigIndex {
                gpu: number(g)?,
                mig: number(m)?,
            });
        }
        number(id).map(GpuId::Index)
    }
}

/// The canonical 8-4-4-4-12 hex form, lowercased.
fn uuid(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    ok.then(|| s.to_ascii_lowercase())
}

fn number(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Why an ID names no PCI function. Not an error for the pod: reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unmapped {
    /// None of the forms the plugins use.
    NotAGpuId,
    /// `MIG-<uuid>`: the driver's proc files do not name MIG devices.
    MigUuid,
    /// No GPU in the directory has this UUID, index or minor.
    NoSuchGpu,
    /// Two entries claim the same UUID.
    Ambiguous,
    /// The index is NVML's (PCI bus order) but the device minor of that GPU
    /// differs, or is missing: which GPU the plugin meant cannot be told.
    IndexDisagrees {
        by_bus_order: Option<Bdf>,
        by_minor: Option<Bdf>,
    },
    /// The directory could not be listed, or holds a file not root's.
    Dir(ListError),
}

/// Why the proc directory gave no list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// It cannot be listed.
    Dir(SysfsError),
    /// A GPU's `information` is a link, another uid's, or writable by group
    /// or others: who could write it would choose which GPU a UUID is.
    Untrusted { gpu: Bdf, why: SysfsError },
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::Dir(e) => write!(f, "{e}"),
            ListError::Untrusted { gpu, why } => write!(f, "{gpu}/information: {why}"),
        }
    }
}

impl fmt::Display for Unmapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |b: &Option<Bdf>| b.map_or("none".to_string(), |b| b.to_string());
        match self {
            Unmapped::NotAGpuId => f.write_str("not a GPU ID of a known device plugin"),
            Unmapped::MigUuid => f.write_str(
                "a MIG UUID; the driver's proc files name no MIG device, only NVML knows its GPU",
            ),
            Unmapped::NoSuchGpu => f.write_str("no GPU of the driver's proc directory has it"),
            Unmapped::Ambiguous => f.write_str("more than one GPU of the proc directory claims it"),
            Unmapped::IndexDisagrees {
                by_bus_order,
                by_minor,
            } => write!(
                f,
                "an index, and PCI bus order gives {} but the device minor gives {}",
                show(by_bus_order),
                show(by_minor)
            ),
            Unmapped::Dir(e) => write!(f, "the driver's proc directory cannot be read: {e}"),
        }
    }
}

/// One GPU of the driver's proc directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuEntry {
    pub pci: Bdf,
    /// `GPU UUID:`, when it has the canonical form.
    pub uuid: Option<String>,
    /// `Device Minor:` (the N of /dev/nvidiaN).
    pub minor: Option<u32>,
}

/// Entries of the proc directory read at most (a node has at most 16 GPUs):
/// the first in PCI order: a hostile proc tree must not make an ADD read
/// thousands.
pub const PROC_GPUS_MAX: usize = 64;

/// The GPUs of the proc directory (`/proc/driver/nvidia/gpus`, or a stand-in),
/// in PCI order. Each `information` is read through the view: no link, a
/// regular file of at most 64 KiB, root's and not writable by group or
/// others (the driver makes them 0444), else the whole list is refused. An
/// entry without one is left out, and so is one whose `Bus Location:` names
/// another function.
pub fn list(dir: &View) -> Result<Vec<GpuEntry>, ListError> {
    let mut out = Vec::new();
    let names = dir.list(Path::new(".")).map_err(ListError::Dir)?;
    let gpus = names.iter().filter_map(|n| Some((n, Bdf::parse(n)?)));
    for (name, pci) in gpus.take(PROC_GPUS_MAX) {
        match dir.read_root_owned(&Path::new(name).join("information")) {
            Ok(text) => out.extend(parse_information(pci, &text)),
            Err(why @ (SysfsError::Link | SysfsError::NotRootOnly { .. })) => {
                return Err(ListError::Untrusted { gpu: pci, why })
            }
            // Missing, not a file, unreadable: no GPU of the driver's here.
            Err(_) => {}
        }
    }
    out.sort_by_key(|e| e.pci);
    Ok(out)
}

/// One GPU's `information`, as `list` reads it: `None` when its `Bus
/// Location:` names another function than `pci`.
pub fn parse_information(pci: Bdf, text: &str) -> Option<GpuEntry> {
    let mut entry = GpuEntry {
        pci,
        uuid: None,
        minor: None,
    };
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "GPU UUID" => {
                entry.uuid = value
                    .strip_prefix("GPU-")
                    .and_then(uuid)
                    .map(|u| format!("GPU-{u}"))
            }
            "Device Minor" => entry.minor = number(value),
            // The driver writes the full address; a mismatch is no GPU of ours.
            "Bus Location" if Bdf::parse(&value.to_ascii_lowercase()) != Some(pci) => return None,
            _ => {}
        }
    }
    Some(entry)
}

/// The PCI function of the GPU a plugin named `id`. `dir` is the NVIDIA
/// driver's proc directory (not read for a PCI address).
pub fn resolve(dir: &View, id: &str) -> Result<Bdf, Unmapped> {
    let parsed = GpuId::parse(id).ok_or(Unmapped::NotAGpuId)?;
    if let GpuId::Pci(b) = parsed {
        return Ok(b);
    }
    if let GpuId::Mig(_) = parsed {
        return Err(Unmapped::MigUuid);
    }
    let gpus = list(dir).map_err(Unmapped::Dir)?;
    resolve_in(&gpus, &parsed)
}

/// `resolve` over an already read list (one read for all of a pod's IDs).
pub fn resolve_in(gpus: &[GpuEntry], id: &GpuId) -> Result<Bdf, Unmapped> {
    let by_uuid = |u: &str| {
        let mut hits = gpus.iter().filter(|g| g.uuid.as_deref() == Some(u));
        match (hits.next(), hits.next()) {
            (Some(g), None) => Ok(g.pci),
            (None, _) => Err(Unmapped::NoSuchGpu),
            (Some(_), Some(_)) => Err(Unmapped::Ambiguous),
        }
    };
    let by_index = |i: u32| {
        let by_bus_order = gpus.get(i as usize).map(|g| g.pci);
        let mut minors = gpus.iter().filter(|g| g.minor == Some(i));
        let by_minor = match (minors.next(), minors.next()) {
            (Some(g), None) => Some(g.pci),
            _ => None,
        };
        match (by_bus_order, by_minor) {
            (None, None) => Err(Unmapped::NoSuchGpu),
            (Some(a), Some(b)) if a == b => Ok(a),
            (a, b) => Err(Unmapped::IndexDisagrees {
                by_bus_order: a,
                by_minor: b,
            }),
        }
    };
    match id {
        GpuId::Pci(b) => Ok(*b),
        GpuId::Mig(_) => Err(Unmapped::MigUuid),
        GpuId::Uuid(u) => by_uuid(u),
        GpuId::MigOfGpu { gpu, .. } => by_uuid(gpu),
        GpuId::Index(i) => by_index(*i),
        GpuId::MigIndex { gpu, .. } => by_index(*gpu),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plugin_form_parses() {
        let u = "GPU-0F00aaaa-1111-2222-3333-444455556666";
        assert_eq!(
            GpuId::parse(u),
            Some(GpuId::Uuid(
                "GPU-0f00aaaa-1111-2222-3333-444455556666".into()
            ))
        );
        assert_eq!(
            GpuId::parse(&format!("{u}::3")),
            GpuId::parse(u),
            "a shared replica is its GPU"
        );
        assert_eq!(GpuId::parse(&format!("{u}::")), None);
        assert_eq!(GpuId::parse(&format!("{u}::x")), None);
        assert!(matches!(
            GpuId::parse("MIG-3eb87630-93d5-b2b6-b8ff-9b359caf4ee2"),
            Some(GpuId::Mig(_))
        ));
        assert_eq!(
            GpuId::parse("MIG-GPU-662077db-fa3f-0d8f-9502-21ab0ef058a2/10/0"),
            Some(GpuId::MigOfGpu {
                gpu: "GPU-662077db-fa3f-0d8f-9502-21ab0ef058a2".into(),
                gi: 10,
                ci: 0
            })
        );
        assert_eq!(
            GpuId::parse("MIG-GPU-662077db-fa3f-0d8f-9502-21ab0ef058a2/1"),
            None
        );
        assert_eq!(GpuId::parse("MIG-GPU-nope/1/0"), None);
        assert_eq!(GpuId::parse("3"), Some(GpuId::Index(3)));
        assert_eq!(
            GpuId::parse("3:1"),
            Some(GpuId::MigIndex { gpu: 3, mig: 1 })
        );
        assert_eq!(
            GpuId::parse("0000:0F:00.0"),
            Some(GpuId::Pci(Bdf::parse("0000:0f:00.0").unwrap()))
        );
        for bad in [
            "",
            "GPU-",
            "GPU-1234",
            "-1",
            "1:",
            "card0",
            "3:1:2",
            "99999999999",
        ] {
            assert_eq!(GpuId::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn information_lines_are_read_and_checked() {
        let pci = Bdf::parse("0000:0f:00.0").unwrap();
        let text = "Model: \t\t NVIDIA A100-SXM4-80GB\nIRQ:   \t\t 0\nGPU UUID: \t GPU-0f000000-0000-4000-8000-000000000000\nBus Location: \t 0000:0f:00.0\nDevice Minor: \t 2\n";
        let e = parse_information(pci, text).unwrap();
        assert_eq!(
            e.uuid.as_deref(),
            Some("GPU-0f000000-0000-4000-8000-000000000000")
        );
        assert_eq!(e.minor, Some(2));
        assert_eq!(parse_information(pci, "Bus Location: 0000:15:00.0\n"), None);
        let odd = parse_information(pci, "GPU UUID: GPU-\u{1b}[2J\nDevice Minor: -1\n").unwrap();
        assert_eq!((odd.uuid, odd.minor), (None, None));
    }

    #[test]
    fn an_index_maps_only_when_bus_order_and_minor_agree() {
        let e = |bus: u8, minor: Option<u32>| GpuEntry {
            pci: Bdf {
                domain: 0,
                bus,
                dev: 0,
                func: 0,
            },
            uuid: None,
            minor,
        };
        let agree = [e(0x0f, Some(0)), e(0x15, Some(1))];
        assert_eq!(resolve_in(&agree, &GpuId::Index(1)).unwrap().bus, 0x15);
        assert_eq!(
            resolve_in(&agree, &GpuId::MigIndex { gpu: 0, mig: 2 })
                .unwrap()
                .bus,
            0x0f
        );
        assert_eq!(
            resolve_in(&agree, &GpuId::Index(2)),
            Err(Unmapped::NoSuchGpu)
        );
        let swapped = [e(0x0f, Some(1)), e(0x15, Some(0))];
        assert!(matches!(
            resolve_in(&swapped, &GpuId::Index(0)),
            Err(Unmapped::IndexDisagrees { by_bus_order: Some(a), by_minor: Some(b) }) if a.bus == 0x0f && b.bus == 0x15
        ));
        let no_minor = [e(0x0f, None)];
        assert!(matches!(
            resolve_in(&no_minor, &GpuId::Index(0)),
            Err(Unmapped::IndexDisagrees { by_minor: None, .. })
        ));
    }
}
