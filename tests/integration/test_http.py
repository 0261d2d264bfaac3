"""HTTP/REST front end of nereid: KServe v2 routes with Triton's
extensions, both tensor encodings for every datatype, error cases,
oversized and malformed bodies, client disconnects, and /metrics.

Requests go through Triton's own client, tritonclient.http (and
tritonclient.http.aio in a few tests): health, metadata, configuration,
statistics, repository control, trace and log settings, system shared
memory, and inference with JSON and binary tensors, BYTES, parameters,
classification and compression. Requests are built by hand only where the
client cannot send them: malformed or oversized bodies, wrong lengths,
chunked bodies, pipelining, disconnects, protocol violations, exact JSON
text, raw binary bodies, /metrics and the generate extension (which
tritonclient has no call for); each such place says why.

Run by ctest (tests/CMakeLists.txt) with NEREID_BIN, NEREID_BACKEND_DIR and
NEREID_EXAMPLES set. Each server listens on ports the kernel picks
(--http-port=0); the port is read from nereid's stdout.
"""

import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import ml_dtypes
import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aiohttpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
NEREID = os.environ.get("NEREID_BIN", os.path.join(SOURCE, "build", "src", "server", "nereid"))
BACKENDS = os.environ.get("NEREID_BACKEND_DIR", os.path.join(SOURCE, "build", "backends"))
EXAMPLES = os.environ.get("NEREID_EXAMPLES", os.path.join(SOURCE, "examples", "models"))
TEST_BACKENDS = os.environ.get("NEREID_TEST_BACKEND_DIR", os.path.join(SOURCE, "build", "test_backends"))
START_TIMEOUT = 90

if not os.access(NEREID, os.X_OK):  # a missing binary fails the run, never skips it
    raise RuntimeError(f"no nereid binary at {NEREID!r} (ctest sets NEREID_BIN)")

# datatype -> (numpy dtype, config type); BF16 has no numpy type: uint16 bits.
DTYPES = {
    "BOOL": (np.bool_, "TYPE_BOOL"),
    "UINT8": (np.uint8, "TYPE_UINT8"),
    "UINT16": (np.uint16, "TYPE_UINT16"),
    "UINT32": (np.uint32, "TYPE_UINT32"),
    "UINT64": (np.uint64, "TYPE_UINT64"),
    "INT8": (np.int8, "TYPE_INT8"),
    "INT16": (np.int16, "TYPE_INT16"),
    "INT32": (np.int32, "TYPE_INT32"),
    "INT64": (np.int64, "TYPE_INT64"),
    "FP16": (np.float16, "TYPE_FP16"),
    "FP32": (np.float32, "TYPE_FP32"),
    "FP64": (np.float64, "TYPE_FP64"),
    "BF16": (np.uint16, "TYPE_BF16"),
    "BYTES": (np.object_, "TYPE_STRING"),
}


def identity_config(name, ctype):
    return (f'name: "{name}"\nbackend: "identity"\nmax_batch_size: 8\n'
            f'input [ {{ name: "INPUT0" data_type: {ctype} dims: [ -1 ] }} ]\n'
            f'output [ {{ name: "OUTPUT0" data_type: {ctype} dims: [ -1 ] }} ]\n'
            'instance_group [ { kind: KIND_CPU count: 1 } ]\n')


class Server:
    def __init__(self, repo, extra=(), env=None):
        self.errfile = tempfile.TemporaryFile(mode="w+")
        args = [NEREID, f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                "--http-port=0", "--metrics-port=0", "--http-address=127.0.0.1",
                "--http-thread-count=2", "--allow-grpc=false", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.errfile, text=True, env=env)
        self.port = self.metrics_port = None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"nereid exited: {self.log()}")
            m = re.match(r"nereid: (HTTP/REST|metrics) listening on .*:(\d+)$", line.strip())
            if m:
                if m.group(1) == "metrics":
                    self.metrics_port = int(m.group(2))
                else:
                    self.port = int(m.group(2))
            if line.startswith("nereid: server "):
                break
        assert self.port, self.log()

    def log(self):
        # A new open file description: seeking the one nereid writes through
        # would move its offset, and a line written meanwhile would land
        # over earlier ones (seen: two log lines spliced into one).
        with open(f"/proc/self/fd/{self.errfile.fileno()}", errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()
        log = self.log()
        for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            assert bad not in log, log
        return self.proc.returncode

    # Hand-built requests, for what tritonclient cannot send (each caller says what).
    def request(self, method, path, body=None, headers=None, port=None):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=30)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()


def model_with_library(repo, name, backend, max_batch_size, io):
    """repo/name served by test backend `backend`, its library copied into
    the model's folder; io: the config's input and output lines."""
    os.makedirs(os.path.join(repo, name, "1"))
    shutil.copy(os.path.join(TEST_BACKENDS, backend, f"libtriton_{backend}.so"), os.path.join(repo, name))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(f'name: "{name}"\nbackend: "{backend}"\nmax_batch_size: {max_batch_size}\n' + io +
                'instance_group [ { kind: KIND_CPU count: 1 } ]\n')


