"""The Vertex AI prediction endpoint (--allow-vertex-ai), as tritonserver
serves it in a Vertex AI container: AIP_MODE=PREDICTION turns it on and
HTTP/REST and gRPC off; AIP_HTTP_PORT, AIP_HEALTH_ROUTE and
AIP_PREDICT_ROUTE place it. The health route, inference on the default
model (JSON, and binary data framed by the vertex-ai-triton Content-Type),
redirects to KServe routes with X-Vertex-Ai-Triton-Redirect, and the
refusals: other routes, other methods, bad binary framing, a missing
environment, a default model that is not there.

Requests to the Vertex AI routes are hand-built (call()): they are not
KServe v2 routes, and tritonclient cannot send them (nor a redirect
header to a route of its own). The HTTP endpoint beside it is asked
through tritonclient.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and NEREID_EXAMPLES set
(see tests/CMakeLists.txt).
"""
import contextlib
import json
import os
import struct
import subprocess
import urllib.error
import urllib.request

import pytest
import tritonclient.http as httpclient

from test_nereid_cli import BACKENDS, EXAMPLES, NEREID, Server, listening_ports, running

BINARY = "application/vnd.vertex-ai-triton.binary+json;json-header-size="
REDIRECT = "X-Vertex-Ai-Triton-Redirect"


def vertex_env(port, **extra):
    env = dict(os.environ, AIP_MODE="PREDICTION", AIP_HTTP_PORT=str(port), AIP_PREDICT_ROUTE="/v1/predict",
               AIP_HEALTH_ROUTE="/v1/health")
    env.update(extra)
    return env


@contextlib.contextmanager
def vertex(*flags, **env):
    """A prediction container's nereid, on the port the kernel picks
    (AIP_HTTP_PORT=0) and reads back from its start-up lines."""
    s = Server([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-metrics=false",
                *flags], env=vertex_env(0, **env))
    with running(s) as lines:
        s.lines, s.port = lines, listening_ports(lines)["vertex_ai"]
        yield s


