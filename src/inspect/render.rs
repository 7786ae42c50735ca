//! What the operator reads: the text tables and the JSON object, both made
//! from the collected views and the checks, and nothing else.

use super::args::Options;
use super::collect::{DeviceSource, Iface, NodeView, PodSysfs, PodView, SysctlObs, TcState};
use super::verdicts::{checked_address, exit_code, is_link_local, locate_in, sysctl_ok, Check};
use crate::rdma::gid::{self, GidEntry};
use crate::rdma::traffic_class;
use crate::rdma::NetnsMode;
use serde_json::{json, Value};

/// Pretty JSON and a newline, as every `--json` run ends.
pub fn json_text(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// `PASS name: reason` or `FAIL name: reason: fix`, one line so that
/// `grep FAIL` keeps the fix with its failure.
pub fn check_line(c: &Check) -> String {
    let verdict = if c.pass { "PASS" } else { "FAIL" };
    match &c.fix {
        Some(fix) if !c.pass => format!("{verdict} {}: {}: {fix}", c.name, c.reason),
        _ => format!("{verdict} {}: {}", c.name, c.reason),
    }
}

pub fn check_json(c: &Check) -> Value {
    json!({
        "name": c.name,
        "device": c.device,
        "ifname": c.ifname,
        "pass": c.pass,
        "reason": c.reason,
        "fix": c.fix,
    })
}

fn checks_text(checks: &[Check]) -> String {
    let mut out: String = checks.iter().map(|c| check_line(c) + "\n").collect();
    let failed = checks.iter().filter(|c| !c.pass).count();
    let n = checks.len();
    let checks_word = if n == 1 { "check" } else { "checks" };
    if failed == 0 {
        out.push_str(&format!("Result: PASS ({n} {checks_word})\n"));
    } else {
        out.push_str(&format!(
            "Result: FAIL ({failed} of {n} {checks_word} failed)\n"
        ));
    }
    out
}

pub fn class_text(tc: &TcState) -> String {
    match tc {
        TcState::NoFile => "n/a".into(),
        TcState::Unreadable(_) => "unreadable".into(),
        TcState::Value(v) => traffic_class::describe(*v),
    }
}

fn class_json(tc: &TcState) -> Value {
    match tc {
        TcState::NoFile => json!({"state": "n/a", "value": null}),
        TcState::Unreadable(e) => json!({"state": "unreadable", "value": null, "error": e}),
        TcState::Value(None) => json!({"state": "unset", "value": null}),
        TcState::Value(Some(n)) => json!({"state": "set", "value": n}),
    }
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

fn mode_word(mode: NetnsMode) -> &'static str {
    match mode {
        NetnsMode::Shared => "shared",
        NetnsMode::Exclusive => "exclusive",
    }
}

// ---------------------------------------------------------------------------
// Node view

pub fn node_text(node: &NodeView, checks: &[Check]) -> String {
    let mut out = mode_line(node.mode);
    out.push_str(&format!("sysfs: {}", node.sysfs_root.display()));
    if node.test_tree {
        out.push_str(" (a test tree)");
    } else if node.mode == NetnsMode::Exclusive {
        out.push_str(" (exclusive mode: devices moved into pods are not listed)");
    }
    out.push('\n');
    out.push_str(&format!("RDMA devices: {}\n", node.devices.len()));
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
                    class_text(&d.tc),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            "",
            &[
                "DEVICE",
                "PCI",
                "PF",
                "NETDEV",
                "PORT",
                "STATE",
                "TRAFFIC CLASS",
            ],
            &rows,
        ));
    }
    out.push('\n');
    if checks.is_empty() {
        out.push_str("No checks: give --traffic-class N to check each device's class, or --netns PATH / --pid PID for a pod's rails.\n");
    } else {
        out.push_str(&checks_text(checks));
    }
    out
}

pub fn node_json(node: &NodeView, checks: &[Check]) -> Value {
    let devices: Vec<Value> = node
        .devices
        .iter()
        .map(|d| {
            json!({
                "device": d.name,
                "pci": d.pci,
                "pf": d.pf,
                "netdevs": d.netdevs,
                "port": d.port,
                "port_state": d.port_state,
                "traffic_class": class_json(&d.tc),
            })
        })
        .collect();
    json!({
        "view": "node",
        "mode": mode_word(node.mode),
        "netns_mode": node.mode.letter().to_string(),
        "sysfs_root": node.sysfs_root,
        "devices": devices,
        "checks": checks.iter().map(check_json).collect::<Vec<_>>(),
        "pass": exit_code(checks) == 0,
    })
}

// ---------------------------------------------------------------------------
// Pod view

fn sysfs_text(s: PodSysfs) -> &'static str {
    match s {
        PodSysfs::TestTree => "a test tree: both views, nothing mounted",
        PodSysfs::Host => "the host's /sys, read from a thread inside the pod netns",
        PodSysfs::PodMount => "a private sysfs mounted inside the pod netns",
    }
}