@pytest.fixture(scope="module")
def repo():
    d = tempfile.mkdtemp(prefix="nereid_http_")
    for m in os.listdir(EXAMPLES):
        shutil.copytree(os.path.join(EXAMPLES, m), os.path.join(d, m))
    # A classification model: identity with a label file on its output.
    name = "identity_labels"
    os.makedirs(os.path.join(d, name, "1"))
    with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
        f.write('name: "identity_labels"\nbackend: "identity"\nmax_batch_size: 8\n'
                'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] label_filename: "labels.txt" } ]\n'
                'instance_group [ { kind: KIND_CPU count: 1 } ]\n')
    with open(os.path.join(d, name, "labels.txt"), "w") as f:
        f.write("".join(f"label{i}\n" for i in range(8)))
    # Test backends, each library in its model's folder (Triton's search
    # order). cancel_wait holds each request until the core cancels it (or
    # 20 s pass); api_probe answers with what the backend API calls no other
    # backend makes returned; echo_params answers like identity and returns
    # its request's parameters.
    io = ('input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
          'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n')
    model_with_library(d, "cancel_wait_http", "cancel_wait", 0,
                       io + 'parameters { key: "max_wait_ms" value: { string_value: "20000" } }\n')
    model_with_library(d, "api_probe", "api_probe", 0,
                       'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
                       'output [ { name: "PROBE" data_type: TYPE_STRING dims: [ 1 ] } ]\n')
    model_with_library(d, "echo_params", "echo_params", 8, io)
    # Raw binary requests: a BYTES input of one element, and an input with
    # two variable-size dimensions (whose shape a raw body cannot give).
    for name, dt, dims in (("identity_bytes_one", "TYPE_STRING", "[ 1 ]"), ("identity_fp16_2d", "TYPE_FP16", "[ -1, -1 ]")):
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
            f.write(f'name: "{name}"\nbackend: "identity"\nmax_batch_size: 8\n'
                    f'input [ {{ name: "INPUT0" data_type: {dt} dims: {dims} }} ]\n'
                    f'output [ {{ name: "OUTPUT0" data_type: {dt} dims: {dims} }} ]\n')
    # An ensemble of the decoupled square_int32: decoupled itself.
    os.makedirs(os.path.join(d, "square_ens", "1"))
    with open(os.path.join(d, "square_ens", "config.pbtxt"), "w") as f:
        f.write('name: "square_ens"\nplatform: "ensemble"\nmax_batch_size: 0\n'
                'input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                'output [ { name: "SQ" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                'ensemble_scheduling { step [ { model_name: "square_int32" model_version: -1\n'
                '  input_map { key: "IN" value: "N" } output_map { key: "OUT" value: "SQ" } } ] }\n')
    # identity taking 30 ms an Execute: replies come while the loop sleeps.
    os.makedirs(os.path.join(d, "identity_slow", "1"))
    with open(os.path.join(d, "identity_slow", "config.pbtxt"), "w") as f:
        f.write('name: "identity_slow"\nbackend: "identity"\nmax_batch_size: 8\n' + io +
                'instance_group [ { kind: KIND_CPU count: 1 } ]\n'
                'parameters { key: "execute_delay_ms" value: { string_value: "30" } }\n')
    for dt, (_, ctype) in DTYPES.items():
        name = f"identity_{dt.lower()}_t"
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
            f.write(identity_config(name, ctype))
    yield d
    shutil.rmtree(d, ignore_errors=True)


UNSENT_MAX = 4 << 20


@pytest.fixture(scope="module")
def srv(repo):
    # A generate_stream client that stops reading is cut off at 4 MB
    # waiting instead of 64: a sanitizer build on a loaded machine took
    # more than 60 s to produce 64 MB of events.
    # --allow-client-shm=true: the shared memory tests register regions.
    s = Server(repo, ["--model-control-mode=explicit", "--load-model=*",
                      "--http-max-input-size=1048576", "--allow-client-shm=true"],
               env={**os.environ, "NEREID_GENERATE_UNSENT_MAX": str(UNSENT_MAX)})
    yield s
    assert s.alive(), s.log()
    assert s.stop() == 0


@pytest.fixture(scope="module")
def client(srv):
    c = httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}")
    yield c
    c.close()


def jreq(srv, method, path, body=None, headers=None):
    # Hand-built, with its body decoded: for what tritonclient cannot send.
    status, hdrs, data = srv.request(method, path, body, headers)
    return status, (json.loads(data) if data else None)


def refused(call, *args, status="400", contains=None, **kwargs):
    """The InferenceServerException that call(*args, **kwargs) raises,
    checked to have HTTP status `status` and `contains` in its message."""
    with pytest.raises(InferenceServerException) as e:
        call(*args, **kwargs)
    err = e.value
    assert err.status() == str(status), (err.status(), err.message())
    if contains:
        assert contains in err.message(), err.message()
    return err


def tensor(name, arr, binary=True, datatype=None):
    """An InferInput holding arr (ml_dtypes.bfloat16 arrays are BF16)."""
    x = httpclient.InferInput(name, list(arr.shape), datatype or np_to_triton_dtype(arr.dtype))
    x.set_data_from_numpy(arr, binary_data=binary)
    return x


def out(name, binary=True, class_count=0):
    return httpclient.InferRequestedOutput(name, binary_data=binary, class_count=class_count)


# ---- routes ---------------------------------------------------------------


def test_server_metadata_and_health(srv, client):
    md = client.get_server_metadata()
    assert md["name"] == "triton" and "binary_tensor_data" in md["extensions"]
    assert client.is_server_live() and client.is_server_ready()
    # By hand: tritonclient sends only GET to health routes.
    assert srv.request("POST", "/v2/health/ready")[0] == 405


def test_model_metadata_ready_config_stats(client):
    md = client.get_model_metadata("simple")
    assert md["name"] == "simple" and md["inputs"][0]["datatype"] == "INT32"
    assert client.get_model_metadata("simple", "1") == md
    assert client.is_model_ready("simple") and client.is_model_ready("simple", "1")
    cfg = client.get_model_config("simple")
    assert cfg["name"] == "simple" and cfg["max_batch_size"] == 8
    stats = client.get_inference_statistics("simple")
    assert stats["model_stats"][0]["name"] == "simple"
    assert client.get_inference_statistics("simple", "1")["model_stats"][0]["version"] == "1"
    allst = client.get_inference_statistics()
    assert {"simple", "identity_fp32"} <= {m["name"] for m in allst["model_stats"]}


def test_unknown_model_and_version(srv, client):
    refused(client.get_model_metadata, "nope", status=404, contains="nope")
    assert not client.is_model_ready("nope")
    refused(client.get_model_metadata, "simple", "7", status=404)
    # Triton's routes take only digits as a version: anything else is no route.
    refused(client.get_model_metadata, "simple", "abc", status=404, contains="Not Found")
    # By hand: is_model_ready answers a bool, and these check the status
    # and error body behind it; tritonclient has no call for an unknown route.
    st, body = jreq(srv, "GET", "/v2/models/nope/ready")
    assert st in (400, 404) and "error" in body
    st, body = jreq(srv, "GET", "/v2/nothing/here")
    assert st == 404 and body["error"]


def wait_not_ready(client, model):
    deadline = time.monotonic() + 30
    while client.is_model_ready(model) and time.monotonic() < deadline:
        time.sleep(0.1)


def test_repository_index_load_unload(srv, client):
    idx = client.get_model_repository_index()
    assert {"name": "simple", "version": "1", "state": "READY"} in [
        {k: e.get(k) for k in ("name", "version", "state")} for e in idx]
    # By hand: tritonclient's index request has no "ready" field, and it
    # cannot send bad JSON or another method.
    st, idx = jreq(srv, "POST", "/v2/repository/index", {"ready": True})
    assert st == 200 and all(e["state"] == "READY" for e in idx)
    # Triton's JSON parser errors are INTERNAL: 500.
    assert jreq(srv, "POST", "/v2/repository/index", "{bad")[0] == 500
    assert srv.request("GET", "/v2/repository/index")[0] == 405

    client.unload_model("identity_int8_t")
    wait_not_ready(client, "identity_int8_t")
    assert srv.request("GET", "/v2/models/identity_int8_t/ready")[0] == 400  # the status behind False
    client.load_model("identity_int8_t")
    assert client.is_model_ready("identity_int8_t")

    # A config override (a JSON string).
    cfg = {"name": "identity_int8_t", "backend": "identity", "max_batch_size": 4,
           "input": [{"name": "INPUT0", "data_type": "TYPE_INT8", "dims": [-1]}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT8", "dims": [-1]}]}
    client.load_model("identity_int8_t", config=json.dumps(cfg))
    assert client.get_model_config("identity_int8_t")["max_batch_size"] == 4
    # Triton answers an override that does not parse with its failed poll (500).
    refused(client.load_model, "identity_int8_t", config="{not json", status="500",
            contains="failed to load 'identity_int8_t', failed to poll from model repository; invalid config")
    # By hand: tritonclient base64-encodes every file it sends.
    st, body = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load",
                    {"parameters": {"file:1/model.bin": "@@@"}})
    assert st == 400 and "base64" in body["error"]
    refused(client.load_model, "identity_int8_t", config=5)
    with pytest.raises(InferenceServerException) as e:
        client.load_model("no_such_model")
    assert int(e.value.status()) >= 400 and e.value.message()
    # A model the repository does not have, from a config and a file override.
    made = dict(cfg, name="http_made_up")
    client.load_model("http_made_up", config=json.dumps(made),
                      files={"file:1/weights.bin": bytes(range(256)) * 64})
    assert client.is_model_ready("http_made_up")
    client.unload_model("http_made_up")
    # Put the original configuration back.
    client.load_model("identity_int8_t")
    client.unload_model("identity_int8_t", unload_dependents=True)
    client.load_model("identity_int8_t")
    assert client.get_model_config("identity_int8_t")["max_batch_size"] == 8


def test_failed_load_of_a_model_no_repository_has(repo):
    """Triton's repository manager answers INTERNAL "failed to load 'X',
    failed to poll from model repository" and, having polled nothing,
    keeps no state for X: the index does not list it and the server stays
    ready."""
    s = Server(repo, ["--model-control-mode=explicit"])
    try:
        with httpclient.InferenceServerClient(f"127.0.0.1:{s.port}") as c:
            assert c.is_server_ready()
            err = refused(c.load_model, "no_such_model", status=500)
            assert err.message() == "failed to load 'no_such_model', failed to poll from model repository", err
            assert "no_such_model" not in [e["name"] for e in c.get_model_repository_index()]
            assert c.is_server_ready()
    finally:
        assert s.stop() == 0


def test_metrics(srv, client):
    client.infer("identity_fp32", [tensor("INPUT0", np.array([[1.0, 2.0]], np.float32))])
    # By hand: tritonclient has no call for /metrics.
    st, hdrs, body = srv.request("GET", "/metrics", port=srv.metrics_port)
    assert st == 200 and b"nv_inference_request_success" in body
    assert srv.request("GET", "/v2", port=srv.metrics_port)[0] == 404


def test_unsupported_routes_answer_clearly(srv, client):
    # Tracing without a trace file (test_tracing.py has the rest): the
    # settings read back, and turning it on is refused, as Triton does.
    for model in ("", "simple"):
        got = client.get_trace_settings(model_name=model or None)
        assert got["trace_level"] == ["OFF"] and got["trace_file"] == "", (model, got)
        refused(client.update_trace_settings, model_name=model or None, settings={"trace_level": ["TIMESTAMPS"]},
                contains="trace file name is not given")
    # By hand: tritonclient sends no other method.
    assert srv.request("PUT", "/v2/trace/setting")[0] == 405
    # CUDA shared memory without GPUs, as Triton built without GPU support:
    # no regions, register fails, unregister is a no-op.
    assert client.get_cuda_shared_memory_status() == []
    refused(client.register_cuda_shared_memory, "c0", b"\0\0\0", 0, 16, contains="GPUs not supported")
    refused(client.get_cuda_shared_memory_status, "c0", status=404, contains="c0")
    client.unregister_cuda_shared_memory()
    client.unregister_cuda_shared_memory("c0")
    assert srv.request("POST", "/v2/cudasharedmemory/status")[0] == 405  # by hand: another method


# ---- inference ---------------------------------------------------------------


def infer_body(name, datatype, shape, data, outputs=None, **extra):
    # For hand-built requests: what tritonclient cannot send.
    body = {"inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]}
    if outputs is not None:
        body["outputs"] = outputs
    body.update(extra)
    return body


def sample(dt, n=16):
    rng = np.random.default_rng(7)
    if dt == "BOOL":
        return rng.integers(0, 2, n).astype(bool)
    if dt == "BYTES":
        return np.array([f"s{i}-\u00e9\"\\\n" .encode() for i in range(n)] + [b""], dtype=object)[:n]
    if dt in ("FP16", "FP32", "FP64"):
        return (rng.standard_normal(n) * 100).astype(DTYPES[dt][0])
    if dt == "BF16":
        return (rng.integers(0, 1 << 16, n).astype(np.uint16) & 0x807F) | 0x3F80  # finite, +-[1, 2)
    info = np.iinfo(DTYPES[dt][0])
    return rng.integers(info.min, info.max, n, dtype=DTYPES[dt][0], endpoint=True)


def bf16_to_float(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def as_sent(dt, arr):
    """arr as tritonclient takes it: BF16 bits viewed as ml_dtypes.bfloat16."""
    return arr.view(ml_dtypes.bfloat16) if dt == "BF16" else arr


def to_json_list(dt, arr):
    if dt == "BYTES":
        return [x.decode() for x in arr]
    if dt == "BF16":
        return [float(v) for v in bf16_to_float(arr)]
    return arr.tolist()


def serialize(dt, arr):
    if dt == "BYTES":
        return b"".join(struct.pack("<I", len(x)) + x for x in arr)
    return arr.tobytes()


def deserialize(dt, raw):
    if dt == "BYTES":
        out, pos = [], 0
        while pos < len(raw):
            (n,) = struct.unpack_from("<I", raw, pos)
            out.append(raw[pos + 4:pos + 4 + n])
            pos += 4 + n
        return np.array(out, dtype=object)
    return np.frombuffer(raw, dtype=DTYPES[dt][0])


def binary_request(body, tails):
    # For hand-built requests: what tritonclient cannot send.
    header = json.dumps(body).encode()
    return header + b"".join(tails), {"Inference-Header-Content-Length": str(len(header)),
                                      "Content-Type": "application/octet-stream"}


def split_binary(hdrs, data):
    hl = int(hdrs.get("Inference-Header-Content-Length", len(data)))
    return json.loads(data[:hl]), data[hl:]


@pytest.mark.parametrize("dt", list(DTYPES))
def test_json_roundtrip_every_datatype(srv, client, dt):
    arr = sample(dt)
    model = f"identity_{dt.lower()}_t"
    if dt == "BF16":
        # By hand: tritonclient refuses to send BF16 data as JSON.
        body = infer_body("INPUT0", dt, [1, len(arr)], to_json_list(dt, arr),
                          outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}}], id="req-7")
        st, hdrs, data = srv.request("POST", f"/v2/models/{model}/infer", body)
        assert st == 200, data
        r = json.loads(data)
    else:
        r = client.infer(model, [tensor("INPUT0", arr[None], binary=False)], outputs=[out("OUTPUT0", False)],
                         request_id="req-7").get_response()
    assert r["model_name"] == model and r["model_version"] == "1" and r["id"] == "req-7"
    out0 = r["outputs"][0]
    assert out0["name"] == "OUTPUT0" and out0["datatype"] == dt and out0["shape"] == [1, len(arr)]
    if dt == "BYTES":
        assert out0["data"] == to_json_list(dt, arr)
    elif dt == "BF16":
        assert np.array_equal(np.array(out0["data"], dtype=np.float32), bf16_to_float(arr))
    elif dt == "FP16":
        assert np.array_equal(np.array(out0["data"], dtype=np.float16), arr)
    elif dt == "FP32":
        assert np.array_equal(np.array(out0["data"], dtype=np.float32), arr)
    else:
        assert np.array_equal(np.array(out0["data"], dtype=DTYPES[dt][0]), arr)


@pytest.mark.parametrize("dt", list(DTYPES))
def test_binary_roundtrip_every_datatype(client, dt):
    arr = sample(dt)
    raw = serialize(dt, arr)
    model = f"identity_{dt.lower()}_t"
    x = tensor("INPUT0", as_sent(dt, arr)[None])
    r = client.infer(model, [x], outputs=[out("OUTPUT0")])
    o = r.get_output("OUTPUT0")
    assert o["parameters"]["binary_data_size"] == len(raw) and "data" not in o
    got = r.as_numpy("OUTPUT0")
    assert got.shape == (1, len(arr))
    assert serialize(dt, got.ravel()) == raw


def test_json_output_of_floats_beyond_int64(client):
    # Whole-valued floats print as integers, but only inside int64's range:
    # converting -6.2e28 to an integer to ask was undefined behaviour (found
    # by the wire fuzzer under clang's UBSan).
    for dt, npdt in (("FP32", np.float32), ("FP64", np.float64)):
        arr = np.array([-6.2e28, 1e20, 3.0, -1e15, 2.5e18, np.inf, -np.inf], dtype=npdt)
        r = client.infer(f"identity_{dt.lower()}_t", [tensor("INPUT0", arr[None])], outputs=[out("OUTPUT0", False)])
        data = r.get_output("OUTPUT0")["data"]
        assert np.array_equal(np.array(data, dtype=npdt), arr), data
        assert data[2] == 3 and isinstance(data[2], int)
        assert np.array_equal(r.as_numpy("OUTPUT0")[0], arr)


def bf16_bits(values):
    """float64 values rounded to BF16 (nearest, ties to even) via float32."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, (bits >> 16).astype(np.uint16) | 0x40, rounded)


def test_half_precision_edges_through_json(srv, client):
    """FP16 and BF16 from JSON numbers round to nearest (ties to even),
    through subnormals, underflow to zero and overflow to infinity; back to
    JSON they print as their float32 values, infinities as Infinity and -0
    with its sign."""
    vals = [6e-8, 3e-8, 2.9e-8, 1e-5, -6.1e-5, 65504.0, 65519.0, 65520.0, 1e6, -0.0, 0.1, -2.5,
            3e38, 1.00390625, 1.01171875]
    with np.errstate(over="ignore"):
        fp16 = np.array(vals, dtype=np.float64).astype(np.float16)
    for dt, want, exact in (("FP16", fp16.view(np.uint16), fp16.astype(np.float64)),
                            ("BF16", bf16_bits(vals), bf16_to_float(bf16_bits(vals)).astype(np.float64))):
        model = f"/v2/models/identity_{dt.lower()}_t/infer"
        # By hand: these JSON numbers are not values of the type (the server
        # rounds them); tritonclient sends only values already in the type,
        # and refuses BF16 as JSON.
        payload = json.dumps(infer_body("INPUT0", dt, [1, len(vals)], vals,
                                        outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}]))
        st, hdrs, data = srv.request("POST", model, payload.encode(), {"Content-Type": "application/json"})
        assert st == 200, data
        got = np.frombuffer(split_binary(hdrs, data)[1], dtype=np.uint16)
        assert got.tolist() == want.tolist(), (dt, [hex(x) for x in got], [hex(x) for x in want])
        # The same bits back as JSON numbers.
        bits = want.astype(np.uint16).view(np.float16 if dt == "FP16" else ml_dtypes.bfloat16)
        r = client.infer(f"identity_{dt.lower()}_t", [tensor("INPUT0", bits[None])], outputs=[out("OUTPUT0", False)])
        data = r.get_output("OUTPUT0")["data"]
        assert len(data) == len(vals)
        for o, e in zip(data, exact):  # printed as float32 values (9 digits), exactly
            assert np.float32(o) == np.float32(e) and np.signbit(o) == np.signbit(e), (dt, data, exact.tolist())


def test_json_string_escapes(srv):
    """Every JSON escape, in BYTES data and in the header (the request id
    comes back), surrogate pairs included, as Python's json decodes them.
    By hand: the escapes are the JSON text under test, which tritonclient
    writes its own way."""
    raw_strings = ['\\b\\f\\n\\r\\t\\/\\"\\\\', '\\ud83d\\ude00 \\u00e9\\u0041', 'plain']
    text = ('{"id": "%s", "inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "BYTES", '
            '"data": [%s]}], "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": true}}]}'
            % (raw_strings[1], ", ".join('"%s"' % x for x in raw_strings)))
    want = [json.loads('"%s"' % x).encode() for x in raw_strings]
    st, hdrs, data = srv.request("POST", "/v2/models/identity_bytes_t/infer", text.encode(),
                                 {"Content-Type": "application/json"})
    assert st == 200, data
    r, tail = split_binary(hdrs, data)
    assert list(deserialize("BYTES", tail)) == want
    assert r["id"] == want[1].decode()
    # A lone surrogate is not text: refused, in the header and in the data.
    for bad in (text.replace("\\ude00", ""), text.replace('"id": "%s"' % raw_strings[1], '"id": "x"')
                .replace("\\ude00", "")):
        st, _, data = srv.request("POST", "/v2/models/identity_bytes_t/infer", bad.encode(),
                                  {"Content-Type": "application/json"})
        # Triton's parse errors are INTERNAL: 500.
        assert st == 500 and "surrogate" in json.loads(data)["error"], data


def test_ensemble_over_http(client):
    """The bundled ensemble (two "simple" steps) answers like a model: JSON
    and binary outputs, request id, its metadata names the platform."""
    a = np.arange(16, dtype=np.int32)[None]
    b = 10 * a
    ins = [tensor("INPUT0", a, binary=False), tensor("INPUT1", b, binary=False)]
    r = client.infer("simple_ensemble", ins, request_id="ens-1", outputs=[out("OUTPUT0", False), out("OUTPUT1", False)])
    resp = r.get_response()
    assert resp["id"] == "ens-1" and resp["model_name"] == "simple_ensemble", resp
    assert {o["name"]: o["data"] for o in resp["outputs"]} == {"OUTPUT0": (2 * a).ravel().tolist(),
                                                                "OUTPUT1": (2 * b).ravel().tolist()}
    # No outputs named: all of them, binary (binary_data_output).
    r = client.infer("simple_ensemble", ins)
    assert np.array_equal(r.as_numpy("OUTPUT0"), 2 * a) and np.array_equal(r.as_numpy("OUTPUT1"), 2 * b)
    r = client.infer("simple_ensemble", ins, outputs=[out("OUTPUT1")])
    assert [o["name"] for o in r.get_response()["outputs"]] == ["OUTPUT1"], r.get_response()
    assert np.array_equal(r.as_numpy("OUTPUT1"), 2 * b)
    assert client.get_model_metadata("simple_ensemble")["platform"] == "ensemble"
    # A bad input is refused against the ensemble's own configuration.
    bad = [ins[0], tensor("INPUT1", b[:, :15], binary=False)]
    refused(client.infer, "simple_ensemble", bad, contains="INPUT1")


def test_binary_data_output_default_and_mixed(client):
    a = np.arange(16, dtype=np.int32)[None]
    b = np.ones((1, 16), dtype=np.int32)
    # A binary and a JSON input; no outputs named: tritonclient asks for
    # all of them binary ("binary_data_output").
    r = client.infer("simple", [tensor("INPUT0", a), tensor("INPUT1", b, binary=False)])
    outs = r.get_response()["outputs"]
    assert [o["name"] for o in outs] == ["OUTPUT0", "OUTPUT1"]
    assert [o["parameters"]["binary_data_size"] for o in outs] == [64, 64]
    assert np.array_equal(r.as_numpy("OUTPUT0"), a + b) and np.array_equal(r.as_numpy("OUTPUT1"), a - b)
    # Only OUTPUT1 requested, as JSON.
    r = client.infer("simple", [tensor("INPUT0", a, binary=False), tensor("INPUT1", b, binary=False)],
                     outputs=[out("OUTPUT1", False)])
    outs = r.get_response()["outputs"]
    assert [o["name"] for o in outs] == ["OUTPUT1"]
    assert outs[0]["data"] == (a - b).ravel().tolist()


def test_binary_data_output_leaves_named_outputs_json(srv):
    """Triton's qa/L0_http: binary_data_output sets only the outputs not
    named; one named without binary_data comes back as JSON."""
    ins = [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": list(range(1, 17))} for n in ("INPUT0", "INPUT1")]
    body = {"parameters": {"binary_data_output": True}, "inputs": ins,
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": False}}, {"name": "OUTPUT1"}]}
    st, r = jreq(srv, "POST", "/v2/models/simple/infer", body)
    assert st == 200, r
    assert [o.get("data") for o in r["outputs"]] == [[2 * i for i in range(1, 17)], [0] * 16]
    body = {"inputs": ins, "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1"}]}
    st, _, raw = srv.request("POST", "/v2/models/simple/infer", json.dumps(body).encode())
    assert st == 200
    assert b"[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]" in raw and b"[2,4,6" not in raw


def test_parameters_accepted(srv, client):
    x = tensor("INPUT0", np.array([[1, 2, 3]], np.float32), binary=False)
    r = client.infer("identity_fp32", [x], priority=1, timeout=1000000,
                     parameters={"custom_s": "x", "custom_i": 3, "custom_b": True, "custom_d": 0.5})
    assert r.as_numpy("OUTPUT0").tolist() == [[1, 2, 3]]
    x = tensor("INPUT0", np.array([[1]], np.float32), binary=False)
    # A value of the wrong kind: Triton's TritonJson words, status 500.
    for bad, name in (({"sequence_id": [1]}, "Unable to parse 'sequence_id': attempt to access JSON non-string"),
                      ({"sequence_id": 1, "sequence_start": 1}, "Unable to parse 'sequence_start': attempt to access JSON non-boolean"),
                      ({"priority": -1}, "Unable to parse 'priority': attempt to access JSON non-unsigned-integer"),
                      ({"timeout": "x"}, "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer")):
        refused(client.infer, "identity_fp32", [x], status=500, contains=name, **bad)
    refused(client.infer, "identity_fp32", [x], contains="'nested'", parameters={"nested": {"a": 1}})
    # By hand: tritonclient sends binary_data_output only as true.
    st, r = jreq(srv, "POST", "/v2/models/identity_fp32/infer",
                 infer_body("INPUT0", "FP32", [1, 1], [1], parameters={"binary_data_output": "yes"}))
    assert st == 500 and r["error"].startswith(
        "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean"), r


def test_parameters_reach_the_backend_and_come_back(client):
    """Request parameters other than the reserved ones reach the backend
    with their JSON types; the parameters a backend sets on its response
    come back in the response's "parameters" object."""
    params = {"s": "text \u00e9\"", "i": -7, "big": 2 ** 62, "b": True, "f": False, "d": 0.1}
    x = tensor("INPUT0", np.array([[1.5, 2.5]], np.float32), binary=False)
    # Every reserved parameter sent too: sequence_id, sequence_start,
    # sequence_end, priority, timeout and (no outputs named)
    # binary_data_output; none of them reaches the backend.
    r = client.infer("echo_params", [x], sequence_id=5, sequence_start=True, sequence_end=True, priority=1,
                     timeout=0, parameters=params)
    assert r.get_response()["parameters"] == params
    assert r.as_numpy("OUTPUT0").tolist() == [[1.5, 2.5]]
    # With JSON outputs too.
    r = client.infer("echo_params", [x], outputs=[out("OUTPUT0", False)], parameters=params)
    assert r.get_response()["parameters"] == params and r.get_output("OUTPUT0")["data"] == [1.5, 2.5]
    # With binary inputs and outputs the parameters stay in the JSON header.
    r = client.infer("echo_params", [tensor("INPUT0", np.array([[3]], np.float32))], outputs=[out("OUTPUT0")],
                     parameters={"k": "v"})
    assert r.get_response()["parameters"] == {"k": "v"} and r.as_numpy("OUTPUT0").tolist() == [[3.0]]
    # No parameters: no "parameters" object.
    r = client.infer("echo_params", [x], outputs=[out("OUTPUT0", False)])
    assert "parameters" not in r.get_response()


def test_backend_api_as_a_triton_backend_sees_it(client, repo):
    """What the backend API calls that only Triton's own backends make
    (the Python backend, for one) return, through api_probe."""
    def probe(**kwargs):
        x = tensor("INPUT0", np.array([1.5, 2.5], np.float32), binary=False)
        r = client.infer("api_probe", [x], outputs=[out("PROBE", False)], **kwargs)
        return json.loads(r.get_output("PROBE")["data"][0])

    p = probe(sequence_id="corr-7", sequence_start=True, timeout=123456)
    model_dir = os.path.join(repo, "api_probe")
    assert p["backend_name"] == "api_probe"
    assert p["backend_artifact_type"] == "FILESYSTEM"
    assert os.path.realpath(p["backend_location"]) == os.path.realpath(model_dir)
    assert p["memory_manager"] is True
    assert (p["policy_before"], p["policy_after"]) == (0, 1)  # BLOCKING, then DEVICE_BLOCKING
    assert p["bad_policy_refused"] is True
    assert p["model_artifact_type"] == "FILESYSTEM"
    assert os.path.realpath(p["model_location"]) == os.path.realpath(model_dir)
    assert p["kind"] == "CPU" and p["device_id"] == 0 and p["passive"] is False
    assert p["profile_count"] == 0 and p["secondary_device_count"] == 0
    assert p["profile_0_refused"] and p["secondary_0_refused"]
    assert isinstance(p["host_policy"], dict)
    assert p["flags"] == 1  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
    assert p["correlation_id_string"] == "corr-7"
    assert p["timeout_us"] == 123456
    assert p["trace_is_null"] is True
    assert p["input_name_0"] == "INPUT0" and p["input_name_7_refused"]
    assert p["input"] == {"name": "INPUT0", "datatype": "FP32", "shape": [2], "byte_size": 8,
                          "buffer_count": 1}
    assert p["input_buffer"] == {"byte_size": 8, "same_buffer": True, "attributes_byte_size": 8,
                                 "attributes_memory_type": "CPU"}
    assert p["response_output"] == {"name": "PROBE", "datatype": "BYTES", "dims": 1, "dim0": 1,
                                    "by_name_agrees": True}
    assert p["output_buffer_memory_type"] == "CPU"  # the front end's allocator answers, as Triton's do
    # A numeric correlation id is no string; no flags and no timeout are 0.
    p = probe(sequence_id=42)
    assert "correlation_id_string_error" in p and p["flags"] == 0 and p["timeout_us"] == 0


def test_keep_alive_and_pipelining(srv):
    # One connection (concurrency=1), kept alive over 20 requests.
    with httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}", concurrency=1) as c:
        x = tensor("INPUT0", np.array([[1.5, 2.5]], np.float32), binary=False)
        for _ in range(20):
            r = c.infer("identity_fp32", [x], outputs=[out("OUTPUT0", False)])
            assert r.get_output("OUTPUT0")["data"] == [1.5, 2.5]
    # Three pipelined requests on one socket, answered in order. By hand:
    # tritonclient waits for each reply before sending the next request.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    reqs = b""
    for i in range(3):
        b = json.dumps(infer_body("INPUT0", "FP32", [1, 1], [float(i)], id=f"p{i}")).encode()
        reqs += (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(b)) + b
    s.sendall(reqs)
    got = b""
    deadline = time.monotonic() + 20
    while got.count(b'"id":"p') < 3 and time.monotonic() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    assert [m.decode() for m in re.findall(rb'"id":"(p\d)"', got)] == ["p0", "p1", "p2"]


