//! A state dir (and node) someone tampered with: entries that are links,
//! FIFOs, directories, garbage or another attachment's; `locks/` or the state
//! dir itself a link or open to others; foreign files; a log file nobody
//! reads. Each row plants its files in a place of its own, runs the base
//! config (which works), and must get its exact code, no panic, no hang, and
//! what its check says: nothing followed out of the state dir, nothing
//! trusted that could have been planted, a corrupt entry moved aside.
//! The rows are `tests/it/common/cases.rs`'s `Case`, as in `tests/it/bad_inputs.rs`.

use crate::common::cases::{Case, Place, ADDR, CID, DEV, PCI};
use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn expect(ok: bool, what: impl Into<String>) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what.into())
    }
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn mkfifo(p: &Path) {
    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

fn private_state(p: &Place) {
    std::fs::create_dir_all(p.state.join("locks")).unwrap();
    std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// A well-formed entry for `cid` as roce-tune writes it (class 41 over 106).
fn entry_json(_p: &Place, cid: &str) -> String {
    json!({
        "version": 2, "network": "rail", "containerId": cid, "ifname": "net1",
        "netns": "/var/run/netns/none", "netnsId": {"dev": 4, "ino": 1},
        "exclusive": false, "device": DEV, "port": 1, "pci": PCI, "guid": null,
        "trafficClass": {"original": 106, "written": 41}, "rdmaCmTos": null,
        "createdNs": 1,
    })
    .to_string()
}

/// A format 4 entry of a rail that owns nothing (no class asked), with
/// `rail` as its rail record.
fn rail_json(cid: &str, rail: Value) -> Value {
    json!({
        "version": 4, "network": "rail", "containerId": cid, "ifname": "net1",
        "netns": "/var/run/netns/none", "netnsId": {"dev": 4, "ino": 1},
        "reach": "host", "device": DEV, "port": 1, "pci": PCI, "guid": null,
        "owned": {}, "deviceInfo": null, "rail": rail, "createdNs": 1,
    })
}

/// What DEL of a corrupt entry must do: succeed, say so, leave the class
/// roce-tune wrote (it cannot know what to restore) and move the entry aside.
fn corrupt_on_del(p: &Place, out: &Run) -> Result<(), String> {
    expect(
        out.stderr.contains("corrupt"),
        format!("stderr does not say corrupt: {}", out.stderr),
    )?;
    expect(
        p.tree.tc(DEV) == "tclass=41",
        format!("tc written: {:?}", p.tree.tc(DEV)),
    )?;
    expect(
        std::fs::symlink_metadata(p.entry(CID)).is_err(),
        "entry still in place",
    )?;
    expect(
        std::fs::symlink_metadata(p.state.join(format!("{CID}:net1.state.corrupt"))).is_ok(),
        "entry not moved to .corrupt",
    )
}

fn canary_intact(p: &Place) -> Result<(), String> {
    let names: Vec<String> = std::fs::read_dir(&p.canary)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    expect(
        names == ["precious"],
        format!("canary dir now holds {names:?}"),
    )?;
    expect(
        std::fs::read_to_string(p.canary.join("precious")).unwrap() == "do not touch\n",
        "canary file written",
    )
}

/// The rows' names, for docs_figures.
pub(crate) fn row_names() -> Vec<String> {
    cases().into_iter().map(|c| c.name).collect()
}

fn cases() -> Vec<Case> {
    vec![
        Case::planted(
            "entry is a link to /etc/passwd (ADD)",
            "ADD",
            |p| {
                private_state(p);
                symlink(Path::new("/etc/passwd"), &p.entry(CID));
            },
            0,
            |p, _| {
                let m = std::fs::symlink_metadata(p.entry(CID)).unwrap();
                expect(m.file_type().is_file(), "entry is not a regular file")?;
                expect(m.mode() & 0o777 == 0o600, "entry is not 0600")?;
                let moved = p.state.join(format!("{CID}:net1.state.corrupt"));
                expect(
                    std::fs::read_link(moved).is_ok_and(|t| t == Path::new("/etc/passwd")),
                    "the link was not moved aside as it was",
                )
            },
        ),
        Case::planted(
            "entry is a link to a valid entry in the canary dir (DEL)",
            "DEL",
            |p| {
                private_state(p);
                std::fs::write(p.canary.join("precious"), "do not touch\n").unwrap();
                std::fs::write(p.canary.join("entry"), entry_json(p, CID)).unwrap();
                symlink(&p.canary.join("entry"), &p.entry(CID));
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            |p, out| {
                corrupt_on_del(p, out)?;
                expect(
                    std::fs::read_to_string(p.canary.join("entry")).unwrap() == entry_json(p, CID),
                    "link target changed",
                )
            },
        ),
        Case::planted(
            "locks/ is a link to the canary dir",
            "ADD",
            |p| {
                std::fs::create_dir_all(&p.state).unwrap();
                std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o700)).unwrap();
                symlink(&p.canary, &p.state.join("locks"));
            },
            5,
            |p, _| {
                canary_intact(p)?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        ),
        Case::planted(
            "a lock file is a link to the canary file",
            "ADD",
            |p| {
                private_state(p);
                symlink(
                    &p.canary.join("precious"),
                    &p.state.join(format!("locks/{PCI}.1.lock")),
                );
            },
            5,
            |p, _| {
                canary_intact(p)?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        ),
        Case::planted(
            "state dir is a link (ADD)",
            "ADD",
            |p| symlink(&p.canary, &p.state),
            5,
            |p, _| {
                canary_intact(p)?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        ),
        Case::planted(
            "state dir is a link (DEL: succeeds, follows nothing)",
            "DEL",
            |p| symlink(&p.canary, &p.state),
            0,
            |p, out| {
                expect(
                    out.stderr.contains("symbolic link"),
                    format!("stderr does not say why: {}", out.stderr),
                )?;
                canary_intact(p)
            },
        ),
        Case::planted(
            "state dir is world-writable (ADD)",
            "ADD",
            |p| {
                std::fs::create_dir_all(&p.state).unwrap();
                std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o777)).unwrap();
            },
            5,
            |p, _| {
                let n = std::fs::read_dir(&p.state).unwrap().count();
                expect(n == 0, format!("{n} files created in the refused dir"))?;
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")
            },
        ),
        Case::planted(
            "state dir is group-writable (DEL: succeeds, trusts nothing)",
            "DEL",
            |p| {
                private_state(p);
                std::fs::write(p.entry(CID), entry_json(p, CID)).unwrap();
                std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o770)).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            |p, _| {
                expect(
                    p.tree.tc(DEV) == "tclass=41",
                    "a planted entry in an open dir was trusted",
                )?;
                expect(
                    p.entry(CID).exists(),
                    "the entry was not kept for the repair",
                )
            },
        ),
        Case::planted(
            "entry is a FIFO (DEL)",
            "DEL",
            |p| {
                private_state(p);
                mkfifo(&p.entry(CID));
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            corrupt_on_del,
        ),
        Case::planted(
            "entry is a FIFO (ADD)",
            "ADD",
            |p| {
                private_state(p);
                mkfifo(&p.entry(CID));
            },
            0,
            |p, _| {
                expect(p.tree.tc(DEV) == "tclass=41", "class not written")?;
                expect(
                    std::fs::symlink_metadata(p.entry(CID)).is_ok_and(|m| m.is_file()),
                    "no real entry written",
                )
            },
        ),
        Case::planted(
            "entry is garbage (DEL)",
            "DEL",
            |p| {
                private_state(p);
                std::fs::write(p.entry(CID), "{\"version\": 1, \"orig").unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            corrupt_on_del,
        ),
        Case::planted(
            "entry is a directory (DEL)",
            "DEL",
            |p| {
                private_state(p);
                std::fs::create_dir(p.entry(CID)).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            corrupt_on_del,
        ),
        Case::planted(
            "entry is 100 KB (DEL)",
            "DEL",
            |p| {
                private_state(p);
                let mut e = entry_json(p, CID);
                e.push_str(&" ".repeat(100 << 10));
                std::fs::write(p.entry(CID), e).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            corrupt_on_del,
        ),
        Case::planted(
            "entry names another attachment (DEL)",
            "DEL",
            |p| {
                private_state(p);
                std::fs::write(p.entry(CID), entry_json(p, "other1")).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            corrupt_on_del,
        ),
        Case::planted(
            "entry's device climbs (DEL)",
            "DEL",
            |p| {
                private_state(p);
                let e = entry_json(p, CID).replace(DEV, "../../../canary");
                std::fs::write(p.entry(CID), e).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            |p, out| {
                corrupt_on_del(p, out)?;
                canary_intact(p)
            },
        ),
        Case::planted(
            "a rail record alone (DEL: dropped, the class not ours left)",
            "DEL",
            |p| {
                private_state(p);
                let e = rail_json(
                    CID,
                    json!({"gidIndex": 3, "trafficClass": null, "rdmaCmTos": 106}),
                );
                std::fs::write(p.entry(CID), e.to_string()).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            |p, _| {
                expect(
                    p.tree.tc(DEV) == "tclass=41",
                    "a class it never owned was written",
                )?;
                expect(
                    std::fs::symlink_metadata(p.entry(CID)).is_err(),
                    "the rail record was not dropped",
                )
            },
        ),
        Case::planted(
            "a rail record's GID index out of range (DEL)",
            "DEL",
            |p| {
                private_state(p);
                let e = rail_json(
                    CID,
                    json!({"gidIndex": 4096, "trafficClass": 41, "rdmaCmTos": null}),
                );
                std::fs::write(p.entry(CID), e.to_string()).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            corrupt_on_del,
        ),
        Case::planted(
            "format 4, neither a rail nor anything to give back (DEL)",
            "DEL",
            |p| {
                private_state(p);
                let e = rail_json(CID, Value::Null);
                std::fs::write(p.entry(CID), e.to_string()).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            corrupt_on_del,
        ),
        Case::planted(
            "a rail record of format 5 (DEL: left alone)",
            "DEL",
            |p| {
                private_state(p);
                let mut e = rail_json(CID, json!({"gidIndex": 3, "ncclIbHca": "=mlx5_2:1"}));
                e["version"] = json!(5);
                std::fs::write(p.entry(CID), e.to_string()).unwrap();
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            |p, out| {
                expect(
                    out.stderr.contains("newer roce-tune"),
                    format!("stderr does not say newer: {}", out.stderr),
                )?;
                expect(p.tree.tc(DEV) == "tclass=41", "tc written")?;
                expect(p.entry(CID).exists(), "the newer entry was not left alone")
            },
        ),
        Case::planted(
            "quarantine name is a link to the canary file (DEL)",
            "DEL",
            |p| {
                private_state(p);
                std::fs::write(p.entry(CID), "garbage").unwrap();
                symlink(
                    &p.canary.join("precious"),
                    &p.state.join(format!("{CID}:net1.state.corrupt")),
                );
                p.tree.set_tc(DEV, "tclass=41");
            },
            0,
            |p, out| {
                corrupt_on_del(p, out)?;
                canary_intact(p)
            },
        ),
        Case::planted(
            "foreign files in the state dir (ADD, DEL)",
            "ADD",
            |p| {
                private_state(p);
                for f in [
                    "notes.txt",
                    "x.json",
                    ":net1.state",
                    "-a:net1.state",
                    "a:b:c.json",
                ] {
                    std::fs::write(p.state.join(f), "foreign").unwrap();
                }
                symlink(&p.canary.join("precious"), &p.state.join("zz:net1.state"));
            },
            0,
            |p, _| {
                let del = Exec::cni(BIN, &p.node, "DEL", CID, "", "net1")
                    .stdin(
                        json!({"cniVersion": "1.0.0", "name": "rail", "type": "roce-tune"})
                            .to_string(),
                    )
                    .run();
                del.succeeded("DEL")?;
                expect(p.tree.tc(DEV) == "tclass=106", "class not restored")?;
                for f in [
                    "notes.txt",
                    "x.json",
                    ":net1.state",
                    "-a:net1.state",
                    "a:b:c.json",
                ] {
                    expect(
                        std::fs::read_to_string(p.state.join(f)).is_ok_and(|s| s == "foreign"),
                        format!("{f} touched"),
                    )?;
                }
                canary_intact(p)
            },
        ),
        Case::planted(
            "sysfs device name with a space",
            "ADD",
            |p| {
                let ib = p
                    .tree
                    .root
                    .join(format!("bus/pci/devices/{PCI}/infiniband"));
                std::fs::rename(ib.join(DEV), ib.join("mlx5 2")).unwrap();
            },
            100,
            |p, _| {
                expect(p.tree.tc(DEV) == "Global tclass=106\n", "tc written")?;
                expect(
                    std::fs::read_dir(&p.state).map_or(true, |d| {
                        d.filter_map(Result::ok)
                            .all(|e| is_state_infrastructure(&e.file_name().to_string_lossy()))
                    }),
                    "state written",
                )
            },
        ),
        Case::planted(
            "logFile is a FIFO nobody reads",
            "ADD",
            |p| {
                mkfifo(&p.canary.join("log"));
                p.write_node(json!({"logFile": path_str(&p.canary.join("log"))}));
            },
            0,
            |p, _| expect(p.tree.tc(DEV) == "tclass=41", "class not written"),
        ),
    ]
}

#[test]
fn a_tampered_state_dir_is_never_followed() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    // How many rows there are is for docs_figures to check (as in
    // bad_inputs).
    let cases = cases();
    let failed = crate::common::cases::failures(&pod, &cases);
    println!(
        "{} tampered state dirs, {} failed",
        cases.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The state dir is created 0700 (parents included), entries and lock files
/// 0600, whatever the runtime's umask; an entry's name is exactly
/// `<containerID>:<ifname>.state` and it holds what ADD recorded.
#[test]
fn state_dir_is_private_whatever_the_umask() {
    needs!(root);
    let pod = Pod::new("net1", Some(ADDR));
    let place = Place::new();
    let conf = place.conf(&pod);
    let state = place.base.join("deep/er/state");
    place.write_node(json!({"stateDir": path_str(&state)}));
    let cid = "0123abcdef_.-Z";
    // umask 000 makes any mode that is not explicit show as world-writable.
    Exec::cni("/bin/sh", &place.node, "ADD", cid, &pod.path(), "net1")
        .args(["-c", "umask 000; exec \"$0\"", BIN])
        .stdin(conf.to_string())
        .run()
        .ok();
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    for d in [
        place.base.join("deep"),
        place.base.join("deep/er"),
        state.clone(),
        state.join("locks"),
    ] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    let entry = state.join(format!("{cid}:net1.state"));
    assert_eq!(mode(&entry), 0o600);
    assert_eq!(mode(&state.join(format!("locks/{PCI}.1.lock"))), 0o600);
    let names: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !is_state_infrastructure(n))
        .collect();
    assert_eq!(names, [format!("{cid}:net1.state")], "only the entry");
    let e: Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    assert_eq!(e["containerId"], cid);
    assert_eq!(e["ifname"], "net1");
    assert_eq!(e["device"], DEV);
    assert_eq!(e["owned"]["trafficClass"]["original"], 106);
    assert_eq!(e["owned"]["trafficClass"]["written"], 41);
    assert_eq!(e["netns"], pod.path());
    Exec::cni(BIN, &place.node, "DEL", cid, &pod.path(), "net1")
        .stdin(conf.to_string())
        .run()
        .ok();
    assert_eq!(place.tree.tc(DEV), "tclass=106");
    assert!(!entry.exists());
}
