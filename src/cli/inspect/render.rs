//! What the operator reads: the text tables, made from the collected views
//! and the checks, and nothing else (`json` makes the same from the same).

use super::args::Options;
use super::collect::{
    setting, DeviceSource, Iface, NodeView, Placement, PodFrom, PodView, QosObs, SettingObs,
    SettingState, SysctlObs,
};
use super::verdicts::{checked_address, is_link_local, locate_in, sysctl_ok, Check, NO_DEVICE_FIX};
use crate::rdma::gid::{self, GidEntry};
use crate::rdma::setting;
use crate::rdma::NetnsMode;
use crate::settings::{snake_name, SETTINGS};
// Writing to a String cannot fail: `let _ = write!(..)` drops an Ok. It
// also saves the temporary String of `push_str(&format!(..))`.
use std::fmt::Write;

/// `PASS name: reason` or `FAIL name: reason: fix`, one line so that
/// `grep FAIL` keeps the fix with its failure.
pub fn check_line(c: &Check) -> String {
    let verdict = if c.pass { "PASS" } else { "FAIL" };
    match &c.fix {
        Some(fix) if !c.pass => format!("{verdict} {}: {}: {fix}", c.name, c.reason),
        _ => format!("{verdict} {}: {}", c.name, c.reason),
    }
}

fn checks_text(checks: &[Check]) -> String {
    let mut out: String = checks.iter().map(|c| check_line(c) + "\n").collect();
    let failed = checks.iter().filter(|c| !c.pass).count();
    let n = checks.len();
    let checks_word = if n == 1 { "check" } else { "checks" };
    if failed == 0 {
        let _ = writeln!(out, "Result: PASS ({n} {checks_word})");
    } else {
        let _ = writeln!(out, "Result: FAIL ({failed} of {n} {checks_word} failed)");
    }
    out
}

/// A setting as a table cell and the rail line show it: the value, `unset`,
/// `n/a` (no file to read), `unreadable`.
pub fn setting_text(state: &SettingState) -> String {
    match state {
        SettingState::NoFile => "n/a".into(),
        SettingState::Unreadable(_) => "unreadable".into(),
        SettingState::Value(v) => setting::show(*v),
    }
}

/// The cell of registered setting `key` among those read; `-` where it was
/// not read (no device).
fn setting_cell(read: &[SettingObs], key: &str) -> String {
    setting(read, key).map_or("-".into(), |o| setting_text(&o.state))
}

fn dash(v: Option<&str>) -> String {
    v.unwrap_or("-").to_string()
}

fn mode_line(mode: NetnsMode) -> String {
    format!(
        "RDMA netns mode: {} (Y = shared, N = exclusive)\n",
        mode.letter()
    )
}

// ---------------------------------------------------------------------------
// Node view

pub fn node_text(node: &NodeView, checks: &[Check]) -> String {
    let mut out = mode_line(node.mode);
    let _ = write!(out, "sysfs: {}", node.sysfs_root.display());
    if let Some(note) = node.root_note {
        let _ = write!(out, " ({note})");
    } else if node.mode == NetnsMode::Exclusive {
        out.push_str(" (exclusive mode: devices moved into pods are not listed)");
    }
    out.push('\n');
    let _ = writeln!(out, "RDMA devices: {}", node.devices.len());
    if node.devices.is_empty() && node.missing.is_none() {
        let _ = writeln!(
            out,
            "  none under {}: {NO_DEVICE_FIX}",
            node.sysfs_root.join("class/infiniband").display()
        );
    }
    if !node.devices.is_empty() {
        let rows: Vec<Vec<String>> = node
            .devices
            .iter()
            .map(|d| {
                vec![
                    d.name.clone(),
                    dash(d.pci.as_deref()),
                    dash(d.pf.as_deref()),
                    if d.netdevs.is_empty() {
                        "-".into()
                    } else {
                        d.netdevs.join(",")
                    },
                    d.port.to_string(),
                    dash(d.port_state.as_deref()),
                ]
                .into_iter()
                .chain(SETTINGS.iter().map(|s| setting_cell(&d.settings, s.key())))
                .collect()
            })
            .collect();
        // A column per registered setting, named as the metrics name it:
        // `rdma_cm_tos` is RDMA CM TOS. ASCII (settings' keys are), so not
        // `to_uppercase`, whose Unicode tables measured 3.1 KB of the binary.
        let named: Vec<String> = SETTINGS
            .iter()
            .map(|s| snake_name(s.key()).replace('_', " ").to_ascii_uppercase())
            .collect();
        let header: Vec<&str> = ["DEVICE", "PCI", "PF", "NETDEV", "PORT", "STATE"]
            .into_iter()
            .chain(named.iter().map(String::as_str))
            .collect();
        out.push('\n');
        out.push_str(&table("", &header, &rows));
    }
    let t = &node.topology;
    if !t.gpus.is_empty() || !t.nics.is_empty() {
        let _ = writeln!(
            out,
            "\nGPUs and RDMA NICs by NUMA node and PCIe root ({} GPUs, {} RDMA ports):",
            t.gpus.len(),
            t.nics.len()
        );
        out.push_str(&crate::topology::render::node_groups(&t.gpus, &t.nics));
    }
    out.push('\n');
    if checks.is_empty() {
        out.push_str("No checks: give --traffic-class N to check each device's class, or --netns PATH / --pid PID for a pod's rails.\n");
    } else {
        out.push_str(&checks_text(checks));
    }
    out
}