def test_replies_written_from_core_threads_hand_the_rest_back_to_the_loop(srv):
    """A reply to a slow model finds its loop asleep and is written from the
    core's thread. What follows it must still happen on the loop: the next
    pipelined request (already in the buffer) is parsed, and a request that
    said Connection: close has its connection closed after the reply. By
    hand at first: tritonclient neither pipelines nor sends Connection: close."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    reqs = b""
    for i in range(4):
        b = json.dumps(infer_body("INPUT0", "FP32", [1, 1], [float(i)], id=f"s{i}")).encode()
        close = b"Connection: close\r\n" if i == 3 else b""
        reqs += (b"POST /v2/models/identity_slow/infer HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n"
                 % (close, len(b))) + b
    s.sendall(reqs)
    f = s.makefile("rb")
    for i in range(4):
        st, hdrs, body = read_response(f)
        assert st == 200 and json.loads(body)["id"] == f"s{i}", body
    assert f.read() == b"", "the server closes after the Connection: close reply"
    s.close()
    # One request at a time, keep-alive: each reply written from the core's
    # thread, the connection left open and served again.
    with httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}", concurrency=1) as c:
        for i in range(5):
            x = tensor("INPUT0", np.array([[i]], np.float32), binary=False)
            r = c.infer("identity_slow", [x], outputs=[out("OUTPUT0", False)])
            assert r.get_output("OUTPUT0")["data"] == [float(i)]


# ---- errors ----------------------------------------------------------------------


def expect_error(srv, path, body, status=400, headers=None, contains=None):
    # Hand-built: for requests tritonclient cannot send (each caller says which).
    st, hdrs, data = srv.request("POST", path, body, headers)
    assert st == status, (st, data)
    err = json.loads(data)["error"]
    if contains:
        assert contains in err, err
    return err


def test_infer_errors(srv, client):
    p = "/v2/models/identity_fp32/infer"

    def f32(data, shape=None, binary=False):
        x = tensor("INPUT0", np.array(data, np.float32), binary=binary)
        if shape:
            x.set_shape(shape)  # after the data: a shape the data does not fill
        return x
    refused(client.infer, "nope", [f32([1])], status=404, contains="nope")
    refused(client.infer, "square_int32", [tensor("IN", np.ones(1, np.int32), binary=False)], status=501,
            contains="decoupled")
    # By hand: bodies that are not an inference request; tritonclient
    # always writes a well-formed one.
    # Triton's TritonJson errors (and its parse errors) are INTERNAL: 500.
    expect_error(srv, p, "{bad json", status=500, contains="JSON")
    assert expect_error(srv, p, "[]", status=500) == (
        "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'")
    # No body: the raw input of a model with one input, of 0 elements here.
    st, _, _ = srv.request("POST", p, "")
    assert st == 200
    assert expect_error(srv, "/v2/models/simple/infer", "").startswith(
        "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 2 inputs")
    assert expect_error(srv, p, {"inputs": 3}, status=500) == (
        "Unable to parse 'inputs': attempt to access JSON non-array as array")
    assert expect_error(
        srv, p, {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP99", "data": [1, 2]}]}).startswith(
        "invalid datatype for input INPUT0")
    refused(client.infer, "identity_fp32", [tensor("INPUT0", np.array([[1, 2]], np.int32), binary=False)],
            contains="FP32")
    # Fewer elements than the shape holds, and more: Triton's sentence,
    # whole (its qa/L0_http compares the body).
    for shape in ([1, 3], [1, 1]):
        assert expect_error(srv, p, infer_body("INPUT0", "FP32", shape, [1, 2]), status=500) == (
            "Unable to parse 'data': Shape does not match true shape of 'data' field")
    # A shape past --http-max-input-size: Triton's sentence (server e5aecb323).
    refused(client.infer, "identity_fp32", [f32([[1]], [1, 1000000000000])],
            contains="JSON input 'INPUT0' has a byte_size (4000000000000 bytes) that exceeds the maximum allowed value")
    refused(client.infer, "identity_fp32", [f32([[1, 2]], [1, -2])], status=500, contains="shape")
    refused(client.infer, "identity_fp32", [f32([[1]] * 9)])  # over max_batch_size
    # By hand: JSON values that do not fit the datatype; tritonclient takes
    # the values from a numpy array of that type.
    expect_error(srv, p, infer_body("INPUT0", "FP32", [1, 2], [1, "x"]), status=500,
                 contains="Unable to parse 'data': attempt to access JSON non-number as double")
    expect_error(srv, "/v2/models/identity_int8_t/infer", infer_body("INPUT0", "INT8", [1, 1], [300]),
                 contains="range")
    expect_error(srv, "/v2/models/identity_int32_t/infer", infer_body("INPUT0", "INT32", [1, 1], [1.5]), status=500,
                 contains="Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer")
    expect_error(srv, "/v2/models/identity_bool_t/infer", infer_body("INPUT0", "BOOL", [1, 1], [1]), status=500,
                 contains="Unable to parse 'data': attempt to access JSON non-boolean as boolean")
    expect_error(srv, "/v2/models/identity_bytes_t/infer", infer_body("INPUT0", "BYTES", [1, 1], [1]), status=500,
                 contains="Unable to parse JSON bytes array: attempt to access JSON non-string as string")
    # An input given no data at all.
    refused(client.infer, "identity_fp32", [httpclient.InferInput("INPUT0", [1, 1], "FP32")],
            contains="Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
                     "'shared_memory_region' in 'parameters'. But no field is set")
    # By hand: "data" that is no array.
    expect_error(srv, p, {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": 5}]},
                 status=500, contains="Unable to parse 'data': attempt to access JSON non-array as array")
    refused(client.infer, "identity_fp32", [f32([[1]])], outputs=[out("NOPE", False)])


def test_binary_size_errors(srv, client):
    p = "/v2/models/identity_fp32/infer"
    raw = np.arange(4, dtype=np.float32).tobytes()
    # A binary tensor whose size does not match its shape.
    x = tensor("INPUT0", np.arange(3, dtype=np.float32)[None])
    x.set_shape([1, 4])
    refused(client.infer, "identity_fp32", [x])

    # By hand from here: tritonclient always sends binary_data_size and
    # Inference-Header-Content-Length that match what it sends.
    def body(size):
        return {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                            "parameters": {"binary_data_size": size}}]}
    payload, headers = binary_request(body(32), [raw])  # claims more than sent
    expect_error(srv, p, payload, headers=headers, contains="additional bytes")
    payload, headers = binary_request(body(16), [raw, b"xx"])  # sends more than claimed
    expect_error(srv, p, payload, headers=headers, contains="additional input data")
    payload, headers = binary_request(body(12), [raw[:12]])  # size does not match the shape
    expect_error(srv, p, payload, headers=headers)
    payload, _ = binary_request(body(16), [raw])
    expect_error(srv, p, payload, headers={"Inference-Header-Content-Length": str(len(payload) + 1)},
                 contains="range")
    # Read as Triton 26.x reads it, with std::stoi (server 2d64d2deb):
    # no digits has its own sentence.
    expect_error(srv, p, payload, headers={"Inference-Header-Content-Length": "abc"},
                 contains="Unable to parse Inference-Header-Content-Length, got: abc")
    expect_error(srv, p, payload, headers={"Inference-Header-Content-Length": "-5"}, contains="range")
    # No Inference-Header-Content-Length but binary_data_size given: the
    # body is all header, so the data is missing.
    expect_error(srv, p, json.dumps(body(16)), contains="unexpected size for input 'INPUT0', expecting 16 additional bytes")


def raw_exchange(port, data):
    # Bytes on a socket: for requests no HTTP client would send.
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(data)
        return s.recv(65536)
    finally:
        s.close()


def test_json_errors_in_tritons_words(srv, client):
    """A body that is not JSON gets Triton's words (RapidJSON's text and
    offset) on the infer route and the other JSON routes; nesting past 100
    gets Triton's limit sentence. By hand: tritonclient writes only valid
    JSON."""
    p = "/v2/models/identity_fp32/infer"
    for route in (p, "/v2/repository/index"):
        for body, want in ((b"abc", "failed to parse the request JSON buffer: Invalid value. at 0"),
                           (b'{"inputs": [1,]}', "failed to parse the request JSON buffer: Invalid value. at 14"),
                           (b'{"a" 1}', "failed to parse the request JSON buffer: Missing a colon after a name of "
                                        "object member. at 5"),
                           (b"[" * 101 + b"]" * 101, "JSON nesting depth exceeds maximum allowed limit (100)")):
            st, _, out = srv.request("POST", route, body, {"Content-Type": "application/json"})
            # Triton's parser errors are INTERNAL (500) on every route;
            # nesting past 100 is INVALID_ARG (400, server http_server.cc).
            want_st = 400 if want.startswith("JSON nesting") else 500
            assert st == want_st, (route, body[:20], out)
            assert json.loads(out)["error"].startswith(want), (route, body[:20], out)
    # A negative dimension: Triton reads dimensions as unsigned and says 500.
    x = tensor("INPUT0", np.array([1.0], np.float32), binary=False)
    x.set_shape([2, -5])
    err = refused(client.infer, "identity_fp32", [x], status=500)
    assert err.message().startswith(
        "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"), err
    # "data" nested 50 deep is flattened; 120 deep passes Triton's limit.
    for depth, ok in ((50, True), (120, False)):
        data = "1.5"
        for _ in range(depth):
            data = f"[{data}]"
        body = ('{"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": %s}]}' % data).encode()
        st, _, out = srv.request("POST", p, body, {"Content-Type": "application/json"})
        if ok:
            assert st == 200 and json.loads(out)["outputs"][0]["data"] == [1.5], out
        else:
            assert st == 400 and json.loads(out)["error"].startswith(
                "JSON nesting depth exceeds maximum allowed limit (100)"), out


def test_oversized_body_rejected(srv, client):
    # The limit is 1 MB here, and bodies are bounded at four times that
    # (Triton r25.07 checks each input instead, see test_http_input_size.py):
    # a 5 MB body is refused from its header alone, before the body is read
    # (and without allocating the claimed size). By hand: a Content-Length
    # with no body behind it, and a chunked body (tritonclient sends neither).
    for length in (5 * 1024 * 1024, 99999999999):
        resp = raw_exchange(srv.port, b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: %d\r\n\r\n" % length)
        # Triton answers 400 with its sentence.
        assert resp.startswith(b"HTTP/1.1 400"), resp
        assert b"request body of %d bytes exceeds the body limit of " % length in resp, resp
        assert b"Use --http-max-input-size to increase the limit." in resp, resp
    # Chunked bodies are held to the same limit.
    chunk = b"x" * 65536
    data = b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    data += (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 80
    try:
        resp = raw_exchange(srv.port, data)
        assert resp == b"" or resp.startswith(b"HTTP/1.1 400"), resp[:200]
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert client.is_server_live()


def test_absolute_target_without_path_and_large_body(srv, client):
    # By hand: absolute request targets, which tritonclient never sends.
    # "http://host" names the path "/", a constant string, not bytes in the
    # receive buffer; a body larger than the first buffer moves the buffer
    # while the head is kept. Found by the wire fuzzer: the path was moved
    # with the buffer's bytes and the route then read a wild pointer.
    body = b"x" * 200000
    for target in (b"http://host", b"https://host?q=1", b"http://host/v2/health/live"):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (target, len(body))
                  + body)
        st, _, out = read_response(s.makefile("rb"))
        s.close()
        assert st in (404, 405), (target, st, out)
    assert client.is_server_live()


def test_random_bodies_never_crash(srv, client):
    # By hand: random and broken bodies, which tritonclient never sends.
    rng = random.Random(1234)
    good = json.dumps(infer_body("INPUT0", "FP32", [1, 4], [1, 2, 3, 4])).encode()
    for i in range(150):
        kind = i % 3
        if kind == 0:
            body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
        elif kind == 1:  # mutate a valid body
            b = bytearray(good)
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] = rng.choice(b'{}[],:"0123456789.-eE tfn\\x')
            body = bytes(b)
        else:  # truncate a valid body
            body = good[:rng.randrange(len(good))]
        headers = {}
        if rng.random() < 0.3:
            headers["Inference-Header-Content-Length"] = str(rng.randint(0, len(body) + 2))
        st, _, data = srv.request("POST", "/v2/models/identity_fp32/infer", body, headers)
        assert st in (200, 400, 500), (st, body, data)  # 500: Triton's JSON errors
        if st != 200:
            assert json.loads(data)["error"]
    assert client.is_server_live()


def test_client_disconnects(srv, client):
    # By hand: requests cut short, closed or reset, as no client means to.
    body = json.dumps(infer_body("INPUT0", "FP32", [1, 4], [1, 2, 3, 4])).encode()
    for partial in (False, True):
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            head = b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
            s.sendall(head + (body[:10] if partial else body))
            s.close()
    # Also with RST instead of FIN.
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.sendall(b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.close()
    time.sleep(0.5)
    assert client.is_server_live()
    r = client.infer("identity_fp32", [tensor("INPUT0", np.array([[7]], np.float32), binary=False)],
                     outputs=[out("OUTPUT0", False)])
    assert r.get_output("OUTPUT0")["data"] == [7]


def test_client_disconnect_cancels_request_in_core(srv, client):
    """A client that goes away while its request runs has it cancelled in
    the core: cancel_wait then answers at once (a failure in the model's
    statistics) instead of holding the request for 20 s. The requests that
    go away are sent by hand: tritonclient cannot leave mid-request, nor
    send generate."""
    model = "cancel_wait_http"

    def failures():
        return client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]["fail"]["count"]

    def held():
        return srv.log().count("cancel_wait: holding ")

    before = failures()
    infer = json.dumps(infer_body("INPUT0", "FP32", [2], [1, 2])).encode()
    generate = json.dumps({"INPUT0": [1, 2]}).encode()
    # cancel_wait logs at verbose level when it holds a request: the test
    # waits for that line (a fixed 0.3 s could be too short on a loaded
    # machine, and a request still on its way is not cancelled but dropped).
    settings = client.get_log_settings()
    assert client.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
    try:
        for how, route, body in (("fin", "infer", infer), ("rst", "infer", infer),
                                 ("fin", "generate", generate), ("rst", "generate_stream", generate)):
            n = held()
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            s.sendall(b"POST /v2/models/%s/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % (model.encode(), route.encode(), len(body)) + body)
            deadline = time.monotonic() + 30
            while held() == n:  # the backend now holds the request
                assert time.monotonic() < deadline, srv.log()
                time.sleep(0.02)
            assert failures() == before, f"cancel_wait answered before the client left ({route})"
            if how == "rst":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            # Under max_wait_ms (20 s), after which cancel_wait fails it anyway.
            deadline = time.monotonic() + 15
            while failures() == before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert failures() == before + 1, f"{route}: request not cancelled after the client went away ({how})"
            before += 1
    finally:
        client.update_log_settings({"log_verbose_level": settings["log_verbose_level"]})
    assert client.is_server_live()


def test_large_binary_roundtrip(client):
    arr = np.arange(200000, dtype=np.float32)[None]  # 800 KB, under the 1 MB limit
    r = client.infer("identity_fp32", [tensor("INPUT0", arr)], outputs=[out("OUTPUT0")])
    assert r.get_output("OUTPUT0")["parameters"]["binary_data_size"] == arr.nbytes
    assert np.array_equal(r.as_numpy("OUTPUT0"), arr)


def test_large_binary_roundtrip_aio(srv):
    """The same through tritonclient.http.aio, several requests at once."""
    import asyncio

    async def main():
        c = aiohttpclient.InferenceServerClient(f"127.0.0.1:{srv.port}")
        try:
            assert await c.is_server_live() and await c.is_model_ready("identity_fp32")
            arrs = [np.arange(200000, dtype=np.float32)[None] + i for i in range(4)]
            results = await asyncio.gather(*(c.infer("identity_fp32", [tensor("INPUT0", a)], outputs=[out("OUTPUT0")])
                                             for a in arrs))
            for a, r in zip(arrs, results):
                assert np.array_equal(r.as_numpy("OUTPUT0"), a)
        finally:
            await c.close()
    asyncio.run(main())


def test_control_routes_and_errors_aio(srv):
    """tritonclient.http.aio against the same routes: metadata, config,
    statistics, the repository index, log and trace settings, system
    shared memory, and refusals with their status and message."""
    import asyncio

    async def main():
        async with aiohttpclient.InferenceServerClient(f"127.0.0.1:{srv.port}") as c:
            assert await c.is_server_live()
            assert (await c.get_server_metadata())["name"] == "triton"
            assert (await c.get_model_metadata("simple", "1"))["inputs"][0]["datatype"] == "INT32"
            assert (await c.get_model_config("simple"))["max_batch_size"] == 8
            stats = await c.get_inference_statistics("simple")
            assert stats["model_stats"][0]["name"] == "simple"
            assert "simple" in {e["name"] for e in await c.get_model_repository_index()}
            assert (await c.get_log_settings())["log_format"] == "default"
            assert (await c.get_trace_settings())["trace_level"] == ["OFF"]
            assert not await c.is_model_ready("nope")
            with pytest.raises(InferenceServerException) as e:
                await c.get_model_metadata("nope")
            assert e.value.status() == "404" and "nope" in e.value.message()
            with pytest.raises(InferenceServerException) as e:
                await c.update_log_settings({"log_info": "yes"})
            assert e.value.status() == "500" and "log_info" in e.value.message()
            with pytest.raises(InferenceServerException) as e:
                await c.infer("square_int32", [tensor("IN", np.array([1], np.int32))])
            assert e.value.status() == "501" and "decoupled" in e.value.message()
            assert await c.get_system_shared_memory_status() == []
            r = await c.infer("identity_bytes_t", [tensor("INPUT0", np.array([[b"a", b"\xff\x00"]], dtype=object))],
                              outputs=[out("OUTPUT0")], request_id="aio-1")
            assert r.get_response()["id"] == "aio-1"
            assert r.as_numpy("OUTPUT0").tolist() == [[b"a", b"\xff\x00"]]
    asyncio.run(main())


def test_http_can_be_disabled(repo):
    out = subprocess.run([NEREID, "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "--http-port" in out.stdout and "--metrics-port" in out.stdout
    s = Server.__new__(Server)
    s.errfile = tempfile.TemporaryFile(mode="w+")
    s.proc = subprocess.Popen([NEREID, f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                               "--allow-http=false", "--allow-metrics=false", "--allow-grpc=false"],
                              stdout=subprocess.PIPE, stderr=s.errfile, text=True)
    lines = []
    while True:
        line = s.proc.stdout.readline()
        assert line, s.log()
        lines.append(line)
        if line.startswith("nereid: server "):
            break
    assert not any("listening" in l for l in lines)
    assert s.stop() == 0


def test_port_in_use_fails_cleanly(repo):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        p = subprocess.run([NEREID, f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                            f"--http-port={port}", "--http-address=127.0.0.1", "--allow-metrics=false",
                            "--allow-grpc=false"],
                           capture_output=True, text=True, timeout=START_TIMEOUT)
        assert p.returncode == 1 and "cannot listen" in p.stderr
    finally:
        blocker.close()


# ---- logging extension ----------------------------------------------------------


def test_logging_get_and_update(srv, client):
    got = client.get_log_settings()
    assert got == {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
                   "log_verbose_level": 0, "log_format": "default"}
    upd = client.update_log_settings({"log_verbose_level": 2, "log_format": "ISO8601", "log_warning": False})
    assert upd["log_verbose_level"] == 2 and upd["log_format"] == "ISO8601"
    assert upd["log_warning"] is False and upd["log_info"] is True
    assert client.get_log_settings() == upd
    refused(client.update_log_settings, {"log_file": "/tmp/x.log"}, status=501, contains="log file")
    # Triton's JSON type errors are INTERNAL: 500, in its words.
    refused(client.update_log_settings, {"log_info": "yes"}, status=500,
            contains="attempt to access JSON non-boolean as boolean")
    refused(client.update_log_settings, {"log_verbose_level": -1}, status=500, contains="log_verbose_level")
    refused(client.update_log_settings, {"log_format": "xml"}, status=503, contains="log_format")
    # By hand: tritonclient writes only valid JSON, and with POST.
    assert jreq(srv, "POST", "/v2/logging", "{bad")[0] == 500
    assert srv.request("PUT", "/v2/logging")[0] == 405
    # Nothing above changed the settings; put the defaults back.
    assert client.get_log_settings() == upd
    got = client.update_log_settings({"log_verbose_level": 0, "log_format": "default", "log_warning": True,
                                      "log_file": None})
    assert got["log_verbose_level"] == 0 and got["log_warning"] is True


# ---- system shared memory ---------------------------------------------------------


@pytest.fixture
def shm_regions():
    """make(size) -> (key, handle): a system shared memory region made by
    tritonclient.utils.shared_memory, destroyed after the test."""
    made = []

    def make(size):
        key = f"/nereid_http_{os.getpid()}_{len(made)}"
        made.append(shm.create_shared_memory_region(key[1:], key, size))
        return key, made[-1]
    yield make
    for h in made:
        shm.destroy_shared_memory_region(h)


def shm_read(handle, dtype, n, offset):
    return shm.get_contents_as_numpy(handle, dtype, [n], offset=offset).copy()


def test_system_shared_memory_routes(srv, client, shm_regions):
    key, _ = shm_regions(4096)
    p = "/v2/systemsharedmemory"
    try:
        client.register_system_shared_memory("r0", key, 1024)
        client.register_system_shared_memory("r1", key, 3072, offset=1024)
        got = client.get_system_shared_memory_status()
        assert sorted(got, key=lambda r: r["name"]) == [
            {"name": "r0", "key": key, "offset": 0, "byte_size": 1024},
            {"name": "r1", "key": key, "offset": 1024, "byte_size": 3072}]
        got = client.get_system_shared_memory_status("r1")
        assert got == [{"name": "r1", "key": key, "offset": 1024, "byte_size": 3072}]
        refused(client.register_system_shared_memory, "r0", key, 16, contains="already in manager")
        refused(client.register_system_shared_memory, "r2", key, 200, offset=4000, contains="r2")
        with pytest.raises(InferenceServerException) as e:
            client.register_system_shared_memory("r2", "/no_such_nereid_key", 8)
        assert int(e.value.status()) >= 400 and "no_such_nereid_key" in e.value.message()
        # By hand: tritonclient always sends the key and the size, and names the region.
        st, got = jreq(srv, "POST", f"{p}/region/r2/register", {"offset": 0, "byte_size": 8})
        assert st == 400 and "'key'" in got["error"]
        st, got = jreq(srv, "POST", f"{p}/region/r2/register", {"key": key})
        assert st == 400 and "'byte_size'" in got["error"]
        st, got = jreq(srv, "POST", f"{p}/register", {"key": key, "byte_size": 8})
        assert st == 400 and "region name" in got["error"]
        refused(client.get_system_shared_memory_status, "nope", status=404, contains="nope")
        # By hand: other methods.
        assert srv.request("POST", f"{p}/status")[0] == 405
        assert srv.request("GET", f"{p}/region/r0/register")[0] == 405
        client.unregister_system_shared_memory("r0")
        assert [r["name"] for r in client.get_system_shared_memory_status()] == ["r1"]
        client.unregister_system_shared_memory("r0")  # unknown: no-op
    finally:
        client.unregister_system_shared_memory()
    assert client.get_system_shared_memory_status() == []


def test_shared_memory_inputs_and_outputs(srv, client, shm_regions):
    a = np.arange(16, dtype=np.int32)
    b = np.full(16, 3, dtype=np.int32)
    kin, hin = shm_regions(128)
    kout, hout = shm_regions(4096 + 128)
    shm.set_shared_memory_region(hin, [a, b])
    client.register_system_shared_memory("in", kin, 128)
    # The output region starts at a non page-aligned offset of the object.
    client.register_system_shared_memory("out", kout, 4096, offset=100)

    def inputs(offset1=64, region0="in"):
        x0 = httpclient.InferInput("INPUT0", [1, 16], "INT32")
        x0.set_shared_memory(region0, 64)
        x1 = httpclient.InferInput("INPUT1", [1, 16], "INT32")
        x1.set_shared_memory("in", 64, offset=offset1)
        return [x0, x1]

    def outputs(size0=64):
        o0, o1 = out("OUTPUT0"), out("OUTPUT1")
        o0.set_shared_memory("out", size0)
        o1.set_shared_memory("out", 64, offset=1000)
        return [o0, o1]
    try:
        r = client.infer("simple", inputs(), outputs=outputs())
        outs = {o["name"]: o for o in r.get_response()["outputs"]}
        # Name, datatype and shape only, as Triton answers: perf_analyzer's
        # client takes any output "parameters" for a binary output.
        assert outs["OUTPUT0"] == {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]}
        assert outs["OUTPUT1"] == {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16]}
        assert np.array_equal(shm_read(hout, np.int32, 16, 100), a + b)
        assert np.array_equal(shm_read(hout, np.int32, 16, 1100), a - b)
        # Mixed: shared memory input, JSON output.
        r = client.infer("simple", inputs(), outputs=[out("OUTPUT0", False)])
        assert r.get_output("OUTPUT0")["data"] == (a + b).tolist()

        # INTERNAL in Triton (its response allocator's error): 500.
        refused(client.infer, "simple", inputs(), outputs=outputs(size0=32), status=500, contains="at least 64 bytes")
        refused(client.infer, "simple", inputs(offset1=100), outputs=outputs(), contains="Invalid offset + byte size")
        with pytest.raises(InferenceServerException) as e:
            client.infer("simple", inputs(region0="nope"), outputs=outputs())
        assert e.value.status() in ("400", "404") and "nope" in e.value.message()

        # By hand from here: tritonclient's own request, changed in ways
        # tritonclient cannot: keys spelled with JSON escapes, a size left
        # out, data beside a region, classification into a region.
        text, _ = httpclient.InferenceServerClient.generate_request_body(inputs(), outputs=outputs())
        body = json.loads(text)

        def bad(body, status=400, contains=None):
            st, r = jreq(srv, "POST", "/v2/models/simple/infer", body)
            assert st == status, (st, r)
            if contains:
                assert contains in r["error"], r["error"]
        # Keys spelled with JSON escapes are the same keys (the server's
        # quick text checks must not miss them).
        shm.set_shared_memory_region(hout, [np.zeros(64, np.uint8)], offset=100)
        escaped = json.dumps(body).replace("shared_memory_", "shared\\u005fmemory_")
        assert "\\u005f" in escaped
        st, r = jreq(srv, "POST", "/v2/models/simple/infer", escaped)
        assert st == 200, r
        assert np.array_equal(shm_read(hout, np.int32, 16, 100), a + b)
        half = json.loads(text)
        del half["inputs"][0]["parameters"]["shared_memory_byte_size"]
        bad(half, contains="shared_memory_byte_size")
        both = json.loads(text)
        both["inputs"][0]["data"] = a.tolist()
        bad(both, contains="Input must set only one of the following fields")
        # Classification needs the server to write strings; it can't go
        # into a shared-memory output (as over gRPC).
        cls = json.loads(text)
        cls["outputs"][0]["parameters"]["classification"] = 2
        bad(cls, contains="'classification'")
    finally:
        client.unregister_system_shared_memory()


def test_unregister_while_in_use_keeps_mapping_valid(client, shm_regions):
    # Registering, inferring and unregistering in a loop never touches an
    # unmapped region (the sanitizers would report it).
    key, h = shm_regions(64)
    shm.set_shared_memory_region(h, [np.arange(4, dtype=np.float32)])
    for i in range(20):
        client.register_system_shared_memory("x", key, 64)
        x = httpclient.InferInput("INPUT0", [1, 4], "FP32")
        x.set_shared_memory("x", 16)
        o = out("OUTPUT0")
        o.set_shared_memory("x", 16, offset=32)
        client.infer("identity_fp32", [x], outputs=[o])
        client.unregister_system_shared_memory("x")
    assert np.array_equal(shm_read(h, np.float32, 4, 32), np.arange(4, dtype=np.float32))


# ---- raw binary requests and classification ------------------------------------------


def test_repeated_and_alternating_headers(srv):
    """A loop keeps the last inference header it parsed (with "data"
    arrays cut out) and reuses it for the same bytes: two keep-alive
    connections (two tritonclient clients of one connection each), each
    cycling through three headers (binary in and out, binary in and JSON
    out, JSON in with fresh values every time), must get their own data
    back every time."""
    rng = random.Random(7)
    clients = [httpclient.InferenceServerClient(f"127.0.0.1:{srv.port}", concurrency=1) for _ in range(2)]
    try:
        for i in range(90):
            kind = i % 3
            n = (16, 8, 12)[kind]
            arr = np.array([[rng.uniform(-1e3, 1e3) for _ in range(n)]], dtype=np.float32)
            c = clients[(i // 3) % 2]
            r = c.infer("identity_fp32", [tensor("INPUT0", arr, binary=kind < 2)], outputs=[out("OUTPUT0", kind == 0)])
            o = r.get_output("OUTPUT0")
            assert o["shape"] == [1, n]
            if kind == 0:
                assert o["parameters"]["binary_data_size"] == arr.nbytes
            else:
                assert np.array(o["data"], dtype=np.float32).tobytes() == arr.tobytes()
            assert r.as_numpy("OUTPUT0").tobytes() == arr.tobytes()
        # The same header with a body of the wrong size is still refused.
        # By hand: tritonclient always sends the size it states.
        body = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                            "parameters": {"binary_data_size": 64}}],
                "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
        payload, headers = binary_request(body, [b"\0" * 60])
        st, _, data = srv.request("POST", "/v2/models/identity_fp32/infer", payload, headers)
        assert st == 400, data
    finally:
        for c in clients:
            c.close()


def test_header_names_in_any_case(srv):
    """The headers the server reads are found whatever their case, the
    first of a repeated one counts, and two Content-Lengths are refused.
    By hand: tritonclient spells headers one way and never repeats them."""
    raw = np.arange(16, dtype=np.float32).tobytes()
    body = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                        "parameters": {"binary_data_size": len(raw)}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    header = json.dumps(body).encode()
    payload = header + raw
    for hl, cl, conn, enc in (("inference-header-content-length", "content-length", "connection", "accept-encoding"),
                              ("INFERENCE-HEADER-CONTENT-LENGTH", "CONTENT-LENGTH", "CONNECTION", "ACCEPT-ENCODING"),
                              ("Inference-header-Content-length", "Content-length", "connection", "Accept-encoding")):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        try:
            s.sendall((f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n{hl}: {len(header)}\r\n"
                       f"{cl}: {len(payload)}\r\n{enc}: gzip\r\n{conn}: close\r\n"
                       f"{conn}: keep-alive\r\n\r\n").encode() + payload)
            data, _ = read_all(s)
        finally:
            s.close()
        head, rest = data.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert b"\r\nConnection: close" in head, head  # the first Connection header counts
        assert b"\r\nContent-Encoding: gzip" in head, head
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    try:
        s.sendall(b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n"
                  b"CONTENT-LENGTH: 2\r\n\r\n{}")
        data, _ = read_all(s)
    finally:
        s.close()
    assert data.startswith(b"HTTP/1.1 400 "), data


def read_all(s):
    """What the server sends until it closes the connection."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data, len(data)
        data += chunk


