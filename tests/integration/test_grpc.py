"""The gRPC front end end to end, through Triton's own Python client
(tritonclient.grpc, sync and aio): what a client written for Triton sends
is what these tests send.

Hand-built requests remain only where the client cannot send what a test
needs: stubs generated at test time from OUR proto/ files (never
upstream's) for fields tritonclient never sets (typed contents, parameters
of other types) and for messages it refuses to build, and a raw HTTP/2
connection (RawH2) for malformed frames, headers and protocol violations.
Each such helper says why.

Run by ctest (see tests/CMakeLists.txt) with NRD_TEST_PYTHON, the
python that has tritonclient, as
    .deps/venv/bin/python -m pytest -q tests/integration/test_grpc.py
with NEREID_BIN, NEREID_BACKEND_DIR and NEREID_EXAMPLES in the environment.
One nereid (explicit model control, every example model loaded plus a
classification model with a label file from a second repository, a 1 MiB
message limit, HTTP on a free port for the cross-protocol shared memory
tests) serves the whole module; it must stop cleanly at the end,
with no sanitizer report in its log.
"""

import ctypes
import ctypes.util
import gzip
import json
import os
import queue
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zlib

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
NEREID = os.environ.get("NEREID_BIN", os.path.join(SOURCE, "build", "src", "server", "nereid"))
BACKENDS = os.environ.get("NEREID_BACKEND_DIR", os.path.join(SOURCE, "build", "backends"))
EXAMPLES = os.environ.get("NEREID_EXAMPLES", os.path.join(SOURCE, "examples", "models"))
TEST_BACKENDS = os.environ.get("NEREID_TEST_BACKEND_DIR", os.path.join(SOURCE, "build", "test_backends"))
PROTO_DIR = os.path.join(SOURCE, "proto")
MAX_MESSAGE = 1 << 20
START_TIMEOUT = 60
RPC_TIMEOUT = 30

if not os.access(NEREID, os.X_OK):  # a missing binary fails the run, never skips it
    raise RuntimeError(f"no nereid binary at {NEREID!r} (ctest sets NEREID_BIN)")

import grpc  # noqa: E402  (grpcio, tritonclient's own transport)
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.grpc.aio as aioclient  # noqa: E402
import tritonclient.utils.shared_memory as shm  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402


def _generate_stubs():
    out = tempfile.mkdtemp(prefix="nereid-grpc-stubs-")
    # In a process of its own: grpc_tools' compiler carries a C++ protobuf
    # of its own, and loaded beside another one (onnx's, which the modules
    # that import this one load) it aborted the interpreter at random.
    p = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={out}",
                        f"--grpc_python_out={out}", "grpc_service.proto", "model_config.proto", "health.proto"],
                       capture_output=True, text=True)
    assert p.returncode == 0, "grpc_tools.protoc failed on our proto files:\n" + p.stderr
    sys.path.insert(0, out)
    return out


STUB_DIR = _generate_stubs()
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pbg  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402


def free_port():
    """A port nothing listens on right now; kept for bench/stateful_bench.py,
    which runs alone. No test uses it: a test's server listens on
    --*-port=0 and reports its ports (Server.ports), as a port picked here
    can be taken by another test's socket before the server binds it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args):
        self.errfile = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([NEREID, *args], stdout=subprocess.PIPE, stderr=self.errfile)
        self.out = b""

    def wait_ready(self):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while time.monotonic() < deadline:
                if not sel.select(timeout=1):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError("nereid exited before ready:\n" + self.text())
                self.out += chunk
                if b"nereid: server " in self.out:
                    return
            raise AssertionError("nereid not ready:\n" + self.text())
        finally:
            sel.close()

    def ports(self):
        """{"http": port, "grpc": port, ...}: the ports of the endpoints that
        are on, from the start-up lines (after wait_ready)."""
        from test_nereid_cli import listening_ports

        return listening_ports(self.out.decode(errors="replace").splitlines())

    def text(self):
        # A new open file description: seeking the one nereid writes through
        # would move its offset, and a line written meanwhile would land
        # over earlier ones (seen: two log lines spliced into one).
        with open(f"/proc/self/fd/{self.errfile.fileno()}", errors="replace") as f:
            err = f.read()
        return self.out.decode(errors="replace") + "\n--- stderr ---\n" + err

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rest, _ = self.proc.communicate(timeout=30)
        self.out += rest
        return self.proc.returncode


def write_identity_model(repo, name, max_batch_size=8, instances=1, output_extra="", extra="",
                         dtype="TYPE_FP32", backend="identity"):
    """repo/name: `backend` (identity, or a test backend answering like it)
    on one `dtype` [-1] tensor (INPUT0 -> OUTPUT0) in a version folder 1.
    output_extra goes inside the output's braces, extra after the instance
    group (batching, parameters)."""
    os.makedirs(os.path.join(repo, name, "1"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(f'name: "{name}"\nbackend: "{backend}"\nmax_batch_size: {max_batch_size}\n'
                f'input [ {{ name: "INPUT0" data_type: {dtype} dims: [ -1 ] }} ]\n'
                f'output [ {{ name: "OUTPUT0" data_type: {dtype} dims: [ -1 ] {output_extra}}} ]\n'
                f'instance_group [ {{ kind: KIND_CPU count: {instances} }} ]\n' + extra)


RICH_CONFIGS = {
    "seq_cfg": """name: "seq_cfg"
backend: "identity"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 7000000
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ]
            initial_state [ { name: "zeros" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } ] } ]
  oldest { max_candidate_sequences: 3 preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 100 }
}
instance_group [ { kind: KIND_CPU count: 1 } ]
""",
    "dyn_cfg": """name: "dyn_cfg"
backend: "identity"
max_batch_size: 8
version_policy: { specific: { versions: [ 1 ] } }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching {
  preferred_batch_size: [ 2, 8 ]
  max_queue_delay_microseconds: 250
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 100000
                         allow_timeout_override: true max_queue_size: 10 }
  priority_queue_policy { key: 1 value { max_queue_size: 5 } }
}
instance_group [ { name: "g" kind: KIND_CPU count: 2
                   rate_limiter { resources [ { name: "R" count: 2 } ] priority: 1 } } ]
