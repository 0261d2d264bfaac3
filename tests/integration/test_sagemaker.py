"""The SageMaker endpoint (--allow-sagemaker), single-model mode, as
tritonserver serves it for SageMaker real-time endpoints: GET /ping
(readiness, or liveness with SAGEMAKER_TRITON_PING_MODE=live), POST
/invocations on SAGEMAKER_TRITON_DEFAULT_MODEL_NAME through the infer,
generate or generate_stream route (SAGEMAKER_TRITON_INFERENCE_TYPE),
binary data framed by the sagemaker-triton Content-Type both ways; the
refusals (other routes and methods, bad framing, multi-model /models, bad
settings) and --sagemaker-safe-port-range.

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

from test_nereid_cli import BACKENDS, EXAMPLES, NEREID, Server, running
from test_vertex_ai import call, free_port

BINARY = "application/vnd.sagemaker-triton.binary+json;json-header-size="
X = list(range(16))
SIMPLE = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": X},
                     {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]}


def sm_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGEMAKER_")}
    env.update(extra)
    return env


@contextlib.contextmanager
def sagemaker(*flags, **env):
    port = free_port()
    s = Server([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-http=false",
                "--allow-grpc=false", "--allow-metrics=false", "--allow-sagemaker=true", f"--sagemaker-port={port}",
                "--sagemaker-thread-count=2", *flags], env=sm_env(**env))
    with running(s) as lines:
        s.lines, s.port = lines, port
        yield s


def test_ping_and_invocations_on_the_default_model():
    with sagemaker(SAGEMAKER_TRITON_DEFAULT_MODEL_NAME="simple") as s:
        assert f"nereid: SageMaker listening on 0.0.0.0:{s.port} (/invocations: infer of model 'simple')\n" in s.lines
        assert call(s, "/ping")[0] == 200
        code, headers, body = call(s, "/invocations", SIMPLE)
        assert code == 200 and headers["Content-Type"] == "application/json"
        out = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
        assert out["OUTPUT0"] == [x + 1 for x in X] and out["OUTPUT1"] == [x - 1 for x in X]
        assert call(s, "/invocations", method="GET")[0] == 405
        assert call(s, "/v2/health/ready")[0] == 400
        code, _, body = call(s, "/models", b"{}")
        assert code == 501 and "multi-model" in json.loads(body)["error"]
        assert call(s, "/models/abc/invoke", b"{}")[0] == 501


def test_binary_data_both_ways():
    with sagemaker(SAGEMAKER_TRITON_DEFAULT_MODEL_NAME="simple") as s:
        header = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
                              "parameters": {"binary_data_size": 64}},
                             {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}],
                  "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
        h = json.dumps(header).encode()
        body = h + struct.pack("<16i", *X)
        code, headers, reply = call(s, "/invocations", body, {"Content-Type": BINARY + str(len(h))})
        assert code == 200, reply
        assert "Inference-Header-Content-Length" not in headers
        assert headers["Content-Type"].startswith(BINARY)
        n = int(headers["Content-Type"][len(BINARY):])
        assert json.loads(reply[:n])["outputs"][0]["parameters"]["binary_data_size"] == 64
        assert list(struct.unpack("<16i", reply[n:n + 64])) == [x + 1 for x in X]
        for bad in ("text/" + BINARY + str(len(h)), BINARY + "x" + str(len(h)), BINARY + "-5",
                    BINARY + str(len(body) + 1)):
            assert call(s, "/invocations", body, {"Content-Type": bad})[0] == 400, bad


def test_liveness_ping_and_the_generate_routes():
    with sagemaker(SAGEMAKER_TRITON_DEFAULT_MODEL_NAME="identity_fp32", SAGEMAKER_TRITON_PING_MODE="live",
                   SAGEMAKER_TRITON_INFERENCE_TYPE="generate") as s:
        assert call(s, "/ping")[0] == 200
        code, _, body = call(s, "/invocations", {"INPUT0": [1.5, 2]})
        assert code == 200 and json.loads(body)["OUTPUT0"] == [1.5, 2]
    with sagemaker(SAGEMAKER_TRITON_DEFAULT_MODEL_NAME="square_int32",
                   SAGEMAKER_TRITON_INFERENCE_TYPE="generate_stream") as s:
        code, headers, body = call(s, "/invocations", {"IN": 3})
        assert code == 200 and headers["Content-Type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")]
        assert [e["OUT"] for e in events] == [3, 3, 3]


def test_an_unknown_default_model_fails_each_invocation():
    with sagemaker() as s:
        code, _, body = call(s, "/invocations", SIMPLE)
        assert code == 404 and "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" in json.loads(body)["error"]


@pytest.mark.parametrize("flags,env,code,message", [
    ([], {"SAGEMAKER_TRITON_INFERENCE_TYPE": "classify"}, 1, "Must be one of: infer, generate, generate_stream"),
    ([], {"SAGEMAKER_TRITON_PING_MODE": "sometimes"}, 1, "SAGEMAKER_TRITON_PING_MODE must be ready or live"),
    (["--sagemaker-safe-port-range=9000-9100", "--allow-http=true", "--http-port=8000"], {}, 2,
     "The server cannot listen to HTTP requests at port 8000, allowed port range is [9000, 9100]"),
    (["--sagemaker-safe-port-range=9100-9000"], {}, 2, "--sagemaker-safe-port-range"),
    (["--sagemaker-thread-count=0"], {}, 2, "--sagemaker-thread-count"),
])
def test_bad_sagemaker_settings_stop_the_server(flags, env, code, message):
    p = subprocess.run([NEREID, f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}",
                        "--allow-http=false", "--allow-grpc=false", "--allow-metrics=false", "--allow-sagemaker=true",
                        f"--sagemaker-port={free_port()}", *flags], env=sm_env(**env), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == code and message in p.stderr, (p.returncode, p.stderr)


def test_safe_port_range_lets_ports_inside_it_through():
    lo = free_port()
    with sagemaker("--allow-grpc=true", f"--grpc-port={lo}", "--grpc-address=127.0.0.1",
                   f"--sagemaker-safe-port-range={lo}-{lo}", SAGEMAKER_TRITON_DEFAULT_MODEL_NAME="simple") as s:
        assert call(s, "/ping")[0] == 200