def test_raw_binary_request(srv):
    # By hand: a raw body (Inference-Header-Content-Length: 0, no JSON),
    # which tritonclient never sends.
    arr = np.array([1.5, -2, 3, 4.25], dtype=np.float32)
    st, hdrs, data = srv.request("POST", "/v2/models/identity_fp32/infer", arr.tobytes(),
                                 {"Inference-Header-Content-Length": "0",
                                  "Content-Type": "application/octet-stream"})
    assert st == 200, data
    r, tail = split_binary(hdrs, data)
    out = r["outputs"][0]
    assert out["name"] == "OUTPUT0" and out["shape"] == [1, 4] and out["parameters"]["binary_data_size"] == 16
    assert np.array_equal(np.frombuffer(tail, dtype=np.float32), arr)
    # A model with two inputs cannot take a raw request (Triton's words).
    st, hdrs, data = srv.request("POST", "/v2/models/simple/infer", b"\0" * 128,
                                 {"Inference-Header-Content-Length": "0"})
    assert st == 400, data
    assert json.loads(data)["error"].startswith(
        "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model "
        "configuration"), data
    # A BYTES input of shape [1]: the whole body is its one element, and the
    # output comes back with its 4-byte length before it.
    st, hdrs, data = srv.request("POST", "/v2/models/identity_bytes_one/infer", b"427 and more",
                                 {"Inference-Header-Content-Length": "0"})
    assert st == 200, data
    r, tail = split_binary(hdrs, data)
    assert r["outputs"][0]["shape"] == [1, 1] and r["outputs"][0]["datatype"] == "BYTES", r
    assert tail == struct.pack("<I", 12) + b"427 and more"
    # Any other BYTES shape cannot take one, nor two variable-size dimensions.
    for model, body, want in (
            ("identity_bytes", b"427",
             "[request id: <id_unknown>] For BYTE datatype raw input 'INPUT0', the model must have input shape [1]"),
            ("identity_fp16_2d", b"\0" * 8,
             "[request id: <id_unknown>] The shape of the raw input 'INPUT0' can not be deduced because there are more than one "
             "variable-sized dimension")):
        st, hdrs, data = srv.request("POST", f"/v2/models/{model}/infer", body,
                                     {"Inference-Header-Content-Length": "0"})
        assert st == 400 and json.loads(data)["error"].startswith(want), data
    # A size that does not fit the input's type.
    st, hdrs, data = srv.request("POST", "/v2/models/identity_fp32/infer", b"\0" * 7,
                                 {"Inference-Header-Content-Length": "0"})
    assert st == 400 and json.loads(data)["error"]


