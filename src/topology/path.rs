//! NCCL's path types and the GPUDirect RDMA rule (docs/topology.md, "Path
//! types" and "When NCCL uses GPUDirect RDMA").

use super::pci::PciNode;
use std::fmt;

/// NCCL's path types, with NCCL's numbers (src/include/graph.h:116-154,
/// names src/graph/topo.cc:34). From sysfs alone a GPU-NIC path is PIX, PXB,
/// PHB or SYS; the others come from NVLink, C2C or PXN and are here so a GDR
/// level can name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathType {
    Loc = 0,
    Nvl = 1,
    Nvb = 2,
    C2c = 3,
    /// At most one PCIe switch.
    Pix = 4,
    /// Several PCIe switches, no host bridge.
    Pxb = 5,
    P2c = 6,
    Pxn = 7,
    /// Through a CPU (a NUMA node's host bridges count as one).
    Phb = 8,
    /// Across CPUs (NUMA nodes).
    Sys = 9,
    Net = 10,
    Dis = 11,
}

const NAMES: [&str; 12] = [
    "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS",
];
const ALL: [PathType; 12] = [
    PathType::Loc,
    PathType::Nvl,
    PathType::Nvb,
    PathType::C2c,
    PathType::Pix,
    PathType::Pxb,
    PathType::P2c,
    PathType::Pxn,
    PathType::Phb,
    PathType::Sys,
    PathType::Net,
    PathType::Dis,
];

/// NCCL's default NCCL_NET_GDR_LEVEL without C2C: PXB. NCCL 2.30 defaults to
/// P2C when NCCL_NET_GDR_C2C=1 (its default, paths.cc:465, 511), but P2C
/// only arises from a C2C link, which sysfs does not show: on a PCIe-only
/// node both levels pick the same rails.
pub const DEFAULT_GDR_LEVEL: PathType = PathType::Pxb;

impl PathType {
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// An NCCL_NET_GDR_LEVEL value as `ncclGetLevel` reads it
    /// (paths.cc:243-280): a name from LOC to SYS, exactly; or an old-style
    /// number, 0..5 being LOC, PIX, PXB, PHB, SYS, SYS and larger ones SYS.
    /// NCCL reads the number with strtol; only decimal digits are taken here.
    pub fn parse_level(s: &str) -> Option<PathType> {
        if let Some(i) = NAMES[..=PathType::Sys as usize]
            .iter()
            .position(|n| *n == s)
        {
            return Some(ALL[i]);
        }
        if !s.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
        let old = digits.parse::<u64>().unwrap_or(u64::MAX).min(5) as usize;
        Some(
            [
                PathType::Loc,
                PathType::Pix,
                PathType::Pxb,
                PathType::Phb,
                PathType::Sys,
                PathType::Sys,
            ][old],
        )
    }
}

impl fmt::Display for PathType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for PathType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The path type between two functions, as NCCL's breadth-first search sets
/// it over its tree (paths.cc:38-130): the type of a path is the worst of its
/// links; a device's link to its switch is PIX (LINK_PCI), a switch-to-switch
/// link PXB (paths.cc:88), a link to a CPU PHB (paths.cc:90), and CPUs are
/// joined by SYS links (topo.cc:270-283). So: one switch node in common at
/// the bottom of both climbs is PIX; a common switch further up is PXB; none
/// but the same NUMA node is PHB; different NUMA nodes SYS.
pub fn between(a: &PciNode, b: &PciNode) -> PathType {
    if a.bdf == b.bdf {
        return PathType::Loc;
    }
    match common_switch(a, b) {
        Some((0, 0)) => PathType::Pix,
        Some(_) => PathType::Pxb,
        None if a.numa == b.numa => PathType::Phb,
        None => PathType::Sys,
    }
}

/// Where the climbs from `a` and `b` first meet: indexes into both
/// `switches`.
fn common_switch(a: &PciNode, b: &PciNode) -> Option<(usize, usize)> {
    a.switches.iter().enumerate().find_map(|(i, sa)| {
        b.switches
            .iter()
            .position(|sb| sb.bdf == sa.bdf)
            .map(|j| (i, j))
    })
}

/// The narrowest PCIe link on the path in GB/s, as NCCL rates links
/// (`pci::Link::gbytes_per_s`); `None` when a link's rate is unknown. The
/// link between two CPUs is not PCIe and not counted. NCCL ranks a GPU's
/// NICs by path bandwidth first and type second (`ncclTopoGetLocal`,
/// topo.cc:1943-1972); the GDR rule looks at the type only.
pub fn pcie_bw(a: &PciNode, b: &PciNode) -> Option<f32> {
    let (ua, ub) = match common_switch(a, b) {
        Some((i, j)) => (i, j),
        None => (a.switches.len(), b.switches.len()),
    };
    let mut min = f32::INFINITY;
    for (n, upto) in [(a, ua), (b, ub)] {
        min = min.min(n.link?.gbytes_per_s());
        for s in &n.switches[..upto] {
            min = min.min(s.link?.gbytes_per_s());
        }
    }
    Some(min)
}

/// NCCL's GPUDirect RDMA rule (`ncclTopoCheckGdr`, paths.cc:468-549): GDR is
/// used when the GPU-NIC path type is within the level (both sides
/// supporting GDR, which sysfs cannot tell). A PXN path is judged by the
/// relay GPU's own path instead (paths.cc:515-526), which is why a rail near
/// any of the pod's NVLink-connected GPUs serves all of them.
pub fn gdr(path: PathType, level: PathType) -> bool {
    path <= level
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_read_as_nccl_reads_them() {
        assert_eq!(PathType::parse_level("PIX"), Some(PathType::Pix));
        assert_eq!(PathType::parse_level("PHB"), Some(PathType::Phb));
        assert_eq!(PathType::parse_level("P2C"), Some(PathType::P2c));
        assert_eq!(PathType::parse_level("SYS"), Some(PathType::Sys));
        // NET and DIS are past the loop's end; lowercase is not a name.
        assert_eq!(PathType::parse_level("NET"), None);
        assert_eq!(PathType::parse_level("pxb"), None);
        assert_eq!(PathType::parse_level("0"), Some(PathType::Loc));
        assert_eq!(PathType::parse_level("1"), Some(PathType::Pix));
        assert_eq!(PathType::parse_level("2"), Some(PathType::Pxb));
        assert_eq!(PathType::parse_level("3"), Some(PathType::Phb));
        assert_eq!(PathType::parse_level("4"), Some(PathType::Sys));
        assert_eq!(
            PathType::parse_level("99999999999999999999"),
            Some(PathType::Sys)
        );
        assert_eq!(PathType::parse_level(""), None);
        assert_eq!(PathType::Pxb.to_string(), "PXB");
        assert_eq!(serde_json::to_string(&PathType::Sys).unwrap(), "\"SYS\"");
        assert!(gdr(PathType::Pxb, DEFAULT_GDR_LEVEL) && !gdr(PathType::Phb, DEFAULT_GDR_LEVEL));
    }
}
