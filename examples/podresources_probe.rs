//! Dev-only: ask a kubelet's PodResources API (or integration/fake_kubelet)
//! for one pod's devices, as ADD will, and time it.
//!
//! `podresources_probe SOCKET NAMESPACE NAME [TIMEOUT_MS [CALLS]]`: with
//! CALLS, that many calls one after another (a new connection each, as each
//! ADD makes), then the median, 90th percentile and maximum.
//! `podresources_probe --checkpoint FILE UID`: the checkpoint fallback's
//! read of one pod, timed (docs/reliability.md, "The kubelet").

use roce_tune::podresources::{from_checkpoint, pod_devices, Query};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 3 && args[0] == "--checkpoint" {
        let t = Instant::now();
        let r = from_checkpoint(Path::new(&args[1]), &args[2]);
        let took = t.elapsed();
        match r {
            Ok(found) => println!("{} devices", found.map_or(0, |d| d.devices.len())),
            Err(e) => println!("error: {e}"),
        }
        println!("1 read: {took:?}");
        return;
    }
    if args.len() < 3 {
        eprintln!("usage: podresources_probe SOCKET NAMESPACE NAME [TIMEOUT_MS [CALLS]]");
        std::process::exit(2);
    }
    let timeout = Duration::from_millis(args.get(3).map_or(1000, |s| s.parse().expect("ms")));
    let calls: usize = args.get(4).map_or(1, |s| s.parse().expect("a count"));
    let q = Query {
        namespace: &args[1],
        name: &args[2],
        uid: None,
    };
    let socket = Path::new(&args[0]);
    let mut times = Vec::with_capacity(calls);
    let mut last = None;
    for _ in 0..calls {
        let t = Instant::now();
        let r = pod_devices(socket, timeout, &q);
        times.push(t.elapsed());
        last = Some(r);
    }
    match last.unwrap() {
        Ok(Some((d, source))) => {
            println!("{source:?}: {} devices", d.devices.len());
            for dev in d.devices {
                println!("  {} {}", dev.resource, dev.id);
            }
        }
        Ok(None) => println!("the kubelet does not know {}/{}", q.namespace, q.name),
        Err(e) => println!("error: {e} ({e:?})"),
    }
    times.sort();
    let at = |p: usize| times[(times.len() - 1) * p / 100];
    println!(
        "{calls} calls: median {:?}, p90 {:?}, max {:?}",
        at(50),
        at(90),
        times[times.len() - 1]
    );
}