def test_classification(client):
    data = np.array([[0.1, 0.9, 0.5, 0.3]], np.float32)
    r = client.infer("identity_labels", [tensor("INPUT0", data, binary=False)],
                     outputs=[out("OUTPUT0", False, class_count=2)])
    o = r.get_output("OUTPUT0")
    assert o["datatype"] == "BYTES" and o["shape"] == [1, 2]
    assert o["data"] == ["0.900000:1:label1", "0.500000:2:label2"]
    # Without a label file: value:index. Batch rows are classified separately;
    # class_count larger than the classes gives them all.
    r = client.infer("identity_fp32", [tensor("INPUT0", np.array([[1, 2], [4, 3]], np.float32), binary=False)],
                     outputs=[out("OUTPUT0", False, class_count=5)])
    o = r.get_output("OUTPUT0")
    assert o["shape"] == [2, 2]
    assert o["data"] == ["2.000000:1", "1.000000:0", "4.000000:0", "3.000000:1"]
    # Binary output of the classification strings.
    r = client.infer("identity_labels", [tensor("INPUT0", data, binary=False)],
                     outputs=[out("OUTPUT0", True, class_count=1)])
    assert r.as_numpy("OUTPUT0").tolist() == [[b"0.900000:1:label1"]]
    refused(client.infer, "identity_bytes_t", [tensor("INPUT0", np.array([[b"x"]], dtype=object), binary=False)],
            outputs=[out("OUTPUT0", False, class_count=1)], contains="BYTES")
    refused(client.infer, "identity_fp32", [tensor("INPUT0", np.array([[1]], np.float32), binary=False)],
            outputs=[out("OUTPUT0", False, class_count="two")], status=500,
            contains="Unable to set 'classification': attempt to access JSON non-unsigned-integer")


