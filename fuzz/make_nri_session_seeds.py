#!/usr/bin/env python3
"""Seeds of the nri_session fuzz target (fuzz/fuzz_targets/nri_session.rs): whole conversations
from a runtime's end of the NRI socket, each behind the target's 9-byte head (byte 0: the plugin
wants a Synchronize's pods; bytes 1 to 8: the sizes, +1, of the pieces it is fed in).

- wire-0.12, wire-old: what containerd's own adaptation sent one plugin, in order (every R->P
  line of ../shared/nri/examples/wire/wire-*.txt, captured by its capture.py), whole and in
  pieces that cut headers and messages.
- split-sync: the runtime's answer to RegisterPlugin, Configure, a Synchronize in three parts
  (a part of pods, a part of pods and containers, the last without `more`), a CreateContainer
  split across two frames, a frame for a conn NRI never opens, a request on a stream that does
  not increase, and two requests in one frame.
- over-budget: Synchronize parts past the target's 1,024-byte budget.

  fuzz/make_nri_session_seeds.py [../shared/nri]

Run once when the captures change; the seeds are committed.
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(n, payload):
    """A length-delimited field."""
    return varint(n << 3 | 2) + varint(len(payload)) + payload


def vfield(n, v):
    return varint(n << 3) + varint(v)


def frame(conn, payload):
    return struct.pack(">II", conn, len(payload)) + payload


def ttrpc(stream, kind, body):
    return struct.pack(">IIBB", len(body), stream, kind, 0) + body


def request(stream, method, payload):
    body = field(1, b"nri.pkg.api.v1alpha1.Plugin") + field(2, method.encode()) + field(3, payload) + vfield(4, 2_000_000_000)
    return ttrpc(stream, 1, body)


def pod(pid, netns=None, annotations=()):
    p = field(1, pid.encode()) + field(2, b"name-" + pid.encode()) + field(3, b"uid-" + pid.encode()) + field(4, b"team-a")
    for k, v in annotations:
        p += field(6, field(1, k.encode()) + field(2, v.encode()))
    if netns:
        p += field(8, field(5, field(1, b"network") + field(2, netns.encode())))
    return p


def container(cid, pid):
    return field(1, cid.encode()) + field(2, pid.encode()) + field(3, b"app") + field(8, b"PATH=/bin")


def write(name, head, wire):
    d = os.path.join(HERE, "seeds", "nri_session")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes(head) + wire)


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "shared", "nri")
    for gen in ("0.12", "old"):
        wire = b""
        with open(os.path.join(shared, "examples", "wire", f"wire-{gen}.txt")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "R->P":
                    wire += bytes.fromhex(parts[2])
        write(f"wire-{gen}", [1] + [255] * 8, wire)
        write(f"wire-{gen}-cut", [0, 0, 6, 9, 2, 40, 13, 1, 7], wire)

    registered = frame(2, ttrpc(1, 2, b""))
    configure = field(2, b"containerd") + field(3, b"v2.2.7") + vfield(4, 5000) + vfield(5, 2000)
    sync1 = field(1, pod("p1", "/var/run/netns/p1", [("roce-tune.io/nccl-env", "true")])) + vfield(3, 1)
    sync2 = field(1, pod("p2")) + field(2, container("c1", "p1")) + field(1, pod("p3")) + vfield(3, 1)
    sync3 = field(2, container("c2", "p2"))
    create = request(9, "CreateContainer", field(1, pod("p1", "/var/run/netns/p1", [("roce-tune.io/nccl-env", "true")])) + field(2, container("c3", "p1")))
    run_pod = request(11, "RunPodSandbox", field(1, pod("xrefused")))
    wire = (registered
            + frame(1, request(1, "Configure", configure))
            + frame(1, request(3, "Synchronize", sync1))
            + frame(1, request(5, "Synchronize", sync2))
            + frame(1, request(7, "Synchronize", sync3))
            + frame(1, create[:17]) + frame(1, create[17:])
            + frame(7, b"\x00\x00\x00\x01garbage")
            + frame(1, request(7, "CreateContainer", b""))
            + frame(1, run_pod + request(13, "StateChange", vfield(1, 2) + field(2, pod("p2")))))
    write("split-sync", [1, 3, 7, 0, 255, 12, 1, 99, 4], wire)
    big = pod("big", annotations=[("filler", "x" * 400)])
    over = registered + frame(1, request(1, "Configure", configure))
    for i, stream in enumerate((3, 5, 7, 9)):
        over += frame(1, request(stream, "Synchronize", field(1, big) + vfield(3, 1)))
    write("over-budget", [1] + [255] * 8, over)


if __name__ == "__main__":
    main()
