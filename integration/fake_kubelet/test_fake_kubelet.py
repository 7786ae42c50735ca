"""The fake kubelet against the real one's documented behaviour, seen through
grpcio's own client (a second, independent gRPC implementation to the Rust
client the fake is for).

Sources: kubernetes pkg/kubelet/apis/podresources/server_v1.go at b7fd57a
(List lists every active pod; Get returns fmt.Errorf values, which grpc-go
sends as UNKNOWN, for a disabled gate and for a pod not found); grpc-go answers
a method the server does not register with UNIMPLEMENTED; multus-cni
pkg/kubeletclient/kubeletclient.go at 95a0932 lines 40 and 85 (a client that
takes at most 16 MiB fails a larger answer with RESOURCE_EXHAUSTED).

Run: integration/.build/venv-grpc/bin/python -m unittest discover -s integration/fake_kubelet
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_kubelet  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = fake_kubelet.generated()

PODS = {
    "pods": [
        {
            "name": "trainer",
            "namespace": "team-a",
            "cpu_ids": [4, 5],
            "containers": [
                {
                    "name": "main",
                    "cpu_ids": [4, 5],
                    "devices": [
                        {"resource": "nvidia.com/gpu", "ids": ["GPU-0", "GPU-1"], "numa": [0]},
                        {"resource": "nvidia.com/rdma_vf", "ids": ["0000:17:00.2"], "numa": [0]},
                    ],
                }
            ],
        },
        {"name": "trainer", "namespace": "team-b", "containers": [{"name": "main"}]},
    ]
}


class Fake:
    def __init__(self, *flags):
        self.dir = tempfile.mkdtemp(prefix="fake-kubelet-test-")
        self.sock = os.path.join(self.dir, "kubelet.sock")
        pods = os.path.join(self.dir, "pods.json")
        with open(pods, "w") as f:
            json.dump(PODS, f)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake_kubelet.py"), "--socket", self.sock,
             "--pods", pods, *flags],
            stdout=subprocess.PIPE,
            env=dict(os.environ, FAKE_KUBELET_LIFETIME_S="60"),
        )
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening "), line

    def stub(self, max_receive=None):
        opts = [] if max_receive is None else [("grpc.max_receive_message_length", max_receive)]
        self.channel = grpc.insecure_channel("unix:" + self.sock, options=opts)
        return pb_grpc.PodResourcesListerStub(self.channel)

    def close(self):
        if getattr(self, "channel", None):
            self.channel.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class FakeKubeletTest(unittest.TestCase):
    def fake(self, *flags):
        f = Fake(*flags)
        self.addCleanup(f.close)
        return f

    def test_list_returns_every_pod_with_devices(self):
        resp = self.fake().stub().List(pb.ListPodResourcesRequest(), timeout=5)
        got = [(p.name, p.namespace) for p in resp.pod_resources]
        self.assertEqual(got, [("trainer", "team-a"), ("trainer", "team-b")])
        devs = resp.pod_resources[0].containers[0].devices
        self.assertEqual([(d.resource_name, list(d.device_ids)) for d in devs],
                         [("nvidia.com/gpu", ["GPU-0", "GPU-1"]),
                          ("nvidia.com/rdma_vf", ["0000:17:00.2"])])
        self.assertEqual(devs[0].topology.nodes[0].ID, 0)
        self.assertEqual(list(resp.pod_resources[0].cpu_ids), [4, 5])

    def test_get_by_namespace_and_name(self):
        stub = self.fake().stub()
        resp = stub.Get(pb.GetPodResourcesRequest(pod_name="trainer", pod_namespace="team-b"),
                        timeout=5)
        self.assertEqual((resp.pod_resources.name, resp.pod_resources.namespace),
                         ("trainer", "team-b"))
        self.assertEqual(len(resp.pod_resources.containers[0].devices), 0)

    def test_get_unknown_pod_is_unknown_with_the_kubelets_message(self):
        stub = self.fake().stub()
        with self.assertRaises(grpc.RpcError) as e:
            stub.Get(pb.GetPodResourcesRequest(pod_name="trainer", pod_namespace="team-c"),
                     timeout=5)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNKNOWN)
        self.assertEqual(e.exception.details(), "pod trainer in namespace team-c not found")

    def test_get_gate_off(self):
        stub = self.fake("--get-disabled").stub()
        with self.assertRaises(grpc.RpcError) as e:
            stub.Get(pb.GetPodResourcesRequest(pod_name="trainer", pod_namespace="team-a"),
                     timeout=5)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNKNOWN)
        self.assertEqual(e.exception.details(), "PodResources API Get method disabled")

    def test_no_get_is_unimplemented_and_list_still_works(self):
        stub = self.fake("--no-get").stub()
        with self.assertRaises(grpc.RpcError) as e:
            stub.Get(pb.GetPodResourcesRequest(pod_name="trainer", pod_namespace="team-a"),
                     timeout=5)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(len(stub.List(pb.ListPodResourcesRequest(), timeout=5).pod_resources), 2)

    def test_allocatable(self):
        resp = self.fake().stub().GetAllocatableResources(pb.AllocatableResourcesRequest(),
                                                           timeout=5)
        self.assertEqual(sorted(i for d in resp.devices for i in d.device_ids),
                         ["0000:17:00.2", "GPU-0", "GPU-1"])

    def test_delay(self):
        stub = self.fake("--delay-ms", "300").stub()
        t = time.monotonic()
        stub.List(pb.ListPodResourcesRequest(), timeout=5)
        self.assertGreaterEqual(time.monotonic() - t, 0.3)
        with self.assertRaises(grpc.RpcError) as e:
            stub.List(pb.ListPodResourcesRequest(), timeout=0.1)
        self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_huge_is_over_multus_limit(self):
        f = self.fake("--huge")
        stub = f.stub(max_receive=16 * 1024 * 1024)
        for call, req in ((stub.List, pb.ListPodResourcesRequest()),
                          (stub.Get, pb.GetPodResourcesRequest(pod_name="trainer",
                                                               pod_namespace="team-a"))):
            with self.assertRaises(grpc.RpcError) as e:
                call(req, timeout=20)
            self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        # Without the limit the answer arrives, and is over it.
        big = f.stub(max_receive=-1).List(pb.ListPodResourcesRequest(), timeout=20)
        self.assertGreater(big.ByteSize(), 16 * 1024 * 1024)

    def test_calls_are_counted_one_line_each(self):
        calls = os.path.join(tempfile.mkdtemp(prefix="fake-kubelet-calls-"), "calls")
        self.addCleanup(shutil.rmtree, os.path.dirname(calls), True)
        stub = self.fake("--calls", calls).stub()
        stub.Get(pb.GetPodResourcesRequest(pod_name="trainer", pod_namespace="team-b"), timeout=5)
        stub.List(pb.ListPodResourcesRequest(), timeout=5)
        with self.assertRaises(grpc.RpcError):
            stub.Get(pb.GetPodResourcesRequest(pod_name="x", pod_namespace="team-a"), timeout=5)
        with open(calls) as c:
            self.assertEqual(c.read().splitlines(), ["Get team-b/trainer", "List", "Get team-a/x"])

    def test_hang_accepts_and_never_answers(self):
        f = self.fake("--hang")
        with self.assertRaises(grpc.RpcError) as e:
            f.stub().List(pb.ListPodResourcesRequest(), timeout=0.3)
        self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        s = socket.socket(socket.AF_UNIX)
        s.connect(f.sock)
        s.settimeout(0.3)
        with self.assertRaises(socket.timeout):
            s.recv(1)
        s.close()

    def test_flood_speaks_http2_and_never_stops(self):
        for kind in sorted(fake_kubelet.FLOODS):
            f = self.fake("--flood", kind)
            s = socket.socket(socket.AF_UNIX)
            s.connect(f.sock)
            s.settimeout(20)
            data = b""
            while len(data) < 256 << 10:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
            s.close()
            self.assertGreaterEqual(len(data), 256 << 10, kind)
            # RFC 9113 3.4: SETTINGS on stream 0 first, then whole frames of
            # the kind, each the same.
            self.assertEqual(data[:9], fake_kubelet.frame(0x4, 0, 0), kind)
            once, one = fake_kubelet.FLOODS[kind]
            body = data[9 + len(once):]
            whole = len(body) // len(one) * len(one)
            self.assertEqual(body[:whole], one * (whole // len(one)), kind)

    def test_garbage_is_not_http2(self):
        f = self.fake("--garbage")
        s = socket.socket(socket.AF_UNIX)
        s.connect(f.sock)
        s.settimeout(5)
        data = b""
        while len(data) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        self.assertEqual(len(data), 4096)
        # RFC 9113 3.4: a server's first frame is SETTINGS (type 4) on stream 0.
        self.assertFalse(data[3] == 4 and data[5:9] == b"\0\0\0\0")
        with self.assertRaises(grpc.RpcError) as e:
            f.stub().List(pb.ListPodResourcesRequest(), timeout=2)
        self.assertIn(e.exception.code(),
                      (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED))


if __name__ == "__main__":
    unittest.main()