parameters { key: "execute_delay_ms" value: { string_value: "0" } }
metric_tags { key: "team" value: "a" }
model_warmup [ { name: "w" batch_size: 1
                 inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]
optimization { execution_accelerators {
  cpu_execution_accelerator [ { name: "openvino" parameters { key: "k" value: "v" } } ] } }
""",
}


@pytest.fixture(scope="module")
def label_repo():
    """A second repository: identity_labels, the identity backend with a
    label file on its output (the model the HTTP classification tests use),
    and identity_<type>_t, the identity backend on each datatype."""
    d = tempfile.mkdtemp(prefix="nereid_grpc_labels_")
    write_identity_model(d, "identity_labels", output_extra='label_filename: "labels.txt" ')
    with open(os.path.join(d, "identity_labels", "labels.txt"), "w") as f:
        f.write("".join(f"label{i}\n" for i in range(8)))
    for dt, (_, ctype) in DTYPES.items():
        write_identity_model(d, f"identity_{dt.lower()}_t", dtype=ctype)
    # Configurations that use most of the schema (ModelConfig over gRPC).
    for name, text in RICH_CONFIGS.items():
        os.makedirs(os.path.join(d, name, "1"))
        with open(os.path.join(d, name, "config.pbtxt"), "w") as f:
            f.write(text)
    # identity with the response cache on (the server has a local cache).
    write_identity_model(d, "identity_cached", extra="response_cache { enable: true }\n")
    # echo_params answers like identity and returns its request's parameters.
    write_identity_model(d, "echo_params", backend="echo_params")
    shutil.copy(os.path.join(TEST_BACKENDS, "echo_params", "libtriton_echo_params.so"),
                os.path.join(d, "echo_params"))
    # An ensemble of the decoupled square_int32 (in the other repository):
    # decoupled itself.
    os.makedirs(os.path.join(d, "square_ens", "1"))
    with open(os.path.join(d, "square_ens", "config.pbtxt"), "w") as f:
        f.write('name: "square_ens"\nplatform: "ensemble"\nmax_batch_size: 0\n'
                'input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                'output [ { name: "SQ" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                'ensemble_scheduling { step [ { model_name: "square_int32" model_version: -1\n'
                '  input_map { key: "IN" value: "N" } output_map { key: "OUT" value: "SQ" } } ] }\n')
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def server(label_repo):
    s = Server(["--model-repository", EXAMPLES, "--model-repository", label_repo,
                "--backend-directory", BACKENDS,
                "--model-control-mode=explicit", "--load-model=*",
                "--http-port=0", "--http-address=127.0.0.1", "--http-thread-count=1",
                "--allow-metrics=false",
                "--grpc-port=0", "--grpc-address=127.0.0.1",
                f"--grpc-max-message-size={MAX_MESSAGE}", "--cache-config=local,size=1048576",
                "--allow-client-shm=true"])  # the shared memory tests register regions
    try:
        s.wait_ready()
        ports = s.ports()
        s.port = ports["grpc"]
        s.http_port = ports["http"]
        yield s
        rc = s.stop()
        log = s.text()
        assert rc == 0, log
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert bad not in log, log
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


@pytest.fixture(scope="module")
def channel(server):
    """A bare grpcio channel: for the health service and for bytes no
    client serializes (malformed messages, unknown methods)."""
    ch = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    grpc.channel_ready_future(ch).result(timeout=RPC_TIMEOUT)
    yield ch
    ch.close()


@pytest.fixture(scope="module")
def stub(channel):
    """Our own stub: only for requests tritonclient cannot build (typed
    contents, parameters of other types, reserved keys,
    extra raw entries) and for a streamed error's id, which it drops."""
    return pbg.GRPCInferenceServiceStub(channel)


@pytest.fixture(scope="module")
def client(server):
    c = grpcclient.InferenceServerClient(url=f"127.0.0.1:{server.port}")
    yield c
    c.close()


def tc_inputs(specs):
    """[(name, datatype, shape, numpy array or list of bytes)] as
    tritonclient InferInputs (BF16 from its uint16 bits)."""
    import ml_dtypes

    out = []
    for name, dt, shape, data in specs:
        if dt == "BYTES":
            arr = np.array(list(data), dtype=np.object_).reshape(shape)
        elif dt == "BF16":
            arr = np.asarray(data, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(shape)
        else:
            arr = np.asarray(data).reshape(shape)
        out.append(grpcclient.InferInput(name, list(shape), dt).set_data_from_numpy(arr))
    return out


def tc_outputs(*names, class_count=0):
    return [grpcclient.InferRequestedOutput(n, class_count=class_count) for n in names]


def tc_error(fn, *args, **kwargs):
    """The InferenceServerException a tritonclient call raises."""
    with pytest.raises(InferenceServerException) as e:
        fn(*args, client_timeout=RPC_TIMEOUT, **kwargs)
    return e.value


def is_final(result):
    """The triton_final_response flag of a streamed response."""
    p = result.get_response().parameters
    assert "triton_final_response" in p, result.get_response()
    return p["triton_final_response"].bool_param


def stream_all(client, calls, **stream_args):
    """Sends calls (dicts of async_stream_infer arguments) on one stream of
    client, closes its sending side and returns every (result, error) in
    arrival order once the server has ended the stream."""
    got = []
    client.start_stream(callback=lambda result, error: got.append((result, error)),
                        stream_timeout=stream_args.pop("stream_timeout", RPC_TIMEOUT), **stream_args)
    try:
        for c in calls:
            client.async_stream_infer(**c)
    finally:
        client.stop_stream()
    return got


def square_call(n, rid, empty_final=False, **kw):
    """async_stream_infer arguments for square_int32 (n responses)."""
    return dict(model_name="square_int32", inputs=tc_inputs([("IN", "INT32", [1], np.array([n], np.int32))]),
                request_id=rid, enable_empty_final_response=empty_final, **kw)


def ok_results(got):
    """The results of stream_all's answers, none of which may be an error."""
    assert all(e is None for _, e in got), [e for _, e in got if e is not None]
    return [r for r, _ in got]


TYPED_FIELD = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
               "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
               "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
               "FP32": "fp32_contents", "FP64": "fp64_contents"}


def infer_request(model, inputs, outputs=(), rid="", raw=True, params=None):
    """A hand-built ModelInferRequest, for what tritonclient cannot send
    (typed contents, parameters it refuses, raw HTTP/2 bodies).
    inputs: [(name, datatype, shape, numpy array or list of bytes)]."""
    r = pb.ModelInferRequest(model_name=model, id=rid)
    for name, dt, shape, data in inputs:
        t = r.inputs.add()
        t.name, t.datatype = name, dt
        t.shape.extend(shape)
        if raw:
            if dt == "BYTES":
                r.raw_input_contents.append(b"".join(len(b).to_bytes(4, "little") + b for b in data))
            else:
                r.raw_input_contents.append(np.ascontiguousarray(data).tobytes())
        elif dt == "BYTES":
            t.contents.bytes_contents.extend(data)
        else:
            # The typed field each datatype travels in, as KServe v2 assigns them.
            getattr(t.contents, TYPED_FIELD[dt]).extend(np.asarray(data).ravel().tolist())
    for o in outputs:
        r.outputs.add().name = o
    for k, v in (params or {}).items():
        if isinstance(v, bool):
            r.parameters[k].bool_param = v
        elif isinstance(v, int):
            r.parameters[k].int64_param = v
        else:
            r.parameters[k].string_param = v
    return r


def output_array(resp, name, dtype):
    """An output of a response read without tritonclient (hand-built calls
    and raw frames)."""
    for i, o in enumerate(resp.outputs):
        if o.name == name:
            return np.frombuffer(resp.raw_output_contents[i], dtype=dtype).reshape(list(o.shape))
    raise KeyError(name)


def square_request(n, rid, empty_final=None):
    """A hand-built square_int32 request: for raw HTTP/2 frames only
    (tests use square_call with tritonclient)."""
    params = {} if empty_final is None else {"triton_enable_empty_final_response": empty_final}
    return infer_request("square_int32", [("IN", "INT32", [1], np.array([n], dtype=np.int32))],
                         rid=rid, params=params)


def final_flag(resp):
    """triton_final_response of a hand-built stream's response."""
    p = resp.infer_response.parameters
    assert "triton_final_response" in p, resp
    return p["triton_final_response"].bool_param


# ---- health and metadata ----------------------------------------------------


def test_live_ready_metadata(client, channel):
    assert client.is_server_live(client_timeout=RPC_TIMEOUT)
    assert client.is_server_ready(client_timeout=RPC_TIMEOUT)
    assert client.is_model_ready("simple", client_timeout=RPC_TIMEOUT)
    assert client.is_model_ready("simple", "1", client_timeout=RPC_TIMEOUT)
    md = client.get_server_metadata(client_timeout=RPC_TIMEOUT)
    assert md.name == "triton" and md.version
    mm = client.get_model_metadata("simple", client_timeout=RPC_TIMEOUT)
    assert mm.name == "simple" and list(mm.versions) == ["1"]
    assert [(t.name, t.datatype, list(t.shape)) for t in mm.inputs] == [
        ("INPUT0", "INT32", [-1, 16]), ("INPUT1", "INT32", [-1, 16])]
    assert [t.name for t in mm.outputs] == ["OUTPUT0", "OUTPUT1"]
    mj = client.get_model_metadata("simple", as_json=True, client_timeout=RPC_TIMEOUT)
    assert mj["name"] == "simple" and mj["platform"] == mm.platform
    # grpc.health.v1 is not Triton's service: tritonclient has no call for it.
    health = health_pb2_grpc.HealthStub(channel)
    assert health.Check(health_pb2.HealthCheckRequest(), timeout=RPC_TIMEOUT).status == \
        health_pb2.HealthCheckResponse.SERVING


def test_response_cache_answers_unary_and_streamed_repeats(client):
    """A repeat is answered from the cache over ModelInfer and over the
    stream (the answer is sent before InferAsync returns), id echoed."""
    x = np.arange(5, dtype=np.float32).reshape(1, 5)
    spec = [("INPUT0", "FP32", [1, 5], x)]
    for _ in range(2):
        r = client.infer("identity_cached", tc_inputs(spec), request_id="again", client_timeout=RPC_TIMEOUT)
        assert r.get_response().id == "again"
        assert r.as_numpy("OUTPUT0").ravel().tolist() == x.ravel().tolist()
    got = ok_results(stream_all(client, [dict(model_name="identity_cached", inputs=tc_inputs(spec),
                                              request_id="again")] * 3))
    assert len(got) == 3
    assert all(g.as_numpy("OUTPUT0").ravel().tolist() == x.ravel().tolist() for g in got)
    st = client.get_inference_statistics("identity_cached", client_timeout=RPC_TIMEOUT).model_stats[0]
    assert st.execution_count == 1, st
    assert st.inference_stats.cache_hit.count == 4 and st.inference_stats.cache_miss.count == 1, st


def test_metadata_errors(client):
    e = tc_error(client.get_model_metadata, "no_such_model")
    assert e.status() in ("StatusCode.NOT_FOUND", "StatusCode.UNAVAILABLE", "StatusCode.INVALID_ARGUMENT")
    assert "no_such_model" in e.message()
    e = tc_error(client.is_model_ready, "simple", "x1")
    assert e.status() == "StatusCode.INVALID_ARGUMENT"


def test_model_config(client):
    c = client.get_model_config("simple", client_timeout=RPC_TIMEOUT).config
    assert c.name == "simple" and c.backend == "add_sub" and c.max_batch_size == 8
    assert [i.name for i in c.input] == ["INPUT0", "INPUT1"]
    assert c.input[0].data_type == 8  # TYPE_INT32
    assert list(c.input[0].dims) == [16]
    sq = client.get_model_config("square_int32", as_json=True, client_timeout=RPC_TIMEOUT)["config"]
    assert sq["model_transaction_policy"]["decoupled"] is True


@pytest.mark.parametrize("model", ["simple", "square_int32", "seq_cfg", "dyn_cfg"])
def test_model_config_is_the_http_config(server, client, model):
    """ModelConfig carries the whole configuration: the HTTP config route's
    JSON, read into the message of the client's own (Triton's) proto, is
    the message tritonclient received (a field the client's proto lacks
    would fail ParseDict; one we dropped, the equality)."""
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2 as triton_mc

    code, j = http_json(server, "GET", f"/v2/models/{model}/config")
    assert code == 200, j
    want = json_format.ParseDict(j, triton_mc.ModelConfig())
    got = client.get_model_config(model, client_timeout=RPC_TIMEOUT).config
    assert got == want, f"gRPC:\n{got}\nHTTP:\n{want}"
    if model == "seq_cfg":
        assert got.WhichOneof("scheduling_choice") == "sequence_batching"
        assert got.sequence_batching.state[0].initial_state[0].zero_data
    if model == "dyn_cfg":
        assert got.dynamic_batching.priority_queue_policy[1].max_queue_size == 5
        assert got.version_policy.WhichOneof("policy_choice") == "specific"


def test_metadata_statistics_and_index_match_http(server, client):
    """The other JSON-backed answers are the HTTP routes' documents too:
    server and model metadata, statistics (with the per-response
    statistics of a decoupled model) and the repository index, read into
    the client's own (Triton's) messages."""
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2 as tpb

    ok_results(stream_all(client, [square_call(2, "stats")]))
    # Statistics are reported after the responses: poll until the request
    # shows (before, a 0.2 s sleep, and the two reads below could differ).
    deadline = time.monotonic() + RPC_TIMEOUT
    while True:
        code, j = http_json(server, "GET", "/v2/models/square_int32/stats")
        m = j["model_stats"][0]
        if m["inference_stats"]["success"]["count"] >= 1 and m.get("response_stats"):
            break
        assert time.monotonic() < deadline, j
        time.sleep(0.02)
    cases = [
        ("GET", "/v2", None, tpb.ServerMetadataResponse(),
         lambda: client.get_server_metadata(client_timeout=RPC_TIMEOUT)),
        ("GET", "/v2/models/simple", None, tpb.ModelMetadataResponse(),
         lambda: client.get_model_metadata("simple", client_timeout=RPC_TIMEOUT)),
        ("GET", "/v2/models/square_int32/stats", None, tpb.ModelStatisticsResponse(),
         lambda: client.get_inference_statistics("square_int32", client_timeout=RPC_TIMEOUT)),
        ("POST", "/v2/repository/index", {}, tpb.RepositoryIndexResponse(),
         lambda: client.get_model_repository_index(client_timeout=RPC_TIMEOUT)),
    ]
    for method, path, body, msg, call in cases:
        code, j = http_json(server, method, path, body)
        assert code == 200, (path, j)
        want = json_format.ParseDict({"models": j} if isinstance(j, list) else j, msg)
        got = call()
        assert got == want, f"{path}:\ngRPC:\n{got}\nHTTP:\n{want}"
    stats = client.get_inference_statistics("square_int32", as_json=True, client_timeout=RPC_TIMEOUT)
    assert len(stats["model_stats"][0]["response_stats"]) > 0


def test_statistics_and_index(client):
    client.infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [1, 4], np.ones((1, 4), np.float32))]),
                 client_timeout=RPC_TIMEOUT)
    # Backends report statistics after sending the response, the batch's
    # (inference_count) and each request's (success) in calls of their
    # own: poll until every field asserted below shows the request.
    deadline = time.monotonic() + 10
    while True:
        st = client.get_inference_statistics("identity_fp32", client_timeout=RPC_TIMEOUT)
        m = st.model_stats[0]
        if (m.inference_count >= 1 and m.inference_stats.success.count >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert len(st.model_stats) == 1
    s = st.model_stats[0]
    assert s.name == "identity_fp32" and s.inference_count >= 1
    assert s.inference_stats.success.count >= 1
    allst = client.get_inference_statistics(client_timeout=RPC_TIMEOUT)
    assert {m.name for m in allst.model_stats} >= {"simple", "identity_fp32"}
    idx = client.get_model_repository_index(client_timeout=RPC_TIMEOUT)
    names = {m.name: m.state for m in idx.models}
    assert names.get("simple") == "READY" and "square_int32" in names
    idx = client.get_model_repository_index(as_json=True, client_timeout=RPC_TIMEOUT)
    assert {m["name"]: m.get("state") for m in idx["models"]}.get("simple") == "READY"


def test_load_unload(client):
    client.unload_model("identity_bytes", client_timeout=RPC_TIMEOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if not client.is_model_ready("identity_bytes", client_timeout=RPC_TIMEOUT):
            break
        time.sleep(0.05)
    assert not client.is_model_ready("identity_bytes", client_timeout=RPC_TIMEOUT)
    client.load_model("identity_bytes", client_timeout=RPC_TIMEOUT)
    assert client.is_model_ready("identity_bytes", client_timeout=RPC_TIMEOUT)
    e = tc_error(client.load_model, "no_such_model")
    assert e.status() != "StatusCode.OK"


def test_failed_load_of_an_unknown_model_leaves_the_server_ready(client):
    e = tc_error(client.load_model, "no_such_model_at_all")
    # INTERNAL, as Triton's repository manager answers it.
    assert e.status() == "StatusCode.INTERNAL" and "failed to poll from model repository" in e.message()
    names = [m.name for m in client.get_model_repository_index(client_timeout=RPC_TIMEOUT).models]
    assert "no_such_model_at_all" not in names
    assert client.is_server_ready(client_timeout=RPC_TIMEOUT)


def test_load_with_config_and_file_overrides(client):
    """load_model(config=..., files=...) for a model the repository does
    not have: a config override and a file override (a bytes parameter).
    The file's bytes must outlive the request message: the load runs on a
    worker thread (found by the wire fuzzer as a use-after-free)."""
    cfg = {"backend": "identity", "max_batch_size": 4,
           "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]}
    client.load_model("grpc_made_up", config=json.dumps(cfg),
                      files={"file:1/weights.bin": bytes(range(256)) * 64}, client_timeout=RPC_TIMEOUT)
    try:
        assert client.is_model_ready("grpc_made_up", client_timeout=RPC_TIMEOUT)
        x = np.arange(3, dtype=np.float32).reshape(1, 3)
        r = client.infer("grpc_made_up", tc_inputs([("INPUT0", "FP32", [1, 3], x)]), client_timeout=RPC_TIMEOUT)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)
        # Without its files the model is in no repository: Triton looks for
        # it before it reads the override, and answers INTERNAL.
        e = tc_error(client.load_model, "grpc_made_up", config="{not json")
        assert e.status() == "StatusCode.INTERNAL" and "failed to poll from model repository" in e.message()
    finally:
        client.unload_model("grpc_made_up", client_timeout=RPC_TIMEOUT)


def test_shared_memory_trace_log(client):
    assert len(client.get_system_shared_memory_status(client_timeout=RPC_TIMEOUT).regions) == 0
    ls = client.get_log_settings(client_timeout=RPC_TIMEOUT)
    assert ls.settings["log_info"].bool_param is True


def test_cuda_shared_memory_without_gpus(client):
    """As Triton built without GPUs: no CUDA region exists, unregistering
    one or all has nothing to do (OK), registering fails with its message,
    and the status of one region is NOT_FOUND (the HTTP routes agree)."""
    assert len(client.get_cuda_shared_memory_status(client_timeout=RPC_TIMEOUT).regions) == 0
    client.unregister_cuda_shared_memory(client_timeout=RPC_TIMEOUT)
    client.unregister_cuda_shared_memory("x", client_timeout=RPC_TIMEOUT)
    e = tc_error(client.register_cuda_shared_memory, "x", b"", 0, 0)
    assert e.status() == "StatusCode.INVALID_ARGUMENT"
    assert e.message().startswith("failed to register CUDA shared memory region: 'x', GPUs not supported")
    e = tc_error(client.get_cuda_shared_memory_status, "x")
    assert e.status() == "StatusCode.NOT_FOUND"
    assert e.message() == "Unable to find cuda shared memory region: 'x'"


def test_trace_setting_without_a_trace_file(client):
    """No trace file given (test_tracing.py has the rest): the settings read
    back, turning tracing on is refused, an unknown model is named."""
    for model in (None, "simple"):
        r = client.get_trace_settings(model_name=model, client_timeout=RPC_TIMEOUT)
        assert list(r.settings["trace_level"].value) == ["OFF"] and list(r.settings["trace_file"].value) == [""]
    j = client.get_trace_settings(as_json=True, client_timeout=RPC_TIMEOUT)
    assert j["settings"]["trace_level"]["value"] == ["OFF"]
    e = tc_error(client.update_trace_settings, settings={"trace_level": ["TIMESTAMPS"]})
    assert e.status() == "StatusCode.INVALID_ARGUMENT" and "trace file name is not given" in e.message()
    e = tc_error(client.get_trace_settings, model_name="nope")
    assert e.status() == "StatusCode.INVALID_ARGUMENT" and e.message() == "Request for unknown model : nope"


def log_request(**settings):
    """A LogSettingsRequest with each value in the field of its Python type:
    tritonclient picks the field by key, so it cannot send a setting of the
    wrong type."""
    r = pb.LogSettingsRequest()
    for k, v in settings.items():
        if isinstance(v, bool):
            r.settings[k].bool_param = v
        elif isinstance(v, int):
            r.settings[k].uint32_param = v
        else:
            r.settings[k].string_param = v
    return r


def log_values(resp):
    return {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in resp.settings.items()}


def test_log_settings_read_and_update(server, client, stub):
    ls = client.get_log_settings(client_timeout=RPC_TIMEOUT)
    kinds = {k: v.WhichOneof("parameter_choice") for k, v in ls.settings.items()}
    assert kinds == {"log_file": "string_param", "log_info": "bool_param", "log_warning": "bool_param",
                     "log_error": "bool_param", "log_verbose_level": "uint32_param",
                     "log_format": "string_param"}
    before = log_values(ls)
    assert before == {"log_file": "", "log_info": True, "log_warning": True, "log_error": True,
                      "log_verbose_level": 0, "log_format": "default"}
    try:
        got = log_values(client.update_log_settings(
            {"log_warning": False, "log_verbose_level": 2, "log_format": "ISO8601"}, client_timeout=RPC_TIMEOUT))
        assert got == dict(before, log_warning=False, log_verbose_level=2, log_format="ISO8601")
        # The same settings are what HTTP's /v2/logging reports.
        code, j = http_json(server, "GET", "/v2/logging")
        assert code == 200 and j["log_warning"] is False and j["log_verbose_level"] == 2
        assert j["log_format"] == "ISO8601"
        assert log_values(client.get_log_settings(client_timeout=RPC_TIMEOUT)) == got

        # Errors change nothing (validated before anything is applied).
        cases = [
            ({"log_file": "/tmp/x.log"}, "StatusCode.UNIMPLEMENTED",
             "log file location can not be updated through network protocol"),
            ({"log_info": False, "log_format": "json"}, "StatusCode.INVALID_ARGUMENT",
             "invalid argument for log_format, got: json"),
        ]
        for settings, code, text in cases:
            e = tc_error(client.update_log_settings, settings)
            assert (e.status(), e.message()) == (code, text)
        # Values of the wrong type: only a hand-built request carries them.
        cases = [
            (log_request(log_info=1), grpc.StatusCode.INVALID_ARGUMENT, "expect boolean for 'log_info'"),
            (log_request(log_error="yes"), grpc.StatusCode.INVALID_ARGUMENT,
             "expect boolean for 'log_error'"),
            (log_request(log_verbose_level=True), grpc.StatusCode.INVALID_ARGUMENT,
             "expect int32 for 'log_verbose_level'"),
            (log_request(log_format=True), grpc.StatusCode.INVALID_ARGUMENT,
             "expect string for 'log_format'"),
        ]
        for r, code, text in cases:
            e = rpc_error(stub.LogSettings, r)
            assert (e.code(), e.details()) == (code, text)
        assert log_values(client.get_log_settings(client_timeout=RPC_TIMEOUT)) == got
    finally:
        client.update_log_settings({"log_info": True, "log_warning": True, "log_error": True,
                                    "log_verbose_level": 0, "log_format": "default"}, client_timeout=RPC_TIMEOUT)
    assert log_values(client.get_log_settings(client_timeout=RPC_TIMEOUT)) == before


# ---- ModelInfer ---------------------------------------------------------------


def test_infer_raw_fp32_echoes_id(client):
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    r = client.infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [1, 16], x)]), request_id="req-7",
                     headers={"x-nereid-test": "1"}, client_timeout=RPC_TIMEOUT)
    resp = r.get_response()
    assert resp.id == "req-7" and resp.model_name == "identity_fp32" and resp.model_version == "1"
    assert resp.outputs[0].datatype == "FP32"
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)
    j = r.get_response(as_json=True)
    assert j["id"] == "req-7" and j["outputs"][0]["shape"] == ["1", "16"]