def class_values(dt):
    """Values for one classified row: extremes of the type, a tie (which
    keeps index order), and for FP16 a subnormal."""
    if dt == "BF16":  # bits: 1.5, -2, 3, 1.5, the smallest normal
        return np.array([0x3FC0, 0xC000, 0x4040, 0x3FC0, 0x0080], dtype=np.uint16)
    npt = DTYPES[dt][0]
    if dt == "FP16":
        return np.array([6e-8, -1.5, 65504, 6e-8, np.inf], dtype=npt)
    if dt in ("FP32", "FP64"):
        return np.array([-1e-7, 3.25, 1e20, 3.25, -np.inf], dtype=npt)
    info = np.iinfo(npt)
    return np.array([info.min, 7, info.max, 7, 0], dtype=npt)


@pytest.mark.parametrize("dt", [d for d in DTYPES if d not in ("BOOL", "BYTES")])
def test_classification_of_every_numeric_datatype(client, dt):
    vals = class_values(dt)
    as_float = bf16_to_float(vals) if dt == "BF16" else vals
    # Descending by value; equal values keep their index order.
    order = sorted(range(len(vals)), key=lambda i: (-float(as_float[i]), i))
    if dt in ("FP16", "FP32", "FP64", "BF16"):
        want = ["%f:%d" % (float(as_float[i]), i) for i in order]
    else:
        want = ["%d:%d" % (int(vals[i]), i) for i in order]
    r = client.infer(f"identity_{dt.lower()}_t", [tensor("INPUT0", as_sent(dt, vals)[None])],
                     outputs=[out("OUTPUT0", False, class_count=len(vals))])
    o = r.get_output("OUTPUT0")
    assert o["datatype"] == "BYTES" and o["shape"] == [1, len(vals)]
    assert o["data"] == want