def call(s, path, body=None, headers=None, method=None):
    """A hand-built request to s.port: (status, headers, body bytes)."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{s.port}{path}", data=data, headers=headers or {},
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


X = list(range(16))
SIMPLE = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": X},
                     {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}


def test_prediction_container_serves_vertex_routes_only():
    with vertex("--vertex-ai-default-model=simple") as s:
        ports = listening_ports(s.lines)
        assert "http" not in ports and "grpc" not in ports, s.text()
        assert f"nereid: Vertex AI listening on 0.0.0.0:{s.port}\n" in s.lines
        code, _, _ = call(s, "/v1/health")
        assert code == 200
        assert call(s, "/v1/health", b"", method="POST")[0] == 405
        code, _, body = call(s, "/v1/predict", SIMPLE)
        out = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
        assert code == 200 and out["OUTPUT0"] == [x + 1 for x in X] and out["OUTPUT1"] == [x - 1 for x in X]
        assert call(s, "/v1/predict", method="GET")[0] == 405
        # KServe routes only through a redirect (hand-built to see the 400).
        assert call(s, "/v2/health/ready")[0] == 400
        assert call(s, "/v1/other", b"{}")[0] == 400


def test_binary_data_framed_by_the_content_type():
    with vertex("--vertex-ai-default-model=simple") as s:
        header = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                              "parameters": {"binary_data_size": 64}},
                             {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}],
                  "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}},
                              {"name": "OUTPUT1", "parameters": {"binary_data": False}}]}
        h = json.dumps(header).encode()
        body = h + struct.pack("<16i", *X)
        code, headers, reply = call(s, "/v1/predict", body, {"Content-Type": BINARY + str(len(h))})
        assert code == 200, reply
        n = int(headers["Inference-Header-Content-Length"])
        outs = json.loads(reply[:n])["outputs"]
        assert outs[0]["name"] == "OUTPUT0" and outs[0]["parameters"]["binary_data_size"] == 64
        assert list(struct.unpack("<16i", reply[n:n + 64])) == [x + 1 for x in X]
        for bad in ("additional-string/" + BINARY + str(len(h)), BINARY + "additional-string" + str(len(h)),
                    BINARY + "-123", BINARY + str(len(body) + 1)):
            code, _, reply = call(s, "/v1/predict", body, {"Content-Type": bad})
            assert code == 400, (bad, reply)
            assert "error" in json.loads(reply)


def test_redirects_reach_the_kserve_routes():
    with vertex("--vertex-ai-default-model=simple") as s:
        def redirect(route, body=b""):
            return call(s, "/v1/predict", body, {REDIRECT: route})

        code, _, body = redirect("v2/models/identity_fp32/infer",
                                 {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]})
        assert code == 200 and json.loads(body)["outputs"][0]["data"] == [1, 2]
        code, _, body = redirect("v2/models/simple")
        assert code == 200 and json.loads(body)["name"] == "simple"
        code, _, body = redirect("v2/models/simple/versions/1/config")
        assert code == 200 and json.loads(body)["name"] == "simple"
        assert redirect("v2/models/simple/ready")[0] == 200
        code, _, body = redirect("v2/models/simple/stats")
        assert code == 200 and json.loads(body)["model_stats"][0]["name"] == "simple"
        assert redirect("v2/models/stats")[0] == 200
        code, _, body = redirect("v2")
        assert code == 200 and "extensions" in json.loads(body)
        assert redirect("v2/health/live")[0] == 200
        code, _, body = redirect("metrics")
        assert code == 200 and b"nv_inference_count" in body
        code, _, body = redirect("v2/repository/index")
        assert code == 200 and {m["name"] for m in json.loads(body)} >= {"simple", "identity_fp32"}
        assert redirect("v2/systemsharedmemory/status")[0] == 200
        # Not among the routes a redirect reaches, and only POST redirects.
        for route in ("v2/logging", "v2/trace/setting", "v2/models/simple/generate", "v3/models", ""):
            assert redirect(route)[0] == 400, route
        assert call(s, "/v1/predict", headers={REDIRECT: "v2/health/ready"}, method="GET")[0] == 405


def test_flag_without_the_container_environment_keeps_the_other_endpoints():
    env = dict(os.environ, AIP_PREDICT_ROUTE="/p", AIP_HEALTH_ROUTE="/h")
    env.pop("AIP_MODE", None)
    s = Server([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-metrics=false",
                "--allow-grpc=false", "--http-port=0", "--http-address=127.0.0.1",
                "--allow-vertex-ai=true", "--vertex-ai-port=0", "--vertex-ai-default-model=simple",
                "--vertex-ai-thread-count=1"], env=env)
    try:
        ports = listening_ports(s.wait_ready())
        assert "http" in ports and "vertex_ai" in ports and "grpc" not in ports, s.text()
        with httpclient.InferenceServerClient(f"127.0.0.1:{ports['http']}") as c:
            assert c.is_server_live()
        s.port = ports["vertex_ai"]
        assert call(s, "/h")[0] == 200
        assert s.stop() == 0, s.text()
    finally:
        s.close()


@pytest.mark.parametrize("flags,env,code,message", [
    ([], {"AIP_PREDICT_ROUTE": ""}, 1, "AIP_PREDICT_ROUTE is not defined for Vertex AI endpoint"),
    ([], {"AIP_HEALTH_ROUTE": ""}, 1, "AIP_HEALTH_ROUTE is not defined for Vertex AI endpoint"),
    ([], {}, 1, "Expect the model repository contains only a single model if default model is not specified"),
    (["--vertex-ai-default-model=nope"], {}, 1, "Expect the default model 'nope' is loaded"),
    ([], {"AIP_HTTP_PORT": "eighty"}, 2, "AIP_HTTP_PORT: expected a port"),
    (["--vertex-ai-thread-count=0"], {}, 2, "--vertex-ai-thread-count"),
])
def test_bad_vertex_settings_stop_the_server(flags, env, code, message):
    # 300 s: it loads and unloads every example; a TSan build beside
    # other tests on 2 cores took more than 60 s.
    e = vertex_env(0, **env)
    p = subprocess.run([NEREID, f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}",
                        "--allow-metrics=false", *flags], env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == code and message in p.stderr, (p.returncode, p.stderr)
