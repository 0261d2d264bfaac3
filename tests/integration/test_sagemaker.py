"""The SageMaker endpoint (--allow-sagemaker), single-model mode, as
tritonserver serves it for SageMaker real-time endpoints: GET /ping
(readiness, or liveness with SAGEMAKER_TRITON_PING_MODE=live), POST
/invocations on SAGEMAKER_TRITON_DEFAULT_MODEL_NAME through the infer,
generate or generate_stream route (SAGEMAKER_TRITON_INFERENCE_TYPE),
binary data framed by the sagemaker-triton Content-Type both ways; the
refusals (other routes and methods, bad framing, bad
settings) and --sagemaker-safe-port-range.

Requests to the SageMaker routes (/ping, /invocations, /models) are
hand-built (call() of test_vertex_ai): they are not KServe v2 routes, and
tritonclient cannot send them. The gRPC endpoint beside it is asked
through tritonclient.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and NEREID_EXAMPLES set
(see tests/CMakeLists.txt).
"""
import contextlib
import json
import os
import struct
import subprocess

import pytest
import tritonclient.grpc as grpcclient

from test_nereid_cli import BACKENDS, EXAMPLES, NEREID, Server, listening_ports, running
from test_vertex_ai import call

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
    """nereid with only the SageMaker endpoint on, on the port the kernel
    picks (--sagemaker-port=0), read back from its start-up lines."""
    s = Server([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-http=false",
                "--allow-grpc=false", "--allow-metrics=false", "--allow-sagemaker=true", "--sagemaker-port=0",
                "--sagemaker-thread-count=2", *flags], env=sm_env(**env))
    with running(s) as lines:
        s.lines, s.port = lines, listening_ports(lines)["sagemaker"]
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
        assert call(s, "/v2/health/ready")[0] == 400  # no KServe routes here: hand-built to see the 400
        # Multi-model routes need explicit model control (test_mme_* below).
        code, _, body = call(s, "/models", {"model_name": "m", "url": EXAMPLES})
        assert code == 400 and "EXPLICIT" in json.loads(body)["error"], body
        assert call(s, "/models/abc/invoke", b"{}")[0] == 404


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
    # 300 s: it loads and unloads every example; a TSan build beside
    # other tests on 2 cores took more than 60 s.
    p = subprocess.run([NEREID, f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}",
                        "--allow-http=false", "--allow-grpc=false", "--allow-metrics=false", "--allow-sagemaker=true",
                        "--sagemaker-port=0", *flags], env=sm_env(**env), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == code and message in p.stderr, (p.returncode, p.stderr)


def test_safe_port_range_lets_ports_inside_it_through():
    # Port 0 (the kernel's pick, so no other test can hold it) at both ends
    # of a range: the bounds are inclusive.
    with sagemaker("--allow-grpc=true", "--grpc-port=0", "--grpc-address=127.0.0.1",
                   "--sagemaker-safe-port-range=0-0", SAGEMAKER_TRITON_DEFAULT_MODEL_NAME="simple") as s:
        ports = listening_ports(s.lines)
        assert "grpc" in ports, s.text()
        with grpcclient.InferenceServerClient(f"127.0.0.1:{ports['grpc']}") as c:
            assert c.is_server_ready() and c.is_model_ready("simple")
        assert call(s, "/ping")[0] == 200


# ---- multi-model endpoints (MME) -------------------------------------------

IDENTITY = {"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32", "data": [1.5, 2.5, 3.5]}]}


@contextlib.contextmanager
def mme(tmp_path, *flags):
    """An MME server: explicit model control over an empty repository."""
    empty = tmp_path / "empty"
    empty.mkdir()
    s = Server([f"--model-repository={empty}", f"--backend-directory={BACKENDS}", "--model-control-mode=explicit",
                "--allow-http=false", "--allow-grpc=false", "--allow-metrics=false", "--allow-sagemaker=true",
                "--sagemaker-port=0", *flags], env=sm_env())
    with running(s) as lines:
        s.lines, s.port = lines, listening_ports(lines)["sagemaker"]
        yield s


def archive(tmp_path, name, folder="identity_fp32", config=None):
    """<tmp>/<name>/<folder>: the example identity model, as SageMaker
    unpacks a model archive."""
    import shutil
    root = tmp_path / name
    shutil.copytree(os.path.join(EXAMPLES, "identity_fp32"), root / folder)
    text = (root / folder / "config.pbtxt").read_text().replace('name: "identity_fp32"\n', "")
    (root / folder / "config.pbtxt").write_text(config if config is not None else text)
    return str(root)