// ---------------------------------------------------------------------------
// Pod view

/// Used entries and the checked index: a real port has 255 slots, mostly
/// empty, and an empty checked index is the news.
pub fn shown_gids(gids: &[(u32, GidEntry)], index: u32) -> Vec<&(u32, GidEntry)> {
    gids.iter()
        .filter(|(i, e)| !e.is_unused() || *i == index)
        .collect()
}

fn show_list(names: &[String], max: usize) -> String {
    if names.is_empty() {
        return "-".into();
    }
    let mut s = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    if names.len() > max {
        let _ = write!(s, " ... ({} more)", names.len() - max);
    }
    s
}

pub fn pod_text(pod: &PodView, opts: &Options, checks: &[Check]) -> String {
    let mut out = mode_line(pod.mode);
    let _ = writeln!(out, "sysfs: {} ({})", pod.sysfs_root.display(), pod.sysfs);
    let _ = writeln!(out, "Pod netns: {}", pod.netns.display());
    let _ = writeln!(
        out,
        "RDMA devices visible in the pod: {} ({})",
        pod.visible_devices.len(),
        show_list(&pod.visible_devices, 8)
    );
    if pod.pid.is_some() {
        let _ = writeln!(
            out,
            "Character devices: {}",
            pod.char_devices
                .as_deref()
                .map_or("- (no /dev/infiniband in the pod)".to_string(), |c| {
                    show_list(c, 16)
                })
        );
    }
    for (name, why) in &pod.not_rails {
        let _ = writeln!(out, "Not a rail: {name}: {why}");
    }
    for i in &pod.interfaces {
        out.push('\n');
        out.push_str(&iface_text(i, opts.gid_index));
    }
    if let Some(p) = &pod.placement {
        out.push('\n');
        out.push_str(&placement_text(p));
    }
    out.push('\n');
    out.push_str(&checks_text(checks));
    out
}

/// Where the pod's name came from, as the text and the JSON say it.
pub fn pod_from(from: &PodFrom) -> String {
    match from {
        PodFrom::Option => "--pod".into(),
        PodFrom::Entry {
            container_id,
            ifname,
        } => format!("the state entry of {container_id}:{ifname}"),
    }
}

/// The pod's rails against its GPUs, `nvidia-smi topo -m`'s way, and the
/// verdict; or why it could not be judged.
fn placement_text(p: &Placement) -> String {
    let mut out = format!(
        "Placement of pod {}/{} (named by {}), GDR level {}",
        p.pod.namespace,
        p.pod.name,
        pod_from(&p.from),
        p.level
    );
    match &p.judged {
        Err(why) => {
            let _ = writeln!(out, ": not judged: {why}");
        }
        Ok(j) => {
            let _ = writeln!(out, ", devices from the kubelet's {:?}:", j.source);
            out.push_str(&crate::topology::render::matrix(&j.verdict));
            for (id, why) in &j.unmapped {
                let _ = writeln!(out, "Not placed: GPU {id}: {why}");
            }
        }
    }
    out
}

