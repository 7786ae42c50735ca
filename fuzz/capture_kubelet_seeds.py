#!/usr/bin/env python3
"""Seeds of the kubelet decoders' fuzz targets, from real bytes: the fake
kubelet (integration/fake_kubelet, grpcio built from the kubelet's proto)
answering roce-tune's own client (examples/podresources_probe), through a
proxy that keeps what the server sent.

  fuzz/capture_kubelet_seeds.py PYTHON_WITH_GRPC PROBE_BINARY

PYTHON_WITH_GRPC: integration/.build/venv-grpc/bin/python; PROBE_BINARY:
target/debug/examples/podresources_probe (`cargo build --example
podresources_probe`). Writes fuzz/seeds/{h2_connection,hpack,podresources}/:
each server's whole byte stream, each header block (and a connection's
blocks in order), each response message. The checkpoint and information
seeds are the fixtures of src/podresources/checkpoint.rs and
tests/it/common/topology.rs.
Run once when the fake or the client changes; the seeds are committed.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "..", "integration", "fake_kubelet", "fake_kubelet.py")
PODS = {
    "pods": [
        {"name": "trainer", "namespace": "team-a", "cpu_ids": [4, 5],
         "containers": [
             {"name": "main", "cpu_ids": [4, 5], "devices": [
                 {"resource": "nvidia.com/gpu",
                  "ids": ["GPU-0f000000-0000-4000-8000-000000000000",
                          "GPU-15000000-0000-4000-8000-000000000000"], "numa": [0]},
                 {"resource": "nvidia.com/rdma_vf",
                  "ids": ["0000:0c:00.2", "0000:16:00.2"], "numa": [0, 1]}]},
             {"name": "sidecar", "devices": [
                 {"resource": "nvidia.com/rdma_vf", "ids": ["0000:0c:00.2"]}]}]},
        {"name": "trainer", "namespace": "team-b",
         "containers": [{"name": "main", "devices": [
             {"resource": "amd.com/gpu", "ids": ["0000:8c:00.0"]}]}]},
    ]
}


def proxy(listen_path, upstream_path, sink):
    """Forward one connection at a time; append what upstream sent to sink."""
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(listen_path)
    ls.listen(4)

    def pump(src, dst, keep):
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if keep is not None:
                keep.append(b)
            try:
                dst.sendall(b)
            except OSError:
                return

    def accept():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            u = socket.socket(socket.AF_UNIX)
            u.connect(upstream_path)
            got = []
            sink.append(got)
            threading.Thread(target=pump, args=(c, u, None), daemon=True).start()
            threading.Thread(target=pump, args=(u, c, got), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return ls


def frames(stream):
    """(type, flags, stream, payload) of each frame after nothing (a server
    has no preface but its SETTINGS)."""
    out, p = [], 0
    while p + 9 <= len(stream):
        n = int.from_bytes(stream[p:p + 3], "big")
        out.append((stream[p + 3], stream[p + 4],
                    int.from_bytes(stream[p + 5:p + 9], "big") & 0x7FFFFFFF,
                    stream[p + 9:p + 9 + n]))
        p += 9 + n
    return out


def main():
    py, probe = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="seeds-")
    pods = os.path.join(work, "pods.json")
    with open(pods, "w") as f:
        json.dump(PODS, f)
    out = {t: os.path.join(HERE, "seeds", t) for t in ("h2_connection", "hpack", "podresources")}
    for d in out.values():
        os.makedirs(d, exist_ok=True)
    cases = [("get", [], "team-a", "trainer"), ("get-unknown", [], "team-c", "x"),
             ("list", ["--no-get"], "team-a", "trainer"),
             ("get-disabled", ["--get-disabled"], "team-b", "trainer")]
    for tag, flags, ns, name in cases:
        up = os.path.join(work, tag + ".sock")
        fake = subprocess.Popen([py, FAKE, "--socket", up, "--pods", pods, *flags],
                                stdout=subprocess.PIPE)
        assert fake.stdout.readline().startswith(b"listening ")
        sink = []
        front = os.path.join(work, tag + "-proxy.sock")
        ls = proxy(front, up, sink)
        r = subprocess.run([probe, front, ns, name, "2000"], capture_output=True, text=True)
        print(tag, r.stdout.strip().splitlines()[0])
        ls.close()
        fake.terminate()
        fake.wait()
        for i, conn in enumerate(sink):
            stream = b"".join(conn)
            with open(os.path.join(out["h2_connection"], f"{tag}-{i}"), "wb") as f:
                f.write(stream)
            body = b""
            blocks = [pl for ty, _, _, pl in frames(stream) if ty == 1]
            # The connection's blocks in order, 0xff between them (the hpack
            # target's split): later blocks name the table earlier ones filled.
            with open(os.path.join(out["hpack"], f"{tag}-{i}-blocks"), "wb") as f:
                f.write(b"\xff".join(blocks))
            for n, (ty, fl, _, payload) in enumerate(frames(stream)):
                if ty == 1:  # HEADERS (grpcio sends no padding or priority)
                    with open(os.path.join(out["hpack"], f"{tag}-{i}-{n}"), "wb") as f:
                        f.write(payload)
                elif ty == 0:
                    body += payload
            if len(body) > 5:
                with open(os.path.join(out["podresources"], f"{tag}-{i}"), "wb") as f:
                    f.write(body[5:])


if __name__ == "__main__":
    main()
