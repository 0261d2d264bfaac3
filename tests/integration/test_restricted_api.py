"""Limiting endpoint access: --http-restricted-api and
--grpc-restricted-protocol, the groups each route and RPC belongs to, the
answers without the header (HTTP 403, gRPC UNAVAILABLE, with Triton's
messages), and bad flag values.

Requests go through Triton's own clients, tritonclient.http and
tritonclient.grpc (their headers= argument carries the keys); only
generate and grpc.health.v1, which tritonclient has no call for, are sent
by hand.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and NEREID_EXAMPLES set
(see tests/CMakeLists.txt).
"""

import json
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from test_nereid_cli import BACKENDS, EXAMPLES, Server, common, run, listening_ports


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


def refused(call, status, *args, **kwargs):
    """The InferenceServerException call(*args, **kwargs) raises, with
    status `status`."""
    with pytest.raises(InferenceServerException) as e:
        call(*args, **kwargs)
    assert e.value.status() == status, (call.__name__, e.value)
    return e.value


def test_http_restricted_groups_need_their_header(srv):
    c = httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}")
    try:
        admin = [(c.get_model_repository_index, ()), (c.get_model_config, ("simple",)),
                 (c.get_model_config, ("simple", "1")), (c.get_system_shared_memory_status, ()),
                 (c.get_cuda_shared_memory_status, ()), (c.load_model, ("simple",))]
        for call, args in admin:
            e = refused(call, "403", *args)
            assert e.message() == "This API is restricted, expecting header 'admin-key'", e
            # A wrong value is refused the same way; the right one (any case of the name) goes through.
            refused(call, "403", *args, headers={"Admin-Key": "nope"})
            if call == c.load_model:  # the handler's own answer (no explicit model control)
                refused(call, "503", *args, headers={"ADMIN-KEY": "s3cret"})
            else:
                call(*args, headers={"ADMIN-KEY": "s3cret"})
        x = httpclient.InferInput("INPUT0", [1, 1], "FP32")
        x.set_data_from_numpy(np.ones((1, 1), np.float32), binary_data=False)
        for version in ("", "1"):
            e = refused(c.infer, "403", "identity_fp32", [x], model_version=version)
            assert "expecting header 'infer-key'" in e.message(), e
            r = c.infer("identity_fp32", [x], model_version=version, headers={"infer-key": "go"})
            assert r.as_numpy("OUTPUT0").tolist() == [[1.0]]
        # The other groups stay open.
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("simple")
        assert c.get_server_metadata()["name"] == "triton"
        assert c.get_model_metadata("simple")["name"] == "simple"
        assert c.get_inference_statistics()["model_stats"]
        assert c.get_inference_statistics("simple")["model_stats"][0]["name"] == "simple"
        assert "trace_level" in c.get_trace_settings()
        assert "log_verbose_level" in c.get_log_settings()
    finally:
        c.close()
    # By hand: tritonclient has no call for the generate extension.
    req = urllib.request.Request(f"http://127.0.0.1:{srv.http}/v2/models/identity_fp32/generate",
                                 data=json.dumps({"INPUT0": [1]}).encode(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 403 and b"infer-key" in e.value.read()


def test_grpc_restricted_groups_need_their_metadata(srv):
    import grpc

    c = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc}")
    try:
        calls = [(c.get_model_repository_index, (), "admin-key", "s3cret"),
                 (c.get_inference_statistics, ("simple",), "admin-key", "s3cret"),
                 (c.is_server_live, (), "probe", "yes"),
                 (c.is_model_ready, ("simple",), "probe", "yes")]
        for call, args, key, value in calls:
            e = refused(call, "StatusCode.UNAVAILABLE", *args, client_timeout=30)
            assert e.message() == f"This protocol is restricted, expecting header 'triton-grpc-protocol-{key}'"
            refused(call, "StatusCode.UNAVAILABLE", *args, client_timeout=30,
                    headers={f"triton-grpc-protocol-{key}": "wrong"})
            call(*args, client_timeout=30, headers={f"triton-grpc-protocol-{key}": value})
        # Open groups; the HTTP restrictions do not apply over gRPC.
        assert c.get_server_metadata(client_timeout=30).name == "triton"
        assert c.get_model_config("simple", client_timeout=30).config.name == "simple"
        x = grpcclient.InferInput("INPUT0", [1, 1], "FP32")
        x.set_data_from_numpy(np.ones((1, 1), np.float32))
        assert c.infer("identity_fp32", [x], client_timeout=30).as_numpy("OUTPUT0").tolist() == [[1.0]]
    finally:
        c.close()
    # grpc.health.v1 Check belongs to the health group. By hand: tritonclient
    # has no call for the gRPC health service (raw bytes: an empty request,
    # SERVING = 1).
    with grpc.insecure_channel(f"127.0.0.1:{srv.grpc}") as ch:
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