# ---- compression --------------------------------------------------------------------------


def test_request_and_response_compression(srv, client):
    import gzip
    import zlib
    m = "identity_fp32"
    x = tensor("INPUT0", np.array([[1, 2, 3, 4]], np.float32), binary=False)
    for enc in ("gzip", "deflate"):
        r = client.infer(m, [x], outputs=[out("OUTPUT0", False)], request_compression_algorithm=enc)
        assert r.get_output("OUTPUT0")["data"] == [1, 2, 3, 4]
    # Binary extension inside a compressed body; compressed binary response.
    arr = np.arange(8, dtype=np.float32)[None]
    r = client.infer(m, [tensor("INPUT0", arr)], outputs=[out("OUTPUT0")], request_compression_algorithm="gzip",
                     response_compression_algorithm="gzip")
    assert np.array_equal(r.as_numpy("OUTPUT0"), arr)
    r = client.infer(m, [x], outputs=[out("OUTPUT0", False)], response_compression_algorithm="deflate")
    assert r.get_output("OUTPUT0")["data"] == [1, 2, 3, 4]
    # By hand from here. tritonclient decodes a compressed response without
    # showing its headers: these check the response really is compressed.
    p = f"/v2/models/{m}/infer"
    body, hl = httpclient.InferenceServerClient.generate_request_body([tensor("INPUT0", arr)], outputs=[out("OUTPUT0")])
    st, hdrs, data = srv.request("POST", p, gzip.compress(body),
                                 {"Inference-Header-Content-Length": str(hl), "Content-Encoding": "gzip",
                                  "Accept-Encoding": "gzip"})
    assert st == 200 and hdrs.get("Content-Encoding") == "gzip"
    r, tail = split_binary(hdrs, gzip.decompress(data))
    assert np.array_equal(np.frombuffer(tail, dtype=np.float32), arr[0])
    body = json.dumps(infer_body("INPUT0", "FP32", [1, 4], [1, 2, 3, 4])).encode()
    st, hdrs, data = srv.request("POST", p, body, {"Accept-Encoding": "deflate"})
    assert st == 200 and hdrs.get("Content-Encoding") == "deflate"
    assert json.loads(zlib.decompress(data))["outputs"][0]["data"] == [1, 2, 3, 4]
    # Headers tritonclient does not send: a weighted Accept-Encoding, an
    # unknown Content-Encoding; and bodies it does not: corrupt data, a
    # small body that inflates past --http-max-input-size.
    st, hdrs, data = srv.request("POST", p, body, {"Accept-Encoding": "br, gzip;q=0"})
    assert st == 200 and "Content-Encoding" not in hdrs and json.loads(data)["outputs"]
    st, hdrs, data = srv.request("POST", p, body, {"Content-Encoding": "br"})
    assert st == 415 and "Content-Encoding" in json.loads(data)["error"]
    st, hdrs, data = srv.request("POST", p, b"not gzip at all", {"Content-Encoding": "gzip"})
    assert st == 400 and "gzip" in json.loads(data)["error"]
    st, hdrs, data = srv.request("POST", p, gzip.compress(body)[:-12], {"Content-Encoding": "gzip"})
    assert st == 400
    bomb = gzip.compress(b" " * (4 * 1024 * 1024))
    st, hdrs, data = srv.request("POST", p, bomb, {"Content-Encoding": "gzip"})
    assert st == 400 and "exceeds the maximum allowed value" in json.loads(data)["error"], data
    assert client.is_server_live()


# ---- generate extension ----------------------------------------------------------------------
# By hand throughout: tritonclient has no call for generate or generate_stream.


def sse_events(srv, path, body, timeout=30):
    # By hand: tritonclient has no call for the generate extension.
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read().decode()
        if r.status != 200 or not r.getheader("Content-Type", "").startswith("text/event-stream"):
            return r.status, json.loads(raw)
        events = [json.loads(chunk[len("data: "):]) for chunk in raw.split("\n\n") if chunk.strip()]
        return r.status, events
    finally:
        c.close()


def test_generate(srv):
    st, r = jreq(srv, "POST", "/v2/models/identity_fp32/generate", {"INPUT0": [1.5, 2, 3]})
    assert st == 200 and r == {"model_name": "identity_fp32", "model_version": "1", "OUTPUT0": [1.5, 2, 3]}
    st, r = jreq(srv, "POST", "/v2/models/identity_bytes/versions/1/generate",
                 {"INPUT0": "hello", "parameters": {"temperature": 0.5, "stream": False}})
    assert st == 200 and r["OUTPUT0"] == "hello", r
    st, r = jreq(srv, "POST", "/v2/models/simple/generate",
                 {"INPUT0": list(range(16)), "INPUT1": [1] * 16})
    assert st == 200 and r["OUTPUT0"] == list(range(1, 17)) and r["OUTPUT1"] == list(range(-1, 15))
    st, r = jreq(srv, "POST", "/v2/models/square_int32/generate", {"IN": 1})
    assert st == 200 and r["OUT"] == 1
    st, r = jreq(srv, "POST", "/v2/models/square_int32/generate", {"IN": 3})
    assert st == 400 and "generate_stream" in r["error"]
    st, r = jreq(srv, "POST", "/v2/models/nope/generate", {"IN": 3})
    assert st == 404 and "nope" in r["error"]
    st, r = jreq(srv, "POST", "/v2/models/simple/generate", {"INPUT0": list(range(16))})
    assert st == 400 and "INPUT1" in r["error"]
    st, r = jreq(srv, "POST", "/v2/models/simple/generate", {"INPUT0": ["a"] * 16, "INPUT1": [1] * 16})
    assert st == 400
    assert jreq(srv, "POST", "/v2/models/simple/generate", "{bad")[0] == 500
    assert srv.request("GET", "/v2/models/simple/generate")[0] == 405


def test_decoupled_ensemble_over_http(srv, client):
    """An ensemble fed by a decoupled step is decoupled: /infer refuses it
    as Triton does, generate_stream sends an event per step response."""
    st, events = sse_events(srv, "/v2/models/square_ens/generate_stream", {"N": 3})
    assert st == 200 and events == [{"model_name": "square_ens", "model_version": "1", "SQ": 3}] * 3, events
    refused(client.infer, "square_ens", [tensor("N", np.array([3], np.int32), binary=False)], status=501,
            contains="decoupled")
    cfg = client.get_model_config("square_ens")
    assert cfg["model_transaction_policy"]["decoupled"] is True, cfg


