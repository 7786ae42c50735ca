#!/usr/bin/env python3
"""Capture the kernel's rtnetlink answers that src/netlink/tests.rs decodes.

Run as root from the repository root:  python3 src/netlink/testdata/capture.py
It prints, for each request, the request and every datagram the kernel sent
back, as hex (16 bytes a line), to src/netlink/testdata/<name>.hex. The
requests are built byte for byte as src/wire/rtnetlink.rs builds them (the
tests check that too), in the layout of include/uapi/linux/netlink.h
(nlmsghdr), rtnetlink.h (ifinfomsg), if_addr.h (ifaddrmsg).

The link and address dumps run in a throwaway netns holding lo and a veth end
named net1 with 10.10.1.2/24, a point-to-point 10.0.0.1 peer 10.0.0.2 and
fd00::2/64, so the captures hold no address of this machine. The GETLINK by
name runs in the initial netns against eth0, whose parent is a virtio device
(IFLA_PARENT_DEV_NAME virtio2, IFLA_PARENT_DEV_BUS_NAME virtio on the
capture machine), and against a name no link has (ENODEV).
"""
import os
import socket
import struct
import subprocess
import sys

NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 1, 4, 0x300
RTM_GETLINK, RTM_GETADDR = 18, 22
IFLA_IFNAME = 3
NLMSG_ERROR, NLMSG_DONE = 2, 3
HERE = os.path.dirname(os.path.abspath(__file__))


def attr(kind, value):
    n = 4 + len(value)
    return struct.pack("=HH", n, kind) + value + b"\0" * ((4 - n % 4) % 4)


def message(kind, flags, seq, body):
    return struct.pack("=IHHII", 16 + len(body), kind, flags, seq, 0) + body


def getlink_by_name(name, seq):
    body = bytes(16) + attr(IFLA_IFNAME, name.encode() + b"\0")
    return message(RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK, seq, body)


def getlink_dump(seq):
    return message(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, seq, bytes(16))


def getaddr_dump(seq):
    return message(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, seq, bytes(8))


def exchange(req, seq):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.bind((0, 0))
    s.settimeout(5)
    s.send(req)
    out = []
    while True:
        d = s.recv(65536)
        out.append(d)
        off, end = 0, False
        while off + 16 <= len(d):
            n, kind, _flags, mseq, _pid = struct.unpack_from("=IHHII", d, off)
            if mseq == seq and kind in (NLMSG_ERROR, NLMSG_DONE):
                end = True
            off += (n + 3) & ~3
        if end:
            return out


def hexlines(b):
    return "\n".join(b[i:i + 16].hex(" ") for i in range(0, len(b), 16))


def save(name, req, answer):
    with open(os.path.join(HERE, name + ".hex"), "w") as f:
        f.write(f"# python3 src/netlink/testdata/capture.py: {name}, kernel {os.uname().release}\n")
        f.write("# request\n" + hexlines(req) + "\n")
        for i, d in enumerate(answer):
            f.write(f"# datagram {i + 1}, {len(d)} bytes\n" + hexlines(d) + "\n")


def run(*cmd):
    subprocess.run(cmd, check=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--in-netns":
        for name, req in [("link_dump", getlink_dump(7)), ("addr_dump", getaddr_dump(8))]:
            save(name, req, exchange(req, int.from_bytes(req[8:12], "little")))
        return
    for name, ifname, seq in [("getlink_eth0", "eth0", 5), ("getlink_enodev", "nosuch0", 6)]:
        req = getlink_by_name(ifname, seq)
        save(name, req, exchange(req, seq))
    ns = f"rtcap{os.getpid()}"
    run("ip", "netns", "add", ns)
    try:
        run("ip", "link", "add", f"{ns}h", "type", "veth", "peer", "name", f"{ns}p")
        run("ip", "link", "set", f"{ns}p", "netns", ns)
        n = ["ip", "-n", ns]
        run(*n, "link", "set", f"{ns}p", "name", "net1")
        run(*n, "link", "set", "lo", "up")
        run(*n, "link", "set", "net1", "up")
        run(*n, "addr", "add", "10.10.1.2/24", "dev", "net1")
        run(*n, "addr", "add", "10.0.0.1", "peer", "10.0.0.2/32", "dev", "net1")
        run(*n, "addr", "add", "fd00::2/64", "dev", "net1", "nodad")
        run("ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), "--in-netns")
    finally:
        subprocess.run(["ip", "netns", "del", ns])
        subprocess.run(["ip", "link", "del", f"{ns}h"], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
