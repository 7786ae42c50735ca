//! A PCI function's place in the PCIe tree, read from sysfs the way NCCL
//! reads it (docs/topology.md, "How sysfs becomes NCCL's tree"):
//!
//! - The place is the link target of `bus/pci/devices/<bdf>`: the bridges
//!   under `devices/pciDDDD:BB/` down to the function (NCCL takes the
//!   realpath of the same link, src/os/linux.cc:631-641).
//! - NCCL's parent of a PCI node is the directory two levels up, so each
//!   switch is one node, its upstream port; the downstream port in between
//!   and the root port below the host bridge are skipped. A non-BDF component
//!   one or two levels up ends the climb at the CPU, keyed by the top node's
//!   `numa_node` (xml.cc:748-795, BDF test xml.cc:579-587).
//! - Broadcom Gen4/Gen5 switches that show two levels are fused into one
//!   (topo.cc:195-268, `ncclTopoFlattenBcmSwitches`), by the IDs NCCL packs
//!   from `vendor`, `device`, `subsystem_vendor`, `subsystem_device`
//!   (topo.cc:521-534).
//! - Link speed and width: the smaller of the function's and its parent
//!   port's `max_link_*` (xml.cc:663-728), GB/s = width x rate / 80
//!   (topo.cc:545-557, 649-658).
//!
//! A VF's directory sits beside its PF's under the same downstream port, so
//! it has the PF's place; NCCL's IB plugin also files every port and VF of a
//! NIC under function 0 of the card (src/transport/net_ib/init.cc:60-80).

use crate::sysfs::{SysfsError, View};
use std::fmt;
use std::path::{Path, PathBuf};

/// A PCI function address `DDDD:BB:DD.F`, lowercase, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    pub domain: u16,
    pub bus: u8,
    pub dev: u8,
    pub func: u8,
}

impl Bdf {
    /// Exactly NCCL's shape (12 characters, xml.cc:579-587), plus the PCI
    /// limits: device < 32, function < 8.
    pub fn parse(s: &str) -> Option<Bdf> {
        let b = s.as_bytes();
        if b.len() != 12 || b[4] != b':' || b[7] != b':' || b[10] != b'.' {
            return None;
        }
        // Placing a pod's functions parses a few hundred addresses: digit by
        // digit, not through from_str_radix's checks (docs/performance.md).
        let hex = |r: std::ops::Range<usize>| {
            b[r].iter().try_fold(0u16, |v, &c| {
                let d = (c as char).to_digit(16)?;
                Some(v << 4 | d as u16)
            })
        };
        let (domain, bus, dev, func) = (hex(0..4)?, hex(5..7)?, hex(8..10)?, hex(11..12)?);
        if dev >= 32 || func >= 8 {
            return None;
        }
        Some(Bdf {
            domain,
            bus: bus as u8,
            dev: dev as u8,
            func: func as u8,
        })
    }
}

impl Bdf {
    /// `DDDD:BB:DD.F`, lowercase, as the kernel names the function; the
    /// bytes of `Display` without a formatter (a port scan names every
    /// function of the node).
    pub fn name(&self) -> [u8; 12] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let h = |v: u16, at: u32| HEX[(v >> at) as usize & 0xf];
        let (d, b, v) = (self.domain, u16::from(self.bus), u16::from(self.dev));
        [
            h(d, 12),
            h(d, 8),
            h(d, 4),
            h(d, 0),
            b':',
            h(b, 4),
            h(b, 0),
            b':',
            h(v, 4),
            h(v, 0),
            b'.',
            HEX[usize::from(self.func & 0xf)],
        ]
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // ASCII by construction.
        f.pad(std::str::from_utf8(&self.name()).unwrap_or_default())
    }
}

impl serde::Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The identity registers NCCL reads (`class` is the 24-bit class code).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PciIds {
    pub class: Option<u32>,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub subsystem_vendor: Option<u16>,
    pub subsystem_device: Option<u16>,
}

impl PciIds {
    /// NCCL's 64-bit device word: vendor, device, subsystem vendor and
    /// subsystem device, 16 bits each, a missing one counting 0
    /// (topo.cc:521-534).
    pub fn nccl_device(&self) -> u64 {
        let w = |v: Option<u16>, shift: u32| u64::from(v.unwrap_or(0)) << shift;
        w(self.vendor, 48)
            | w(self.device, 32)
            | w(self.subsystem_vendor, 16)
            | w(self.subsystem_device, 0)
    }

