"""Security issue 53, what clients can reach: client shared memory
(--allow-client-shm, off by default as in Triton 26.x), Triton's reserved
parameter names (request parameters and forwarded headers), and
--http-restricted-api on the cloud endpoints (SageMaker, Vertex AI).

Shared memory, inference and forwarded headers go through Triton's own
clients (tritonclient.http, tritonclient.grpc). Hand-built requests only
where those cannot send them: request parameters named like Triton's
reserved keys (tritonclient refuses them before sending, so HTTP bodies
are built by hand and gRPC messages through the generated stubs), and the
SageMaker and Vertex AI routes (not KServe routes; call() of
test_vertex_ai).

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR, NEREID_TEST_BACKEND_DIR
and NEREID_EXAMPLES set (see tests/CMakeLists.txt).
"""
import json
import os
import shutil
import subprocess
import tempfile
import types
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc
from tritonclient.utils import InferenceServerException

from security_helpers import WatchedServer
from test_nereid_cli import NEREID
from test_sagemaker import IDENTITY, archive, sm_env
from test_vertex_ai import REDIRECT, call, vertex_env

DISABLED = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
SIMPLE_ONLY = ["--model-control-mode=explicit", "--load-model=simple", "--allow-metrics=false"]
X = np.arange(16, dtype=np.int32).reshape(1, 16)
ONES = np.ones((1, 16), np.int32)


def http(s):
    return httpclient.InferenceServerClient(s.url("http"))


def grpc_client(s):
    return grpcclient.InferenceServerClient(s.url("grpc"))


@pytest.fixture
def region():
    """A 128-byte POSIX shared memory object holding X then ONES (the
    inputs of 'simple'), destroyed after the test."""
    key = f"/nrd_sec_shm_{os.getpid()}"
    h = shm.create_shared_memory_region("sec", key, 256)
    shm.set_shared_memory_region(h, [X, ONES])
    yield key, h
    shm.destroy_shared_memory_region(h)


def shm_inputs(module):
    ins = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    ins[0].set_shared_memory("r", 64)
    ins[1].set_shared_memory("r", 64, offset=64)
    return ins


# ---- --allow-client-shm ------------------------------------------------------------------