/// The rail's QoS line: the class, its DSCP and ECN bits, the priority
/// it lands on, that priority's PFC and pause counts, the verdict and why.
pub fn qos_line(q: &QosObs) -> String {
    match q {
        QosObs::Off => "qos: not asked (qosCheck is off)".into(),
        QosObs::NoClass => "qos: no class set on the rail: nothing to judge".into(),
        QosObs::Judged { pf, verdict, class } => {
            let c = crate::qos::Class(*class);
            let mut out = format!(
                "qos: class={class} dscp={} ecn={} pf={}",
                c.dscp(),
                c.ecn(),
                dash(pf.as_deref())
            );
            if let Some(l) = verdict.landing() {
                let pfc = match l.pfc {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "n/a",
                };
                let _ = write!(out, " priority={} pfc={pfc}", l.priority);
                if let Some(p) = l.pause {
                    let _ = write!(out, " pause_sent={} pause_received={}", p.sent, p.received);
                }
            }
            let _ = write!(out, " verdict={}: {verdict}", verdict.name());
            out
        }
    }
}

/// The rail line, then its address, GID and sysctl tables.
fn iface_text(i: &Iface, gid_index: u32) -> String {
    let ips: Vec<String> = i
        .addrs
        .iter()
        .filter(|(ip, _)| !is_link_local(ip))
        .map(|(ip, _)| ip.to_string())
        .collect();
    let device = match &i.device {
        Ok((d, DeviceSource::Forced)) => format!("{d} (from --device)"),
        Ok((d, DeviceSource::Lookup(how))) => format!("{d} (by {how})"),
        Err(_) => "- (not found)".into(),
    };
    let mut out = format!(
        "Interface {}: ip={} rdma_device={device} port={} state={}",
        i.ifname,
        if ips.is_empty() {
            "-".into()
        } else {
            ips.join(",")
        },
        i.port,
        dash(i.port_state.as_deref()),
    );
    // Every registered setting, `name=value`, as the metrics name it.
    for s in SETTINGS {
        let _ = write!(
            out,
            " {}={}",
            snake_name(s.key()),
            setting_cell(&i.settings, s.key())
        );
    }
    out.push('\n');
    if let Some(q) = &i.qos {
        let _ = writeln!(out, "  {}", qos_line(q));
    }
    let want = checked_address(&i.addrs).map(|(g, _)| g);
    let rows: Vec<Vec<String>> = i
        .addrs
        .iter()
        .map(|(ip, p)| {
            let g = gid::of_address(ip);
            vec![
                format!("{ip}/{p}"),
                gid::format_gid(&g),
                locate_in(&i.gids, &g).map_or("-".into(), |x| x.to_string()),
                if want == Some(g) {
                    "checked".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            "  ",
            &["ADDRESS", "ROCE V2 GID", "AT INDEX", ""],
            &rows,
        ));
    }
    if i.device.is_ok() {
        let shown = shown_gids(&i.gids, gid_index);
        let rows: Vec<Vec<String>> = shown
            .iter()
            .map(|(idx, e)| {
                vec![
                    idx.to_string(),
                    e.gid
                        .as_ref()
                        .map_or("unreadable".to_string(), gid::format_gid),
                    e.gid_type.clone().unwrap_or_else(|| "-".into()),
                    dash(e.ndev.as_deref()),
                ]
            })
            .collect();
        if !rows.is_empty() {
            out.push_str(&table("  ", &["GID", "VALUE", "TYPE", "NETDEV"], &rows));
        }
        let hidden = i.gids.len() - shown.len();
        if hidden > 0 {
            let _ = writeln!(out, "  ({hidden} unused GID entries not shown)");
        }
    }
    let rows: Vec<Vec<String>> = i.sysctls.iter().map(sysctl_row).collect();
    out.push_str(&table("  ", &["SYSCTL", "VALUE", "RECOMMENDED", ""], &rows));
    out
}

fn sysctl_row(s: &SysctlObs) -> Vec<String> {
    vec![
        s.key.clone(),
        match &s.value {
            Ok(v) => v.clone(),
            Err(_) => "unreadable".into(),
        },
        s.recommended.clone(),
        if sysctl_ok(s) { "ok" } else { "DIFFERS" }.into(),
    ]
}

// ---------------------------------------------------------------------------
// Tables

/// Columns padded to their widest cell (in characters), two spaces apart,
/// no trailing blanks: what `column -t` would give, stable for diffs.
pub fn table(indent: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (c, cell) in r.iter().enumerate().take(cols) {
            width[c] = width[c].max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::from(indent);
        for (c, cell) in cells.enumerate().take(cols) {
            if c > 0 {
                s.push_str("  ");
            }
            // `{:<w$}` pads by chars, the unit the widths were measured in.
            let _ = write!(s, "{cell:<w$}", w = width[c]);
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(&mut header.iter().copied());
    for r in rows {
        out.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    out
}
