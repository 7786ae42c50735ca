//! rtnetlink through the library, in a real pod netns: the link by name and
//! in the dump, its addresses (a point-to-point one included), and an
//! alternative name, which the kernel resolves to the link's real name.

use crate::common::*;
use roce_tune::netlink::Netlink;
use roce_tune::netns::NetNs;
use std::net::IpAddr;
use std::path::Path;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn links_and_addresses_of_a_pod_netns() {
    needs!(root);
    let pod = Pod::new("net1", Some("10.10.1.2/24"));
    let ns = &pod.ns;
    sh(&format!(
        "ip -n {ns} addr add 10.0.0.1 peer 10.0.0.2/32 dev net1 && \
         ip -n {ns} addr add fd00::2/64 dev net1 nodad && \
         ip -n {ns} link property add dev net1 altname rail-alt0"
    ));
    let want_index: u32 = sh(&format!(
        "ip netns exec {ns} cat /sys/class/net/net1/ifindex"
    ))
    .parse()
    .unwrap();

    let roce_tune::netns::Lookup::Netns(netns) = NetNs::lookup(Path::new(&pod.path())).unwrap()
    else {
        panic!("{} is no netns", pod.path());
    };
    let (by_name, by_alt, links, addrs, lo_addrs) = netns
        .run(|| -> Result<_, roce_tune::netlink::Error> {
            let mut nl = Netlink::open()?;
            let by_name = nl.link_by_name("net1")?;
            let by_alt = nl.link_by_name("rail-alt0")?;
            let links = nl.links()?;
            let addrs = nl.addresses(want_index)?;
            let lo_addrs = nl.addresses(1)?;
            Ok((by_name, by_alt, links, addrs, lo_addrs))
        })
        .unwrap()
        .unwrap();

    let link = by_name.expect("net1 is in the pod");
    assert_eq!((link.index, link.name.as_str()), (want_index, "net1"));
    // A veth has no parent device.
    assert_eq!((link.parent_dev, link.parent_bus), (None, None));
    // The kernel answers the altname with net1; it is not net1's name.
    assert_eq!(by_alt, None);
    let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["lo", "net1"]);
    assert_eq!(
        addrs,
        [
            (ip("10.10.1.2"), 24),
            (ip("10.0.0.1"), 32),
            (ip("fd00::2"), 64)
        ]
    );
    // lo of a new netns is down: no address.
    assert_eq!(lo_addrs, []);
}
