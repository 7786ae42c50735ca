#!/usr/bin/env python3
"""A fake kubelet PodResources endpoint for roce-tune's tests.

Serves v1.PodResourcesLister (podresources.proto beside this file) on a unix
socket with grpcio, answering as the kubelet's server does (kubernetes
pkg/kubelet/apis/podresources/server_v1.go at b7fd57a):

- List: every pod of --pods, each container's devices;
- Get: the pod of that namespace and name; an unknown pod is a plain Go error,
  which grpc-go sends as status UNKNOWN "pod %s in namespace %s not found";
  with the KubeletPodResourcesGet gate off, UNKNOWN "PodResources API Get
  method disabled" (--get-disabled); a kubelet older than 1.27 has no Get at
  all, so gRPC answers UNIMPLEMENTED (--no-get);
- GetAllocatableResources: every device of every pod.

--calls FILE appends one line per call to FILE ("Get <namespace>/<name>",
"List", "GetAllocatableResources"), flushed before the answer: what a test
counts the calls a pod's ADDs made with.

Other modes: --delay-ms N (each answer N ms late), --huge (each answer carries
a filler over 16 MiB, Multus's receive limit), --hang (a plain socket that
accepts and never writes), --garbage (a plain socket that writes random bytes,
--seed, and never speaks HTTP/2), --flood KIND (a raw HTTP/2 peer that sends
its SETTINGS and then, without end, frames RFC 9113 allows: FLOODS says each
and cites the RFC; what a client that keeps reading must cut off).

The Python code for the .proto is generated with grpcio-tools on first use,
into integration/.build/fake_kubelet/gen-<hash of the .proto> (or under
$ROCE_TUNE_BUILD_DIR), atomically, so parallel tests can share it.

Prints "listening <socket>" on stdout once the socket accepts connections.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "podresources.proto")
# Over multus-cni pkg/kubeletclient/kubeletclient.go defaultPodResourcesMaxSize.
HUGE_BYTES = 16 * 1024 * 1024 + 64 * 1024


def build_dir():
    base = os.environ.get("ROCE_TUNE_BUILD_DIR") or os.path.join(HERE, "..", ".build")
    return os.path.join(os.path.abspath(base), "fake_kubelet")


def generated():
    """Import the generated modules, generating them first if needed."""
    with open(PROTO, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    out = os.path.join(build_dir(), "gen-" + digest)
    if not os.path.isfile(os.path.join(out, "podresources_pb2_grpc.py")):
        os.makedirs(build_dir(), exist_ok=True)
        tmp = tempfile.mkdtemp(dir=build_dir(), prefix="tmp-")
        # mkdtemp makes it 0700: a fake run as another uid (the ownership
        # tests) must read it too.
        os.chmod(tmp, 0o755)
        from grpc_tools import protoc

        rc = protoc.main(
            [
                "protoc",
                "-I" + HERE,
                "--python_out=" + tmp,
                "--grpc_python_out=" + tmp,
                PROTO,
            ]
        )
        if rc != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            sys.exit("fake_kubelet: protoc failed (%d)" % rc)
        try:
            os.rename(tmp, out)
        except OSError:
            # Another process generated the same thing first.
            shutil.rmtree(tmp, ignore_errors=True)
    sys.path.insert(0, out)
    import podresources_pb2 as pb
    import podresources_pb2_grpc as pb_grpc

    return pb, pb_grpc


def load_pods(path):
    """{"pods": [{"name", "namespace", "cpu_ids"?, "containers": [{"name",
    "cpu_ids"?, "devices": [{"resource", "ids", "numa"?}]}]}]}"""
    if not path:
        return []
    with open(path) as f:
        return json.load(f)["pods"]


def to_message(pb, pod):
    msg = pb.PodResources(
        name=pod["name"], namespace=pod["namespace"], cpu_ids=pod.get("cpu_ids", [])
    )
    for c in pod.get("containers", []):
        cr = msg.containers.add(name=c["name"], cpu_ids=c.get("cpu_ids", []))
        for d in c.get("devices", []):
            dev = cr.devices.add(resource_name=d["resource"], device_ids=d["ids"])
            for n in d.get("numa", []):
                dev.topology.nodes.add(ID=n)
    return msg


def filler(pb):
    """A container whose device IDs add up to HUGE_BYTES."""
    c = pb.ContainerResources(name="filler")
    chunk = "f" * (1024 * 1024)
    d = c.devices.add(resource_name="example.com/filler")
    for _ in range(HUGE_BYTES // len(chunk) + 1):
        d.device_ids.append(chunk)
    return c


def serve_grpc(args, pods):
    import grpc
    from concurrent import futures

    pb, _ = generated()
    calls = threading.Lock()

    def count(line):
        if args.calls:
            with calls, open(args.calls, "a") as f:
                f.write(line + "\n")

    def pause():
        if args.delay_ms:
            time.sleep(args.delay_ms / 1000.0)

    def list_(request, context):
        count("List")
        pause()
        resp = pb.ListPodResourcesResponse()
        for p in pods:
            resp.pod_resources.append(to_message(pb, p))
        if args.huge:
            big = resp.pod_resources.add(name="filler", namespace="filler")
            big.containers.append(filler(pb))
        return resp

    def get(request, context):
        count("Get %s/%s" % (request.pod_namespace, request.pod_name))
        pause()
        if args.get_disabled:
            context.abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        for p in pods:
            if p["name"] == request.pod_name and p["namespace"] == request.pod_namespace:
                msg = to_message(pb, p)
                if args.huge:
                    msg.containers.append(filler(pb))
                return pb.GetPodResourcesResponse(pod_resources=msg)
        context.abort(
            grpc.StatusCode.UNKNOWN,
            "pod %s in namespace %s not found" % (request.pod_name, request.pod_namespace),
        )

    def allocatable(request, context):
        count("GetAllocatableResources")
        pause()
        resp = pb.AllocatableResourcesResponse()
        for p in pods:
            for c in p.get("containers", []):
                for d in c.get("devices", []):
                    resp.devices.add(resource_name=d["resource"], device_ids=d["ids"])
        return resp

    def unary(fn, req, resp):
        return grpc.unary_unary_rpc_method_handler(
            fn,
            request_deserializer=req.FromString,
            response_serializer=resp.SerializeToString,
        )

    methods = {
        "List": unary(list_, pb.ListPodResourcesRequest, pb.ListPodResourcesResponse),
        "GetAllocatableResources": unary(
            allocatable, pb.AllocatableResourcesRequest, pb.AllocatableResourcesResponse
        ),
    }
    if not args.no_get:
        # Left out, the method does not exist: gRPC itself answers UNIMPLEMENTED.
        methods["Get"] = unary(get, pb.GetPodResourcesRequest, pb.GetPodResourcesResponse)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_send_message_length", -1)],
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("v1.PodResourcesLister", methods),)
    )
    if server.add_insecure_port("unix:" + args.socket) == 0:
        sys.exit("fake_kubelet: cannot listen on " + args.socket)
    server.start()
    return server.stop


def frame(ty, flags, stream, payload=b""):
    """RFC 9113 4.1: the 9-byte header, then the payload."""
    return (len(payload).to_bytes(3, "big") + bytes([ty, flags])
            + stream.to_bytes(4, "big") + payload)


# RFC 7541 6.2.2 literals without indexing, names from the static table:
# ":status" (index 8), "content-type" (index 31, 0x0f 0x10 in 4-bit prefix).
STATUS_100 = b"\x08\x03100"
RESPONSE_HEADERS = b"\x08\x03200\x0f\x10\x10application/grpc"

# What --flood sends after the server's SETTINGS: (frames sent once, the
# frame repeated without end), each a frame RFC 9113 lets a server send.
FLOODS = {
    # 8.1: a response is "zero or more" informational (1xx) header blocks,
    # then the final one: no limit on how many.
    "informational": (b"", frame(0x1, 0x4, 1, STATUS_100)),
    # 4.1, 5.5: "Implementations MUST ignore and discard frames of unknown
    # types."
    "unknown": (b"", frame(0xFA, 0, 0, bytes(32))),
    # 6.9: WINDOW_UPDATE on the connection; an increment of 1 is valid
    # until the window would pass 2^31-1.
    "window-update": (b"", frame(0x8, 0, 0, (1).to_bytes(4, "big"))),
    # 6.7: "Receivers of a PING frame that does not include an ACK flag MUST
    # send a PING frame with the ACK flag set": each makes the client write.
    "ping": (b"", frame(0x6, 0, 0, b"hostile!")),
    # 6.5.3: each SETTINGS without ACK must be acknowledged.
    "settings": (b"", frame(0x4, 0, 0)),
    # 5.3.2, 6.3: PRIORITY (deprecated, still a frame to take) on the stream.
    "priority": (b"", frame(0x2, 0, 1, bytes([0, 0, 0, 0, 15]))),
    # 6.1: the response's HEADERS, then DATA that is all padding ("Padding
    # octets MUST be set to zero"), valid frames carrying no byte.
    "padding": (frame(0x1, 0x4, 1, RESPONSE_HEADERS), frame(0x0, 0x8, 1, bytes([255]) + bytes(255))),
}
# A kubelet-sized send buffer (SO_SNDBUFFORCE, root): with the default the
# queue runs dry now and then on a busy machine, and a client that checks its
# bound only before a blocking read gets lucky.
SO_SNDBUFFORCE = 32
FLOOD_FOR_S = 30


def serve_flood(args):
    """--flood KIND: SETTINGS, then FLOODS[KIND] as fast as the socket takes
    it, on every connection, for FLOOD_FOR_S at most; what the client writes
    (its ACKs) is read and dropped, so it never blocks on a full socket."""
    once, one = FLOODS[args.flood]
    burst = one * max(1, (256 * 1024) // len(one))
    def drain(conn):
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    def flood(conn):
        try:
            conn.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 64 << 20)
        except OSError:
            pass
        threading.Thread(target=drain, args=(conn,), daemon=True).start()
        until = time.monotonic() + FLOOD_FOR_S
        try:
            conn.sendall(frame(0x4, 0, 0) + once)
            while time.monotonic() < until:
                conn.sendall(burst)
        except OSError:
            pass
        conn.close()

    return serve_each(args, lambda conn: threading.Thread(
        target=flood, args=(conn,), daemon=True).start())


def serve_each(args, handle):
    """A plain socket at args.socket; `handle` each connection it accepts. The
    stop function for main()."""
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(args.socket)
    lsock.listen(64)

    def loop():
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            handle(conn)

    threading.Thread(target=loop, daemon=True).start()
    return lambda grace: lsock.close()


def serve_raw(args):
    """--hang and --garbage: a plain socket, no HTTP/2 at all."""
    held = []
    rng = random.Random(args.seed)

    def handle(conn):
        if args.garbage:
            try:
                conn.sendall(bytes(rng.getrandbits(8) for _ in range(4096)))
            except OSError:
                pass
        # Held open, never read, never answered.
        held.append(conn)

    return serve_each(args, handle)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--pods", help="JSON file of pods")
    get = ap.add_mutually_exclusive_group()
    get.add_argument("--no-get", action="store_true", help="no Get method (kubelet < 1.27)")
    get.add_argument("--get-disabled", action="store_true", help="KubeletPodResourcesGet off")
    ap.add_argument("--delay-ms", type=int, default=0)
    ap.add_argument("--calls", help="append a line per call to this file")
    ap.add_argument("--huge", action="store_true")
    raw = ap.add_mutually_exclusive_group()
    raw.add_argument("--hang", action="store_true")
    raw.add_argument("--garbage", action="store_true")
    raw.add_argument("--flood", choices=sorted(FLOODS))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    args.socket = os.path.abspath(args.socket)
    if os.path.exists(args.socket):
        os.unlink(args.socket)

    if args.flood:
        stop = serve_flood(args)
    elif args.hang or args.garbage:
        stop = serve_raw(args)
    else:
        stop = serve_grpc(args, load_pods(args.pods))
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print("listening " + args.socket, flush=True)
    # Bounded even if nobody stops it: a test that dies leaves no server behind.
    done.wait(timeout=float(os.environ.get("FAKE_KUBELET_LIFETIME_S", "600")))
    stop(0)
    try:
        os.unlink(args.socket)
    except OSError:
        pass


if __name__ == "__main__":
    main()
