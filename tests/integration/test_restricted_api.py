"""Limiting endpoint access: --http-restricted-api and
--grpc-restricted-protocol, the groups each route and RPC belongs to, the
answers without the header (HTTP 403, gRPC UNAVAILABLE, with Triton's
messages), and bad flag values.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and NEREID_EXAMPLES set
(see tests/CMakeLists.txt).
"""

import json
import struct
import urllib.error
import urllib.request

import pytest

from test_nereid_cli import BACKENDS, EXAMPLES, Server, common, run, listening_ports
from test_tracing import stubs


@pytest.fixture(scope="module")
def srv():
    s = Server([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-metrics=false",
                "--http-port=0", "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                "--http-restricted-api=model-repository,model-config,shared-memory:Admin-Key=s3cret",
                "--http-restricted-api=inference:infer-key=go",
                "--grpc-restricted-protocol=model-repository,statistics:admin-key=s3cret",
                "--grpc-restricted-protocol=health:probe=yes"])
    lines = s.wait_ready()
    ports = listening_ports(lines)
    s.http, s.grpc = ports["http"], ports["grpc"]
    yield s
    assert s.stop() == 0, s.text()


def http(s, method, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{s.http}{path}", data=data, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


INFER = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "FP32", "data": [1]}]}


def test_http_restricted_groups_need_their_header(srv):
    admin = [("POST", "/v2/repository/index", None), ("GET", "/v2/models/simple/config", None),
             ("GET", "/v2/models/simple/versions/1/config", None), ("GET", "/v2/systemsharedmemory/status", None),
             ("GET", "/v2/cudasharedmemory/status", None),
             ("POST", "/v2/repository/models/simple/load", {})]
    for method, path, body in admin:
        code, text = http(srv, method, path, body)
        assert code == 403, (path, code, text)
        assert json.loads(text) == {"error": "This API is restricted, expecting header 'admin-key'"}, text
        # A wrong value is refused the same way; the right one (any case of the name) goes through.
        assert http(srv, method, path, body, {"Admin-Key": "nope"})[0] == 403, path
        code, text = http(srv, method, path, body, {"ADMIN-KEY": "s3cret"})
        want = 503 if path.endswith("/load") else 200  # the handler's own answer (no explicit model control)
        assert code == want, (path, code, text)
    for path in ("/v2/models/identity_fp32/infer", "/v2/models/identity_fp32/versions/1/infer"):
        code, text = http(srv, "POST", path, INFER)
        assert code == 403 and b"expecting header 'infer-key'" in text, text
        assert http(srv, "POST", path, INFER, {"infer-key": "go"})[0] == 200
    code, text = http(srv, "POST", "/v2/models/identity_fp32/generate", {"INPUT0": [1]})
    assert code == 403 and b"infer-key" in text, text
    # The other groups stay open.
    for path in ("/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/simple", "/v2/models/simple/ready",
                 "/v2/models/stats", "/v2/models/simple/stats", "/v2/trace/setting", "/v2/logging"):
        assert http(srv, "GET", path)[0] == 200, path


def test_grpc_restricted_groups_need_their_metadata(srv):
    import grpc

    pb, pbg = stubs()
    with grpc.insecure_channel(f"127.0.0.1:{srv.grpc}") as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        calls = [(stub.RepositoryIndex, pb.RepositoryIndexRequest(), "admin-key", "s3cret"),
                 (stub.ModelStatistics, pb.ModelStatisticsRequest(name="simple"), "admin-key", "s3cret"),
                 (stub.ServerLive, pb.ServerLiveRequest(), "probe", "yes"),
                 (stub.ModelReady, pb.ModelReadyRequest(name="simple"), "probe", "yes")]
        for rpc, msg, key, value in calls:
            with pytest.raises(grpc.RpcError) as e:
                rpc(msg, timeout=30)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
            assert e.value.details() == f"This protocol is restricted, expecting header 'triton-grpc-protocol-{key}'"
            with pytest.raises(grpc.RpcError) as e:
                rpc(msg, timeout=30, metadata=[(f"triton-grpc-protocol-{key}", "wrong")])
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
            rpc(msg, timeout=30, metadata=[(f"triton-grpc-protocol-{key}", value)])
        # Open groups; the HTTP restrictions do not apply over gRPC.
        stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30)
        stub.ModelConfig(pb.ModelConfigRequest(name="simple"), timeout=30)
        r = pb.ModelInferRequest(model_name="identity_fp32")
        t = r.inputs.add()
        t.name, t.datatype = "INPUT0", "FP32"
        t.shape.extend([1, 1])
        r.raw_input_contents.append(struct.pack("<f", 1))
        stub.ModelInfer(r, timeout=30)
        # grpc.health.v1 Check belongs to the health group (raw bytes: an empty request, SERVING = 1).
        check = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as e:
            check(b"", timeout=30)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert check(b"", timeout=30, metadata=[("triton-grpc-protocol-probe", "yes")]) == b"\x08\x01"


@pytest.mark.parametrize("flag, why", [
    ("--http-restricted-api=inferences:k=v", "unknown API 'inferences'"),
    ("--http-restricted-api=inference", "expected <api>,<api>,...:<key>=<value>"),
    ("--http-restricted-api=inference:=v", "the header key is empty"),
    ("--grpc-restricted-protocol=health:k", "expected <api>,<api>,...:<key>=<value>"),
])
def test_bad_restriction_values(flag, why):
    code, _, err = run([*common(), flag])
    assert code == 2 and why in err, err


def test_an_api_in_two_groups_is_refused():
    code, _, err = run([*common(), "--http-restricted-api=inference,health:a=1", "--http-restricted-api=health:b=2"])
    assert code == 2 and "'health' is already in another restricted group" in err, err