/// How the device was found, as the JSON's `device_source` says it.
fn source_text(s: &DeviceSource) -> String {
    match s {
        DeviceSource::Forced => "--device".into(),
        DeviceSource::Lookup(how) => how.to_string(),
    }
}

/// Used entries and the checked index: a real port has 255 slots, mostly
/// empty, and an empty checked index is the news.
fn shown_gids(gids: &[(u32, GidEntry)], index: u32) -> Vec<&(u32, GidEntry)> {
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
        s.push_str(&format!(" ... ({} more)", names.len() - max));
    }
    s
}

pub fn pod_text(pod: &PodView, opts: &Options, checks: &[Check]) -> String {
    let mut out = mode_line(pod.mode);
    out.push_str(&format!(
        "sysfs: {} ({})\n",
        pod.sysfs_root.display(),
        sysfs_text(pod.sysfs)
    ));
    out.push_str(&format!("Pod netns: {}\n", pod.netns.display()));
    out.push_str(&format!(
        "RDMA devices visible in the pod: {} ({})\n",
        pod.visible_devices.len(),
        show_list(&pod.visible_devices, 8)
    ));
    if pod.pid.is_some() {
        out.push_str(&format!(
            "Character devices: {}\n",
            pod.char_devices
                .as_deref()
                .map_or("- (no /dev/infiniband in the pod)".to_string(), |c| {
                    show_list(c, 16)
                })
        ));
    }
    for (name, why) in &pod.not_rails {
        out.push_str(&format!("Not a rail: {name}: {why}\n"));
    }
    for i in &pod.interfaces {
        out.push('\n');
        out.push_str(&iface_text(i, opts.gid_index));
    }
    out.push('\n');
    out.push_str(&checks_text(checks));
    out
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
        "Interface {}: ip={} rdma_device={device} port={} state={} traffic_class={}\n",
        i.ifname,
        if ips.is_empty() {
            "-".into()
        } else {
            ips.join(",")
        },
        i.port,
        dash(i.port_state.as_deref()),
        if i.device.is_ok() {
            class_text(&i.tc)
        } else {
            "-".into()
        },
    );
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
            out.push_str(&format!("  ({hidden} unused GID entries not shown)\n"));
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

pub fn pod_json(pod: &PodView, opts: &Options, checks: &[Check]) -> Value {
    let interfaces: Vec<Value> = pod
        .interfaces
        .iter()
        .map(|i| iface_json(i, opts.gid_index))
        .collect();
    json!({
        "view": "pod",
        "mode": mode_word(pod.mode),
        "netns_mode": pod.mode.letter().to_string(),
        "sysfs_root": pod.sysfs_root,
        "sysfs_view": sysfs_text(pod.sysfs),
        "netns": pod.netns,
        "gid_index": opts.gid_index,
        "rdma_devices_visible": pod.visible_devices,
        "char_devices": pod.char_devices,
        "interfaces": interfaces,
        "not_rails": pod.not_rails.iter().map(|(n, w)| json!({"ifname": n, "why": w})).collect::<Vec<_>>(),
        "checks": checks.iter().map(check_json).collect::<Vec<_>>(),
        "pass": exit_code(checks) == 0,
    })
}

fn iface_json(i: &Iface, gid_index: u32) -> Value {
    let want = checked_address(&i.addrs).map(|(g, _)| g);
    let (device, source, error) = match &i.device {
        Ok((d, s)) => (Some(d.clone()), Some(source_text(s)), None),
        Err(e) => (None, None, Some(e.clone())),
    };
    json!({
        "ifname": i.ifname,
        "device": device,
        "device_source": source,
        "device_error": error,
        "port": i.port,
        "port_state": i.port_state,
        "addresses": i.addrs.iter().map(|(ip, p)| {
            let g = gid::of_address(ip);
            json!({
                "address": format!("{ip}/{p}"),
                "gid": gid::format_gid(&g),
                "roce_v2_index": locate_in(&i.gids, &g),
                "checked": want == Some(g),
            })
        }).collect::<Vec<_>>(),
        "gids": shown_gids(&i.gids, gid_index).iter().map(|(idx, e)| json!({
            "index": idx,
            "gid": e.gid.as_ref().map(gid::format_gid),
            "type": e.gid_type,
            "netdev": e.ndev,
        })).collect::<Vec<_>>(),
        "traffic_class": if i.device.is_ok() { class_json(&i.tc) } else { Value::Null },
        "sysctls": i.sysctls.iter().map(|s| json!({
            "key": s.key,
            "value": s.value.as_ref().ok(),
            "recommended": s.recommended,
            "ok": sysctl_ok(s),
        })).collect::<Vec<_>>(),
    })
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
            s.push_str(&format!("{cell:<w$}", w = width[c]));
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