@pytest.mark.parametrize("raw", [True, False])
def test_infer_add_sub_int32(client, stub, raw):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    spec = [("INPUT0", "INT32", [1, 16], a), ("INPUT1", "INT32", [1, 16], b)]
    if raw:
        r = client.infer("simple", tc_inputs(spec), client_timeout=RPC_TIMEOUT)
        out0, out1 = r.as_numpy("OUTPUT0"), r.as_numpy("OUTPUT1")
    else:
        # Typed contents: tritonclient only sends raw_input_contents.
        resp = stub.ModelInfer(infer_request("simple", spec, raw=False), timeout=RPC_TIMEOUT)
        out0, out1 = output_array(resp, "OUTPUT0", np.int32), output_array(resp, "OUTPUT1", np.int32)
    np.testing.assert_array_equal(out0, a + b)
    np.testing.assert_array_equal(out1, a - b)


@pytest.mark.parametrize("stream", [False, True])
def test_infer_ensemble(client, stream):
    """The bundled ensemble (two "simple" steps) over ModelInfer and over
    the stream, where it answers as a non-decoupled model."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 5, dtype=np.int32)
    spec = [("INPUT0", "INT32", [1, 16], a), ("INPUT1", "INT32", [1, 16], b)]
    if stream:
        got = ok_results(stream_all(client, [dict(model_name="simple_ensemble", inputs=tc_inputs(spec),
                                                  request_id="ens-2")]))
        assert len(got) == 1, got
        r = got[0]
    else:
        r = client.infer("simple_ensemble", tc_inputs(spec), request_id="ens-2", client_timeout=RPC_TIMEOUT)
    resp = r.get_response()
    assert resp.id == "ens-2" and resp.model_name == "simple_ensemble"
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), 2 * a)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), 2 * b)


def test_infer_requested_output_only(client):
    a = np.ones((1, 16), dtype=np.int32)
    r = client.infer("simple", tc_inputs([("INPUT0", "INT32", [1, 16], a), ("INPUT1", "INT32", [1, 16], a)]),
                     outputs=tc_outputs("OUTPUT1"), client_timeout=RPC_TIMEOUT)
    assert [o.name for o in r.get_response().outputs] == ["OUTPUT1"]
    assert r.as_numpy("OUTPUT0") is None
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - a)


def test_infer_typed_fp32_batch(stub):
    # Typed contents (fp32_contents): tritonclient only sends raw_input_contents.
    x = np.random.default_rng(1).random((3, 5), dtype=np.float32)
    resp = stub.ModelInfer(infer_request("identity_fp32", [("INPUT0", "FP32", [3, 5], x)], raw=False),
                           timeout=RPC_TIMEOUT)
    np.testing.assert_array_equal(output_array(resp, "OUTPUT0", np.float32), x)


@pytest.mark.parametrize("raw", [True, False])
def test_infer_bytes(client, stub, raw):
    items = [b"hello", b"", b"\x00\xffbinary", "ünïcode".encode()]
    if raw:
        r = client.infer("identity_bytes", tc_inputs([("INPUT0", "BYTES", [1, 4], items)]),
                         client_timeout=RPC_TIMEOUT)
        assert r.get_response().outputs[0].datatype == "BYTES"
        assert r.as_numpy("OUTPUT0").ravel().tolist() == items
        return
    # bytes_contents: tritonclient only sends raw_input_contents.
    resp = stub.ModelInfer(infer_request("identity_bytes", [("INPUT0", "BYTES", [1, 4], items)], raw=False),
                           timeout=RPC_TIMEOUT)
    assert resp.outputs[0].datatype == "BYTES"
    assert bytes_list(resp.raw_output_contents[0], decode=False) == items


# datatype -> (numpy dtype, config type); BF16 travels as its uint16 bits.
DTYPES = {
    "BOOL": (np.bool_, "TYPE_BOOL"), "UINT8": (np.uint8, "TYPE_UINT8"),
    "UINT16": (np.uint16, "TYPE_UINT16"), "UINT32": (np.uint32, "TYPE_UINT32"),
    "UINT64": (np.uint64, "TYPE_UINT64"), "INT8": (np.int8, "TYPE_INT8"),
    "INT16": (np.int16, "TYPE_INT16"), "INT32": (np.int32, "TYPE_INT32"),
    "INT64": (np.int64, "TYPE_INT64"), "FP16": (np.float16, "TYPE_FP16"),
    "FP32": (np.float32, "TYPE_FP32"), "FP64": (np.float64, "TYPE_FP64"),
    "BF16": (np.uint16, "TYPE_BF16"), "BYTES": (np.object_, "TYPE_STRING"),
}


def sample(dt, n=12):
    """n values of datatype dt, the type's extremes among them."""
    rng = np.random.default_rng(11)
    if dt == "BOOL":
        return rng.integers(0, 2, n).astype(bool)
    if dt == "BYTES":
        return [f"s{i}".encode() * i for i in range(n)]
    if dt in ("FP16", "FP32", "FP64"):
        x = (rng.standard_normal(n) * 100).astype(DTYPES[dt][0])
        x[:2] = [np.finfo(x.dtype).max, np.finfo(x.dtype).tiny]
        return x
    if dt == "BF16":
        return (rng.integers(0, 1 << 16, n).astype(np.uint16) & 0x807F) | 0x3F80
    info = np.iinfo(DTYPES[dt][0])
    x = rng.integers(info.min, info.max, n, dtype=DTYPES[dt][0], endpoint=True)
    x[:2] = [info.min, info.max]
    return x


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "typed"])
@pytest.mark.parametrize("dt", list(DTYPES))
def test_infer_every_datatype(client, stub, dt, raw):
    """Every datatype in raw_input_contents (sent by tritonclient) and in
    its typed contents field (hand-built: the client never sends typed
    contents) comes back unchanged (outputs are always raw, as in Triton);
    FP16 and BF16 have no typed field, so they must come raw."""
    x = sample(dt)
    model = f"identity_{dt.lower()}_t"
    if raw:
        r = client.infer(model, tc_inputs([("INPUT0", dt, [2, 6], x)]), client_timeout=RPC_TIMEOUT)
        out = r.get_response().outputs[0]
        assert out.datatype == dt and list(out.shape) == [2, 6]
        assert len(r.get_response().raw_output_contents) == 1
        got = r.as_numpy("OUTPUT0")
        if dt == "BYTES":
            assert got.ravel().tolist() == x
        else:
            if dt == "BF16":
                got = got.view(np.uint16)
            np.testing.assert_array_equal(got.ravel(), x)
        return
    r = infer_request(model, [("INPUT0", dt, [2, 6], x)], raw=dt in ("FP16", "BF16"))
    if dt in ("FP16", "BF16"):
        r.raw_input_contents.pop()
        r.inputs[0].contents.fp32_contents.extend([0.0] * 12)
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(r, timeout=RPC_TIMEOUT)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"datatype {dt} must be sent in raw_input_contents" in e.value.details()
        return
    resp = stub.ModelInfer(r, timeout=RPC_TIMEOUT)
    out = resp.outputs[0]
    assert out.datatype == dt and list(out.shape) == [2, 6] and len(resp.raw_output_contents) == 1
    if dt == "BYTES":
        assert bytes_list(resp.raw_output_contents[0], decode=False) == x
    else:
        np.testing.assert_array_equal(output_array(resp, "OUTPUT0", DTYPES[dt][0]).ravel(), x)


