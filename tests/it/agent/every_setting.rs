//! What every owned per-rail setting shares, held for each line of
//! `roce_tune::settings::SETTINGS` by one table-driven test: ADD records the
//! original and writes the value, CHECK sees a drift with the setting's own
//! code, the agent repairs it within two periods, DEL gives back the
//! original exactly (unset included, where the setting has an unset), a
//! value out of its bounds is refused (7) with nothing changed, and another
//! device's file is never touched. A setting is a row of `fixture` (how a
//! test tree holds its file); a setting without one fails here, so a new
//! setting's own tests are only what is special about it.

use super::*;

/// How the test tree holds a setting's file, as the kernel would show it.
struct Fixture {
    /// Make the file of `dev` exist, holding `value`.
    plant: fn(&Tree, &str, Option<u32>),
    /// The value the file of `dev` holds (`None`: unset).
    read: fn(&Tree, &str) -> Option<u32>,
    /// The originals a rail is tested over: unset where the setting has one.
    originals: &'static [Option<u32>],
    /// What ADD is asked to write, and what someone else writes over it.
    wanted: u32,
    drifted: u32,
}

fn fixture(key: &str) -> Option<Fixture> {
    match key {
        "trafficClass" => Some(Fixture {
            plant: |tree, dev, v| {
                let content = v.map_or(String::new(), |n| format!("Global tclass={n}\n"));
                kernel_write(&tree.tc_path(dev), &content)
            },
            read: |tree, dev| parse_class(&tree.tc(dev)),
            originals: &[None, Some(106)],
            wanted: 41,
            drifted: 0,
        }),
        "rdmaCmTos" => Some(Fixture {
            plant: |tree, dev, v| {
                let file = tos_file(tree, dev);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                kernel_write(&file, &format!("{}\n", v.expect("a ToS is never unset")));
            },
            // The agent's write of a test tree's file is not atomic, as
            // configfs's is: a read in between sees no number, as `None`.
            read: |tree, dev| read(&tos_file(tree, dev)).trim().parse().ok(),
            originals: &[Some(0), Some(32)],
            wanted: 106,
            drifted: 8,
        }),
        // The test-only setting (feature `test-setting`): only a test tree
        // has its file. It proves one declaration is all the code of a
        // setting needs beyond its file (docs/contributing.md).
        #[cfg(feature = "test-setting")]
        "testKnob" => Some(Fixture {
            plant: |tree, dev, v| {
                let content = v.map_or(String::new(), |n| format!("{n}\n"));
                kernel_write(&knob_file(tree, dev), &content)
            },
            read: |tree, dev| read(&knob_file(tree, dev)).trim().parse().ok(),
            originals: &[None, Some(9)],
            wanted: 3,
            drifted: 12,
        }),
        _ => None,
    }
}

#[cfg(feature = "test-setting")]
fn knob_file(tree: &Tree, dev: &str) -> PathBuf {
    tree.root.join(format!(
        "class/infiniband/{dev}/ports/1/roce_tune_test_knob"
    ))
}

/// The class file as the kernel shows it: empty or `tclass=-1` is unset
/// (docs/design.md, "The traffic class file").
fn parse_class(content: &str) -> Option<u32> {
    let first = content.lines().next().unwrap_or("").trim();
    let n = first
        .trim_start_matches("Global ")
        .trim_start_matches("tclass=");
    match n {
        "" | "-1" => None,
        n => Some(
            n.parse()
                .unwrap_or_else(|_| panic!("class file {content:?}")),
        ),
    }
}

fn tos_file(tree: &Tree, dev: &str) -> PathBuf {
    tree.root.join(format!(
        "kernel/config/rdma_cm/{dev}/ports/1/default_roce_tos"
    ))
}

#[test]
fn every_setting_is_recorded_written_checked_repaired_restored_exactly_and_bounded() {
    needs!(root);
    let settings = roce_tune::settings::SETTINGS;
    let missing: Vec<&str> = settings
        .iter()
        .map(|s| s.key())
        .filter(|k| fixture(k).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "settings without a row of `fixture`: {missing:?}"
    );
    // Built with the test-only setting (make integration's second run), the
    // list holds it: the run covers a setting added through its declaration.
    assert_eq!(
        settings.iter().any(|s| s.key() == "testKnob"),
        cfg!(feature = "test-setting")
    );
    for s in settings {
        let (key, f) = (s.key(), fixture(s.key()).unwrap());
        let name = roce_tune::settings::snake_name(key);
        for &original in f.originals {
            let what = format!("{key} over {original:?}");
            // Rail 1's device is another tenant's: it holds a value of its
            // own, and no command of rail 0 may touch it.
            let mut rail = Rail::spec().rails(2).build();
            let (dev, foreign) = (DEV, rail.vfs[1].dev.clone());
            (f.plant)(&rail.tree, dev, original);
            (f.plant)(&rail.tree, &foreign, Some(f.drifted));
            agent_node(&rail.state, &rail.tree, "repair");
            for other in settings {
                rail.conf.as_object_mut().unwrap().remove(other.key());
            }
            rail.conf[key] = json!(f.wanted);
            let run = |command: &str, conf: &Value| {
                cni(
                    &rail.state,
                    command,
                    "c1",
                    &rail.pod,
                    "net1",
                    "train-0",
                    conf,
                )
            };

            // Refused, whatever the value's flaw (out of its declared
            // bounds, not a whole number): nothing changed.
            let above = s.declaration().max + 1;
            for bad in [json!(above), json!(-1), json!("3"), json!(1.5), json!(true)] {
                let mut conf = rail.conf.clone();
                conf[key] = bad.clone();
                let r = run("ADD", &conf);
                assert_eq!(r.code(), 7, "{what}, {bad}: {}", r.stdout);
                assert!(r.msg().contains(key), "{what}, {bad}: {}", r.msg());
                assert_eq!((f.read)(&rail.tree, dev), original, "{what}, {bad}");
                assert!(rail.state.entries().is_empty(), "{what}, {bad}");
            }

            // Recorded before the write, written, seen by CHECK.
            run("ADD", &rail.conf).ok();
            assert_eq!((f.read)(&rail.tree, dev), Some(f.wanted), "{what}");
            let entry = rail.state.entry("c1", "net1").unwrap();
            assert_eq!(
                entry["owned"][key],
                json!({"original": original, "written": f.wanted}),
                "{what}"
            );
            run("CHECK", &rail.conf).ok();
            (f.plant)(&rail.tree, dev, Some(f.drifted));
            let r = run("CHECK", &rail.conf);
            assert_eq!(
                r.code(),
                u64::from(s.code()),
                "{what}: CHECK names the drift: {}",
                r.stdout
            );

            // The agent puts it back within two periods, and counts it.
            let agent = Agent::start(&rail.state, 1);
            let back = within(TWO_PERIODS * 2, || {
                (f.read)(&rail.tree, dev) == Some(f.wanted)
            });
            assert!(back.is_some(), "{what}: not repaired\n{}", agent.log());
            let (m, ok) = agent.wait_for(TWO_PERIODS, |m| m.repairs(&name) >= 1.0);
            assert!(ok, "{what}: {}", m.text);
            drop(agent);

            // DEL gives back the original exactly; the other device's value
            // was never touched.
            run("DEL", &rail.conf).ok();
            assert_eq!(
                (f.read)(&rail.tree, dev),
                original,
                "{what}: restored exactly"
            );
            assert!(rail.state.entries().is_empty(), "{what}");
            assert_eq!(
                (f.read)(&rail.tree, &foreign),
                Some(f.drifted),
                "{what}: another device's file"
            );
        }
    }
}
