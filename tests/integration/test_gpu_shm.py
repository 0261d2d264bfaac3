"""CUDA shared memory over HTTP and gRPC, and GPU metrics, against the
stand-in NVIDIA driver (tests/gpu_stub; NRD_FAKE_CUDA names it): a client
shares device memory by its CUDA IPC handle, the server reads inputs from it
and writes outputs into it in place, with the checks system shared memory
has. The stand-in's device memory is host memory shared through memfd, so
this process reads and writes it directly.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and NRD_FAKE_CUDA set;
scripts/gpu_check.sh runs it with NRD_REAL_GPU=1 against the real driver
(then everything lives on GPU 0 and device memory is read by copies)."""

import base64
import json
import ctypes
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

NEREID = os.environ["NEREID_BIN"]
BACKENDS = os.environ["NEREID_BACKEND_DIR"]
REAL = bool(os.environ.get("NRD_REAL_GPU"))
FAKE = None if REAL else os.environ["NRD_FAKE_CUDA"]
GPU_B = 0 if REAL else 1  # the stand-in's second GPU; a real machine surely has GPU 0


class Cuda:
    """Device memory as a CUDA client has it, from the stand-in or libcuda."""

    def __init__(self):
        self.lib = ctypes.CDLL(FAKE or "libcuda.so.1")
        assert self.lib.cuInit(0) == 0
        self.dev = {}  # pointer -> device

    def _ctx(self, dev):
        ctx = ctypes.c_void_p()
        assert self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert self.lib.cuCtxPushCurrent_v2(ctx) == 0

    def _pop(self):
        ctx = ctypes.c_void_p()
        assert self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctx)) == 0

    def alloc(self, dev, size):
        self._ctx(dev)
        d = ctypes.c_ulonglong()
        assert self.lib.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(size)) == 0
        self._pop()
        self.dev[d.value] = dev
        return d.value

    def handle(self, ptr):
        h = (ctypes.c_char * 64)()
        self._ctx(self.dev[ptr])
        assert self.lib.cuIpcGetMemHandle(h, ctypes.c_ulonglong(ptr)) == 0
        self._pop()
        return base64.b64encode(bytes(h)).decode()

    def write(self, ptr, arr, base=None):
        self._ctx(self.dev[base if base is not None else ptr])
        assert self.lib.cuMemcpyHtoD_v2(ctypes.c_ulonglong(ptr), ctypes.c_void_p(arr.ctypes.data),
                                        ctypes.c_size_t(arr.nbytes)) == 0
        self._pop()

    def read(self, ptr, dtype, n):
        out = np.empty(n, dtype=dtype)
        self._ctx(self.dev[ptr])
        assert self.lib.cuMemcpyDtoH_v2(ctypes.c_void_p(out.ctypes.data), ctypes.c_ulonglong(ptr),
                                        ctypes.c_size_t(out.nbytes)) == 0
        self._pop()
        return out


class Server:
    def __init__(self, repo, extra=()):
        self.err = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ) if REAL else dict(os.environ, NEREID_CUDA_LIBRARY=FAKE, NEREID_NVML_LIBRARY=FAKE,
                                                 NRD_FAKE_CUDA_DEVICES="2")
        args = [NEREID, f"--model-repository={repo}", f"--backend-directory={BACKENDS}", "--http-port=0",
                "--grpc-port=0", "--metrics-port=0", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
                "--allow-client-shm=true", "--cuda-memory-pool-byte-size=0:1048576",
                f"--cuda-memory-pool-byte-size={GPU_B}:1048576", "--pinned-memory-pool-byte-size=1048576", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)
        self.ports = {}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError("nereid exited: " + self.log())
            m = re.match(r"nereid: (HTTP/REST|gRPC endpoint|metrics) listening on \S*:(\d+)", line)
            if m:
                self.ports[m.group(1)] = int(m.group(2))
            if line.startswith("nereid: server "):
                break
        assert "HTTP/REST" in self.ports and "gRPC endpoint" in self.ports, self.log()

    def log(self):
        with open(f"/proc/self/fd/{self.err.fileno()}", errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
        log = self.log()
        for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "ThreadSanitizer"):
            assert bad not in log, log


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    d = repo / "id" / "1"
    d.mkdir(parents=True)
    (repo / "id" / "config.pbtxt").write_text(
        'name: "id"\nbackend: "identity"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]\n'
        'instance_group [ { kind: KIND_GPU gpus: [ %d ] } ]\n' % GPU_B)
    probe_lib = os.path.join(os.environ.get("NEREID_TEST_BACKEND_DIR", ""), "api_probe", "libtriton_api_probe.so")
    if not REAL and os.path.exists(probe_lib):
        (repo / "probe" / "1").mkdir(parents=True)
        (repo / "probe" / "config.pbtxt").write_text(
            'name: "probe"\nbackend: "api_probe"\nmax_batch_size: 0\n'
            'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
            'output [ { name: "PROBE" data_type: TYPE_STRING dims: [ 1 ] } ]\n')
        os.symlink(probe_lib, repo / "probe" / "libtriton_api_probe.so")
    s = Server(repo)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def cuda():
    return Cuda()