    /// Class 0x03xxxx: NCCL types such a PCI node GPU (topo.cc:536-544).
    pub fn is_display(&self) -> bool {
        self.class.is_some_and(|c| c >> 16 == 0x03)
    }
}

/// A link as NCCL rates it: the slower end's rate and the narrower width.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Transfer rate in GT/s (`max_link_speed`).
    pub gts: f32,
    /// Lanes (`max_link_width`); NCCL counts 0 as 16 (topo.cc:655).
    pub width: u32,
}

impl Link {
    /// GB/s: lanes x NCCL's per-lane figure (x100 Mb/s: 2.5 GT/s -> 15 ...
    /// 64 GT/s -> 480, anything else 60) / 80 (topo.cc:545-557, 657).
    pub fn gbytes_per_s(&self) -> f32 {
        // Tenths of GT/s, as the kernel prints them ("2.5", "16.0").
        let rate = match (self.gts * 10.0).round() as u32 {
            25 => 15.0,
            50 => 30.0,
            80 => 60.0,
            160 => 120.0,
            320 => 240.0,
            640 => 480.0,
            _ => 60.0,
        };
        let width = if self.width == 0 { 16 } else { self.width };
        width as f32 * rate / 80.0
    }
}

/// One of NCCL's PCI switch nodes above a function: the switch's upstream
/// port, with the link up to its own parent.
#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    pub bdf: Bdf,
    pub ids: PciIds,
    pub link: Option<Link>,
}

/// A PCI function and its place in the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct PciNode {
    pub bdf: Bdf,
    /// The directory above the topmost bridge, the host bridge (PCIe root
    /// complex) `pciDDDD:BB`; NCCL stops its climb there.
    pub host: String,
    /// Every bridge from the host bridge down to the function, top first:
    /// `bridges[0]` is the root port.
    pub bridges: Vec<Bdf>,
    /// NCCL's CPU node: `numa_node` of the topmost NCCL node (`None` when
    /// unreadable; the kernel writes -1 for "no node").
    pub numa: Option<i32>,
    pub ids: PciIds,
    pub link: Option<Link>,
    /// NCCL's switch nodes above the function, nearest first, after fusing.
    pub switches: Vec<Switch>,
    /// Switch nodes NCCL fuses into their parent (Broadcom two-level
    /// switches), nearest first: shown, not walked.
    pub fused: Vec<Bdf>,
    /// For a VF, its PF (`physfn`).
    pub physfn: Option<Bdf>,
    /// The RDMA devices of the function (`infiniband/<dev>`).
    pub rdma: Vec<String>,
}

impl PciNode {
    /// The PCIe root the function hangs from: host bridge and root port.
    pub fn root(&self) -> String {
        match self.bridges.first() {
            Some(rp) => format!("{}/{rp}", self.host),
            None => self.host.clone(),
        }
    }
}

/// Why a function could not be placed. Addresses are shown only once they
/// parsed as one; file content never.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocateError {
    /// Not of the form `DDDD:BB:DD.F`.
    BadAddress,
    /// No `bus/pci/devices/<bdf>`, or not a link.
    NotFound(Bdf),
    /// The link could not be read, or points outside or oddly.
    Link(Bdf, SysfsError),
    /// The link target is not `devices/.../<bdf>` through bridges.
    NotInTree(Bdf),
    /// A directory that had to be listed could not be.
    List(SysfsError),
}

impl fmt::Display for LocateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocateError::BadAddress => f.write_str("not a PCI address of the form DDDD:BB:DD.F"),
            LocateError::NotFound(b) => write!(f, "PCI function {b} is not in bus/pci/devices"),
            LocateError::Link(b, e) => write!(f, "bus/pci/devices/{b} cannot be placed: {e}"),
            LocateError::NotInTree(b) => {
                write!(
                    f,
                    "bus/pci/devices/{b} does not point into devices/ through PCI bridges"
                )
            }
            LocateError::List(e) => write!(f, "bus/pci/devices cannot be listed: {e}"),
        }
    }
}

impl std::error::Error for LocateError {}

const DEVICES: &str = "bus/pci/devices";

