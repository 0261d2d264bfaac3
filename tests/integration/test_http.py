"""HTTP/REST front end of nereid: KServe v2 routes with Triton's
extensions, both tensor encodings for every datatype, error cases,
oversized and malformed bodies, client disconnects, and /metrics.

Run by ctest (tests/CMakeLists.txt) with NEREID_BIN, NEREID_BACKEND_DIR and
NEREID_EXAMPLES set. Each server listens on ports the kernel picks
(--http-port=0); the port is read from nereid's stdout. Requests are shaped
like the ones tritonclient.http builds.
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

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
NEREID = os.environ.get("NEREID_BIN", os.path.join(SOURCE, "build", "src", "server", "nereid"))
BACKENDS = os.environ.get("NEREID_BACKEND_DIR", os.path.join(SOURCE, "build", "backends"))
EXAMPLES = os.environ.get("NEREID_EXAMPLES", os.path.join(SOURCE, "examples", "models"))
START_TIMEOUT = 90

pytestmark = pytest.mark.skipif(not os.access(NEREID, os.X_OK), reason=f"no nereid binary at {NEREID}")

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
    def __init__(self, repo, extra=()):
        self.errfile = tempfile.TemporaryFile(mode="w+")
        args = [NEREID, f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                "--http-port=0", "--metrics-port=0", "--http-address=127.0.0.1",
                "--http-thread-count=2", "--allow-grpc=false", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.errfile, text=True)
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
        self.errfile.seek(0)
        return self.errfile.read()

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


@pytest.fixture(scope="module")
def repo():
    d = tempfile.mkdtemp(prefix="nereid_http_")
    for m in os.listdir(EXAMPLES):
        shutil.copytree(os.path.join(EXAMPLES, m), os.path.join(d, m))
    for dt, (_, ctype) in DTYPES.items():
        name = f"identity_{dt.lower()}_t"
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
            f.write(identity_config(name, ctype))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def srv(repo):
    s = Server(repo, ["--model-control-mode=explicit", "--load-model=*",
                      "--http-max-input-size=1048576"])
    yield s
    assert s.alive(), s.log()
    assert s.stop() == 0


def jreq(srv, method, path, body=None, headers=None):
    status, hdrs, data = srv.request(method, path, body, headers)
    return status, (json.loads(data) if data else None)


# ---- routes ---------------------------------------------------------------


def test_server_metadata_and_health(srv):
    st, body = jreq(srv, "GET", "/v2")
    assert st == 200 and body["name"] == "triton" and "binary_tensor_data" in body["extensions"]
    assert srv.request("GET", "/v2/health/live")[0] == 200
    assert srv.request("GET", "/v2/health/ready")[0] == 200
    assert srv.request("POST", "/v2/health/ready")[0] == 405


def test_model_metadata_ready_config_stats(srv):
    st, md = jreq(srv, "GET", "/v2/models/simple")
    assert st == 200 and md["name"] == "simple" and md["inputs"][0]["datatype"] == "INT32"
    st, md1 = jreq(srv, "GET", "/v2/models/simple/versions/1")
    assert st == 200 and md1 == md
    assert srv.request("GET", "/v2/models/simple/ready")[0] == 200
    assert srv.request("GET", "/v2/models/simple/versions/1/ready")[0] == 200
    st, cfg = jreq(srv, "GET", "/v2/models/simple/config")
    assert st == 200 and cfg["name"] == "simple" and cfg["max_batch_size"] == 8
    st, stats = jreq(srv, "GET", "/v2/models/simple/stats")
    assert st == 200 and stats["model_stats"][0]["name"] == "simple"
    st, stats = jreq(srv, "GET", "/v2/models/simple/versions/1/stats")
    assert st == 200
    st, allst = jreq(srv, "GET", "/v2/models/stats")
    assert st == 200 and {"simple", "identity_fp32"} <= {m["name"] for m in allst["model_stats"]}


def test_unknown_model_and_version(srv):
    st, body = jreq(srv, "GET", "/v2/models/nope")
    assert st == 404 and "nope" in body["error"]
    st, body = jreq(srv, "GET", "/v2/models/nope/ready")
    assert st in (400, 404) and "error" in body
    st, body = jreq(srv, "GET", "/v2/models/simple/versions/7")
    assert st in (400, 404) and "error" in body
    st, body = jreq(srv, "GET", "/v2/models/simple/versions/abc")
    assert st == 400 and "version" in body["error"]
    st, body = jreq(srv, "GET", "/v2/nothing/here")
    assert st == 404 and body["error"]


def test_repository_index_load_unload(srv):
    st, idx = jreq(srv, "POST", "/v2/repository/index")
    assert st == 200 and {"name": "simple", "version": "1", "state": "READY"} in [
        {k: e.get(k) for k in ("name", "version", "state")} for e in idx]
    st, idx = jreq(srv, "POST", "/v2/repository/index", {"ready": True})
    assert st == 200 and all(e["state"] == "READY" for e in idx)
    assert jreq(srv, "POST", "/v2/repository/index", "{bad")[0] == 400
    assert srv.request("GET", "/v2/repository/index")[0] == 405

    st, _ = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/unload")
    assert st == 200
    deadline = time.monotonic() + 30
    while srv.request("GET", "/v2/models/identity_int8_t/ready")[0] == 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert srv.request("GET", "/v2/models/identity_int8_t/ready")[0] == 400
    st, _ = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load")
    assert st == 200
    assert srv.request("GET", "/v2/models/identity_int8_t/ready")[0] == 200

    # Config override (a JSON string), as tritonclient's load_model(config=...) sends.
    cfg = {"name": "identity_int8_t", "backend": "identity", "max_batch_size": 4,
           "input": [{"name": "INPUT0", "data_type": "TYPE_INT8", "dims": [-1]}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT8", "dims": [-1]}]}
    st, _ = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load",
                 {"parameters": {"config": json.dumps(cfg)}})
    assert st == 200
    st, got = jreq(srv, "GET", "/v2/models/identity_int8_t/config")
    assert got["max_batch_size"] == 4
    st, body = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load",
                    {"parameters": {"config": "{not json"}})
    assert st == 400 and body["error"]
    st, body = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load",
                    {"parameters": {"file:1/model.bin": "@@@"}})
    assert st == 400 and "base64" in body["error"]
    st, body = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load",
                    {"parameters": {"config": 5}})
    assert st == 400
    st, body = jreq(srv, "POST", "/v2/repository/models/no_such_model/load")
    assert st >= 400 and body["error"]
    # Put the original configuration back.
    assert jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load")[0] == 200
    st, _ = jreq(srv, "POST", "/v2/repository/models/identity_int8_t/unload",
                 {"parameters": {"unload_dependents": True}})
    assert st == 200
    assert jreq(srv, "POST", "/v2/repository/models/identity_int8_t/load")[0] == 200


def test_metrics(srv):
    srv.request("POST", "/v2/models/identity_fp32/infer", infer_body("INPUT0", "FP32", [1, 2], [1.0, 2.0]))
    st, hdrs, body = srv.request("GET", "/metrics", port=srv.metrics_port)
    assert st == 200 and b"nv_inference_request_success" in body
    assert srv.request("GET", "/v2", port=srv.metrics_port)[0] == 404


def test_unsupported_routes_answer_clearly(srv):
    for path in ("/v2/trace/setting", "/v2/cudasharedmemory/status"):
        st, body = jreq(srv, "GET", path)
        assert st == 501 and "not supported" in body["error"]


# ---- inference ---------------------------------------------------------------


def infer_body(name, datatype, shape, data, outputs=None, **extra):
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
    header = json.dumps(body).encode()
    return header + b"".join(tails), {"Inference-Header-Content-Length": str(len(header)),
                                      "Content-Type": "application/octet-stream"}


def split_binary(hdrs, data):
    hl = int(hdrs.get("Inference-Header-Content-Length", len(data)))
    return json.loads(data[:hl]), data[hl:]


@pytest.mark.parametrize("dt", list(DTYPES))
def test_json_roundtrip_every_datatype(srv, dt):
    arr = sample(dt)
    model = f"identity_{dt.lower()}_t"
    body = infer_body("INPUT0", dt, [1, len(arr)], to_json_list(dt, arr),
                      outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}}], id="req-7")
    st, hdrs, data = srv.request("POST", f"/v2/models/{model}/infer", body)
    assert st == 200, data
    r = json.loads(data)
    assert r["model_name"] == model and r["model_version"] == "1" and r["id"] == "req-7"
    out = r["outputs"][0]
    assert out["name"] == "OUTPUT0" and out["datatype"] == dt and out["shape"] == [1, len(arr)]
    if dt == "BYTES":
        assert out["data"] == to_json_list(dt, arr)
    elif dt == "BF16":
        assert np.array_equal(np.array(out["data"], dtype=np.float32), bf16_to_float(arr))
    elif dt == "FP16":
        assert np.array_equal(np.array(out["data"], dtype=np.float16), arr)
    elif dt == "FP32":
        assert np.array_equal(np.array(out["data"], dtype=np.float32), arr)
    else:
        assert np.array_equal(np.array(out["data"], dtype=DTYPES[dt][0]), arr)


@pytest.mark.parametrize("dt", list(DTYPES))
def test_binary_roundtrip_every_datatype(srv, dt):
    arr = sample(dt)
    raw = serialize(dt, arr)
    model = f"identity_{dt.lower()}_t"
    body = {"inputs": [{"name": "INPUT0", "shape": [1, len(arr)], "datatype": dt,
                        "parameters": {"binary_data_size": len(raw)}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    payload, headers = binary_request(body, [raw])
    st, hdrs, data = srv.request("POST", f"/v2/models/{model}/infer", payload, headers)
    assert st == 200, data
    r, tail = split_binary(hdrs, data)
    out = r["outputs"][0]
    assert out["parameters"]["binary_data_size"] == len(raw) and "data" not in out
    assert tail == raw


def test_binary_data_output_default_and_mixed(srv):
    a = np.arange(16, dtype=np.int32)
    b = np.ones(16, dtype=np.int32)
    body = {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b.tolist()}],
        "parameters": {"binary_data_output": True}}
    payload, headers = binary_request(body, [a.tobytes()])
    st, hdrs, data = srv.request("POST", "/v2/models/simple/infer", payload, headers)
    assert st == 200, data
    r, tail = split_binary(hdrs, data)
    names = [o["name"] for o in r["outputs"]]
    assert names == ["OUTPUT0", "OUTPUT1"] and len(tail) == 128
    o0 = np.frombuffer(tail[:64], dtype=np.int32)
    o1 = np.frombuffer(tail[64:], dtype=np.int32)
    assert np.array_equal(o0, a + b) and np.array_equal(o1, a - b)
    # Only OUTPUT1 requested, as JSON.
    body = infer_body("INPUT0", "INT32", [1, 16], a.tolist(),
                      outputs=[{"name": "OUTPUT1", "parameters": {"binary_data": False}}])
    body["inputs"].append({"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [b.tolist()]})
    st, r = jreq(srv, "POST", "/v2/models/simple/infer", body)
    assert st == 200 and [o["name"] for o in r["outputs"]] == ["OUTPUT1"]
    assert r["outputs"][0]["data"] == (a - b).tolist()


def test_parameters_accepted(srv):
    body = infer_body("INPUT0", "FP32", [1, 3], [1, 2, 3],
                      parameters={"priority": 0, "timeout": 1000000, "custom_s": "x", "custom_i": 3,
                                  "custom_b": True, "custom_d": 0.5})
    st, r = jreq(srv, "POST", "/v2/models/identity_fp32/infer", body)
    assert st == 200, r
    for bad in ({"sequence_id": [1]}, {"sequence_start": 1}, {"priority": -1}, {"timeout": "x"},
                {"binary_data_output": "yes"}, {"nested": {"a": 1}}):
        st, r = jreq(srv, "POST", "/v2/models/identity_fp32/infer",
                     infer_body("INPUT0", "FP32", [1, 1], [1], parameters=bad))
        assert st == 400 and r["error"], bad


def test_keep_alive_and_pipelining(srv):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    body = json.dumps(infer_body("INPUT0", "FP32", [1, 2], [1.5, 2.5]))
    for _ in range(20):
        c.request("POST", "/v2/models/identity_fp32/infer", body=body)
        r = c.getresponse()
        assert r.status == 200 and json.loads(r.read())["outputs"][0]["data"] == [1.5, 2.5]
    c.close()
    # Three pipelined requests on one socket, answered in order.
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


# ---- errors ----------------------------------------------------------------------


def expect_error(srv, path, body, status=400, headers=None, contains=None):
    st, hdrs, data = srv.request("POST", path, body, headers)
    assert st == status, (st, data)
    err = json.loads(data)["error"]
    if contains:
        assert contains in err, err
    return err


def test_infer_errors(srv):
    p = "/v2/models/identity_fp32/infer"
    expect_error(srv, "/v2/models/nope/infer", infer_body("INPUT0", "FP32", [1], [1]), 404, contains="nope")
    expect_error(srv, "/v2/models/square_int32/infer", infer_body("IN", "INT32", [1], [1]), 501,
                 contains="decoupled")
    expect_error(srv, p, "{bad json", contains="JSON")
    expect_error(srv, p, "[]")
    expect_error(srv, p, "", contains="empty")
    expect_error(srv, p, {"inputs": 3}, contains="inputs")
    expect_error(srv, p, {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP99", "data": [1, 2]}]},
                 contains="datatype")
    expect_error(srv, p, infer_body("INPUT0", "INT32", [1, 2], [1, 2]), contains="FP32")
    expect_error(srv, p, infer_body("INPUT0", "FP32", [1, 3], [1, 2]), contains="elements")
    expect_error(srv, p, infer_body("INPUT0", "FP32", [1, 1], [1, 2]), contains="elements")
    expect_error(srv, p, infer_body("INPUT0", "FP32", [1, 1000000000000], [1]), contains="elements")
    expect_error(srv, p, infer_body("INPUT0", "FP32", [1, 2], [1, "x"]))
    expect_error(srv, p, infer_body("INPUT0", "FP32", [1, -2], [1, 2]), contains="shape")
    expect_error(srv, p, infer_body("INPUT0", "FP32", [9, 1], [1] * 9))  # over max_batch_size
    expect_error(srv, "/v2/models/identity_int8_t/infer", infer_body("INPUT0", "INT8", [1, 1], [300]),
                 contains="range")
    expect_error(srv, "/v2/models/identity_int32_t/infer", infer_body("INPUT0", "INT32", [1, 1], [1.5]))
    expect_error(srv, "/v2/models/identity_bool_t/infer", infer_body("INPUT0", "BOOL", [1, 1], [1]))
    expect_error(srv, "/v2/models/identity_bytes_t/infer", infer_body("INPUT0", "BYTES", [1, 1], [1]))
    expect_error(srv, p, {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32"}]},
                 contains="binary_data_size")
    expect_error(srv, p, {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": 5}]},
                 contains="data")
    expect_error(srv, p, infer_body("INPUT0", "FP32", [1, 1], [1], outputs=[{"name": "NOPE"}]))


def test_binary_size_errors(srv):
    p = "/v2/models/identity_fp32/infer"
    raw = np.arange(4, dtype=np.float32).tobytes()

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
    expect_error(srv, p, payload, headers={"Inference-Header-Content-Length": "abc"}, contains="range")
    expect_error(srv, p, payload, headers={"Inference-Header-Content-Length": "-5"})
    # No Inference-Header-Content-Length but binary_data_size given.
    expect_error(srv, p, json.dumps(body(16)), contains="Inference-Header-Content-Length")


def raw_exchange(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(data)
        return s.recv(65536)
    finally:
        s.close()


def test_oversized_body_rejected(srv):
    # The limit is 1 MB here: a 2 MB body is refused from its header alone,
    # before the body is read (and without allocating the claimed size).
    for length in (2 * 1024 * 1024, 99999999999):
        resp = raw_exchange(srv.port, b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                            b"Content-Length: %d\r\n\r\n" % length)
        assert resp.startswith(b"HTTP/1.1 413"), resp
    # Chunked bodies are held to the same limit.
    chunk = b"x" * 65536
    data = b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    data += (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 20
    try:
        resp = raw_exchange(srv.port, data)
        assert resp == b"" or resp.startswith(b"HTTP/1.1 413"), resp[:200]
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert srv.request("GET", "/v2/health/live")[0] == 200


def test_random_bodies_never_crash(srv):
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
        assert st in (200, 400), (st, body, data)
        if st == 400:
            assert json.loads(data)["error"]
    assert srv.request("GET", "/v2/health/live")[0] == 200


def test_client_disconnects(srv):
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
    assert srv.request("GET", "/v2/health/live")[0] == 200
    st, r = jreq(srv, "POST", "/v2/models/identity_fp32/infer", infer_body("INPUT0", "FP32", [1, 1], [7]))
    assert st == 200 and r["outputs"][0]["data"] == [7]


def test_large_binary_roundtrip(srv):
    arr = np.arange(200000, dtype=np.float32)  # 800 KB, under the 1 MB limit
    body = {"inputs": [{"name": "INPUT0", "shape": [1, arr.size], "datatype": "FP32",
                        "parameters": {"binary_data_size": arr.nbytes}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    payload, headers = binary_request(body, [arr.tobytes()])
    st, hdrs, data = srv.request("POST", "/v2/models/identity_fp32/infer", payload, headers)
    assert st == 200
    r, tail = split_binary(hdrs, data)
    assert np.array_equal(np.frombuffer(tail, dtype=np.float32), arr)


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
