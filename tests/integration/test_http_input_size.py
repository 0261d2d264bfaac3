"""--http-max-input-size as Triton r25.07 applies it (server qa/L0_http,
http_input_size_limit_test.py; http_server.cc): the limit is on each
input's data, not on the body, so a JSON body larger than the limit whose
data fits is served. Raw binary bodies (Inference-Header-Content-Length:
0) and JSON inputs over the limit get Triton's sentences; 0 and negative
limits stop the server with Triton's sentence. Nereid still bounds the
body, at four times the limit (docs/http.md).

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import json
import os
import subprocess
import tempfile
import urllib.error
import urllib.request

import numpy as np
import pytest

from security_helpers import WatchedServer
from test_nereid_cli import BACKENDS, NEREID

LIMIT = 1 << 20  # 1 MiB
ELEMENTS = LIMIT // 4
CONFIG = """name: "ident"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


@pytest.fixture(scope="module")
def server():
    with tempfile.TemporaryDirectory() as top:
        os.makedirs(os.path.join(top, "ident", "1"))
        with open(os.path.join(top, "ident", "config.pbtxt"), "w") as f:
            f.write(CONFIG)
        with WatchedServer([f"--http-max-input-size={LIMIT}"], repo=top) as s:
            yield f"http://127.0.0.1:{s.ports['http']}/v2/models/ident/infer"


def post(url, body, headers):
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_raw_binary_input_over_the_limit_is_refused(server):
    data = np.ones(ELEMENTS + 32, dtype=np.float32).tobytes()
    status, _, body = post(server, data, {"Inference-Header-Content-Length": "0"})
    assert status == 400, body
    assert json.loads(body)["error"].startswith(
        f"Raw input has a byte_size ({len(data)} bytes) that exceeds the maximum allowed value of {LIMIT} bytes. "
        "Use --http-max-input-size to increase the limit."), body


def test_raw_binary_input_under_the_limit_is_served(server):
    x = np.arange(ELEMENTS - 32, dtype=np.float32)
    status, headers, body = post(server, x.tobytes(), {"Inference-Header-Content-Length": "0"})
    assert status == 200, body
    n = int(headers["Inference-Header-Content-Length"])
    assert np.array_equal(np.frombuffer(body[n:], dtype=np.float32), x)


def json_request(n):
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, n],
                                   "data": [1.0] * n}]}).encode()


def test_json_input_over_the_limit_is_refused_with_tritons_sentence(server):
    n = ELEMENTS + 32
    status, _, body = post(server, json_request(n), {"Content-Type": "application/json"})
    assert status == 400, body
    assert json.loads(body)["error"].startswith(
        f"JSON input 'INPUT0' has a byte_size ({n * 4} bytes) that exceeds the maximum allowed value of {LIMIT} "
        "bytes. Use --http-max-input-size to increase the limit."), body


def test_a_json_body_larger_than_the_limit_whose_data_fits_is_served(server):
    n = ELEMENTS - 32
    body_in = json_request(n)
    assert len(body_in) > LIMIT  # the text is larger than the data
    status, _, body = post(server, body_in, {"Content-Type": "application/json"})
    assert status == 200, body[:300]
    out = json.loads(body)["outputs"][0]
    assert out["shape"] == [1, n]


def test_a_body_past_four_times_the_limit_is_refused(server):
    n = ELEMENTS - 32
    # Data that fits, written with enough padding to pass 4 x the limit.
    body_in = json_request(n).replace(b"1.0,", b"1.000000000000000000,")
    assert len(body_in) > 4 * LIMIT
    status, _, body = post(server, body_in, {"Content-Type": "application/json"})
    assert status == 400, body[:300]
    assert b"Use --http-max-input-size to increase the limit." in body


@pytest.mark.parametrize("value", ["0", "-1024"])
def test_a_limit_of_zero_or_less_stops_the_server(value):
    p = subprocess.run([NEREID, "--model-repository", tempfile.gettempdir(), "--backend-directory", BACKENDS,
                        f"--http-max-input-size={value}"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert (p.stdout + p.stderr).count("Error: --http-max-input-size must be greater than 0.") == 1, p.stderr