def test_infer_input_data_errors(client, stub):
    x = np.ones((1, 2), dtype=np.float32)
    # An input without data (tritonclient sends one whose data was never set).
    e = tc_error(client.infer, "identity_fp32", [grpcclient.InferInput("INPUT0", [1, 2], "FP32")])
    assert e.status() == "StatusCode.INVALID_ARGUMENT"
    assert "unable to find data for input tensor 'INPUT0' for model 'identity_fp32' in request." in e.message()
    # Hand-built from here: tritonclient never sends typed contents.
    # Both raw_input_contents and typed contents for the same input.
    r = infer_request("identity_fp32", [("INPUT0", "FP32", [1, 2], x)])
    r.inputs[0].contents.fp32_contents.extend([1.0, 1.0])
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(r, timeout=RPC_TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert ("contents field must not be specified when using raw_input_contents for 'INPUT0' for model "
            "'identity_fp32'") in e.value.details()
    # Typed contents of the wrong field for the datatype: no data of its own,
    # so the element count does not match the shape.
    r = infer_request("identity_fp32", [("INPUT0", "FP32", [1, 2], x)], raw=False)
    r.inputs[0].contents.ClearField("fp32_contents")
    r.inputs[0].contents.int_contents.extend([1, 1])
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(r, timeout=RPC_TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_parameters_reach_the_backend_and_come_back(client, stub):
    """Request parameters other than the reserved ones reach the backend
    with their types; the backend's response parameters come back in
    ModelInferResponse.parameters, over ModelInfer and ModelStreamInfer."""
    x = np.array([[1.5, 2.5]], dtype=np.float32)
    spec = [("INPUT0", "FP32", [1, 2], x)]
    params = {"s": "text é", "i": -7, "b": True, "d": 0.1}
    want = {"s": ("string_param", "text é"), "i": ("int64_param", -7), "b": ("bool_param", True),
            "d": ("double_param", 0.1)}

    def check(result, want):
        resp = result.get_response()
        got = {k: (v.WhichOneof("parameter_choice"), getattr(v, v.WhichOneof("parameter_choice")))
               for k, v in resp.parameters.items()}
        assert got == want
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)

    check(client.infer("echo_params", tc_inputs(spec), parameters=params, client_timeout=RPC_TIMEOUT), want)
    got = ok_results(stream_all(client, [dict(model_name="echo_params", inputs=tc_inputs(spec),
                                              parameters=params)]))
    assert len(got) == 1
    check(got[0], dict(want, triton_final_response=("bool_param", True)))
    check(client.infer("echo_params", tc_inputs(spec), client_timeout=RPC_TIMEOUT), {})
    # Reserved keys as parameters: tritonclient refuses to send them, so
    # this request is hand-built. sequence_id and priority are the
    # request's settings and do not reach the backend; binary_data_output
    # means nothing to gRPC: the backend gets it, as in Triton.
    r = infer_request("echo_params", spec, params={"s": "v", "sequence_id": 0, "priority": 0,
                                                     "binary_data_output": True})
    resp = stub.ModelInfer(r, timeout=RPC_TIMEOUT)
    got = {k: (v.WhichOneof("parameter_choice"), getattr(v, v.WhichOneof("parameter_choice")))
           for k, v in resp.parameters.items()}
    assert got == {"s": ("string_param", "v"), "binary_data_output": ("bool_param", True)}
    # As in Triton: no uint64 custom parameters, and 'triton_' keys are
    # reserved (triton_enable_empty_final_response aside). Hand-built: the
    # client has no uint64 parameter and refuses 'triton_' keys itself.
    for key, setter, msg in (("u", "uint64_param", "uint64"), ("triton_x", "bool_param", "reserved")):
        bad = infer_request("echo_params", spec)
        setattr(bad.parameters[key], setter, 1)
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(bad, timeout=RPC_TIMEOUT)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and msg in e.value.details()
        assert f"'{key}'" in e.value.details()


def test_infer_parameters_passed(client):
    """Custom parameters reach the backend (echo_params returns what it
    saw); priority and timeout are taken by the server as the request's
    settings and are not passed on as parameters, as in Triton."""
    x = np.ones((1, 2), dtype=np.float32)
    r = client.infer("echo_params", tc_inputs([("INPUT0", "FP32", [1, 2], x)]), priority=1, timeout=10_000_000,
                     parameters={"custom_s": "v", "custom_b": True}, client_timeout=RPC_TIMEOUT)
    got = {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in r.get_response().parameters.items()}
    assert got == {"custom_s": "v", "custom_b": True}


def test_infer_errors(client, stub):
    x = np.ones((1, 2), dtype=np.float32)
    e = tc_error(client.infer, "square_int32", tc_inputs([("IN", "INT32", [1], np.array([1], np.int32))]))
    assert e.status() == "StatusCode.UNIMPLEMENTED"
    assert "decoupled" in e.message()
    e = tc_error(client.infer, "no_such_model", tc_inputs([("INPUT0", "FP32", [1, 2], x)]))
    assert e.status() != "StatusCode.OK" and "no_such_model" in e.message()
    # Wrong byte size for the shape: the core rejects it.
    inp = tc_inputs([("INPUT0", "FP32", [1, 2], x)])
    inp[0].set_shape([1, 3])
    e = tc_error(client.infer, "identity_fp32", inp)
    assert e.status() == "StatusCode.INVALID_ARGUMENT"
    # An unknown datatype (tritonclient sends it, without data).
    e = tc_error(client.infer, "identity_fp32", [grpcclient.InferInput("INPUT0", [1, 2], "XX32")])
    assert e.status() == "StatusCode.INVALID_ARGUMENT"
    assert e.message() == "input 'INPUT0' has an invalid datatype 'XX32'"
    # Hand-built: tritonclient never sends more raw entries than inputs.
    r = infer_request("identity_fp32", [("INPUT0", "FP32", [1, 2], x)])
    r.raw_input_contents.append(b"extra")
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(r, timeout=RPC_TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_malformed_message(channel):
    # Bytes that are no protobuf message: no client sends them.
    call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                               request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        call(b"\x0a\xff\xff\xff\xff\x0f", timeout=RPC_TIMEOUT)  # string field with a huge length
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    meta = channel.unary_unary("/inference.GRPCInferenceService/ModelMetadata",
                               request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as e:
        meta(b"\xff\xff\xff", timeout=RPC_TIMEOUT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_method(channel):
    # Methods Triton's service does not have: tritonclient cannot call them.
    for path in ("/inference.GRPCInferenceService/NoSuchRpc", "/other.Service/ServerLive"):
        call = channel.unary_unary(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as e:
            call(b"", timeout=RPC_TIMEOUT)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_oversized_message(client):
    x = np.zeros((1, MAX_MESSAGE // 4 + 16), dtype=np.float32)
    e = tc_error(client.infer, "identity_fp32", tc_inputs([("INPUT0", "FP32", list(x.shape), x)]))
    assert e.status() == "StatusCode.RESOURCE_EXHAUSTED"
    assert "larger than max" in e.message()
    # The connection is still usable.
    assert client.is_server_live(client_timeout=RPC_TIMEOUT)


def test_concurrent_unary(client):
    """64 async_infer calls in flight at once, each answered with its own
    data."""
    done = queue.Queue()
    sent = {}
    for i in range(64):
        x = np.full((1, 16), i, dtype=np.float32)
        sent[str(i)] = x
        client.async_infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [1, 16], x)]), request_id=str(i),
                           callback=lambda result, error: done.put((result, error)), client_timeout=RPC_TIMEOUT)
    for _ in range(64):
        result, error = done.get(timeout=RPC_TIMEOUT)
        assert error is None, error
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), sent.pop(result.get_response().id))
    assert not sent


def test_aio_client_unary_calls(server):
    """tritonclient.grpc.aio: health, metadata, config and 64 concurrent
    inferences on one channel."""
    import asyncio

    async def run():
        async with aioclient.InferenceServerClient(url=f"127.0.0.1:{server.port}") as c:
            assert await c.is_server_live()
            assert await c.is_model_ready("simple")
            md = await c.get_model_metadata("simple", as_json=True)
            assert md["name"] == "simple" and md["versions"] == ["1"]
            cfg = await c.get_model_config("square_int32")
            assert cfg.config.model_transaction_policy.decoupled
            xs = [np.full((1, 16), i, dtype=np.float32) for i in range(64)]
            rs = await asyncio.gather(*(c.infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [1, 16], x)]),
                                                request_id=str(i), client_timeout=RPC_TIMEOUT)
                                        for i, x in enumerate(xs)))
            for i, r in enumerate(rs):
                assert r.get_response().id == str(i)
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), xs[i])
            with pytest.raises(InferenceServerException) as e:
                await c.infer("square_int32", tc_inputs([("IN", "INT32", [1], np.array([1], np.int32))]))
            assert e.value.status() == "StatusCode.UNIMPLEMENTED" and "decoupled" in e.value.message()

    asyncio.run(run())


# ---- classification extension --------------------------------------------------


def bytes_list(raw, decode=True):
    """A BYTES tensor's raw contents (4-byte little-endian length prefixes),
    as text or, with decode=False, as bytes."""
    out = []
    while raw:
        n = int.from_bytes(raw[:4], "little")
        out.append(raw[4:4 + n].decode() if decode else raw[4:4 + n])
        raw = raw[4 + n:]
    return out


def classify(req, output, k):
    """Asks for `output` with classification k of any InferParameter field
    as (field, value): the bad types tritonclient's
    InferRequestedOutput(output, class_count=k) cannot send (it sends an
    int64_param, and none for 0); k alone is the int64_param."""
    o = req.outputs.add()
    o.name = output
    field, value = k if isinstance(k, tuple) else ("int64_param", k)
    setattr(o.parameters["classification"], field, value)
    return req


def tc_classified(result, name):
    """(datatype, shape, classes as text) of a classified output."""
    o = [o for o in result.get_response().outputs if o.name == name][0]
    return o.datatype, list(o.shape), [v.decode() for v in result.as_numpy(name).ravel().tolist()]


def test_classification_with_labels(client):
    x = np.array([[0.1, 0.9, 0.5, 0.3]], np.float32)
    for k, want in ((1, ["0.900000:1:label1"]), (2, ["0.900000:1:label1", "0.500000:2:label2"])):
        r = client.infer("identity_labels", tc_inputs([("INPUT0", "FP32", [1, 4], x)]), request_id=f"k{k}",
                         outputs=tc_outputs("OUTPUT0", class_count=k), client_timeout=RPC_TIMEOUT)
        assert r.get_response().id == f"k{k}"
        assert tc_classified(r, "OUTPUT0") == ("BYTES", [1, k], want)
    # A batch of two: each row on its own, labels by index within the row.
    x2 = np.array([[0.1, 0.9, 0.5, 0.3], [0.7, 0.2, 0.1, 0.8]], np.float32)
    r = client.infer("identity_labels", tc_inputs([("INPUT0", "FP32", [2, 4], x2)]),
                     outputs=tc_outputs("OUTPUT0", class_count=1), client_timeout=RPC_TIMEOUT)
    assert tc_classified(r, "OUTPUT0") == ("BYTES", [2, 1], ["0.900000:1:label1", "0.800000:3:label3"])


def test_classification_without_labels(client):
    # No label file: value:index. k larger than the classes gives them all.
    x = np.array([[1, 2], [4, 3]], np.float32)
    r = client.infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [2, 2], x)]),
                     outputs=tc_outputs("OUTPUT0", class_count=5), client_timeout=RPC_TIMEOUT)
    assert tc_classified(r, "OUTPUT0") == ("BYTES", [2, 2], ["2.000000:1", "1.000000:0",
                                                            "4.000000:0", "3.000000:1"])
    # Integers print as integers; ties keep index order; an output not
    # classified in the same response is untouched.
    a = np.array([[5, -7, 9, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3]], np.int32)
    b = np.ones((1, 16), np.int32)
    r = client.infer("simple", tc_inputs([("INPUT0", "INT32", [1, 16], a), ("INPUT1", "INT32", [1, 16], b)]),
                     outputs=tc_outputs("OUTPUT1") + tc_outputs("OUTPUT0", class_count=3),
                     client_timeout=RPC_TIMEOUT)
    assert tc_classified(r, "OUTPUT0") == ("BYTES", [1, 3], ["10:2", "10:3", "9:12"])
    assert [o.datatype for o in r.get_response().outputs if o.name == "OUTPUT1"] == ["INT32"]
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


def test_classification_bad_requests(client, stub, shm_objects):
    x = np.array([[0.1, 0.9]], np.float32)
    spec = [("INPUT0", "FP32", [1, 2], x)]
    e = tc_error(client.infer, "identity_fp32", tc_inputs(spec), outputs=tc_outputs("OUTPUT0", class_count=-3))
    assert e.status() == "StatusCode.INVALID_ARGUMENT"
    assert "'classification'" in e.message() and "OUTPUT0" in e.message(), e.message()

    def req(k, model="identity_fp32"):
        return classify(infer_request(model, spec), "OUTPUT0", k)

    # Hand-built: a classification of 0 or of another type.
    for k in (0, ("double_param", 2.0), ("string_param", "2"), ("bool_param", True), ("uint64_param", 2)):
        e = rpc_error(stub.ModelInfer, req(k))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, k
        assert "'classification'" in e.details() and "OUTPUT0" in e.details(), e.details()
    # A BYTES output cannot be classified.
    e = tc_error(client.infer, "identity_bytes", tc_inputs([("INPUT0", "BYTES", [1, 1], [b"x"])]),
                 outputs=tc_outputs("OUTPUT0", class_count=1))
    assert e.status() == "StatusCode.INVALID_ARGUMENT"
    assert e.message() == "class result not available for output due to unsupported type 'BYTES'"
    # Shared memory and classification on one output: hand-built, as
    # tritonclient refuses to set shared memory on a classification output.
    m = shm_objects(4096)
    shm_register(client, "cls", m, 4096)
    r = req(1)
    set_shm(r.outputs[0].parameters, "cls", 8)
    e = rpc_error(stub.ModelInfer, r)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "shared_memory_region" in e.details() and "classification" in e.details()
    # The server is fine.
    r = client.infer("identity_fp32", tc_inputs(spec), outputs=tc_outputs("OUTPUT0", class_count=1),
                     client_timeout=RPC_TIMEOUT)
    assert tc_classified(r, "OUTPUT0") == ("BYTES", [1, 1], ["0.900000:1"])


def test_classification_stream_and_decoupled(client):
    """ModelStreamInfer classifies the same way, also every response of a
    decoupled model; errors arrive as error_message and the stream goes on."""
    calls = [square_call(3, "sq", empty_final=True, outputs=tc_outputs("OUT", class_count=2)),
             dict(model_name="identity_labels",
                  inputs=tc_inputs([("INPUT0", "FP32", [1, 3], np.array([[3, 1, 2]], np.float32))]),
                  request_id="lab", outputs=tc_outputs("OUTPUT0", class_count=2)),
             square_call(1, "bad", outputs=tc_outputs("OUT", class_count=-3)),
             dict(model_name="identity_bytes", inputs=tc_inputs([("INPUT0", "BYTES", [1, 1], [b"x"])]),
                  request_id="bytes", outputs=tc_outputs("OUTPUT0", class_count=1))]
    got = stream_all(client, calls)
    per = {}
    for r, _ in got:
        if r is not None:
            per.setdefault(r.get_response().id, []).append(r)
    assert set(per) == {"sq", "lab"}, per
    sq = [r for r in per["sq"] if not is_final(r)]
    assert len(sq) == 3 and len(per["sq"]) == 4
    for r in sq:
        assert tc_classified(r, "OUT") == ("BYTES", [1], ["3:0"])
    assert tc_classified(per["lab"][0], "OUTPUT0") == \
        ("BYTES", [1, 2], ["3.000000:0:label0", "2.000000:2:label2"])
    errs = sorted(e.message() for _, e in got if e is not None)
    assert len(errs) == 2, errs
    assert "unsupported type 'BYTES'" in errs[0] and "'classification'" in errs[1], errs


# ---- ModelStreamInfer -----------------------------------------------------------


# ---- ModelStreamInfer -----------------------------------------------------------


def test_stream_square_n_responses(client):
    got = ok_results(stream_all(client, [square_call(4, "a")]))
    assert len(got) == 4
    for r in got:
        assert r.get_response().id == "a"
        assert r.as_numpy("OUT").tolist() == [4]
    # The backend ends with a flags-only final: without the opt-in no empty
    # response arrives, so no response carries triton_final_response=true.
    assert [is_final(r) for r in got] == [False] * 4


def test_stream_decoupled_ensemble(client):
    """An ensemble whose step is decoupled streams one response per step
    response, then the final flag; ModelInfer refuses it as decoupled."""
    call = dict(model_name="square_ens", inputs=tc_inputs([("N", "INT32", [1], np.array([3], dtype=np.int32))]),
                request_id="e", enable_empty_final_response=True)
    got = ok_results(stream_all(client, [call]))
    assert [is_final(r) for r in got] == [False, False, False, True], got
    for r in got[:3]:
        assert r.get_response().model_name == "square_ens"
        assert r.as_numpy("SQ").tolist() == [3]
    e = tc_error(client.infer, "square_ens", call["inputs"], request_id="e")
    assert e.status() == "StatusCode.UNIMPLEMENTED" and "decoupled" in e.message(), e.message()


def test_stream_empty_final_opt_in(client):
    got = ok_results(stream_all(client, [square_call(2, "b", empty_final=True)]))
    assert [is_final(r) for r in got] == [False, False, True]
    assert len(got[-1].get_response().outputs) == 0 and got[-1].get_response().id == "b"
    # n = 0: nothing but the final flag.
    assert stream_all(client, [square_call(0, "z")]) == []
    got = ok_results(stream_all(client, [square_call(0, "z", empty_final=True)]))
    assert len(got) == 1 and is_final(got[0]) and got[0].get_response().id == "z"