/// The function `bdf` (as the device plugin or Multus names it) placed in
/// the tree of `view`.
pub fn locate(view: &View, bdf: &str) -> Result<PciNode, LocateError> {
    Placer::new(view).locate(bdf)
}

/// Every function of the node (that can be placed) with an RDMA device and
/// no `physfn`: the node's ports (a dual-port NIC has two), what a VF can be
/// carved from.
pub fn rdma_ports(view: &View) -> Result<Vec<PciNode>, LocateError> {
    Placer::new(view).rdma_ports()
}

/// Every GPU-class function (class 0x03) of NVIDIA (0x10de) or AMD (0x1002);
/// the board's VGA controller is neither.
pub fn gpus(view: &View) -> Result<Vec<PciNode>, LocateError> {
    Placer::new(view).gpus()
}

/// A directory's `max_link_speed` (GT/s) and `max_link_width`.
type Maxima = (Option<f32>, Option<u32>);

/// A function's link target as components, and where its BDFs start
/// (after the host bridge); shared, not copied, by every look at it.
type Place = std::rc::Rc<(Vec<String>, usize)>;

/// What a function showed a `Placer`, each part once read.
#[derive(Default)]
struct Seen {
    /// Its `bus/pci/devices` link, as components, and where its BDFs start.
    place: Option<Result<Place, LocateError>>,
    physfn: Option<Option<String>>,
    rdma: Option<Vec<String>>,
}

/// What was read of a directory, by its path. A few dozen directories per
/// pod: a scan beats a hash map, whose hasher and table would add to a
/// binary copied to every node.
struct Memo<T>(std::cell::RefCell<Vec<(PathBuf, T)>>);

impl<T: Copy> Memo<T> {
    fn new() -> Memo<T> {
        Memo(std::cell::RefCell::new(Vec::new()))
    }

    fn get_or(&self, dir: &Path, read: impl FnOnce() -> T) -> T {
        // Bytes, not `Path`'s component-wise equality: a lookup is a memcmp.
        let key = dir.as_os_str();
        if let Some((_, v)) = self.0.borrow().iter().find(|(d, _)| d.as_os_str() == key) {
            return *v;
        }
        let v = read();
        self.0.borrow_mut().push((dir.to_owned(), v));
        v
    }
}

/// Places functions, reading each bridge's attributes once: every function
/// under a root climbs the same switches, and a pod's verdict places all of
/// the node's ports, its GPUs and its rails. Measured on the BM.GPU.B4.8
/// tree (docs/topology.md, "Cost"): locating every function for the ports
/// took 18-30 ms, each of the ~3,300 attribute files an `openat2`, a
/// `statx`, a read and a close.
pub struct Placer<'v> {
    view: &'v View,
    ids: Memo<PciIds>,
    maxima: Memo<Maxima>,
    numa: Memo<Option<i32>>,
    /// What each function showed, by address: a port scan looks at every
    /// function's link, `physfn` and `infiniband/`, and then places the
    /// ports it found, which reads them again (a 16-rail pod's first rail:
    /// 32 of its 40 functions).
    seen: std::cell::RefCell<Vec<(Bdf, Seen)>>,
    /// `bus/pci/devices`, opened once for all its links.
    devices: std::cell::OnceCell<Result<crate::sysfs::Links, SysfsError>>,
    /// Every attribute NCCL reads (the node views of `inspect`), or only
    /// what a path type needs (`for_verdict`).
    full: bool,
}

