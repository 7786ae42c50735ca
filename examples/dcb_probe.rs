//! Dev-only: ask a netdev for its IEEE DCB state as roce-tune will ask a
//! PF, to hold the DCB codec and the QoS verdict against a real kernel (the
//! kernel lane's guest, scenario rxe-counters).
//!
//! `dcb_probe [--class N] [--priority P] IFNAME...`: for each netdev, the
//! request sent on a raw rtnetlink socket, each datagram of the answer
//! printed as hex (`raw:` lines, for fixtures and fuzz seeds) and fed to
//! `dcb::Exchange`; then the same asked through `netlink::ask_dcb`, the
//! exchange roce-tune uses. Prints the answer and the verdict for class N
//! (default 106) against priority P (default 3, lossless), each line led by
//! the netdev's name. One process for all the names: under TCG each exec
//! costs seconds. Exits 1 when the two ways disagree for a name, 2 on usage.

use nix::sys::socket::{
    connect, recv, send, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
    SockType,
};
use roce_tune::netlink::ask_dcb;
use roce_tune::qos::{verdict, Class, Fabric};
use roce_tune::wire::dcb::{encode_request, Answer, Exchange};
use std::os::fd::AsRawFd;

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let (mut class, mut priority) = (106u8, 3u8);
    let mut names = Vec::new();
    while let Some(a) = args.next() {
        let slot = match a.as_str() {
            "--class" => &mut class,
            "--priority" => &mut priority,
            _ => {
                names.push(a);
                continue;
            }
        };
        *slot = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            eprintln!("dcb_probe: {a} takes a number from 0 to 255");
            std::process::exit(2)
        });
    }
    if names.is_empty() {
        eprintln!("usage: dcb_probe [--class N] [--priority P] IFNAME...");
        std::process::exit(2);
    }
    let fabric = Fabric {
        priority: Some(priority),
        lossless: true,
    };
    let mut status = 0;
    for ifname in &names {
        let raw = raw_answer(ifname);
        let by_socket = ask_dcb(ifname);
        match &by_socket {
            Ok(answer) => {
                println!("{ifname}: answer: {answer:?}");
                let v = verdict(Class(class), Some(answer), fabric);
                println!("{ifname}: verdict: {}: {v}", v.name());
            }
            Err(e) => println!("{ifname}: ask_dcb: {e}"),
        }
        match (raw, by_socket) {
            (Ok(a), Ok(b)) if a == b => {
                println!("{ifname}: agree: the raw answer decodes the same")
            }
            (a, b) => {
                println!("{ifname}: DISAGREE: raw {a:?}, ask_dcb {b:?}");
                status = 1;
            }
        }
    }
    std::process::exit(status);
}

/// The exchange by hand: one request, datagrams printed and fed to the
/// codec until the answer ends.
fn raw_answer(ifname: &str) -> Result<Answer, String> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| format!("socket: {e}"))?;
    connect(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).map_err(|e| format!("connect: {e}"))?;
    let seq = 0x5eed;
    let request = encode_request(ifname, seq).map_err(|e| e.to_string())?;
    send(fd.as_raw_fd(), &request, MsgFlags::empty()).map_err(|e| format!("send: {e}"))?;
    let mut ex = Exchange::new(seq);
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..16 {
        let n =
            recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).map_err(|e| format!("recv: {e}"))?;
        let hex: String = buf[..n].iter().map(|b| format!("{b:02x}")).collect();
        println!("{ifname}: raw: {hex}");
        if let Some(answer) = ex.feed(&buf[..n]).map_err(|e| e.to_string())? {
            return Ok(answer);
        }
    }
    Err("no end within 16 datagrams".into())
}