def test_stream_interleaved_requests(client):
    counts = {"r5": 5, "r3": 3, "r0": 0, "r7": 7, "r1": 1}
    got = ok_results(stream_all(client, [square_call(n, rid, empty_final=True) for rid, n in counts.items()]))
    per = {}
    for r in got:
        per.setdefault(r.get_response().id, []).append(r)
    for rid, n in counts.items():
        rs = per[rid]
        assert len(rs) == n + 1, rid
        assert [is_final(r) for r in rs] == [False] * n + [True]
        for r in rs[:-1]:
            assert r.as_numpy("OUT").tolist() == [n]


def test_stream_concurrent_requests_are_not_serialized(client):
    """A big request must not hold back a small one sent after it."""
    ids, small_done = [], threading.Event()

    def callback(result, error):
        assert error is None, error
        ids.append(result.get_response().id)
        if ids[-1] == "small" and is_final(result):
            small_done.set()

    client.start_stream(callback=callback, stream_timeout=RPC_TIMEOUT)
    try:
        client.async_stream_infer(**square_call(300, "big"))
        client.async_stream_infer(**square_call(1, "small", empty_final=True))
        assert small_done.wait(RPC_TIMEOUT)  # the stream stays open until then
    finally:
        client.stop_stream()
    assert ids.count("big") == 300 and ids.count("small") == 2


def test_stream_errors_keep_stream_open(client, stub):
    bad = dict(model_name="no_such_model", inputs=tc_inputs([("IN", "INT32", [1], np.array([1], np.int32))]),
               request_id="bad")
    # An input of an unknown datatype: tritonclient sends it without data.
    badtype = dict(model_name="square_int32", inputs=[grpcclient.InferInput("IN", [1], "XX")], request_id="badtype")
    got = stream_all(client, [bad, square_call(2, "ok", empty_final=True), badtype])
    errs = [e.message() for _, e in got if e is not None]
    assert len(errs) == 2 and any("no_such_model" in m for m in errs), errs
    assert any("invalid datatype 'XX'" in m for m in errs), errs
    assert [r.get_response().id for r, _ in got if r is not None] == ["ok"] * 3
    # An error response carries its request's id, which tritonclient does
    # not pass on: a hand-built stream reads it.
    bad_req = infer_request("no_such_model", [("IN", "INT32", [1], np.array([1], np.int32))], rid="bad")
    got = list(stub.ModelStreamInfer(iter([bad_req]), timeout=RPC_TIMEOUT))
    assert len(got) == 1 and got[0].infer_response.id == "bad" and "no_such_model" in got[0].error_message


def test_stream_non_decoupled_model(client):
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    got = ok_results(stream_all(client, [dict(model_name="identity_fp32", request_id=str(i),
                                              inputs=tc_inputs([("INPUT0", "FP32", [1, 4], x)])) for i in range(3)]))
    assert sorted(r.get_response().id for r in got) == ["0", "1", "2"]
    for r in got:
        assert is_final(r)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)


def cancel_after(client, call, n):
    """Streams call and cancels the stream (stop_stream(cancel_requests=True))
    once n responses came: how many responses came in all, and the errors."""
    results, errors, enough = [], [], threading.Event()

    def callback(result, error):
        if error is not None:
            errors.append(error)
        else:
            results.append(result)
            if len(results) >= n:
                enough.set()

    client.start_stream(callback=callback, stream_timeout=RPC_TIMEOUT)
    try:
        client.async_stream_infer(**call)
        assert enough.wait(RPC_TIMEOUT)
    finally:
        client.stop_stream(cancel_requests=True)
    return len(results), errors


def test_stream_cancel_mid_stream(client):
    n, errors = cancel_after(client, square_call(1_000_000, "huge"), 10)
    assert 10 <= n < 1_000_000
    assert [e.status() for e in errors] == ["StatusCode.CANCELLED"], errors
    # The server keeps serving, and the cancelled request drains.
    assert len(ok_results(stream_all(client, [square_call(3, "after")]))) == 3


def test_deadline_exceeded(client):
    got = stream_all(client, [square_call(10_000_000, "slow")], stream_timeout=0.5)
    errors = [e for _, e in got if e is not None]
    assert [e.status() for e in errors] == ["StatusCode.DEADLINE_EXCEEDED"], errors
    assert client.is_server_live(client_timeout=RPC_TIMEOUT)


def test_many_concurrent_streams(server):
    """16 clients, each with a stream, at once."""
    def one(i, out):
        n = 1 + i % 7
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{server.port}") as c:
            out[i] = (n, ok_results(stream_all(c, [square_call(n, f"s{i}", empty_final=True)])))

    out = {}
    threads = [threading.Thread(target=one, args=(i, out)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(RPC_TIMEOUT)
    assert len(out) == 16
    for i, (n, got) in out.items():
        assert len(got) == n + 1 and is_final(got[-1])
        assert all(r.get_response().id == f"s{i}" for r in got)


def test_aio_concurrent_streams(server):
    """tritonclient.grpc.aio: eight streams at once on one channel, each
    with two decoupled requests."""
    import asyncio

    async def one(c, i):
        async def calls():
            for k in range(2):
                yield square_call(1 + (i + k) % 5, f"a{i}.{k}")

        got = {}
        async for result, error in c.stream_infer(calls(), stream_timeout=RPC_TIMEOUT):
            assert error is None, error
            got.setdefault(result.get_response().id, []).append(result.as_numpy("OUT").tolist())
        return got

    async def run():
        async with aioclient.InferenceServerClient(url=f"127.0.0.1:{server.port}") as c:
            return await asyncio.gather(*(one(c, i) for i in range(8)))

    for i, got in enumerate(asyncio.run(run())):
        want = {f"a{i}.{k}": [[1 + (i + k) % 5]] * (1 + (i + k) % 5) for k in range(2)}
        assert got == want


def test_unload_while_stream_open(client):
    """Unloading a model while a stream has requests in flight on it: the
    in-flight request finishes (or fails cleanly), later requests on the
    same stream get an error message, and the stream stays usable."""
    q = queue.Queue()
    client.start_stream(callback=lambda result, error: q.put((result, error)), stream_timeout=120)
    seen, unloaded, errors, other = 0, False, [], False
    try:
        client.async_stream_infer(**square_call(20000, "long", empty_final=True))
        while not other:
            result, error = q.get(timeout=RPC_TIMEOUT)
            if error is not None:
                errors.append(error.message())
                # tritonclient passes no id with an error: the message names it.
                if "unknown model: 'square_int32'" in error.message():
                    client.async_stream_infer(model_name="identity_fp32", request_id="other",
                                              inputs=tc_inputs([("INPUT0", "FP32", [1, 1],
                                                                 np.ones((1, 1), np.float32))]))
                continue
            rid = result.get_response().id
            if rid == "long":
                seen += 1
                if seen == 10 and not unloaded:
                    client.unload_model("square_int32", client_timeout=RPC_TIMEOUT)
                    unloaded = True
                    client.async_stream_infer(**square_call(2, "after-unload"))
            if rid == "other":
                other = True
    finally:
        client.stop_stream(cancel_requests=True)
        client.load_model("square_int32", client_timeout=RPC_TIMEOUT)
    assert unloaded and other
    assert any("unknown model: 'square_int32'" in m for m in errors), errors
    assert client.is_model_ready("square_int32", client_timeout=RPC_TIMEOUT)


def _inference_count(client, model):
    return client.get_inference_statistics(model, client_timeout=RPC_TIMEOUT).model_stats[0].inference_count


def test_client_that_stops_reading(client):
    """Backpressure: with a client that does not read, the server stops
    taking requests from the connection (bounded buffering), and resumes
    without deadlock once the client reads again. tritonclient reads the
    stream on one thread, through the callback: a callback that blocks is
    a client that does not read."""
    item = b"x" * (512 * 1024)
    n_req = 200  # 100 MiB of responses, far above the throttle mark
    before = _inference_count(client, "identity_bytes")
    go, results, errors = threading.Event(), [], []

    def callback(result, error):
        go.wait(120)
        (errors if error is not None else results).append(error or result)

    client.start_stream(callback=callback, stream_timeout=120)
    try:
        for i in range(n_req):
            client.async_stream_infer("identity_bytes", tc_inputs([("INPUT0", "BYTES", [1, 1], [item])]),
                                      request_id=str(i))
        time.sleep(4)
        stalled = _inference_count(client, "identity_bytes") - before
        print("processed while the client did not read:", stalled, "of", n_req)
        assert stalled < n_req, "the server buffered every response for a client that does not read"
    finally:
        go.set()
        client.stop_stream()
    assert errors == []
    assert len(results) == n_req


def test_keepalive_pings_answered():
    """A server pinging every 100 ms keeps an idle connection usable (the
    client answers the pings; unanswered ones would close it). It sends at
    most --grpc-http2-max-pings-without-data pings between data frames, and
    with --grpc-http2-max-ping-strikes=0 tolerates any client pings (a
    tritonclient pinging every 100 ms with KeepAliveOptions, and raw ones)."""
    s = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS,
                "--allow-http=false", "--allow-metrics=false", "--grpc-port=0",
                "--grpc-address=127.0.0.1", "--grpc-keepalive-time=100", "--grpc-keepalive-timeout=2000",
                "--grpc-keepalive-permit-without-calls=true", "--grpc-http2-max-pings-without-data=3",
                "--grpc-http2-max-ping-strikes=0"])
    try:
        s.wait_ready()
        port = s.ports()["grpc"]
        ka = grpcclient.KeepAliveOptions(keepalive_time_ms=100, keepalive_timeout_ms=2000,
                                         keepalive_permit_without_calls=True, http2_max_pings_without_data=0)
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}", keepalive_options=ka) as c:
            assert c.is_server_live(client_timeout=RPC_TIMEOUT)
            time.sleep(1.0)
            assert c.is_server_live(client_timeout=RPC_TIMEOUT)

        # Counting the server's pings takes a raw HTTP/2 connection.
        h = RawH2(port)
        try:
            server_pings = 0
            h.sock.settimeout(0.2)
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                try:
                    f = h.read_frame()
                except socket.timeout:
                    continue
                assert f is not None
                if f[0] == 4 and not f[1] & 1:
                    h.send(4, 1, 0, b"")
                if f[0] == 6 and not f[1] & 1:
                    server_pings += 1
                    h.send(6, 1, 0, f[3])
            assert server_pings == 3  # then no more without data in between
            h.sock.settimeout(RPC_TIMEOUT)
            for i in range(10):
                h.send(6, 0, 0, i.to_bytes(8, "big"))
            acks = 0
            while acks < 10:
                f = h.read_frame()
                assert f is not None and f[0] != 7, f
                if f[0] == 6 and f[1] & 1:
                    acks += 1
            h.request(1, LIVE_PATH, grpc_frame(pb.ServerLiveRequest().SerializeToString()))
            assert h.response(1)[0]["grpc-status"] == "0"
        finally:
            h.close()
        assert s.stop() == 0
        assert "Sanitizer" not in s.text()
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def test_too_many_pings_get_goaway(server):
    """With Triton's defaults (no pings without calls, 2 strikes), a client
    flooding PINGs on an idle connection gets GOAWAY ENHANCE_YOUR_CALM with
    "too_many_pings", and the connection closes. (Raw frames: grpcio
    paces its pings and would not flood.)"""
    h = RawH2(server.port)
    try:
        # One write: the server may close as soon as it has read the fourth.
        h.sock.sendall(b"".join(h.frame(6, 0, 0, i.to_bytes(8, "big")) for i in range(10)))
        acks, goaway = 0, None
        while True:
            f = h.read_frame()
            if f is None:
                break
            if f[0] == 6 and f[1] & 1:
                acks += 1
            if f[0] == 7:
                goaway = f[3]
        assert goaway is not None, "no GOAWAY"
        assert int.from_bytes(goaway[4:8], "big") == 0xB  # ENHANCE_YOUR_CALM
        assert goaway[8:] == b"too_many_pings"
        assert acks >= 3, acks  # at least the first ping and two strikes are answered
    finally:
        h.close()
    # Other connections are unaffected.
    with grpcclient.InferenceServerClient(url=f"127.0.0.1:{server.port}") as c:
        assert c.is_server_live(client_timeout=RPC_TIMEOUT)


@pytest.mark.parametrize("flag,value", [
    ("--grpc-keepalive-permit-without-calls", "maybe"),
    ("--grpc-http2-max-pings-without-data", "-1"),
    ("--grpc-http2-min-recv-ping-interval-without-data", "5m"),
    ("--grpc-http2-max-ping-strikes", "x"),
    ("--grpc-http2-max-ping-strikes", "2147483648"),
])
def test_keepalive_flags_reject_bad_values(flag, value):
    p = subprocess.run([NEREID, "--model-repository", EXAMPLES, f"{flag}={value}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    first = p.stderr.splitlines()[0]
    assert flag in first and value in first, first


def test_port_in_use_or_unknown_address_fails_cleanly():
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    common = [NEREID, "--model-repository", EXAMPLES, "--backend-directory", BACKENDS,
              "--allow-http=false", "--allow-metrics=false"]
    try:
        p = subprocess.run(common + [f"--grpc-port={port}", "--grpc-address=127.0.0.1"],
                           capture_output=True, text=True, timeout=START_TIMEOUT)
        assert p.returncode == 1, p.stderr
        assert "gRPC" in p.stderr and f"cannot listen on 127.0.0.1:{port}" in p.stderr, p.stderr
    finally:
        blocker.close()
    p = subprocess.run(common + ["--grpc-address=no-such-host.invalid"],
                       capture_output=True, text=True, timeout=START_TIMEOUT)
    assert p.returncode == 1, p.stderr
    assert "cannot resolve address 'no-such-host.invalid'" in p.stderr, p.stderr


def test_keepalive_flags_accepted():
    s = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS,
                "--allow-http=false", "--allow-metrics=false", "--grpc-port=0",
                "--grpc-address=127.0.0.1", "--grpc-keepalive-permit-without-calls=false",
                "--grpc-http2-max-pings-without-data=0",
                "--grpc-http2-min-recv-ping-interval-without-data=10000",
                "--grpc-http2-max-ping-strikes=5"])
    try:
        s.wait_ready()
        assert s.stop() == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


# ---- repeat_int32 (decoupled, Triton's repeat example) over ModelStreamInfer --------