def clients(srv):
    return [httpclient.InferenceServerClient(f"127.0.0.1:{srv.ports['HTTP/REST']}"),
            grpcclient.InferenceServerClient(f"127.0.0.1:{srv.ports['gRPC endpoint']}")]


def names(status):
    """Region names from either client's CUDA status answer."""
    if isinstance(status, list):
        return sorted(r["name"] for r in status)
    return sorted(status.regions.keys())


def test_registration_and_its_errors_on_both_protocols(srv, cuda):
    for c in clients(srv):
        proto = "http" if isinstance(c, httpclient.InferenceServerClient) else "grpc"
        ptr = cuda.alloc(0, 256)
        c.register_cuda_shared_memory(f"r_{proto}", cuda.handle(ptr), 0, 256)
        st = c.get_cuda_shared_memory_status(f"r_{proto}")
        if proto == "http":
            assert st == [{"name": f"r_{proto}", "device_id": 0, "byte_size": 256}]
        else:
            assert st.regions[f"r_{proto}"].device_id == 0 and st.regions[f"r_{proto}"].byte_size == 256
        # CUDA regions are not system regions.
        sysst = c.get_system_shared_memory_status()
        assert (sysst if proto == "http" else list(sysst.regions)) == []
        with pytest.raises(InferenceServerException, match="already in manager"):
            c.register_cuda_shared_memory(f"r_{proto}", cuda.handle(ptr), 0, 256)
        bad = base64.b64encode(bytes(64)).decode()
        with pytest.raises(InferenceServerException,
                           match="failed to register CUDA shared memory region 'bad': failed to open CUDA IPC "
                                 "handle: invalid argument"):
            c.register_cuda_shared_memory("bad", bad, 0, 256)
        with pytest.raises(InferenceServerException, match="Unable to find cuda shared memory region: 'nope'"):
            c.get_cuda_shared_memory_status("nope")
        c.unregister_cuda_shared_memory(f"r_{proto}")
        assert names(c.get_cuda_shared_memory_status()) == []
    # A handle of the wrong size (HTTP's own check).
    c = clients(srv)[0]
    with pytest.raises(InferenceServerException, match="must be a valid base64 encoded cudaIpcMemHandle_t"):
        c.register_cuda_shared_memory("short", base64.b64encode(bytes(10)).decode(), 0, 16)


def make_io(mod, region_in, region_out, in_off=0, out_size=64):
    x = mod.InferInput("INPUT0", [16], "INT32")
    x.set_shared_memory(region_in, 64, offset=in_off)
    o = mod.InferRequestedOutput("OUTPUT0")
    o.set_shared_memory(region_out, out_size)
    return [x], [o]