def test_mme_load_list_invoke_unload(tmp_path):
    url = archive(tmp_path, "abc")
    with mme(tmp_path) as s:
        assert call(s, "/models")[0] == 200 and json.loads(call(s, "/models")[2]) == {"models": []}
        code, _, body = call(s, "/models", {"model_name": "abc", "url": url})
        assert code == 200, body
        assert json.loads(call(s, "/models")[2]) == {"models": [{"modelName": "abc", "modelUrl": url}]}
        code, _, body = call(s, "/models/abc")
        assert code == 200 and json.loads(body) == {"modelName": "abc", "modelUrl": url}
        code, _, body = call(s, "/models/abc/invoke", IDENTITY)
        assert code == 200, body
        assert json.loads(body)["outputs"][0]["data"] == [1.5, 2.5, 3.5]
        # The same name again: its repository is registered already.
        code, _, body = call(s, "/models", {"model_name": "abc", "url": url})
        assert code == 409, body
        assert call(s, "/models/nope")[0] == 404
        assert call(s, "/models/nope/invoke", IDENTITY)[0] == 404
        assert call(s, "/models/nope", method="DELETE")[0] == 404
        assert call(s, "/models/abc/invoke", method="GET")[0] == 405
        code, _, body = call(s, "/models/abc", method="DELETE")
        assert code == 200, body
        assert call(s, "/models/abc")[0] == 404
        assert call(s, "/models/abc/invoke", IDENTITY)[0] == 404
        assert json.loads(call(s, "/models")[2]) == {"models": []}
        # Unregistered: the same archive loads again.
        assert call(s, "/models", {"model_name": "abc", "url": url})[0] == 200
        assert call(s, "/models/abc/invoke", IDENTITY)[0] == 200


def test_mme_target_model_header_names_the_model(tmp_path):
    url = archive(tmp_path, "h1")
    target = {"X-Amzn-SageMaker-Target-Model": "model.tar.gz"}
    with mme(tmp_path) as s:
        code, _, body = call(s, "/models", {"model_name": "h1", "url": url}, target)
        assert code == 200, body
        code, _, body = call(s, "/models/h1/invoke", IDENTITY, target)
        assert code == 200 and json.loads(body)["model_name"] == "model.tar.gz", body
        assert json.loads(call(s, "/models")[2])["models"][0]["modelName"] == "h1"
        assert call(s, "/models/h1", method="DELETE", headers=target)[0] == 200


def test_mme_refusals(tmp_path):
    bad = archive(tmp_path, "bad", config="backend: \"identity\"\nmax_batch_size: -3\n")
    empty = tmp_path / "nothing"
    empty.mkdir()
    with mme(tmp_path) as s:
        for body, why in (({"url": str(empty)}, "model_name"), ({"model_name": "x"}, "url"),
                          ({"model_name": "x", "url": "/proc/self"}, "/proc/"),
                          ({"model_name": "x", "url": str(empty)}, "no model folder"),
                          ({"model_name": "x", "url": str(tmp_path / "missing")}, "no model folder")):
            code, _, reply = call(s, "/models", body)
            assert code == 400 and why in json.loads(reply)["error"], (body, reply)
        assert call(s, "/models", b"{not json")[0] == 500  # Triton's parser error: INTERNAL
        # A model that fails to load: 400, and its repository is unregistered.
        code, _, reply = call(s, "/models", {"model_name": "bad", "url": bad})
        assert code == 400 and "max_batch_size" in json.loads(reply)["error"], reply
        assert json.loads(call(s, "/models")[2]) == {"models": []}
        with open(os.path.join(bad, "identity_fp32", "config.pbtxt"), "w") as f:
            f.write('backend: "identity"\nmax_batch_size: 8\n'
                    'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
                    'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n')
        assert call(s, "/models", {"model_name": "bad", "url": bad})[0] == 200
        assert call(s, "/models/a/b/c")[0] == 400
        assert call(s, "/models/a", method="PUT")[0] == 400


def test_mme_picks_the_ensemble_and_refuses_a_model_folder_outside_sagemakers_layout(tmp_path):
    import shutil
    root = tmp_path / "ens"
    for m in ("simple", "simple_ensemble"):
        shutil.copytree(os.path.join(EXAMPLES, m), root / m)
    text = (root / "simple_ensemble" / "config.pbtxt").read_text()
    (root / "simple_ensemble" / "config.pbtxt").write_text(text.replace('name: "simple_ensemble"', ""))
    with mme(tmp_path) as s:
        # Two folders: the ensemble's is the model; its step loads with it.
        code, _, body = call(s, "/models", {"model_name": "ens", "url": str(root)})
        assert code == 200, body
        code, _, body = call(s, "/models/ens/invoke", SIMPLE)
        assert code == 200 and json.loads(body)["model_name"] == "ens", body
        out = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
        assert out["OUTPUT0"] == [2 * x for x in X]
        # A folder holding config.pbtxt itself is SageMaker's layout only.
        code, _, body = call(s, "/models", {"model_name": "m2", "url": str(root / "simple")})
        assert code == 400 and "/opt/ml/models/<id>/model" in json.loads(body)["error"], body


def test_mme_restricted_as_the_model_repository_api(tmp_path):
    url = archive(tmp_path, "r1")
    with mme(tmp_path, "--http-restricted-api=model-repository:admin=yes") as s:
        code, _, body = call(s, "/models", {"model_name": "r1", "url": url})
        assert code == 403 and "admin" in json.loads(body)["error"]
        assert call(s, "/models", {"model_name": "r1", "url": url}, {"admin": "yes"})[0] == 200
        assert call(s, "/models")[0] == 403
        assert call(s, "/models", headers={"admin": "yes"})[0] == 200
        assert call(s, "/models/r1/invoke", IDENTITY)[0] == 200