def repeat_request(values, delays, wait, rid, empty_final=True):
    """A hand-built repeat_int32 request, for raw HTTP/2 frames."""
    params = {} if empty_final is None else {"triton_enable_empty_final_response": empty_final}
    return infer_request("repeat_int32", [
        ("IN", "INT32", [len(values)], np.array(values, dtype=np.int32)),
        ("DELAY", "UINT32", [len(delays)], np.array(delays, dtype=np.uint32)),
        ("WAIT", "UINT32", [1], np.array([wait], dtype=np.uint32))], rid=rid, params=params)


def repeat_call(values, delays, wait, rid, empty_final=True):
    """async_stream_infer arguments for repeat_int32."""
    return dict(model_name="repeat_int32", request_id=rid, enable_empty_final_response=empty_final,
                inputs=tc_inputs([("IN", "INT32", [len(values)], np.array(values, dtype=np.int32)),
                                  ("DELAY", "UINT32", [len(delays)], np.array(delays, dtype=np.uint32)),
                                  ("WAIT", "UINT32", [1], np.array([wait], dtype=np.uint32))]))


def test_stream_repeat_responses_in_order(client):
    t0 = time.monotonic()
    got = []
    client.start_stream(callback=lambda result, error: got.append((time.monotonic() - t0, result, error)),
                        stream_timeout=RPC_TIMEOUT)
    try:
        client.async_stream_infer(**repeat_call([10, -20, 30], [0, 100, 200], 50, "rep"))
    finally:
        client.stop_stream()
    assert [e for _, _, e in got] == [None] * 4
    assert [r.get_response().id for _, r, _ in got] == ["rep"] * 4
    assert [is_final(r) for _, r, _ in got] == [False, False, False, True]
    data = [r for _, r, _ in got[:3]]
    assert [r.as_numpy("OUT").tolist() for r in data] == [[10], [-20], [30]]
    assert [r.as_numpy("IDX").tolist() for r in data] == [[0], [1], [2]]
    assert len(got[3][1].get_response().outputs) == 0
    # Streamed: the first response long before the last delay elapsed. No
    # bound on when the first came: counted from before the call was made,
    # it is only latency, which a loaded machine (ctest -j2 beside a build)
    # stretches without limit; the gap between the answers is what shows
    # they were not held back to the end.
    first, last = got[0][0], got[2][0]
    assert last >= 0.29 and last - first >= 0.25, (first, last)


def test_stream_repeat_zero_and_no_empty_final(client):
    got = ok_results(stream_all(client, [repeat_call([], [], 0, "r0")]))
    assert len(got) == 1 and is_final(got[0]) and got[0].get_response().id == "r0"
    assert len(got[0].get_response().outputs) == 0
    # Without the opt-in the flags-only final sends nothing.
    got = ok_results(stream_all(client, [repeat_call([7, 8], [0, 0], 0, "r2", empty_final=False)]))
    assert [is_final(r) for r in got] == [False, False]
    assert [r.as_numpy("OUT").tolist() for r in got] == [[7], [8]]


def test_stream_repeat_interleaved_requests(client, stub):
    """Several repeat requests on one stream: their responses interleave in
    time, and each request ends with exactly one triton_final_response."""
    got = stream_all(client, [repeat_call([1, 2, 3], [0, 200, 200], 0, "a"),
                              repeat_call([7, 8, 9], [100, 200, 200], 0, "b"),
                              repeat_call([], [], 50, "c"),
                              repeat_call([5], [1, 2], 0, "bad")])
    order = [(r.get_response().id, is_final(r)) for r, _ in got if r is not None]
    per = {}
    for rid, fin in order:
        per.setdefault(rid, []).append(fin)
    assert per["a"] == [False, False, False, True] and per["b"] == [False, False, False, True], per
    assert per["c"] == [True], per
    assert "bad" not in per, per
    data = [rid for rid, fin in order if rid in ("a", "b") and not fin]
    assert data == ["a", "b", "a", "b", "a", "b"], order
    for r, _ in got:
        if r is not None and r.get_response().id in ("a", "b") and not is_final(r):
            idx = r.as_numpy("IDX").tolist()[0]
            base = 1 if r.get_response().id == "a" else 7
            assert r.as_numpy("OUT").tolist() == [base + idx]
    errs = [e for _, e in got if e is not None]
    assert len(errs) == 1 and "same number of elements" in errs[0].message(), errs
    # The error response carries the request's id, which tritonclient does
    # not pass on: a hand-built stream reads it.
    bad = infer_request("repeat_int32", [("IN", "INT32", [1], np.array([5], dtype=np.int32)),
                                         ("DELAY", "UINT32", [2], np.array([1, 2], dtype=np.uint32)),
                                         ("WAIT", "UINT32", [1], np.array([0], dtype=np.uint32))], rid="bad")
    got = list(stub.ModelStreamInfer(iter([bad]), timeout=RPC_TIMEOUT))
    assert len(got) == 1 and got[0].infer_response.id == "bad"
    assert "same number of elements" in got[0].error_message


def test_stream_repeat_cancel(client):
    """Cancelling the stream stops a long repeat request; the server keeps
    serving the model."""
    n = 200
    seen, errors = cancel_after(client, repeat_call(list(range(n)), [20] * n, 0, "long"), 3)
    assert 3 <= seen < n
    assert [e.status() for e in errors] == ["StatusCode.CANCELLED"], errors
    got = ok_results(stream_all(client, [repeat_call([4], [0], 0, "after")]))
    assert [is_final(r) for r in got] == [False, True]


# ---- system shared memory ----------------------------------------------------------


class ShmObject:
    """A POSIX shared memory object made, written and read with
    tritonclient.utils.shared_memory, as a Triton client does; the registry
    opens it by key "/<name>"."""

    def __init__(self, size):
        self.name = "nrd_grpc_" + uuid.uuid4().hex[:12]
        self.key = "/" + self.name
        self.handle = shm.create_shared_memory_region(self.name, self.key, size, create_only=True)

    def write(self, offset, arr):
        shm.set_shared_memory_region(self.handle, [np.ascontiguousarray(arr)], offset=offset)

    def read(self, offset, dtype, shape):
        return shm.get_contents_as_numpy(self.handle, np.dtype(dtype), shape, offset=offset).copy()

    def close(self):
        shm.destroy_shared_memory_region(self.handle)


@pytest.fixture
def shm_objects(client):
    made = []

    def make(size):
        m = ShmObject(size)
        made.append(m)
        return m
    yield make
    client.unregister_system_shared_memory(client_timeout=RPC_TIMEOUT)
    for m in made:
        m.close()


def shm_register(client, name, obj, size, offset=0):
    client.register_system_shared_memory(name, obj.key, size, offset=offset, client_timeout=RPC_TIMEOUT)


def set_shm(params, region, size, offset=None):
    """Shared memory parameters on a hand-built tensor, beside data or of a
    kind tritonclient's set_shared_memory never produces."""
    params["shared_memory_region"].string_param = region
    params["shared_memory_byte_size"].int64_param = size
    if offset is not None:
        params["shared_memory_offset"].int64_param = offset


def rpc_error(fn, *args):
    """The grpc.RpcError of a call through our own stub (hand-built requests)."""
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, timeout=RPC_TIMEOUT)
    return e.value


def test_shm_register_status_unregister(client, shm_objects):
    m = shm_objects(4096)
    shm_register(client, "g_a", m, 1024)
    shm_register(client, "g_b", m, 512, offset=2048)
    st = client.get_system_shared_memory_status(client_timeout=RPC_TIMEOUT)
    assert set(st.regions) == {"g_a", "g_b"}
    b = st.regions["g_b"]
    assert (b.name, b.key, b.offset, b.byte_size) == ("g_b", m.key, 2048, 512)
    one = client.get_system_shared_memory_status("g_a", client_timeout=RPC_TIMEOUT)
    assert list(one.regions) == ["g_a"] and one.regions["g_a"].byte_size == 1024
    j = client.get_system_shared_memory_status("g_a", as_json=True, client_timeout=RPC_TIMEOUT)
    assert j["regions"]["g_a"]["key"] == m.key

    e = tc_error(client.register_system_shared_memory, "g_a", m.key, 16)
    assert e.status() == "StatusCode.ALREADY_EXISTS" and "g_a" in e.message()
    e = tc_error(client.get_system_shared_memory_status, "nope")
    assert e.status() == "StatusCode.NOT_FOUND"
    assert e.message() == "Unable to find system shared memory region: 'nope'"
    e = tc_error(client.register_system_shared_memory, "g_big", m.key, 200, offset=4000)
    assert e.status() == "StatusCode.INVALID_ARGUMENT" and "g_big" in e.message()
    e = tc_error(client.register_system_shared_memory, "g_nokey", "/nrd_grpc_no_such_object", 16)
    assert e.status() == "StatusCode.INTERNAL" and "nrd_grpc_no_such_object" in e.message()
    e = tc_error(client.register_system_shared_memory, "", m.key, 16)
    assert e.status() == "StatusCode.INVALID_ARGUMENT" and "name" in e.message()

    # Unknown names unregister fine; one name removes one; empty removes all.
    client.unregister_system_shared_memory("nope", client_timeout=RPC_TIMEOUT)
    client.unregister_system_shared_memory("g_a", client_timeout=RPC_TIMEOUT)
    st = client.get_system_shared_memory_status(client_timeout=RPC_TIMEOUT)
    assert set(st.regions) == {"g_b"}
    shm_register(client, "g_a", m, 1024)
    client.unregister_system_shared_memory(client_timeout=RPC_TIMEOUT)
    st = client.get_system_shared_memory_status(client_timeout=RPC_TIMEOUT)
    assert len(st.regions) == 0


def test_shm_infer_inputs_and_outputs_in_place(client, shm_objects):
    """add_sub with both inputs in one region and both outputs in another,
    at offsets, through tritonclient's set_shared_memory."""
    min_ = shm_objects(4096)
    mout = shm_objects(8192)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 5, dtype=np.int32)
    min_.write(0, a)
    min_.write(64, b)
    shm_register(client, "in", min_, 128)
    shm_register(client, "out", mout, 128, offset=4096)
    inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"), grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("in", 64)
    inputs[1].set_shared_memory("in", 64, offset=64)
    outputs = tc_outputs("OUTPUT0", "OUTPUT1")
    outputs[0].set_shared_memory("out", 64)
    outputs[1].set_shared_memory("out", 64, offset=64)
    r = client.infer("simple", inputs, outputs=outputs, request_id="shm-1", client_timeout=RPC_TIMEOUT)
    resp = r.get_response()
    assert resp.id == "shm-1"
    np.testing.assert_array_equal(mout.read(4096, np.int32, (1, 16)), a + b)
    np.testing.assert_array_equal(mout.read(4096 + 64, np.int32, (1, 16)), a - b)
    # One (empty) raw_output_contents entry per output, as Triton lays them out.
    assert len(resp.raw_output_contents) == 2 and all(len(x) == 0 for x in resp.raw_output_contents)
    outs = {o.name: o for o in resp.outputs}
    assert list(outs["OUTPUT0"].shape) == [1, 16] and outs["OUTPUT0"].datatype == "INT32"
    # No parameters on an output written to shared memory, as Triton answers.
    assert len(outs["OUTPUT0"].parameters) == 0 and len(outs["OUTPUT1"].parameters) == 0