def test_inference_reads_and_writes_cuda_regions_in_place(srv, cuda):
    data = np.arange(16, dtype=np.int32) * 3 - 7
    for c, mod in zip(clients(srv), (httpclient, grpcclient)):
        p_in, p_out = cuda.alloc(0, 128), cuda.alloc(GPU_B, 64)
        cuda.write(p_in + 64, data, base=p_in)
        c.register_cuda_shared_memory("in", cuda.handle(p_in), 0, 128)
        c.register_cuda_shared_memory("out", cuda.handle(p_out), GPU_B, 64)
        try:
            inputs, outputs = make_io(mod, "in", "out", in_off=64)
            r = c.infer("id", inputs, outputs=outputs)
            assert np.array_equal(cuda.read(p_out, np.int32, 16), data)
            # The same bounds and lookups as system shared memory.
            with pytest.raises(InferenceServerException, match="Invalid offset \\+ byte size"):
                c.infer("id", *make_io(mod, "in", "out", in_off=100)[:1], outputs=outputs)
            with pytest.raises(InferenceServerException, match="at least 64 bytes"):
                c.infer("id", inputs, outputs=make_io(mod, "in", "out", out_size=32)[1])
            with pytest.raises(InferenceServerException, match="nope"):
                c.infer("id", make_io(mod, "nope", "out")[0], outputs=outputs)
        finally:
            c.unregister_cuda_shared_memory()
        with pytest.raises(InferenceServerException, match="in"):
            c.infer("id", *make_io(mod, "in", "out"))


def test_gpu_metrics_from_nvml(srv):
    text = urllib.request.urlopen(f"http://127.0.0.1:{srv.ports['metrics']}/metrics", timeout=30).read().decode()
    uuid = 'gpu_uuid="GPU-[^"]+"' if REAL else 'gpu_uuid="GPU-00000000-0000-0000-0000-000000000001"'
    for name, kind in (("nv_gpu_utilization", "gauge"), ("nv_gpu_memory_total_bytes", "gauge"),
                       ("nv_gpu_memory_used_bytes", "gauge"), ("nv_gpu_power_usage", "gauge"),
                       ("nv_gpu_power_limit", "gauge"), ("nv_energy_consumption", "counter")):
        assert f"# TYPE {name} {kind}" in text, text
        assert re.search(rf"^{name}{{{uuid}}} \S+$", text, re.M), (name, text)
    if not REAL:
        assert re.search(rf"^nv_gpu_utilization{{{uuid}}} 0\.35$", text, re.M), text
        assert re.search(rf"^nv_gpu_power_limit{{{uuid}}} 300$", text, re.M), text
    assert re.search(r"^nv_pinned_memory_pool_total_bytes 1048576$", text, re.M), text
    # The devices in the log at start, and Triton's metrics line for each.
    log = srv.log()
    assert "Collecting metrics for GPU 0:" in log, log
    if not REAL:
        assert "GPU 1: Nereid Stand-in GPU 1, compute capability 8.0, 1073741824 bytes" in log, log
        assert "Collecting metrics for GPU 1: Nereid Stand-in GPU 1" in log, log


def test_gpu_metrics_can_be_switched_off(tmp_path):
    s = Server(tmp_path, extra=("--allow-gpu-metrics=false",))
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{s.ports['metrics']}/metrics", timeout=30).read().decode()
        assert "nv_gpu_utilization" not in text
    finally:
        s.stop()