def test_help_lists_allow_client_shm():
    p = subprocess.run([NEREID, "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "--allow-client-shm=BOOL" in p.stdout, p.stdout + p.stderr
    text = p.stdout.split("--allow-client-shm=BOOL", 1)[1].split("\n  --", 1)[0]
    assert "default false" in text, text


def test_bad_allow_client_shm_value_stops_the_server():
    p = subprocess.run([NEREID, "--allow-client-shm=maybe"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "allow-client-shm" in p.stderr, p.stderr


def http_refused(call_, *args, **kwargs):
    with pytest.raises(InferenceServerException) as e:
        call_(*args, **kwargs)
    assert e.value.status() == "501", (e.value.status(), e.value.message())
    assert e.value.message().startswith(DISABLED), e.value.message()


def grpc_refused(call_, *args, **kwargs):
    with pytest.raises(InferenceServerException) as e:
        call_(*args, **kwargs)
    assert e.value.status() == "StatusCode.UNIMPLEMENTED", (e.value.status(), e.value.message())
    assert e.value.message().startswith(DISABLED), e.value.message()


def test_client_shared_memory_is_refused_by_default(region):
    """Every register and unregister, system and CUDA, HTTP and gRPC, gets
    Triton's refusal (HTTP 501, gRPC UNIMPLEMENTED), before the request's
    own checks (no region name, bad handle); status still answers, empty;
    an inference naming a region finds none."""
    key, _ = region
    with WatchedServer(SIMPLE_ONLY) as s:
        with http(s) as c:
            http_refused(c.register_system_shared_memory, "r", key, 128)
            http_refused(c.register_system_shared_memory, "r", "/no_such_nereid_key", 128)
            http_refused(c.unregister_system_shared_memory, "r")
            http_refused(c.unregister_system_shared_memory)
            http_refused(c.register_cuda_shared_memory, "c", b"\0" * 64, 0, 64)
            http_refused(c.unregister_cuda_shared_memory, "c")
            http_refused(c.unregister_cuda_shared_memory)
            assert c.get_system_shared_memory_status() == []
            assert c.get_cuda_shared_memory_status() == []
            with pytest.raises(InferenceServerException) as e:
                c.infer("simple", shm_inputs(httpclient))
            assert e.value.message().startswith("Unable to find shared memory region: 'r'"), e.value.message()
        # The empty region name is checked after the switch, as in Triton.
        code, body = raw_http(s, "/v2/systemsharedmemory/register", {"key": key, "byte_size": 8})
        assert code == 501 and json.loads(body)["error"].startswith(DISABLED), body
        with grpc_client(s) as c:
            grpc_refused(c.register_system_shared_memory, "r", key, 128)
            grpc_refused(c.register_system_shared_memory, "", "", 0)
            grpc_refused(c.unregister_system_shared_memory, "r")
            grpc_refused(c.unregister_system_shared_memory)
            grpc_refused(c.register_cuda_shared_memory, "c", b"\0" * 64, 0, 64)
            grpc_refused(c.unregister_cuda_shared_memory, "c")
            grpc_refused(c.unregister_cuda_shared_memory)
            assert len(c.get_system_shared_memory_status().regions) == 0
            assert len(c.get_cuda_shared_memory_status().regions) == 0
            with pytest.raises(InferenceServerException) as e:
                c.infer("simple", shm_inputs(grpcclient))
            assert e.value.message().startswith("Unable to find shared memory region: 'r'"), e.value.message()
        with http(s) as c:
            assert c.get_system_shared_memory_status() == []


def test_allow_client_shm_true_restores_shared_memory(region):
    """--allow-client-shm=true: a region registered over one protocol is
    read by inference over both, shown by status, and unregistered; CUDA
    answers as a server without GPUs."""
    key, _ = region
    with WatchedServer(SIMPLE_ONLY + ["--allow-client-shm=true"]) as s:
        with http(s) as c:
            c.register_system_shared_memory("r", key, 128)
            assert [r["name"] for r in c.get_system_shared_memory_status()] == ["r"]
            out = c.infer("simple", shm_inputs(httpclient)).as_numpy("OUTPUT0")
            assert out.tolist() == (X + 1).tolist()
            with pytest.raises(InferenceServerException) as e:
                c.register_cuda_shared_memory("c", b"\0" * 64, 0, 64)
            assert "GPUs not supported" in e.value.message()
            c.unregister_cuda_shared_memory()
        with grpc_client(s) as c:
            assert list(c.get_system_shared_memory_status().regions) == ["r"]
            out = c.infer("simple", shm_inputs(grpcclient)).as_numpy("OUTPUT0")
            assert out.tolist() == (X + 1).tolist()
            c.unregister_system_shared_memory("r")
            assert len(c.get_system_shared_memory_status().regions) == 0
            c.register_system_shared_memory("g", key, 64)
            c.unregister_system_shared_memory()
            c.unregister_cuda_shared_memory()
        with http(s) as c:
            assert c.get_system_shared_memory_status() == []


# ---- reserved parameter keys ------------------------------------------------------------


def raw_http(s, path, body, headers=None):
    """A hand-built POST to the KServe endpoint: (status, body bytes)."""
    req = urllib.request.Request(f"http://{s.url('http')}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


SIMPLE_JSON = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
                          {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}
HTTP_TRITON_PREFIX = "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."
GRPC_TRITON_PREFIX = ("parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys "
                      "starting with 'triton_' are allowed: triton_enable_empty_final_response")


def grpc_simple_request(params):
    r = pb.ModelInferRequest(model_name="simple")
    for name, data in (("INPUT0", X), ("INPUT1", ONES)):
        t = r.inputs.add(name=name, datatype="INT32", shape=[1, 16])
        t.contents.int_contents.extend(data.flatten().tolist())
    for k, v in params.items():
        if isinstance(v, bool):
            r.parameters[k].bool_param = v
        elif isinstance(v, int):
            r.parameters[k].int64_param = v
        else:
            r.parameters[k].string_param = v
    return r


def test_triton_prefixed_request_parameters_are_refused():
    """HTTP refuses every parameter key starting with 'triton_' (400);
    gRPC every one but triton_enable_empty_final_response
    (INVALID_ARGUMENT); other parameters still pass."""
    with WatchedServer(SIMPLE_ONLY) as s:
        for key in ("triton_x", "triton_enable_empty_final_response", "triton_"):
            code, body = raw_http(s, "/v2/models/simple/infer", {**SIMPLE_JSON, "parameters": {key: True}})
            assert code == 400 and json.loads(body)["error"].startswith(HTTP_TRITON_PREFIX), (key, body)
        code, body = raw_http(s, "/v2/models/simple/infer", {**SIMPLE_JSON, "parameters": {"tritonx": 1, "x": "y"}})
        assert code == 200, body
        with grpc.insecure_channel(s.url("grpc")) as ch:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
            for key in ("triton_x", "triton_final_response", "triton_"):
                with pytest.raises(grpc.RpcError) as e:
                    stub.ModelInfer(grpc_simple_request({key: True}), timeout=30)
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
                assert e.value.details().startswith(GRPC_TRITON_PREFIX), e.value.details()
            r = stub.ModelInfer(grpc_simple_request({"triton_enable_empty_final_response": True, "x": "y"}),
                                timeout=30)
            assert r.model_name == "simple"


RESERVED_HEADERS = ("sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers",
                    "binary_data_output", "triton_x", "triton_enable_empty_final_response")


@pytest.fixture(scope="module")
def echo_repo():
    d = tempfile.mkdtemp(prefix="nereid_sec_fwd_")
    os.makedirs(os.path.join(d, "echo", "1"))
    with open(os.path.join(d, "echo", "config.pbtxt"), "w") as f:
        f.write('name: "echo"\nbackend: "echo_params"\nmax_batch_size: 0\n'
                'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n')
    shutil.copy(os.path.join(os.environ["NEREID_TEST_BACKEND_DIR"], "echo_params", "libtriton_echo_params.so"),
                os.path.join(d, "echo"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_reserved_forwarded_headers_are_refused(echo_repo):
    """A header the forward pattern matches but named like a reserved
    parameter is refused with Triton's sentence (HTTP 400, gRPC
    INVALID_ARGUMENT), on unary and streaming gRPC; other matching headers
    still reach the model."""
    flags = ["--allow-metrics=false", "--http-header-forward-pattern=^(my_|triton_|sequence_|priority|timeout|"
             "headers|binary_data_output)", "--grpc-header-forward-pattern=^(my_|triton_|sequence_|priority|"
             "timeout|headers|binary_data_output)"]
    with WatchedServer(flags, repo=echo_repo) as s:
        x = httpclient.InferInput("INPUT0", [1], "FP32")
        x.set_data_from_numpy(np.ones(1, np.float32), binary_data=False)
        with http(s) as c:
            r = c.infer("echo", [x], headers={"my_header": "v"})
            assert r.get_response()["parameters"]["my_header"] == "v"
            for name in RESERVED_HEADERS:
                with pytest.raises(InferenceServerException) as e:
                    c.infer("echo", [x], headers={"my_header": "v", name: "1"})
                assert e.value.status() == "400", (name, e.value.status())
                want = f"Header '{name}' is reserved for Triton usage and cannot be forwarded."
                assert e.value.message().startswith(want), e.value.message()
        g = grpcclient.InferInput("INPUT0", [1], "FP32")
        g.set_data_from_numpy(np.ones(1, np.float32))
        with grpc_client(s) as c:
            r = c.infer("echo", [g], headers={"my_header": "v"}, client_timeout=30)
            assert r.get_response().parameters["my_header"].string_param == "v"
            for name in RESERVED_HEADERS:
                with pytest.raises(InferenceServerException) as e:
                    c.infer("echo", [g], headers={name: "1"}, client_timeout=30)
                assert e.value.status() == "StatusCode.INVALID_ARGUMENT", (name, e.value.status())
                want = f"Header '{name}' is reserved for Triton usage and cannot be forwarded."
                assert e.value.message().startswith(want), e.value.message()
            import queue
            got = queue.Queue()
            c.start_stream(lambda result, error: got.put((result, error)), headers={"priority": "1"})
            try:
                c.async_stream_infer("echo", [g])
                result, error = got.get(timeout=30)
            finally:
                c.stop_stream()
            assert result is None and error is not None
            assert str(error.message()).startswith("Header 'priority' is reserved for Triton usage"), error


# ---- --http-restricted-api on the cloud endpoints --------------------------------------


def endpoint(s, name):
    return types.SimpleNamespace(port=s.ports[name])


SIMPLE_BODY = SIMPLE_JSON
RESTRICT = "--http-restricted-api=inference:infer-key=yes"
RESTRICTED_MSG = "This API is restricted, expecting header 'infer-key'"


def test_sagemaker_invocations_and_mme_invoke_hold_the_inference_restriction(tmp_path):
    """/invocations (a5b45da57) and /models/<m>/invoke (b58e983ec) need the
    inference group's header, checked before the method."""
    url = archive(tmp_path, "abc")
    flags = ["--model-control-mode=explicit", "--load-model=simple", "--allow-metrics=false",
             "--allow-sagemaker=true", "--sagemaker-port=0", RESTRICT]
    with WatchedServer(flags, env=sm_env(SAGEMAKER_TRITON_DEFAULT_MODEL_NAME="simple")) as s:
        sm = endpoint(s, "sagemaker")
        for method, body in (("POST", SIMPLE_BODY), ("GET", None)):
            code, _, reply = call(sm, "/invocations", body, method=method)
            assert code == 403 and json.loads(reply)["error"] == RESTRICTED_MSG, (method, reply)
        code, _, reply = call(sm, "/invocations", SIMPLE_BODY, {"infer-key": "yes"})
        assert code == 200, reply
        assert call(sm, "/invocations", SIMPLE_BODY, {"infer-key": "no"})[0] == 403
        # The model repository group is open: the MME load goes through.
        code, _, reply = call(sm, "/models", {"model_name": "abc", "url": url})
        assert code == 200, reply
        for method, body in (("POST", IDENTITY), ("GET", None)):
            code, _, reply = call(sm, "/models/abc/invoke", body, method=method)
            assert code == 403 and json.loads(reply)["error"] == RESTRICTED_MSG, (method, reply)
        code, _, reply = call(sm, "/models/abc/invoke", IDENTITY, {"infer-key": "yes"})
        assert code == 200, reply
        assert call(sm, "/ping")[0] == 200
        # The KServe endpoint keeps the same rule.
        code, body = raw_http(s, "/v2/models/simple/infer", SIMPLE_BODY)
        assert code == 403, body


def test_vertex_predict_holds_the_restriction_and_redirects_only_read():
    """The predict route needs the inference group's header (6b0539b92);
    a redirect reaches shared memory status and the repository index but
    not register, unregister, load or unload (403, d8f1616f6)."""
    flags = ["--model-control-mode=explicit", "--load-model=simple", "--allow-metrics=false",
             "--vertex-ai-default-model=simple", "--allow-client-shm=true", RESTRICT]
    with WatchedServer(flags, env=vertex_env(0)) as s:
        v = endpoint(s, "vertex_ai")
        for method, body in (("POST", SIMPLE_BODY), ("GET", None)):
            code, _, reply = call(v, "/v1/predict", body, method=method)
            assert code == 403 and json.loads(reply)["error"] == RESTRICTED_MSG, (method, reply)
        code, _, reply = call(v, "/v1/predict", SIMPLE_BODY, {"infer-key": "yes"})
        assert code == 200, reply
        code, _, reply = call(v, "/v1/predict", SIMPLE_BODY, {REDIRECT: "v2/models/simple/infer"})
        assert code == 403, reply
        code, _, reply = call(v, "/v1/predict", SIMPLE_BODY, {REDIRECT: "v2/models/simple/infer", "infer-key": "yes"})
        assert code == 200, reply
        for route, body in (("v2/systemsharedmemory/region/r/register", {"key": "/k", "byte_size": 8}),
                            ("v2/systemsharedmemory/region/r/unregister", None),
                            ("v2/systemsharedmemory/unregister", None),
                            ("v2/cudasharedmemory/region/r/register", {"raw_handle": {"b64": ""}, "byte_size": 8}),
                            ("v2/cudasharedmemory/unregister", None),
                            ("v2/repository/models/simple/unload", {}),
                            ("v2/repository/models/simple/load", {})):
            code, _, reply = call(v, "/v1/predict", body if body is not None else b"", {REDIRECT: route})
            assert code == 403, (route, reply)
        assert call(v, "/v1/predict", b"", {REDIRECT: "v2/systemsharedmemory/status"})[0] == 200
        assert call(v, "/v1/predict", b"", {REDIRECT: "v2/cudasharedmemory/status"})[0] == 200
        code, _, reply = call(v, "/v1/predict", b"", {REDIRECT: "v2/repository/index"})
        assert code == 200 and "simple" in {m["name"] for m in json.loads(reply)}, reply
        # Nothing the refused redirects asked for happened.
        assert call(v, "/v1/predict", SIMPLE_BODY, {"infer-key": "yes"})[0] == 200
        assert json.loads(call(v, "/v1/predict", b"", {REDIRECT: "v2/systemsharedmemory/status"})[2]) == []