def test_generate_stream(srv):
    st, events = sse_events(srv, "/v2/models/square_int32/generate_stream", {"IN": 4})
    assert st == 200 and events == [{"model_name": "square_int32", "model_version": "1", "OUT": 4}] * 4
    st, events = sse_events(srv, "/v2/models/square_int32/generate_stream", {"IN": 0})
    assert st == 200 and events == []
    st, events = sse_events(srv, "/v2/models/identity_fp32/generate_stream", {"INPUT0": [7]})
    assert st == 200 and events == [{"model_name": "identity_fp32", "model_version": "1", "OUTPUT0": 7}]
    # A failed response is an event carrying "error" (the status is already 200).
    st, events = sse_events(srv, "/v2/models/square_int32/generate_stream", {"IN": -1})
    assert st == 200 and len(events) == 1 and ">= 0" in events[0]["error"]
    st, r = jreq(srv, "POST", "/v2/models/square_int32/generate", {"IN": -1})
    assert st == 400 and ">= 0" in r["error"]
    # Errors before inference starts are plain JSON errors.
    st, r = sse_events(srv, "/v2/models/square_int32/generate_stream", {"IN": "x"})
    assert st == 400 and r["error"]
    # Events arrive as they are sent: the first is readable before the end.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    try:
        body = json.dumps({"IN": 3}).encode()
        s.sendall(b"POST /v2/models/square_int32/generate_stream HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while got.count(b"data: ") < 3 or not got.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
        assert b"text/event-stream" in got and b"Transfer-Encoding: chunked" in got
    finally:
        s.close()
    # A client that goes away mid-stream does not disturb the server.
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        body = json.dumps({"IN": 200}).encode()
        s.sendall(b"POST /v2/models/square_int32/generate_stream HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        s.recv(100)
        s.close()
    time.sleep(0.3)
    st, events = sse_events(srv, "/v2/models/square_int32/generate_stream", {"IN": 2})
    assert st == 200 and len(events) == 2


def test_generate_with_endless_responses_is_stopped(srv):
    """A decoupled model asked for 2^31 - 1 responses: a generate_stream
    client that leaves, one that stops reading (the server holds at most
    64 MB for it, then cancels), and a plain generate (stopped at the second
    response, which makes its answer an error) all stop the backend, so the
    single square instance is free for the next request at once (otherwise
    it would be busy for hours, and the server's memory would grow with
    every response). Found by the gRPC fuzzer's twin on HTTP. The srv
    fixture lowers the 64 MB to UNSENT_MAX (NEREID_GENERATE_UNSENT_MAX)."""
    body = json.dumps({"IN": 2**31 - 1}).encode()
    head = b"POST /v2/models/square_int32/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)

    def next_is_quick():
        t0 = time.monotonic()
        st, events = sse_events(srv, "/v2/models/square_int32/generate_stream", {"IN": 2}, timeout=20)
        assert st == 200 and len(events) == 2
        assert time.monotonic() - t0 < 10

    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(head + body)
    assert s.recv(100)
    s.close()  # leaves mid-stream
    next_is_quick()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(head + body)  # and never reads
    deadline = time.monotonic() + 60
    while "generate_stream client is not reading" not in srv.log():
        assert time.monotonic() < deadline, "the server never gave up on the client"
        time.sleep(0.2)
    assert f"more than {UNSENT_MAX} bytes waiting" in srv.log()
    next_is_quick()
    s.close()
    st, r = jreq(srv, "POST", "/v2/models/square_int32/generate", {"IN": 2**31 - 1})
    assert st == 400 and "more than one response" in r["error"], r
    next_is_quick()


# ---- HTTP/1.1 framing (our own parser) ------------------------------------------
# By hand throughout: split, pipelined, chunked, malformed and HTTP/1.0
# requests, which tritonclient never sends.


def read_response(f, head=False):
    """One response from a socket file: (status, {lower-case header: value},
    body). `head`: the answer to a HEAD request (no body)."""
    line = f.readline()
    assert line.startswith(b"HTTP/1.1 "), line
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, v = h.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = b""
    if head or status == 100:
        return status, headers, body
    if headers.get("transfer-encoding") == "chunked":
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                f.readline()
                break
            body += f.read(n)
            f.readline()
    else:
        body = f.read(int(headers.get("content-length", "0")))
    return status, headers, body


def chunked(data, rng, extensions=False, trailer=False):
    out = b""
    i = 0
    while i < len(data):
        n = rng.randint(1, 40)
        piece = data[i:i + n]
        ext = b";x=1" if extensions and rng.random() < 0.5 else b""
        out += b"%x%s\r\n" % (len(piece), ext) + piece + b"\r\n"
        i += n
    return out + b"0\r\n" + (b"X-Trailer: yes\r\n" if trailer else b"") + b"\r\n"


def test_pipelined_requests_split_at_random_bytes(srv):
    """Many kinds of request on one connection, sent in pieces cut at random
    bytes, so heads, bodies and chunk framing arrive split everywhere."""
    rng = random.Random(7)
    reqs, expect = b"", []
    for i in range(24):
        kind = i % 4
        vals = [float(i), float(i) + 0.5]
        body = json.dumps(infer_body("INPUT0", "FP32", [1, 2], vals, id=f"r{i}")).encode()
        if kind == 0:
            reqs += b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
            expect.append(None)
            continue
        if kind == 1:
            reqs += (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                     % len(body)) + body
        elif kind == 2:
            reqs += (b"POST /v2/models/identity_fp32/infer?x=1 HTTP/1.1\r\nhost: x\r\n"
                     b"transfer-encoding: chunked\r\n\r\n") + chunked(body, rng, extensions=True, trailer=i % 8 == 2)
        else:
            payload, headers = binary_request(
                {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32",
                             "parameters": {"binary_data_size": 8}}], "id": f"r{i}"},
                [np.array(vals, dtype=np.float32).tobytes()])
            reqs += (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                     b"Inference-Header-Content-Length: %s\r\nContent-Length: %d\r\n\r\n"
                     % (headers["Inference-Header-Content-Length"].encode(), len(payload))) + payload
        expect.append((f"r{i}", vals))
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    i = 0
    while i < len(reqs):
        n = rng.randint(1, 200)
        s.sendall(reqs[i:i + n])
        i += n
        if rng.random() < 0.2:
            time.sleep(0.002)
    for want in expect:
        st, hdrs, body = read_response(f)
        assert st == 200, body
        if want is None:
            continue
        r = json.loads(body)
        assert r["id"] == want[0] and r["outputs"][0]["data"] == want[1], r
    s.close()


def test_pipelined_burst_to_a_model_run_inline(srv):
    """identity_fp32 is fast, so after a few requests the loop runs it
    inline (docs/core.md): 64 requests sent in one write are then answered
    in order on that loop, each reply written before the next request is
    parsed, with none left waiting for another event."""
    def request(i):
        vals = [float(i), -float(i)]
        payload, headers = binary_request(
            {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32",
                         "parameters": {"binary_data_size": 8}}],
             "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": False}}], "id": f"b{i}"},
            [np.array(vals, dtype=np.float32).tobytes()])
        return (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                b"Inference-Header-Content-Length: %s\r\nContent-Length: %d\r\n\r\n"
                % (headers["Inference-Header-Content-Length"].encode(), len(payload))) + payload, vals
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    f = s.makefile("rb")
    for i in range(10):  # one at a time: the model proves itself fast
        s.sendall(request(i)[0])
        assert read_response(f)[0] == 200
    burst = [request(i) for i in range(100, 164)]
    s.sendall(b"".join(r for r, _ in burst))
    for i, (_, vals) in zip(range(100, 164), burst):
        st, _, body = read_response(f)
        assert st == 200, body
        r = json.loads(body)
        assert r["id"] == f"b{i}" and r["outputs"][0]["data"] == vals, r
    s.close()


def test_bare_lf_heads_pipelined(srv):
    """Heads ended by bare LF lines are accepted, and the first blank line
    ends each one even when a later request uses CRLF."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    f = s.makefile("rb")
    s.sendall(b"GET /v2/models/simple HTTP/1.1\nHost: x\n\n"
              b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    st, _, body = read_response(f)
    assert st == 200 and json.loads(body)["name"] == "simple"
    st, _, body = read_response(f)
    assert st == 200 and body == b""
    s.close()


def test_one_byte_at_a_time(srv):
    body = json.dumps(infer_body("INPUT0", "FP32", [1, 1], [3.0])).encode()
    data = (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            % len(body)) + body
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for b in data:
        s.sendall(bytes([b]))
    st, _, out = read_response(s.makefile("rb"))
    s.close()
    assert st == 200 and json.loads(out)["outputs"][0]["data"] == [3.0]


@pytest.mark.parametrize("raw,status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /v2/health/live HTTP/2.0\r\n\r\n", 505),
    (b"GET /v2/health/live FOO/1.1\r\n\r\n", 400),
    (b"GET noslash HTTP/1.1\r\n\r\n", 400),
    (b"GET /v2/health/live HTTP/1.1\r\nNoColonHere\r\n\r\n", 400),
    (b"GET /v2/health/live HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400),
    (b"POST /v2/repository/index HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", 400),
    (b"POST /v2/repository/index HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    (b"POST /v2/repository/index HTTP/1.1\r\nContent-Length: 12a\r\n\r\n", 400),
    (b"POST /v2/repository/index HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400),
    (b"POST /v2/repository/index HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    (b"POST /v2/repository/index HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX", 400),
    (b"GET /v2/health/live HTTP/1.1\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(70)) + b"\r\n", 431),
    (b"GET /v2/health/live HTTP/1.1\r\nBig: " + b"a" * 70000 + b"\r\n\r\n", 431),
])
def test_malformed_requests_answered_and_closed(srv, client, raw, status):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    try:
        s.sendall(raw)
    except (BrokenPipeError, ConnectionResetError):
        pass
    f = s.makefile("rb")
    st, hdrs, body = read_response(f)
    assert st == status, body
    assert hdrs.get("connection") == "close" and json.loads(body)["error"]
    assert f.read() == b""  # the server closed the connection
    s.close()
    assert client.is_server_live()


def test_expect_100_continue(srv):
    body = json.dumps(infer_body("INPUT0", "FP32", [1, 1], [5.0])).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    f = s.makefile("rb")
    s.sendall(b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body))
    assert f.readline() == b"HTTP/1.1 100 Continue\r\n" and f.readline() == b"\r\n"
    s.sendall(body)
    st, _, out = read_response(f)
    assert st == 200 and json.loads(out)["outputs"][0]["data"] == [5.0]
    # Too large: refused at once, no 100.
    s.sendall(b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
              b"Content-Length: 99999999\r\n\r\n")
    st, _, _ = read_response(f)
    assert st == 400
    s.close()


def test_http10_keep_alive_and_head(srv):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    f = s.makefile("rb")
    # HTTP/1.0 asking for keep-alive keeps the connection; HEAD has no body.
    s.sendall(b"GET /v2/models/simple HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    st, hdrs, body = read_response(f)
    assert st == 200 and hdrs.get("connection") == "keep-alive" and json.loads(body)["name"] == "simple"
    s.sendall(b"HEAD /v2/models/simple HTTP/1.1\r\nHost: x\r\n\r\n")
    st, hdrs, body = read_response(f, head=True)
    assert st == 200 and int(hdrs["content-length"]) > 0 and body == b""
    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    st, hdrs, _ = read_response(f)
    assert st == 200 and hdrs.get("connection") == "close"
    assert f.read() == b""
    s.close()
    # Plain HTTP/1.0: answered, then closed.
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    f = s.makefile("rb")
    s.sendall(b"GET /v2/health/live HTTP/1.0\r\n\r\n")
    st, hdrs, _ = read_response(f)
    assert st == 200 and hdrs.get("connection") == "close"
    assert f.read() == b""
    s.close()