def metric_series(text, family):
    """{labels: value} of one family's samples."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(rf"^{family}{{([^}}]*)}} (\S+)$", text, re.M)}


@pytest.mark.parametrize("gpu_metrics", [True, False])
def test_gpu_instances_count_under_their_gpu_uuid(tmp_path, gpu_metrics):
    # Triton gives each KIND_GPU instance a metric reporter labelled with
    # its GPU's UUID (while it collects GPU metrics): what the instances
    # report leaves the unlabelled series, which keeps the model's own
    # counts (pending requests, failures before an instance).
    gpus = [0, GPU_B] if not REAL else [0]
    for name, group in (("g", "kind: KIND_GPU gpus: [ %s ]" % ", ".join(map(str, gpus))), ("c", "kind: KIND_CPU")):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "identity"\nmax_batch_size: 0\n'
            'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
            'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] } ]\n'
            f'instance_group [ {{ {group} }} ]\n')
    s = Server(tmp_path, extra=() if gpu_metrics else ("--allow-gpu-metrics=false",))
    try:
        c = clients(s)[0]
        for name, n in (("g", 6), ("c", 3)):
            for _ in range(n):
                i = httpclient.InferInput("INPUT0", [4], "INT32")
                i.set_data_from_numpy(np.arange(4, dtype=np.int32))
                c.infer(name, [i])
        text = urllib.request.urlopen(f"http://127.0.0.1:{s.ports['metrics']}/metrics", timeout=30).read().decode()
        uuids = set(re.findall(r'^nv_gpu_utilization{gpu_uuid="([^"]+)"}', text, re.M))
        for family in ("nv_inference_count", "nv_inference_exec_count", "nv_inference_request_success"):
            series = metric_series(text, family)
            assert series['model="c",version="1"'] == 3, (family, series)
            assert not [k for k in series if k.startswith('gpu_uuid=') and 'model="c"' in k], series
            g = {k: v for k, v in series.items() if 'model="g"' in k}
            assert sum(g.values()) == 6, (family, g)
            labelled = {re.match(r'gpu_uuid="([^"]+)"', k).group(1) for k in g if k.startswith("gpu_uuid=")}
            if gpu_metrics:
                assert g['model="g",version="1"'] == 0, g
                assert labelled and labelled <= uuids, (labelled, uuids)
                if not REAL:
                    assert labelled == {"GPU-00000000-0000-0000-0000-000000000000",
                                        "GPU-00000000-0000-0000-0000-000000000001"}, g
            else:
                assert g == {'model="g",version="1"': 6}, g
        for family in ("nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                       "nv_inference_compute_infer_duration_us"):
            labelled = [k for k in metric_series(text, family) if k.startswith("gpu_uuid=")]
            assert len(labelled) == (len(gpus) if gpu_metrics else 0), (family, labelled)
        fails = metric_series(text, "nv_inference_request_failure")
        gpu_fails = [k for k in fails if k.startswith("gpu_uuid=")]
        assert len(gpu_fails) == (4 * len(gpus) if gpu_metrics else 0), fails
        assert all(v == 0 for v in fails.values()), fails
        pending = metric_series(text, "nv_inference_pending_request_count")
        assert not [k for k in pending if k.startswith("gpu_uuid=")], pending
    finally:
        s.stop()


@pytest.mark.skipif(REAL, reason="the stand-in's two devices")
def test_cuda_visible_devices_and_min_compute_capability(tmp_path):
    # CUDA_VISIBLE_DEVICES=1: the driver shows one device, ordinal 0 (the
    # second GPU); a model asking for GPU 1 fails with Triton's message.
    # --min-supported-compute-capability above the devices': none is used.
    d = tmp_path / "g" / "1"
    d.mkdir(parents=True)
    (tmp_path / "g" / "config.pbtxt").write_text(
        'name: "g"\nbackend: "identity"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
        'instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]\n')
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    try:
        s = Server(tmp_path, extra=("--model-control-mode=explicit",))
    finally:
        if old is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
    try:
        c = clients(s)[0]
        with pytest.raises(InferenceServerException,
                           match="instance group g_0 of model g specifies invalid or unsupported gpu id 1. GPUs "
                                 "with at least the minimum required CUDA compute compatibility of 6.000000 are: 0 \\("):
            c.load_model("g")
        text = urllib.request.urlopen(f"http://127.0.0.1:{s.ports['metrics']}/metrics", timeout=30).read().decode()
        assert re.findall(r'^nv_gpu_utilization{gpu_uuid="([^"]+)"}', text, re.M) == [
            "GPU-00000000-0000-0000-0000-000000000001"], text
    finally:
        s.stop()
    (tmp_path / "g" / "config.pbtxt").write_text(
        (tmp_path / "g" / "config.pbtxt").read_text().replace("gpus: [ 1 ]", "gpus: [ 0 ]"))
    s = Server(tmp_path, extra=("--model-control-mode=explicit", "--min-supported-compute-capability=9.0"))
    try:
        with pytest.raises(InferenceServerException,
                           match="specifies invalid or unsupported gpu id 0.*of 9.000000 are:  \\("):
            clients(s)[0].load_model("g")
    finally:
        s.stop()


def http_post(srv, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{srv.ports['HTTP/REST']}{path}", method="POST",
                                 data=body if isinstance(body, bytes) else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_bad_registrations_are_refused(srv, cuda):
    # By hand: bodies tritonclient would not send.
    good = cuda.handle(cuda.alloc(0, 64))
    url = "/v2/cudasharedmemory/region/x/register"
    for body, words in (
            ({"device_id": 0, "byte_size": 64}, "no 'raw_handle' field"),
            ({"raw_handle": {"b64": 5}, "device_id": 0, "byte_size": 64}, "Unable to parse 'b64'"),
            ({"raw_handle": "abc", "device_id": 0, "byte_size": 64}, "Unable to parse 'b64'"),
            ({"raw_handle": {"b64": "!!!"}, "device_id": 0, "byte_size": 64}, "valid base64 encoded cudaIpcMemHandle_t"),
            ({"raw_handle": {"b64": good}, "byte_size": 64}, "no 'device_id' field"),
            ({"raw_handle": {"b64": good}, "device_id": -1, "byte_size": 64}, "Unable to parse 'device_id'"),
            ({"raw_handle": {"b64": good}, "device_id": 0}, "no 'byte_size' field"),
            ({"raw_handle": {"b64": good}, "device_id": 0, "byte_size": "64"}, "Unable to parse 'byte_size'"),
            ({"raw_handle": {"b64": good}, "device_id": 7, "byte_size": 64}, "failed to open CUDA IPC handle"),
            (b"{not json", "failed to parse the request JSON buffer")):
        status, text = http_post(srv, url, body)
        # A body that is not JSON gets the status the other routes give it.
        assert (status == 400 or isinstance(body, bytes)) and words in text, (body, status, text)
    # The same handle twice under two names maps it twice; both work.
    assert http_post(srv, "/v2/cudasharedmemory/region/a/register",
                     {"raw_handle": {"b64": good}, "device_id": 0, "byte_size": 64})[0] == 200
    assert http_post(srv, "/v2/cudasharedmemory/region/b/register",
                     {"raw_handle": {"b64": good}, "device_id": 0, "byte_size": 64})[0] == 200
    g = clients(srv)[1]
    with pytest.raises(InferenceServerException, match="failed to open CUDA IPC handle: invalid argument"):
        g.register_cuda_shared_memory("short", base64.b64encode(bytes(10)).decode(), 0, 16)
    assert names(g.get_cuda_shared_memory_status()) == ["a", "b"]
    g.unregister_cuda_shared_memory()
    assert names(g.get_cuda_shared_memory_status()) == []


@pytest.mark.skipif(REAL or not os.environ.get("NEREID_TEST_BACKEND_DIR"),
                    reason="api_probe writes its output with memcpy: the stand-in's host-backed memory only")
def test_backend_learns_an_output_goes_to_gpu_memory(srv, cuda):
    # The front ends' allocators answer a backend's question about an
    # output (TRITONBACKEND_RequestOutputBufferProperties) with the memory
    # of the region the request bound it to: GPU for a CUDA region.
    for c, mod in zip(clients(srv), (httpclient, grpcclient)):
        p_out = cuda.alloc(0, 4096)
        c.register_cuda_shared_memory("probe_out", cuda.handle(p_out), 0, 4096)
        try:
            x = mod.InferInput("INPUT0", [2], "FP32")
            x.set_data_from_numpy(np.array([1, 2], dtype=np.float32))
            o = mod.InferRequestedOutput("PROBE")
            o.set_shared_memory("probe_out", 4096)
            c.infer("probe", [x], outputs=[o])
            raw = cuda.read(p_out, np.uint8, 4096).tobytes()
            n = int.from_bytes(raw[:4], "little")
            report = json.loads(raw[4:4 + n])
            assert report["output_buffer_memory_type"] == "GPU", report
        finally:
            c.unregister_cuda_shared_memory("probe_out")