def test_shm_infer_mixed_raw_and_shm(client, shm_objects):
    """raw_input_contents holds only the inputs not in shared memory; an
    output not in shared memory comes back in its aligned raw entry."""
    m = shm_objects(4096)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 2, dtype=np.int32)
    m.write(0, b)
    shm_register(client, "mix", m, 4096)
    inputs = tc_inputs([("INPUT0", "INT32", [1, 16], a)]) + [grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[1].set_shared_memory("mix", 64)
    outputs = tc_outputs("OUTPUT0", "OUTPUT1")
    outputs[0].set_shared_memory("mix", 64, offset=1024)
    r = client.infer("simple", inputs, outputs=outputs, client_timeout=RPC_TIMEOUT)
    np.testing.assert_array_equal(m.read(1024, np.int32, (1, 16)), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
    resp = r.get_response()
    idx = [o.name for o in resp.outputs].index("OUTPUT0")
    assert len(resp.raw_output_contents[idx]) == 0


def test_shm_stream_infer(client, shm_objects):
    m = shm_objects(4096)
    x = np.arange(8, dtype=np.float32).reshape(1, 8)
    m.write(0, x)
    shm_register(client, "st", m, 4096)

    def call(i):
        inp = grpcclient.InferInput("INPUT0", [1, 8], "FP32")
        inp.set_shared_memory("st", 32)
        out = grpcclient.InferRequestedOutput("OUTPUT0")
        out.set_shared_memory("st", 32, offset=1024 + 64 * i)
        return dict(model_name="identity_fp32", inputs=[inp], outputs=[out], request_id=f"s{i}")
    got = ok_results(stream_all(client, [call(0), call(1)]))
    assert sorted(r.get_response().id for r in got) == ["s0", "s1"]
    for i in range(2):
        np.testing.assert_array_equal(m.read(1024 + 64 * i, np.float32, (1, 8)), x)


def test_shm_infer_errors(client, stub, shm_objects):
    m = shm_objects(4096)
    shm_register(client, "err", m, 256)
    x = np.zeros((1, 16), np.float32)

    def call(in_shm=None, out_shm=None):
        """identity_fp32 through tritonclient: INPUT0 in shared memory
        (region, size, offset) or raw, OUTPUT0 in shared memory if given."""
        if in_shm:
            inputs = [grpcclient.InferInput("INPUT0", [1, 16], "FP32")]
            inputs[0].set_shared_memory(*in_shm)
        else:
            inputs = tc_inputs([("INPUT0", "FP32", [1, 16], x)])
        outputs = None
        if out_shm:
            outputs = tc_outputs("OUTPUT0")
            outputs[0].set_shared_memory(*out_shm)
        return dict(model_name="identity_fp32", inputs=inputs, outputs=outputs)

    cases = [
        (call(("nope", 64)), "StatusCode.NOT_FOUND", "nope"),
        (call(("err", 64, 250)), "StatusCode.INVALID_ARGUMENT", "err"),
        (call(out_shm=("nope", 64)), "StatusCode.NOT_FOUND", "nope"),
        (call(out_shm=("err", 64, 224)), "StatusCode.INVALID_ARGUMENT", "err"),
        (call(out_shm=("err", 16)), "StatusCode.INTERNAL", "should be at least 64 bytes"),  # Triton's code
    ]
    for c, code, text in cases:
        e = tc_error(client.infer, **c)
        assert e.status() == code, (c, e)
        assert text in e.message(), e.message()

    def req(in_params=None, raw=False, contents=False):
        """Hand-built: tritonclient clears an input's data when it puts the
        input in shared memory, and never sends typed contents or
        parameters of the wrong type."""
        r = pb.ModelInferRequest(model_name="identity_fp32")
        t = r.inputs.add()
        t.name, t.datatype = "INPUT0", "FP32"
        t.shape.extend([1, 16])
        if in_params:
            set_shm(t.parameters, *in_params)
        if raw:
            r.raw_input_contents.append(x.tobytes())
        if contents:
            t.contents.fp32_contents.extend([0.0] * 16)
        return r

    for r, code, text in ((req(("err", 64), raw=True), grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents"),
                          (req(("err", 64), contents=True), grpc.StatusCode.INVALID_ARGUMENT, "contents")):
        e = rpc_error(stub.ModelInfer, r)
        assert e.code() == code, (r, e)
        assert text in e.details(), e.details()
    # Parameters of the wrong type or incomplete name the field.
    r = req()
    r.inputs[0].parameters["shared_memory_region"].string_param = "err"
    e = rpc_error(stub.ModelInfer, r)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "shared_memory_byte_size" in e.details()
    r = req(("err", 64))
    r.inputs[0].parameters["shared_memory_byte_size"].string_param = "64"
    e = rpc_error(stub.ModelInfer, r)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "shared_memory_byte_size" in e.details()
    # On a stream the error arrives as error_message and the stream goes on.
    got = stream_all(client, [call(("nope", 64))])
    assert len(got) == 1 and got[0][0] is None and "nope" in got[0][1].message()


def http_json(server, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=RPC_TIMEOUT) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_shm_shared_with_http(server, client, shm_objects):
    """One registry serves both protocols, as in Triton."""
    m = shm_objects(4096)
    code, _ = http_json(server, "POST", "/v2/systemsharedmemory/region/via_http/register",
                        {"key": m.key, "offset": 0, "byte_size": 128})
    assert code == 200
    st = client.get_system_shared_memory_status("via_http", client_timeout=RPC_TIMEOUT)
    assert st.regions["via_http"].key == m.key and st.regions["via_http"].byte_size == 128
    shm_register(client, "via_grpc", m, 256, offset=1024)
    code, regions = http_json(server, "GET", "/v2/systemsharedmemory/region/via_grpc/status")
    assert code == 200 and regions == [{"name": "via_grpc", "key": m.key, "offset": 1024, "byte_size": 256}]
    e = tc_error(client.register_system_shared_memory, "via_http", m.key, 16)
    assert e.status() == "StatusCode.ALREADY_EXISTS"
    # A region registered over HTTP feeds a gRPC inference.
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    m.write(0, x)
    inp = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_shared_memory("via_http", 64)
    r = client.infer("identity_fp32", [inp], client_timeout=RPC_TIMEOUT)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)
    code, _ = http_json(server, "POST", "/v2/systemsharedmemory/unregister", {})
    assert code == 200
    st = client.get_system_shared_memory_status(client_timeout=RPC_TIMEOUT)
    assert len(st.regions) == 0


# ---- raw HTTP/2 (what grpcio will not send) ------------------------------------------


class RawH2:
    """A minimal HTTP/2 client over a socket: literal HPACK out, and the
    server's header blocks decoded by libnghttp2's own HPACK inflater
    through ctypes (nghttp2 is already the server's dependency). Kept for
    what no gRPC client sends: bad headers, bad frames, PING floods, frame
    level reads of windows, settings and GOAWAY."""

    class _NV(ctypes.Structure):
        _fields_ = [("name", ctypes.POINTER(ctypes.c_uint8)), ("value", ctypes.POINTER(ctypes.c_uint8)),
                    ("namelen", ctypes.c_size_t), ("valuelen", ctypes.c_size_t), ("flags", ctypes.c_uint8)]

    def __init__(self, port, sock=None):
        """sock: a connected socket to use (a TLS one, say) instead of a new
        connection to port."""
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=RPC_TIMEOUT)
        self.buf = b""
        lib = ctypes.CDLL(ctypes.util.find_library("nghttp2"))
        lib.nghttp2_hd_inflate_hd2.restype = ctypes.c_ssize_t
        lib.nghttp2_hd_inflate_hd2.argtypes = [ctypes.c_void_p, ctypes.POINTER(self._NV),
                                               ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                                               ctypes.c_size_t, ctypes.c_int]
        lib.nghttp2_hd_inflate_end_headers.argtypes = [ctypes.c_void_p]
        lib.nghttp2_hd_inflate_del.argtypes = [ctypes.c_void_p]
        self.lib = lib
        self.inflater = ctypes.c_void_p()
        assert lib.nghttp2_hd_inflate_new(ctypes.byref(self.inflater)) == 0
        self.sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + self.frame(4, 0, 0, b""))

    def close(self):
        self.sock.close()
        self.lib.nghttp2_hd_inflate_del(self.inflater)

    @staticmethod
    def frame(ftype, flags, stream, payload):
        return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload

    def send(self, ftype, flags, stream, payload):
        self.sock.sendall(self.frame(ftype, flags, stream, payload))

    @staticmethod
    def literal(name, value):
        name, value = name.encode(), value.encode()
        assert len(name) < 127 and len(value) < 127
        return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value

    BASE_HEADERS = ((":method", "POST"), (":scheme", "http"), (":authority", "nereid"),
                    ("content-type", "application/grpc"), ("te", "trailers"))

    def request(self, stream, path, body, extra=(), base=BASE_HEADERS):
        hdrs = [(":path", path), *base, *extra]
        self.send(1, 0x4, stream, b"".join(self.literal(n, v) for n, v in hdrs))
        # DATA frames of at most 16 KiB (HTTP/2's default largest frame).
        for off in range(0, max(len(body), 1), 16384):
            self.send(0, 0x1 if off + 16384 >= len(body) else 0, stream, body[off:off + 16384])

    def read_frame(self):
        while True:
            if len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + n:
                    f = (self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF,
                         self.buf[9:9 + n])
                    self.buf = self.buf[9 + n:]
                    return f
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk

    def decode(self, block):
        out = []
        nv = self._NV()
        flags = ctypes.c_int()
        off = 0
        while True:
            rest = block[off:]
            rv = self.lib.nghttp2_hd_inflate_hd2(self.inflater, ctypes.byref(nv), ctypes.byref(flags),
                                                 rest, len(rest), 1)
            assert rv >= 0, rv
            off += rv
            if flags.value & 0x02:
                out.append((ctypes.string_at(nv.name, nv.namelen).decode(),
                            ctypes.string_at(nv.value, nv.valuelen).decode()))
            if flags.value & 0x01:
                self.lib.nghttp2_hd_inflate_end_headers(self.inflater)
                return out
            if rv == 0 and not flags.value & 0x02:
                return out

    def response(self, stream):
        """Reads until the stream ends: (headers dict, data bytes)."""
        headers, data, block = {}, b"", b""
        while True:
            f = self.read_frame()
            assert f is not None, "connection closed"
            ftype, flags, sid, payload = f
            if ftype == 4 and not flags & 1:
                self.send(4, 1, 0, b"")
            if sid != stream:
                continue
            if ftype == 0:
                data += payload
            elif ftype in (1, 9):
                block += payload
                if flags & 0x4:
                    headers.update(self.decode(block))
                    block = b""
            if ftype in (0, 1) and flags & 0x1 and not block:
                return headers, data
            if ftype == 3:
                raise AssertionError("stream reset")


def test_server_settings(server):
    """The server's first SETTINGS: 1000 concurrent streams, 1 MiB stream
    windows, 64 KiB frames, and no RFC 7540 priorities (nghttp2 then keeps
    no priority tree; clients ignore the setting if they do not know it)."""
    h = RawH2(server.port)
    try:
        while True:
            ftype, flags, _, payload = h.read_frame()
            if ftype == 4 and not flags & 1:
                break
        got = {int.from_bytes(payload[i:i + 2], "big"): int.from_bytes(payload[i + 2:i + 6], "big")
               for i in range(0, len(payload), 6)}
        assert got == {0x3: 1000, 0x4: 1 << 20, 0x5: 1 << 16, 0x9: 1}, got
    finally:
        h.close()


def test_full_socket_resumes_when_the_client_reads(server, client):
    """A client with HTTP/2 flow control wide open that stops reading fills
    the socket: the server's writes block (EAGAIN) and wait for EPOLLOUT,
    other connections are served meanwhile, and once the client reads
    every response arrives whole and in order per stream. (Raw frames:
    grpcio keeps its windows and reads on its own.)"""
    fill_socket_then_read(RawH2(server.port), client)


def fill_socket_then_read(h, client):
    """The body of test_full_socket_resumes_when_the_client_reads, on the
    RawH2 connection h (closed at the end); client (tritonclient) checks
    that the server serves others meanwhile."""
    try:
        # INITIAL_WINDOW_SIZE at its maximum, and as much for the connection.
        h.send(4, 0, 0, (4).to_bytes(2, "big") + (2 ** 31 - 1).to_bytes(4, "big"))
        h.send(8, 0, 0, (2 ** 31 - 1 - 65535).to_bytes(4, "big"))
        # The server's 1 MiB stream window holds once we acknowledge its SETTINGS.
        while True:
            ftype, flags, _, _ = h.read_frame()
            if ftype == 4 and not flags & 1:
                h.send(4, 1, 0, b"")
                break
        streams = list(range(1, 17, 2))
        items = {sid: bytes([65 + i]) * (900 * 1024) for i, sid in enumerate(streams)}
        for sid in streams:
            r = infer_request("identity_bytes", [("INPUT0", "BYTES", [1, 1], [items[sid]])], rid=str(sid))
            h.request(sid, "/inference.GRPCInferenceService/ModelInfer", grpc_frame(r.SerializeToString()))
        time.sleep(1.0)  # about 7 MiB of answers: more than both sockets' buffers hold
        assert client.is_server_live(client_timeout=RPC_TIMEOUT)
        data, trailers, block = {sid: b"" for sid in streams}, {}, b""
        while len(trailers) < len(streams):
            f = h.read_frame()
            assert f is not None, "connection closed"
            ftype, flags, sid, payload = f
            if ftype == 4 and not flags & 1:
                h.send(4, 1, 0, b"")
            elif ftype == 0:
                data[sid] += payload
            elif ftype in (1, 9):
                block += payload
                if flags & 0x4:
                    hdrs = dict(h.decode(block))
                    block = b""
                    if flags & 0x1:
                        trailers[sid] = hdrs
            elif ftype == 3:
                raise AssertionError(f"stream {sid} reset (code {int.from_bytes(payload, 'big')})")
        for sid in streams:
            assert trailers[sid].get("grpc-status") == "0", trailers[sid]
            body = data[sid]
            assert body[0] == 0 and int.from_bytes(body[1:5], "big") == len(body) - 5
            resp = pb.ModelInferResponse.FromString(body[5:])
            assert resp.id == str(sid)
            assert bytes_list(resp.raw_output_contents[0], decode=False) == [items[sid]]
    finally:
        h.close()



def grpc_frame(payload, compressed=False):
    """A gRPC length-prefixed message, for raw HTTP/2 requests (any flag
    byte and payload, which no client sends wrong)."""
    return bytes([1 if compressed else 0]) + len(payload).to_bytes(4, "big") + payload


LIVE_PATH = "/inference.GRPCInferenceService/ServerLive"

