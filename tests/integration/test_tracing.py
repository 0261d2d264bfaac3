"""Request tracing end to end: --trace-config, the trace file's objects for
HTTP, gRPC and ensemble requests, sampling (rate, count, log frequency),
and the trace extension over HTTP and gRPC, good and bad settings. Requests
and trace settings go through tritonclient; the generate routes, which
tritonclient does not speak, stay hand-built.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and NEREID_EXAMPLES set
(see tests/CMakeLists.txt).
"""

import json
import os
import queue
import sys
import tempfile
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from test_nereid_cli import BACKENDS, EXAMPLES, Server, listening_ports

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "proto")
CORE = ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START",
        "COMPUTE_END", "REQUEST_END"]


def stubs():
    """Python modules of nereid's own proto files (for suites that need
    the raw gRPC stubs)."""
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="nereid_trace_stubs_")
    assert protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", f"--grpc_python_out={out}",
                        "grpc_service.proto", "model_config.proto"]) == 0
    sys.path.insert(0, out)
    import grpc_service_pb2
    import grpc_service_pb2_grpc

    return grpc_service_pb2, grpc_service_pb2_grpc


@pytest.fixture
def traced(tmp_path):
    """Starts nereid on the examples with tracing flags; yields (start)."""
    started = []

    def start(*flags):
        s = Server([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-metrics=false",
                    "--http-port=0", "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                    *flags])
        started.append(s)
        lines = s.wait_ready()
        ports = listening_ports(lines)
        s.http, s.grpc = ports["http"], ports["grpc"]
        return s

    try:
        yield start
    finally:
        for s in started:
            s.close()


def http(s, path, body=None):
    """A hand-built POST (or GET) for the routes tritonclient does not
    speak (generate): (status, JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{s.http}{path}", data=data)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def client(s, protocol="http"):
    if protocol == "grpc":
        return grpcclient.InferenceServerClient(f"127.0.0.1:{s.grpc}")
    return httpclient.InferenceServerClient(f"127.0.0.1:{s.http}")


def inputs_of(protocol, **arrays):
    module = grpcclient if protocol == "grpc" else httpclient
    out = []
    for name, array in arrays.items():
        i = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        i.set_data_from_numpy(array)
        out.append(i)
    return out


def infer(s, model, protocol="http", rid="", **arrays):
    """Runs model through tritonclient with the named numpy inputs."""
    with client(s, protocol) as c:
        return c.infer(model, inputs_of(protocol, **arrays), request_id=rid)


def infer_identity(s, rid="", protocol="http"):
    x = np.array([[1, 2, 3]], np.float32)
    assert (infer(s, "identity_fp32", protocol, rid, INPUT0=x).as_numpy("OUTPUT0") == x).all()


def simple_inputs():
    x = np.arange(16, dtype=np.int32).reshape(1, 16)
    return {"INPUT0": x, "INPUT1": x}


def grouped(path):
    """{id: {"info": {...}, "marks": {name: ns}}} from a trace file."""
    with open(path) as f:
        objs = json.load(f)
    out = {}
    for o in objs:
        t = out.setdefault(o["id"], {"info": None, "marks": {}})
        if "model_name" in o:
            t["info"] = o
        else:
            for ts in o["timestamps"]:
                t["marks"][ts["name"]] = ts["ns"]
    return out


def test_trace_file_holds_http_grpc_and_ensemble_requests(traced, tmp_path):
    f = tmp_path / "trace.json"
    s = traced("--trace-config", f"triton,file={f}", "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")
    infer_identity(s, rid="req-7")
    infer(s, "simple_ensemble", **simple_inputs())
    infer_identity(s, protocol="grpc")
    assert s.stop() == 0, s.text()
    traces = grouped(f)
    roots = [t for t in traces.values() if "parent_id" not in t["info"]]
    assert len(roots) == 3, traces
    http_id = next(i for i, t in traces.items() if t["info"].get("request_id") == "req-7")
    t = traces[http_id]
    assert t["info"]["model_name"] == "identity_fp32" and t["info"]["model_version"] == 1
    ns = [t["marks"][n] for n in CORE]
    assert ns == sorted(ns), t
    assert t["marks"]["QUEUE_START"] <= t["marks"]["INFER_RESPONSE_COMPLETE"] <= t["marks"]["HTTP_SEND_START"]
    assert t["marks"]["HTTP_SEND_START"] <= t["marks"]["HTTP_SEND_END"]
    # Receive marks: the request came in before the core saw it.
    assert t["marks"]["HTTP_RECV_START"] <= t["marks"]["HTTP_RECV_END"] <= t["marks"]["REQUEST_START"], t
    # The ensemble: its own request and one child per step, each with its model.
    ens = next(i for i, t in traces.items() if t["info"]["model_name"] == "simple_ensemble")
    kids = [t for t in traces.values() if t["info"].get("parent_id") == ens]
    assert len(kids) == 2 and all(k["info"]["model_name"] == "simple" for k in kids), traces
    assert all(set(CORE) <= set(k["marks"]) for k in kids)
    assert {"REQUEST_START", "QUEUE_START", "REQUEST_END"} <= set(traces[ens]["marks"])
    grpc_t = [t for t in roots if "GRPC_SEND_START" in t["marks"]]
    assert len(grpc_t) == 1 and set(CORE) <= set(grpc_t[0]["marks"]), traces
    g = grpc_t[0]["marks"]
    assert g["GRPC_WAITREAD_START"] <= g["GRPC_WAITREAD_END"] <= g["REQUEST_START"] <= g["GRPC_SEND_START"], g


def test_each_streamed_request_has_its_own_read_marks(traced, tmp_path):
    f = tmp_path / "s.json"
    s = traced(f"--trace-config=triton,file={f}", "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")
    answers = queue.Queue()
    with client(s, "grpc") as c:
        c.start_stream(callback=lambda result, error: answers.put((result, error)))
        for i in range(3):
            c.async_stream_infer("identity_fp32", inputs_of("grpc", INPUT0=np.array([[i]], np.float32)),
                                 request_id=f"s{i}")
        c.stop_stream()
    got = [answers.get_nowait() for _ in range(answers.qsize())]
    assert all(e is None for _, e in got), got
    assert [r.get_response().id for r, _ in got] == ["s0", "s1", "s2"], got
    assert s.stop() == 0, s.text()
    traces = grouped(f)
    by_id = {t["info"]["request_id"]: t["marks"] for t in traces.values()}
    assert sorted(by_id) == ["s0", "s1", "s2"], traces
    for m in by_id.values():
        assert m["GRPC_WAITREAD_START"] <= m["GRPC_WAITREAD_END"] <= m["REQUEST_START"] <= m["GRPC_SEND_END"], m
    # One after another on one stream: a request is read after the one before it began.
    assert by_id["s0"]["GRPC_WAITREAD_END"] <= by_id["s1"]["GRPC_WAITREAD_END"] <= by_id["s2"]["GRPC_WAITREAD_END"]


def test_generate_requests_are_traced(traced, tmp_path):
    f = tmp_path / "g.json"
    s = traced(f"--trace-config=triton,file={f}", "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1")
    # Hand-built: tritonclient has no call for the generate extension.
    code, r = http(s, "/v2/models/identity_fp32/generate", {"id": "gen", "INPUT0": [1.5, 2, 3]})
    assert code == 200 and r["OUTPUT0"] == [1.5, 2, 3], r
    req = urllib.request.Request(f"http://127.0.0.1:{s.http}/v2/models/square_int32/generate_stream",
                                 data=json.dumps({"id": "genstream", "IN": 2}).encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.read().count(b"data: ") == 2
    assert s.stop() == 0, s.text()
    by_id = {t["info"]["request_id"]: t["marks"] for t in grouped(f).values()}
    assert sorted(by_id) == ["gen", "genstream"], by_id
    for m in by_id.values():
        assert set(CORE) <= set(m), m
        order = ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START",
                 "HTTP_SEND_END"]
        assert [m[n] for n in order] == sorted(m[n] for n in order), m


def test_tensors_level_writes_inputs_and_outputs(traced, tmp_path):
    f = tmp_path / "t.json"
    s = traced(f"--trace-config=triton,file={f}", "--trace-config=level=TENSORS", "--trace-config=rate=1")
    infer(s, "identity_fp32", rid="f", INPUT0=np.array([[1.5, -2, 3]], np.float32))
    infer(s, "identity_bytes", "grpc", rid="b", INPUT0=np.array([["a\"q", "b,c\u00e9\\"]], np.object_))
    x = list(range(16))
    infer(s, "simple_ensemble", rid="e", **simple_inputs())
    # Both levels at once, set over the extension: timestamps come back too.
    with client(s) as c:
        got = c.update_trace_settings(settings={"trace_level": ["TIMESTAMPS", "TENSORS"]})
    assert got["trace_level"] == ["TIMESTAMPS", "TENSORS"], got
    infer(s, "identity_fp32", rid="both", INPUT0=np.array([[7]], np.float32))
    assert s.stop() == 0, s.text()
    with open(f) as fh:
        objs = json.load(fh)
    tensors = {}
    for o in objs:
        if "activity" in o:
            tensors.setdefault(o["id"], []).append((o["activity"], o["tensor"]))
    f32 = next(v for v in tensors.values() if v[0][1]["dtype"] == "FP32" and v[0][1]["shape"] == "1,3")
    assert f32 == [("TENSOR_QUEUE_INPUT", {"name": "INPUT0", "data": "1.5,-2,3", "shape": "1,3", "dtype": "FP32"}),
                   ("TENSOR_BACKEND_INPUT", {"name": "INPUT0", "data": "1.5,-2,3", "shape": "1,3", "dtype": "FP32"}),
                   ("TENSOR_BACKEND_OUTPUT", {"name": "OUTPUT0", "data": "1.5,-2,3", "shape": "1,3",
                                              "dtype": "FP32"})], f32
    byt = next(v for v in tensors.values() if v[0][1]["dtype"] == "BYTES")
    assert [a for a, _ in byt] == ["TENSOR_QUEUE_INPUT", "TENSOR_BACKEND_INPUT", "TENSOR_BACKEND_OUTPUT"]
    assert byt[0][1]["data"] == '"a"q","b,c\\xc3\\xa9\\x5c"', byt
    # The ensemble: its own inputs and outputs, and each step's under the step's id.
    ens = [v for v in tensors.values() if any(t["name"] == "INPUT1" for _, t in v)]
    assert len(ens) == 3, tensors  # the ensemble and its two steps
    for v in ens:
        assert {a for a, _ in v} >= {"TENSOR_QUEUE_INPUT", "TENSOR_BACKEND_OUTPUT"}, v
    sums = [t for v in ens for a, t in v if a == "TENSOR_BACKEND_OUTPUT" and t["name"] == "OUTPUT0"]
    assert sums and all(t["data"] == ",".join(str(2 * i) for i in x) for t in sums), sums
    # TENSORS alone: no timestamps; both levels: both kinds.
    ts_ids = {o["id"] for o in objs if "timestamps" in o}
    both = [i for i, v in tensors.items() if v[0][1]["shape"] == "1,1"]
    assert len(both) == 1 and ts_ids == set(both), (ts_ids, both)


def test_rate_count_and_log_frequency(traced, tmp_path):
    f = tmp_path / "t.json"
    s = traced(f"--trace-config=triton,file={f}", "--trace-config=level=TIMESTAMPS", "--trace-config=rate=2",
               "--trace-config=triton,log-frequency=2")
    for _ in range(6):  # every second request: 3 traces
        infer_identity(s)
    assert os.path.exists(f"{f}.0") and not os.path.exists(f"{f}.1")
    assert len(grouped(f"{f}.0")) == 2
    assert s.stop() == 0, s.text()
    assert len(grouped(f"{f}.1")) == 1  # the rest, at the end
    assert not os.path.exists(f)
    # A count: the last trace it allows is written out at once.
    g = tmp_path / "c.json"
    s = traced(f"--trace-config=triton,file={g}", "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1",
               "--trace-config=count=2")
    for _ in range(4):
        infer_identity(s)
    with client(s) as c:
        assert c.get_trace_settings()["trace_count"] == "0"
    assert len(grouped(f"{g}.0")) == 2
    assert s.stop() == 0, s.text()


def test_off_by_default_and_settings_over_http(traced, tmp_path):
    f = tmp_path / "t.json"
    s = traced(f"--trace-config=triton,file={f}")
    infer_identity(s)
    c = client(s)
    assert c.get_trace_settings() == {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1",
                                      "log_frequency": "0", "trace_file": str(f), "trace_mode": "triton"}
    # Turn it on for one model only; the other follows the global setting.
    m = c.update_trace_settings("identity_fp32", {"trace_level": ["TIMESTAMPS"], "trace_rate": "1"})
    assert m["trace_level"] == ["TIMESTAMPS"] and m["trace_rate"] == "1", m
    assert c.get_trace_settings("simple")["trace_level"] == ["OFF"]
    infer_identity(s, rid="on")
    # null resets the model's fields: it follows the global setting again.
    m = c.update_trace_settings("identity_fp32", {"trace_level": None, "trace_rate": None})
    assert m["trace_level"] == ["OFF"] and m["trace_rate"] == "1000", m
    infer_identity(s, rid="off-again")
    bad = [
        ({"trace_file": "x.json"}, 501, "trace file location can not be updated"),
        ({"trace_rate": 5}, 400, "Unable to parse 'trace_rate'"),
        ({"trace_rate": "five"}, 400, "Unable to parse 'trace_rate', got: five"),
        ({"trace_count": "-5"}, 400, "Expecting value >= -1"),
        ({"log_frequency": "99999999999"}, 400, "out of range"),
        ({"trace_level": ["OFF", "TIMESTAMPS"]}, 400, "Expect only one trace level 'OFF'"),
        ({"trace_level": ["TIMESTAMPS"], "trace_rate": "0"}, 400, "invalid trace setting :sample rate must be non-zero"),
        ({"trace_level": "TIMESTAMPS"}, 400, "must be an array"),
    ]
    for body, code, text in bad:
        with pytest.raises(InferenceServerException) as e:
            c.update_trace_settings(settings=body)
        assert e.value.status() == str(code) and text in e.value.message(), (body, e.value)
    assert c.get_trace_settings()["trace_level"] == ["OFF"]  # nothing changed
    # A level Triton does not know is passed over (Triton answers 200 and
    # changes nothing); one it knows beside it still counts.
    assert c.update_trace_settings(settings={"trace_level": ["LOUD"]})["trace_level"] == ["OFF"]
    assert c.update_trace_settings(settings={"trace_level": ["LOUD", "TIMESTAMPS"]})["trace_level"] == ["TIMESTAMPS"]
    assert c.update_trace_settings(settings={"trace_level": ["OFF"]})["trace_level"] == ["OFF"]
    with pytest.raises(InferenceServerException) as e:
        c.get_trace_settings("nope")
    assert e.value.status() == "400" and e.value.message() == "Request for unknown model : nope", e.value
    c.close()
    assert s.stop() == 0, s.text()
    traces = grouped(f)
    assert [t["info"].get("request_id") for t in traces.values()] == ["on"], traces


def test_trace_setting_over_grpc(traced, tmp_path):
    s = traced(f"--trace-config=triton,file={tmp_path / 't.json'}")
    with client(s, "grpc") as c:
        r = c.get_trace_settings()
        got = {k: list(v.value) for k, v in r.settings.items()}
        assert got["trace_level"] == ["OFF"] and got["trace_rate"] == ["1000"], got
        r = c.update_trace_settings("simple", {"trace_level": ["TIMESTAMPS"], "trace_count": "3"})
        got = {k: list(v.value) for k, v in r.settings.items()}
        assert got["trace_level"] == ["TIMESTAMPS"] and got["trace_count"] == ["3"], got
        assert c.get_trace_settings("simple", as_json=True)["settings"]["trace_count"]["value"] == ["3"]
        with pytest.raises(InferenceServerException) as e:
            c.update_trace_settings(settings={"trace_rate": ["1", "2"]})
        assert e.value.status() == "StatusCode.INVALID_ARGUMENT", e.value
        assert "expect only 1 value for 'trace_rate'" in e.value.message()
        with pytest.raises(InferenceServerException) as e:
            c.update_trace_settings(settings={"trace_file": "x"})
        assert e.value.status() == "StatusCode.UNIMPLEMENTED", e.value
    assert s.stop() == 0, s.text()


@pytest.mark.parametrize(
    "flag,text",
    [(",level=TIMESTAMPS", "No trace mode specified"),
     ("foo,level=TIMESTAMPS", "invalid value for trace mode option"),
     ("level=sometimes", "a trace level"),
     ("rate=-1", "rate=<count"),
     ("level", "--trace-config option format is")],
)
def test_bad_trace_config_exits_2(flag, text):
    from test_nereid_cli import common, run

    code, _, err = run([*common(), f"--trace-config={flag}"])
    assert code == 2 and text in err.splitlines()[0], err
