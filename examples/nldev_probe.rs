//! Dev-only: print what RDMA netlink reports in the netns this runs in, to
//! hold roce-tune's decoder against `rdma -j link show` / `rdma -j dev show` /
//! `rdma system show` on a real kernel (the kernel lane's VM).
//!
//! `nldev_probe [IFNAME]`: with IFNAME, also looks the netdev up by rtnetlink
//! and runs the (ifindex, name) match, as ADD will.
//! `nldev_probe --port-dump N`: one PORT_GET dump of device index N, to see
//! what the kernel answers for an index this netns cannot see.

use roce_tune::netlink::nldev::{port_for_netdev, PortMatch, RdmaNetlink};
use roce_tune::netlink::Netlink;

fn main() {
    let mut nl = match RdmaNetlink::open() {
        Ok(nl) => nl,
        Err(e) => {
            println!(
                "open: {e} (unavailable: {}, errno {:?})",
                e.is_unavailable(),
                e.errno()
            );
            std::process::exit(2);
        }
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, n] = args.as_slice() {
        if flag == "--port-dump" {
            let index = n.parse().expect("a device index");
            match nl.ports_of(index) {
                Ok(ps) => println!("ports_of({index}): {ps:?}"),
                Err(e) => println!(
                    "ports_of({index}): error: {e} (errno {:?}, kind {:?})",
                    e.errno(),
                    e.kind()
                ),
            }
            return;
        }
    }
    match nl.netns_mode() {
        Ok(m) => println!("netns_mode: {m:?}"),
        Err(e) => println!("netns_mode: error: {e} (errno {:?})", e.errno()),
    }
    match nl.devices() {
        Ok(ds) => {
            for d in ds {
                println!("device: {d:?}");
            }
        }
        Err(e) => println!("devices: error: {e} (errno {:?})", e.errno()),
    }
    let ports = match nl.ports() {
        Ok(ps) => ps,
        Err(e) => {
            println!("ports: error: {e} (errno {:?})", e.errno());
            std::process::exit(1);
        }
    };
    for p in &ports {
        println!("port: {p:?}");
        println!("      {p}");
    }
    if let Some(ifname) = args.first() {
        let link = Netlink::open().and_then(|mut r| r.link_by_name(ifname));
        match link {
            Ok(Some(l)) => match port_for_netdev(&ports, l.index, &l.name) {
                PortMatch::One(p) => println!("match {ifname} (ifindex {}): {p}", l.index),
                PortMatch::None => println!("match {ifname} (ifindex {}): none", l.index),
                PortMatch::Ambiguous(ps) => {
                    let names: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
                    println!("match {ifname}: ambiguous: {}", names.join("; "))
                }
            },
            Ok(None) => println!("match {ifname}: no such interface here"),
            Err(e) => println!("match {ifname}: rtnetlink: {e}"),
        }
    }
}