# ---- compression ------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["gzip", "deflate"])
def test_compressed_unary_and_stream(client, algo):
    x = np.zeros((1, 16), np.float32)
    x[0, 3] = 7
    r = client.infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [1, 16], x)]), request_id="z",
                     compression_algorithm=algo, client_timeout=RPC_TIMEOUT)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)
    got = ok_results(stream_all(client, [square_call(3, "a"), square_call(2, "b")], compression_algorithm=algo))
    assert sorted(r.get_response().id for r in got if not is_final(r)) == ["a", "a", "a", "b", "b"]
    # Decompressed, this message exceeds the 1 MiB limit; compressed it is tiny.
    big = np.zeros((1, (MAX_MESSAGE // 4) + 1024), np.float32)
    e = tc_error(client.infer, "identity_fp32", tc_inputs([("INPUT0", "FP32", list(big.shape), big)]))
    assert e.status() == "StatusCode.RESOURCE_EXHAUSTED"
    e = tc_error(client.infer, "identity_fp32", tc_inputs([("INPUT0", "FP32", list(big.shape), big)]),
                 compression_algorithm=algo)
    assert e.status() == "StatusCode.RESOURCE_EXHAUSTED"
    assert "decompressed" in e.message()


def test_request_headers_checked_as_grpc_does(server):
    """Requests whose headers are not a gRPC call get gRPC's own answer:
    UNKNOWN with the message gRPC's server gives, one stream at a time,
    and the connection stays usable. host stands in for :authority."""
    body = grpc_frame(pb.ServerLiveRequest().SerializeToString())
    base = dict(RawH2.BASE_HEADERS)

    def without(name, **changed):
        return tuple((n, changed.get(n.strip(":"), v)) for n, v in base.items() if n != name)

    cases = [
        (without(":method"), "Missing :method header"),
        (without("", method="GET"), "Bad method header"),
        (without("te"), "Missing :te header"),
        (without("", te="gzip"), "Bad :te header"),
        (without(":scheme"), "Missing :scheme header"),
        (without("", scheme="ftp"), "Bad :scheme header"),
        (without(":authority"), "Missing :authority header"),
    ]
    h = RawH2(server.port)
    try:
        stream = 1
        for headers, message in cases:
            h.request(stream, LIVE_PATH, body, base=headers)
            hdrs, data = h.response(stream)
            assert hdrs["grpc-status"] == "2", (message, hdrs)
            assert urllib.parse.unquote(hdrs["grpc-message"]) == message
            assert data == b""
            stream += 2
        # No :path at all.
        h.send(1, 0x4, stream, b"".join(h.literal(n, v) for n, v in base.items()))
        h.send(0, 0x1, stream, body)
        hdrs, _ = h.response(stream)
        assert urllib.parse.unquote(hdrs["grpc-message"]) == "Missing :path header"
        stream += 2
        for headers in (without(":authority") + (("host", "nereid"),), without("", scheme="https")):
            h.request(stream, LIVE_PATH, body, base=headers)
            hdrs, data = h.response(stream)
            assert hdrs["grpc-status"] == "0", hdrs
            assert pb.ServerLiveResponse.FromString(data[5:]).live
            stream += 2
    finally:
        h.close()


def test_compression_raw_errors_and_accept_encoding(server):
    h = RawH2(server.port)
    try:
        body = pb.ServerLiveRequest().SerializeToString()
        h.request(1, LIVE_PATH, grpc_frame(gzip.compress(body), True), [("grpc-encoding", "gzip")])
        hdrs, data = h.response(1)
        assert hdrs["grpc-status"] == "0" and hdrs["grpc-accept-encoding"] == "identity,deflate,gzip"
        assert pb.ServerLiveResponse.FromString(data[5:]).live
        h.request(3, LIVE_PATH, grpc_frame(zlib.compress(body), True), [("grpc-encoding", "deflate")])
        assert h.response(3)[0]["grpc-status"] == "0"
        # Corrupt data: INTERNAL, as gRPC answers a message it cannot decompress.
        h.request(5, LIVE_PATH, grpc_frame(b"\x1f\x8bnot gzip at all", True), [("grpc-encoding", "gzip")])
        hdrs, _ = h.response(5)
        assert hdrs["grpc-status"] == "13" and "decompress" in urllib.parse.unquote(hdrs["grpc-message"])
        h.request(7, LIVE_PATH, grpc_frame(zlib.compress(b"x" * 100)[:-6], True), [("grpc-encoding", "deflate")])
        assert h.response(7)[0]["grpc-status"] == "13"
        # An encoding we do not know: UNIMPLEMENTED naming it.
        h.request(9, LIVE_PATH, grpc_frame(b"abc", True), [("grpc-encoding", "snappy")])
        hdrs, _ = h.response(9)
        assert hdrs["grpc-status"] == "12"
        assert "'snappy'" in urllib.parse.unquote(hdrs["grpc-message"])
        # The compressed flag without an encoding is a protocol error.
        h.request(11, LIVE_PATH, grpc_frame(gzip.compress(body), True))
        assert h.response(11)[0]["grpc-status"] == "13"
        # The connection still works.
        h.request(13, LIVE_PATH, grpc_frame(body))
        assert h.response(13)[0]["grpc-status"] == "0"
    finally:
        h.close()


@pytest.mark.parametrize("bad, status, text", [
    (b"\x02\0\0\0\0", "13", "flags"),  # invalid message flags: the transport ends the call
    (grpc_frame(b"\x0a\xff\xff\xff\xff\x0f"), "3", "malformed protobuf"),  # the handler ends it
])
def test_stream_ended_by_a_bad_message_cancels_its_requests(server, client, bad, status, text):
    """When the server ends a stream for a bad message after a good one,
    the requests the stream had started are cancelled in the core: no one
    can receive their responses. Otherwise square's worker would send
    2^31 - 1 of them into the void before taking its next job (and the
    server would not stop). Found by the wire fuzzer, both ways."""
    h = RawH2(server.port)
    try:
        endless = square_request(2**31 - 1, "endless").SerializeToString()
        h.request(1, STREAM_PATH, grpc_frame(endless) + bad)
        hdrs, _ = h.response(1)
        assert hdrs["grpc-status"] == status, hdrs
        assert text in urllib.parse.unquote(hdrs["grpc-message"])
    finally:
        h.close()
    got = ok_results(stream_all(client, [square_call(3, "next")]))
    assert [r.get_response().id for r in got] == ["next"] * 3


# ---- response compression (--grpc-infer-response-compression-level) -------------------

INFER_PATH = "/inference.GRPCInferenceService/ModelInfer"
STREAM_PATH = "/inference.GRPCInferenceService/ModelStreamInfer"


def start_compressing(level):
    s = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS,
                "--model-control-mode=explicit", "--load-model=identity_fp32", "--load-model=square_int32",
                "--allow-http=false", "--allow-metrics=false", "--grpc-port=0",
                "--grpc-address=127.0.0.1", f"--grpc-infer-response-compression-level={level}"])
    s.wait_ready()
    s.port = s.ports()["grpc"]
    return s


def stop_cleanly(s):
    try:
        assert s.stop() == 0, s.text()
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert bad not in s.text(), s.text()
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


@pytest.fixture(scope="module")
def high_server():
    s = start_compressing("high")
    yield s
    stop_cleanly(s)


def raw_call(port, path, msg, accept=None):
    """One call on its own raw HTTP/2 connection (so flow control windows
    never run out): the response headers and trailers, and its messages as
    (compressed flag, payload) pairs. Raw: the test reads the wire layout
    (compressed flag, grpc-encoding) and sends grpc-accept-encoding values
    that grpcio never sends."""
    h = RawH2(port)
    try:
        extra = [] if accept is None else [("grpc-accept-encoding", accept)]
        h.request(1, path, grpc_frame(msg.SerializeToString()), extra)
        hdrs, data = h.response(1)
    finally:
        h.close()
    msgs = []
    while data:
        n = int.from_bytes(data[1:5], "big")
        msgs.append((data[0], data[5:5 + n]))
        data = data[5 + n:]
    return hdrs, msgs


def plain(hdrs, flag, payload):
    if flag == 0:
        return payload
    assert flag == 1
    return gzip.decompress(payload) if hdrs["grpc-encoding"] == "gzip" else zlib.decompress(payload)


# Compresses well, but not to nothing: zlib level 1 and 9 differ a lot on it.
WAVE = np.round(np.sin(np.arange(8192, dtype=np.float32) / 7) * 100).astype(np.float32).reshape(1, 8192)


def wave_request(rid="w"):
    """WAVE as a hand-built request, for raw_call."""
    return infer_request("identity_fp32", [("INPUT0", "FP32", list(WAVE.shape), WAVE)], rid=rid)


def test_response_compression_raw(high_server):
    """Responses are compressed (flag 1, grpc-encoding) in what the client
    accepts; with "high" and both accepted that is deflate (gRPC's choice).
    A client that does not accept gzip or deflate, and RPCs other than
    inference, get them uncompressed."""
    port = high_server.port
    for accept, enc in (("identity,deflate,gzip", "deflate"), ("gzip", "gzip"), ("deflate", "deflate"),
                        ("identity , gzip", "gzip")):
        hdrs, msgs = raw_call(port, INFER_PATH, wave_request(), accept)
        assert hdrs["grpc-status"] == "0" and hdrs.get("grpc-encoding") == enc, (accept, hdrs)
        assert len(msgs) == 1 and msgs[0][0] == 1, accept
        assert len(msgs[0][1]) < WAVE.nbytes // 4
        resp = pb.ModelInferResponse.FromString(plain(hdrs, *msgs[0]))
        assert resp.id == "w"
        np.testing.assert_array_equal(output_array(resp, "OUTPUT0", np.float32), WAVE)
    for accept in (None, "identity", "snappy, br"):
        hdrs, msgs = raw_call(port, INFER_PATH, wave_request(), accept)
        assert hdrs["grpc-status"] == "0" and "grpc-encoding" not in hdrs, (accept, hdrs)
        assert len(msgs) == 1 and msgs[0][0] == 0
        resp = pb.ModelInferResponse.FromString(msgs[0][1])
        np.testing.assert_array_equal(output_array(resp, "OUTPUT0", np.float32), WAVE)
    hdrs, msgs = raw_call(port, LIVE_PATH, pb.ServerLiveRequest(), "gzip")
    assert "grpc-encoding" not in hdrs and msgs[0][0] == 0
    assert pb.ServerLiveResponse.FromString(msgs[0][1]).live
    # A message too small to gain is sent as it is (flag 0), as gRPC does.
    tiny = infer_request("identity_fp32", [("INPUT0", "FP32", [1, 1], np.array([[1.5]], np.float32))])
    hdrs, msgs = raw_call(port, INFER_PATH, tiny, "gzip")
    assert hdrs["grpc-encoding"] == "gzip" and msgs[0][0] == 0
    assert output_array(pb.ModelInferResponse.FromString(msgs[0][1]), "OUTPUT0", np.float32).tolist() == [[1.5]]
    # Streams: every response message.
    hdrs, msgs = raw_call(port, STREAM_PATH, wave_request("s"), "gzip")
    assert hdrs["grpc-status"] == "0" and hdrs["grpc-encoding"] == "gzip"
    assert len(msgs) == 1 and msgs[0][0] == 1
    r = pb.ModelStreamInferResponse.FromString(plain(hdrs, *msgs[0]))
    assert r.error_message == "" and r.infer_response.id == "s"
    np.testing.assert_array_equal(output_array(r.infer_response, "OUTPUT0", np.float32), WAVE)


def test_response_compression_grpcio(high_server):
    """tritonclient (grpcio) accepts gzip and deflate and decodes
    compressed responses, unary and streamed."""
    with grpcclient.InferenceServerClient(url=f"127.0.0.1:{high_server.port}") as c:
        def wave_call(rid):
            return dict(model_name="identity_fp32", inputs=tc_inputs([("INPUT0", "FP32", list(WAVE.shape), WAVE)]),
                        request_id=rid)

        r = c.infer(**wave_call("w"), client_timeout=RPC_TIMEOUT)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), WAVE)
        got = ok_results(stream_all(c, [wave_call("a"), square_call(3, "sq", empty_final=True), wave_call("b")]))
        assert sorted(r.get_response().id for r in got) == ["a", "b", "sq", "sq", "sq", "sq"]
        for r in got:
            if r.get_response().id in ("a", "b"):
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), WAVE)
        # Compressed requests still work alongside.
        r = c.infer(**wave_call("w"), compression_algorithm="gzip", client_timeout=RPC_TIMEOUT)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), WAVE)


def test_response_compression_levels(high_server):
    """low picks the first accepted encoding (gzip) and zlib's fastest level;
    high the last (deflate) and zlib's best; medium the middle one."""
    low, medium = start_compressing("low"), start_compressing("medium")
    try:
        hdrs, _ = raw_call(low.port, INFER_PATH, wave_request(), "identity,deflate,gzip")
        assert hdrs["grpc-encoding"] == "gzip"
        hdrs, _ = raw_call(medium.port, INFER_PATH, wave_request(), "identity,deflate,gzip")
        assert hdrs["grpc-encoding"] == "deflate"
        hdrs, _ = raw_call(medium.port, INFER_PATH, wave_request(), "gzip")
        assert hdrs["grpc-encoding"] == "gzip"
        sizes = {}
        for name, srv in (("low", low), ("medium", medium), ("high", high_server)):
            hdrs, msgs = raw_call(srv.port, INFER_PATH, wave_request(), "gzip")
            assert hdrs["grpc-encoding"] == "gzip" and msgs[0][0] == 1
            resp = pb.ModelInferResponse.FromString(plain(hdrs, *msgs[0]))
            np.testing.assert_array_equal(output_array(resp, "OUTPUT0", np.float32), WAVE)
            sizes[name] = len(msgs[0][1])
        assert sizes["low"] > sizes["medium"] >= sizes["high"], sizes
    finally:
        stop_cleanly(low)
        stop_cleanly(medium)


@pytest.mark.parametrize("value", ["max", "9", "HIGHEST", ""])
def test_response_compression_flag_rejected(value):
    flag = "--grpc-infer-response-compression-level"
    p = subprocess.run([NEREID, "--model-repository", EXAMPLES, f"{flag}={value}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    first = p.stderr.splitlines()[0]
    assert flag in first and f"'{value}'" in first and "none, low, medium or high" in first, first


def teardown_module(module):
    shutil.rmtree(STUB_DIR, ignore_errors=True)


# ---- --grpc-max-connection-age -------------------------------------------------------


def test_connections_older_than_the_max_age_get_goaway_then_close():
    """An idle connection gets GOAWAY (NO_ERROR) once older than the age
    and closes; one with a stream still answering keeps it until the grace
    runs out, then closes, and its request is cancelled in the core (the
    square instance is free for the next client). grpcio's channel simply
    reconnects."""
    s = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS,
                "--model-control-mode=explicit", "--load-model=square_int32", "--allow-http=false",
                "--allow-metrics=false", "--grpc-port=0", "--grpc-address=127.0.0.1",
                "--grpc-max-connection-age=300", "--grpc-max-connection-age-grace=1000"])
    s.wait_ready()
    port = s.ports()["grpc"]
    try:
        def until_closed(h):
            kinds = []
            while (f := h.read_frame()) is not None:
                kinds.append(f[0])
                if f[0] == 7:
                    assert int.from_bytes(f[3][4:8], "big") == 0, f  # NO_ERROR
            return kinds

        h = RawH2(port)
        t0 = time.monotonic()
        kinds = until_closed(h)
        h.close()
        assert 7 in kinds and time.monotonic() - t0 < 5, kinds
        # A stream that never ends: GOAWAY comes, responses go on until the grace is over.
        h = RawH2(port)
        t0 = time.monotonic()
        h.request(1, STREAM_PATH, grpc_frame(square_request(2**31 - 1, "long").SerializeToString()))
        kinds = until_closed(h)
        h.close()
        took = time.monotonic() - t0
        assert 7 in kinds and kinds.count(0) > 1, kinds[:20]
        assert 1.0 < took < 6, took
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}") as c:
            got = ok_results(stream_all(c, [square_call(2, "next")]))
            assert [r.get_response().id for r in got] == ["next"] * 2
        # tritonclient (grpcio) reconnects by itself after GOAWAY.
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}") as c:
            for _ in range(3):
                assert c.is_server_live(client_timeout=RPC_TIMEOUT)
                time.sleep(0.4)
    finally:
        stop_cleanly(s)