impl<'v> Placer<'v> {
    pub fn new(view: &'v View) -> Placer<'v> {
        Placer {
            view,
            ids: Memo::new(),
            maxima: Memo::new(),
            numa: Memo::new(),
            seen: Default::default(),
            devices: Default::default(),
            full: true,
        }
    }

    /// A placer for a verdict: a path type is the switches' BDFs (their IDs,
    /// which decide Broadcom's fusing) and the NUMA nodes (`path::between`),
    /// never a function's own IDs or any link's rate, so those are not read
    /// (`ids` default, `link` none). A pod's first rail placed 40 functions
    /// of the bench's node reading 649 files; 7 of a function's ~10 were
    /// these (docs/performance.md, "The placement check").
    pub fn for_verdict(view: &'v View) -> Placer<'v> {
        Placer {
            full: false,
            ..Placer::new(view)
        }
    }

    /// [`locate`], with this placer's cache.
    pub fn locate(&self, bdf: &str) -> Result<PciNode, LocateError> {
        let view = self.view;
        let (bdf, place) = self.place(bdf)?;
        let (comps, first_bdf) = (&place.0, place.1);
        let host = comps[first_bdf - 1].clone();
        let chain: Vec<Bdf> = comps[first_bdf..]
            .iter()
            .filter_map(|c| Bdf::parse(c))
            .collect();
        let dir_of = |upto: usize| -> PathBuf { comps[..=upto].iter().collect() };
        let dev_at = first_bdf + chain.len() - 1;
        let dev_dir = dir_of(dev_at);

        // NCCL's nodes: two levels up each time, while both levels are BDFs.
        let mut switches = Vec::new();
        let mut at = dev_at;
        while at >= first_bdf + 2 {
            at -= 2;
            let sw_dir = dir_of(at);
            switches.push(Switch {
                bdf: Bdf::parse(&comps[at]).expect("checked above"),
                ids: self.ids_of(&sw_dir),
                link: self
                    .full
                    .then(|| self.link(&sw_dir, at > first_bdf))
                    .flatten(),
            });
        }
        let top_dir = dir_of(at);
        let numa = self.numa.get_or(&top_dir, || {
            view.read_trimmed(&top_dir.join("numa_node"))
                .and_then(|s| s.parse::<i32>().ok())
        });
        let fused = fuse_bcm(&mut switches);
        let physfn = self.physfn_name(bdf, &dev_dir).and_then(|n| Bdf::parse(&n));
        let rdma = self.rdma_names(bdf, &dev_dir);
        Ok(PciNode {
            bdf,
            host,
            bridges: chain[..chain.len() - 1].to_vec(),
            numa,
            ids: if self.full {
                self.ids_of(&dev_dir)
            } else {
                PciIds::default()
            },
            link: self
                .full
                .then(|| self.link(&dev_dir, dev_at > first_bdf))
                .flatten(),
            switches,
            fused,
            physfn,
            rdma,
        })
    }

    /// The link target of `bus/pci/devices/<bdf>` as components, and where
    /// its chain of BDFs starts (after the host bridge).
    fn place(&self, bdf: &str) -> Result<(Bdf, Place), LocateError> {
        // Either case: hex digits parse as both.
        let bdf = Bdf::parse(bdf).ok_or(LocateError::BadAddress)?;
        let place = self.seen(
            bdf,
            |s| &s.place,
            |s, v| s.place = Some(v),
            || self.read_place(bdf).map(std::rc::Rc::new),
        )?;
        Ok((bdf, place))
    }

    fn read_place(&self, bdf: Bdf) -> Result<(Vec<String>, usize), LocateError> {
        let devices = self
            .devices
            .get_or_init(|| self.view.links(Path::new(DEVICES)));
        let name = bdf.name();
        let target = match devices {
            Ok(links) => links.target(std::str::from_utf8(&name).unwrap_or_default()),
            Err(e) => Err(e.clone()),
        };
        let target = target.map_err(|e| match e {
            SysfsError::Missing | SysfsError::Os(nix::errno::Errno::EINVAL) => {
                LocateError::NotFound(bdf)
            }
            e => LocateError::Link(bdf, e),
        })?;
        let comps: Vec<String> = target
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        // devices/<host>/<bdf>.../<bdf>: the last is the function itself.
        if comps.len() < 3
            || comps[0] != "devices"
            || Bdf::parse(&comps[comps.len() - 1]) != Some(bdf)
        {
            return Err(LocateError::NotInTree(bdf));
        }
        // NCCL climbs while components look like BDFs; the first that does
        // not is the CPU's (xml.cc:767).
        let first_bdf = comps
            .iter()
            .rposition(|c| Bdf::parse(c).is_none())
            .map_or(0, |i| i + 1);
        if first_bdf < 2 {
            return Err(LocateError::NotInTree(bdf));
        }
        Ok((comps, first_bdf))
    }

    /// The node's RDMA ports under the PCIe roots `roots` ([`PciNode::root`]):
    /// only these can be within PXB of a function under those roots, since
    /// the climbs of two functions meet at a switch only below one root port
    /// (docs/topology.md, "Path types"). Read from the link alone, a port
    /// elsewhere is never placed.
    pub fn rdma_ports_under(&self, roots: &[String]) -> Result<Vec<PciNode>, LocateError> {
        // Each root as (host bridge, root port), once.
        let mut roots: Vec<(&str, Option<&str>)> = roots
            .iter()
            .map(|r| match r.split_once('/') {
                Some((host, port)) => (host, Some(port)),
                None => (r.as_str(), None),
            })
            .collect();
        roots.sort_unstable();
        roots.dedup();
        let under = |dir: &Path| {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            self.place(name).is_ok_and(|(_, place)| {
                let (comps, first) = (&place.0, place.1);
                let port = (comps.len() - first > 1).then(|| comps[first].as_str());
                roots.contains(&(comps[first - 1].as_str(), port))
            })
        };
        self.functions(
            |dir| under(dir) && self.maybe_port(dir),
            |n| !n.rdma.is_empty() && n.physfn.is_none(),
        )
    }

    fn maybe_port(&self, dir: &Path) -> bool {
        let Some(bdf) = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(Bdf::parse)
        else {
            return false;
        };
        !self.rdma_names(bdf, dir).is_empty() && self.physfn_name(bdf, dir).is_none()
    }

    /// What `bdf`, at `dir` (its link or its place), showed of `field`, read
    /// once.
    fn seen<T: Clone>(
        &self,
        bdf: Bdf,
        get: impl Fn(&Seen) -> &Option<T>,
        set: impl FnOnce(&mut Seen, T),
        read: impl FnOnce() -> T,
    ) -> T {
        // Kept in address order, found by bisection: a port scan asks
        // about every function of the node a few times each.
        let at = |seen: &[(Bdf, Seen)]| seen.binary_search_by(|(b, _)| b.cmp(&bdf));
        {
            let seen = self.seen.borrow();
            if let Some(v) = at(&seen).ok().and_then(|i| get(&seen[i].1).clone()) {
                return v;
            }
        }
        let v = read();
        let mut seen = self.seen.borrow_mut();
        let i = match at(&seen) {
            Ok(i) => i,
            Err(i) => {
                seen.insert(i, (bdf, Seen::default()));
                i
            }
        };
        set(&mut seen[i].1, v.clone());
        v
    }

    /// The name `physfn` points at (a VF's PF), when it is a link.
    fn physfn_name(&self, bdf: Bdf, dir: &Path) -> Option<String> {
        self.seen(
            bdf,
            |s| &s.physfn,
            |s, v| s.physfn = Some(v),
            || self.view.link_name(&dir.join("physfn")).ok(),
        )
    }

    /// The RDMA devices under `infiniband/` (names fit for a message).
    fn rdma_names(&self, bdf: Bdf, dir: &Path) -> Vec<String> {
        self.seen(
            bdf,
            |s| &s.rdma,
            |s, v| s.rdma = Some(v),
            || {
                let names = self.view.list(&dir.join("infiniband")).unwrap_or_default();
                names.into_iter().filter(|n| safe_name(n)).collect()
            },
        )
    }

    /// [`rdma_ports`]. A function is placed only once it has shown an RDMA
    /// device and no `physfn`: two cheap reads, where placing it reads a
    /// few dozen files.
    pub fn rdma_ports(&self) -> Result<Vec<PciNode>, LocateError> {
        self.functions(
            |dir| self.maybe_port(dir),
            |n| !n.rdma.is_empty() && n.physfn.is_none(),
        )
    }

    /// [`gpus`], placing only the functions whose class and vendor say GPU.
    pub fn gpus(&self) -> Result<Vec<PciNode>, LocateError> {
        let is_gpu = |ids: &PciIds| ids.is_display() && matches!(ids.vendor, Some(0x10de | 0x1002));
        let maybe = |dir: &Path| {
            hex_attr(self.view, dir, "class").is_some_and(|c| c >> 16 == 0x03)
                && matches!(hex_attr(self.view, dir, "vendor"), Some(0x10de | 0x1002))
        };
        self.functions(maybe, |n| is_gpu(&n.ids))
    }

    fn functions(
        &self,
        maybe: impl Fn(&Path) -> bool,
        keep: impl Fn(&PciNode) -> bool,
    ) -> Result<Vec<PciNode>, LocateError> {
        let names = self
            .view
            .list(Path::new(DEVICES))
            .map_err(LocateError::List)?;
        Ok(names
            .iter()
            .filter(|n| Bdf::parse(n).is_some())
            .filter(|n| maybe(&Path::new(DEVICES).join(n)))
            .filter_map(|n| self.locate(n).ok())
            .filter(|n| keep(n))
            .collect())
    }

    fn ids_of(&self, dir: &Path) -> PciIds {
        // A verdict reads a switch's IDs for Broadcom's fusing alone, which
        // packs no class.
        self.ids.get_or(dir, || read_ids(self.view, dir, self.full))
    }

    /// Read apart from the IDs: of a function's parent port only these count.
    fn maxima_of(&self, dir: &Path) -> Maxima {
        self.maxima.get_or(dir, || {
            let view = self.view;
            let speed = view
                .read_trimmed(&dir.join("max_link_speed"))
                .and_then(|s| s.split_whitespace().next()?.parse::<f32>().ok())
                .filter(|g| g.is_finite() && *g > 0.0);
            let width = view
                .read_trimmed(&dir.join("max_link_width"))
                .and_then(|s| s.parse::<u32>().ok());
            (speed, width)
        })
    }

    /// The link as NCCL rates it: the smaller of the function's and, when
    /// the parent is a bridge, the parent port's maxima (xml.cc:679-690,
    /// 712-719).
    fn link(&self, dir: &Path, parent_is_bridge: bool) -> Option<Link> {
        let (own_s, own_w) = self.maxima_of(dir);
        let up = dir
            .parent()
            .filter(|_| parent_is_bridge)
            .map(|p| self.maxima_of(p));
        let (up_s, up_w) = up.unwrap_or((None, None));
        let gts = match (own_s, up_s) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        let width = match (own_w, up_w) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(0),
        };
        Some(Link { gts, width })
    }
}

fn safe_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

fn hex_attr(view: &View, dir: &Path, name: &str) -> Option<u32> {
    let s = view.read_trimmed(&dir.join(name))?;
    u32::from_str_radix(s.strip_prefix("0x").unwrap_or(&s), 16).ok()
}

fn read_ids(view: &View, dir: &Path, class: bool) -> PciIds {
    let h16 = |n| hex_attr(view, dir, n).and_then(|v| u16::try_from(v).ok());
    PciIds {
        class: class
            .then(|| hex_attr(view, dir, "class"))
            .flatten()
            .filter(|c| *c <= 0xff_ffff),
        vendor: h16("vendor"),
        device: h16("device"),
        subsystem_vendor: h16("subsystem_vendor"),
        subsystem_device: h16("subsystem_device"),
    }
}

/// NCCL's Broadcom generation of a switch, at `level` 0 (the parent) or 1
/// (the sub-switch): Gen4 PEX88000 shows itself as two levels with the same
/// IDs; Gen5 PEX89000 as a parent `...0xxx` and subs `...1xxx`
/// (topo.cc:199-203).
fn bcm_gen(device: u64, level: u64) -> u8 {
    let masked = device & 0xffff_ffff_ffff_f000;
    if masked == 0x1000_c010_1000_a000 {
        4
    } else if masked == 0x1000_c030_1000_0000 | (level * 0x1000) {
        5
    } else {
        0
    }
}

/// `ncclTopoFlattenBcmSwitches` on one chain (nearest first): a Broadcom
/// parent absorbs its direct sub-switch of the same generation, once; the
/// sub's children become the parent's. NCCL visits parents before their
/// children and marks a parent once it has merged (topo.cc:204-268), so a
/// walk from the top down, each node judged once, decides alike for every
/// chain through a switch. Returns the fused nodes, nearest first.
fn fuse_bcm(chain: &mut Vec<Switch>) -> Vec<Bdf> {
    let mut fused = Vec::new();
    let mut i = chain.len();
    while i >= 2 {
        let (parent, sub) = (&chain[i - 1], &chain[i - 2]);
        let gen = bcm_gen(parent.ids.nccl_device(), 0);
        if gen != 0 && bcm_gen(sub.ids.nccl_device(), 1) == gen {
            fused.push(sub.bdf);
            chain.remove(i - 2);
            // The parent is marked; its new child, the sub's child, is
            // judged next as a parent of its own.
            i -= 2;
        } else {
            i -= 1;
        }
    }
    fused.reverse();
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_nccl_shapes_them() {
        let b = Bdf::parse("0000:0c:00.1").unwrap();
        assert_eq!(b.to_string(), "0000:0c:00.1");
        assert_eq!(
            Bdf::parse("0000:0C:1f.7").unwrap().to_string(),
            "0000:0c:1f.7"
        );
        for bad in [
            "0000:0c:00",
            "10000:00:00.0",
            "0000:0c:20.0",
            "0000:0c:00.8",
            "0000-0c:00.0",
            "pci0000:00",
            "+000:0c:00.0",
        ] {
            assert_eq!(Bdf::parse(bad), None, "{bad}");
        }
    }

    fn sw(bdf: &str, v: u16, d: u16, sv: u16, sd: u16) -> Switch {
        Switch {
            bdf: Bdf::parse(bdf).unwrap(),
            ids: PciIds {
                class: Some(0x060400),
                vendor: Some(v),
                device: Some(d),
                subsystem_vendor: Some(sv),
                subsystem_device: Some(sd),
            },
            link: None,
        }
    }

    #[test]
    fn broadcom_two_level_switches_fuse_once() {
        // GPU side of a DGX A100 root: NVIDIA-board bridge, BCM sub, BCM top.
        let mut chain = vec![
            sw("0000:0d:00.0", 0x1000, 0xc010, 0x10de, 0x13b8),
            sw("0000:0a:00.0", 0x1000, 0xc010, 0x1000, 0xa096),
            sw("0000:01:00.0", 0x1000, 0xc010, 0x1000, 0xa096),
        ];
        assert_eq!(
            fuse_bcm(&mut chain),
            vec![Bdf::parse("0000:0a:00.0").unwrap()]
        );
        let left: Vec<String> = chain.iter().map(|s| s.bdf.to_string()).collect();
        assert_eq!(left, ["0000:0d:00.0", "0000:01:00.0"]);
        // Three Gen4 levels: the top absorbs one; the next absorbs the third.
        let mut three = vec![
            sw("0000:04:00.0", 0x1000, 0xc010, 0x1000, 0xa096),
            sw("0000:03:00.0", 0x1000, 0xc010, 0x1000, 0xa096),
            sw("0000:02:00.0", 0x1000, 0xc010, 0x1000, 0xa096),
            sw("0000:01:00.0", 0x1000, 0xc010, 0x1000, 0xa096),
        ];
        assert_eq!(fuse_bcm(&mut three).len(), 2);
        assert_eq!(three.len(), 2);
        // Gen5: the parent's subsystem device is 0x0xxx, its subs' 0x1xxx.
        let mut g5 = vec![
            sw("0000:02:00.0", 0x1000, 0xc030, 0x1000, 0x1100),
            sw("0000:01:00.0", 0x1000, 0xc030, 0x1000, 0x0100),
        ];
        assert_eq!(fuse_bcm(&mut g5).len(), 1);
        let mut g5_upside_down = vec![
            sw("0000:02:00.0", 0x1000, 0xc030, 0x1000, 0x0100),
            sw("0000:01:00.0", 0x1000, 0xc030, 0x1000, 0x1100),
        ];
        assert!(fuse_bcm(&mut g5_upside_down).is_empty());
        // Another vendor's switch is never fused.
        let mut plx = vec![
            sw("0000:02:00.0", 0x10b5, 0x8747, 0x10b5, 0x8747),
            sw("0000:01:00.0", 0x10b5, 0x8747, 0x10b5, 0x8747),
        ];
        assert!(fuse_bcm(&mut plx).is_empty());
    }

    #[test]
    fn link_rates_follow_nccls_table() {
        assert_eq!(
            Link {
                gts: 16.0,
                width: 16
            }
            .gbytes_per_s(),
            24.0
        );
        assert_eq!(
            Link {
                gts: 32.0,
                width: 16
            }
            .gbytes_per_s(),
            48.0
        );
        assert_eq!(Link { gts: 8.0, width: 0 }.gbytes_per_s(), 12.0);
        assert_eq!(
            Link {
                gts: 12.0,
                width: 8
            }
            .gbytes_per_s(),
            6.0
        );
    }
}
