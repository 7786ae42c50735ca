//! Text for operators and logs, from a verdict or placed functions only.
//! Every name that came from outside (a plugin's ID, an interface, a sysfs
//! directory) goes through `log::escape`.

use super::pci::PciNode;
use super::verdict::Verdict;
use crate::log::escape;
use std::collections::BTreeMap;
// Writing to a String cannot fail.
use std::fmt::Write;

/// The pod's rails against its GPUs with NCCL's path types, laid out as
/// `nvidia-smi topo -m` lays out its NIC rows, then the legends. The last
/// column says whether the rail is near one of the pod's GPUs at the level.
pub fn matrix(v: &Verdict) -> String {
    let cols: Vec<String> = (0..v.gpus.len()).map(|i| format!("GPU{i}")).collect();
    let width = cols.iter().map(String::len).max().unwrap_or(0).max(4) + 2;
    let row_label = (0..v.rails.len())
        .map(|i| format!("NIC{i}").len())
        .max()
        .unwrap_or(4)
        .max(4)
        + 2;
    let mut out = format!("{:row_label$}", "");
    for c in &cols {
        let _ = write!(out, "{c:width$}");
    }
    let _ = writeln!(out, "near at {}", v.level);
    for (i, r) in v.rails.iter().enumerate() {
        let _ = write!(out, "{:row_label$}", format!("NIC{i}"));
        for p in &r.paths {
            let _ = write!(out, "{:width$}", p.name());
        }
        let _ = writeln!(out, "{}", if r.near { "near" } else { "far" });
    }
    out.push_str("\nLegend:\n  PIX = at most one PCIe switch\n  PXB = several PCIe switches, no host bridge\n");
    out.push_str(
        "  PHB = through a CPU's host bridge (one NUMA node)\n  SYS = across NUMA nodes\n",
    );
    if !v.gpus.is_empty() {
        out.push_str("\nGPU Legend:\n");
        for (i, g) in v.gpus.iter().enumerate() {
            let _ = writeln!(out, "  GPU{i}: {} ({})", escape(&g.id), g.pci);
        }
    }
    if !v.rails.is_empty() {
        out.push_str("\nNIC Legend:\n");
        for (i, r) in v.rails.iter().enumerate() {
            let _ = writeln!(out, "  NIC{i}: {} ({})", escape(&r.name), r.pci);
        }
    }
    out
}

/// One paragraph: clean, or which GPUs are starved and why, and which rails
/// are far.
pub fn summary(v: &Verdict) -> String {
    let mut out = String::new();
    if v.starved {
        out.push_str("STARVED:");
        for p in v.pools.iter().filter(|p| p.starved) {
            let gpus: Vec<String> = p.gpus.iter().map(|&i| v.gpus[i].pci.to_string()).collect();
            let part = p.gpus.len() * v.rails.len() / v.gpus.len().max(1);
            let _ = write!(
                out,
                " GPUs {} have {} near rail{} and need {} (their part of the pod's {} rails is {}; the node has {} port{} near them);",
                gpus.join(", "),
                p.near_rails,
                if p.near_rails == 1 { "" } else { "s" },
                p.need,
                v.rails.len(),
                part,
                p.node_ports,
                if p.node_ports == 1 { "" } else { "s" },
            );
        }
        out.pop();
        out.push('.');
    } else {
        let _ = write!(
            out,
            "clean: every GPU has its part of the {} rail{} near it at {}.",
            v.rails.len(),
            if v.rails.len() == 1 { "" } else { "s" },
            v.level
        );
    }
    let far: Vec<String> = v
        .rails
        .iter()
        .filter(|r| !r.near)
        .map(|r| escape(&r.name))
        .collect();
    if !far.is_empty() {
        let _ = write!(out, " Far from every GPU of the pod: {}.", far.join(", "));
    }
    out
}

/// The node's GPUs and RDMA functions grouped by NUMA node, then PCIe root
/// (host bridge and root port), in PCI order.
pub fn node_groups(gpus: &[PciNode], nics: &[PciNode]) -> String {
    // Ordered by the maps themselves: another instance of the generic
    // stable sort would cost the binary about 3.6 KB (cargo bloat).
    type Group<'a> = BTreeMap<String, BTreeMap<(super::Bdf, &'static str), &'a PciNode>>;
    let mut by_numa: BTreeMap<Option<i32>, Group> = BTreeMap::new();
    let all = gpus
        .iter()
        .map(|g| ("GPU", g))
        .chain(nics.iter().map(|n| ("NIC", n)));
    for (kind, n) in all {
        by_numa
            .entry(n.numa)
            .or_default()
            .entry(n.root())
            .or_default()
            .insert((n.bdf, kind), n);
    }
    let mut out = String::new();
    for (numa, roots) in &by_numa {
        match numa {
            Some(n) if *n >= 0 => {
                let _ = writeln!(out, "NUMA node {n}");
            }
            _ => out.push_str("NUMA node unknown\n"),
        }
        for (root, devs) in roots {
            let _ = writeln!(out, "  PCIe root {}", escape(root));
            for ((_, kind), n) in devs {
                let _ = write!(out, "    {kind} {}", n.bdf);
                if !n.rdma.is_empty() {
                    let names: Vec<String> = n.rdma.iter().map(|r| escape(r)).collect();
                    let _ = write!(out, " {}", names.join(","));
                }
                if let Some(pf) = n.physfn {
                    let _ = write!(out, " (VF of {pf})");
                }
                out.push('\n');
            }
        }
    }
    out
}
