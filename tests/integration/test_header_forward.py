"""--http-header-forward-pattern and --grpc-header-forward-pattern: request
headers whose names match reach the model as string parameters (the
echo_params test backend returns its request's parameters in the
response), over HTTP infer and generate and gRPC ModelInfer and
ModelStreamInfer; headers that do not match, and every header without a
pattern, stay out; a bad pattern stops the server by name.

Requests go through Triton's own clients (tritonclient.http and
tritonclient.grpc, streaming included); only generate, which tritonclient
has no call for, is sent by hand.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR, NEREID_TEST_BACKEND_DIR
and NEREID_EXAMPLES set (see tests/CMakeLists.txt).
"""

import json
import os
import queue
import shutil
import tempfile
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from test_nereid_cli import BACKENDS, Server, common, run, listening_ports

TEST_BACKENDS = os.environ["NEREID_TEST_BACKEND_DIR"]


@pytest.fixture(scope="module")
def repo():
    d = tempfile.mkdtemp(prefix="nereid_fwd_")
    os.makedirs(os.path.join(d, "echo", "1"))
    with open(os.path.join(d, "echo", "config.pbtxt"), "w") as f:
        f.write('name: "echo"\nbackend: "echo_params"\nmax_batch_size: 0\n'
                'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n')
    shutil.copy(os.path.join(TEST_BACKENDS, "echo_params", "libtriton_echo_params.so"), os.path.join(d, "echo"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start(repo, *flags):
    s = Server([f"--model-repository={repo}", f"--backend-directory={BACKENDS}", "--allow-metrics=false",
                "--http-port=0", "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1", *flags])
    lines = s.wait_ready()
    ports = listening_ports(lines)
    s.http, s.grpc = ports["http"], ports["grpc"]
    return s


HEADERS = {"My_Header-1": "my value 1", "my_header_2": 'a "quoted" value\\', "other": "no"}


def http_params(s):
    x = httpclient.InferInput("INPUT0", [1], "FP32")
    x.set_data_from_numpy(np.ones(1, np.float32), binary_data=False)
    with httpclient.InferenceServerClient(f"127.0.0.1:{s.http}") as c:
        r = c.infer("echo", [x], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)],
                    headers=dict(HEADERS))
    assert r.as_numpy("OUTPUT0").tolist() == [1.0]
    return r.get_response().get("parameters", {})


def grpc_params(s):
    x = grpcclient.InferInput("INPUT0", [1], "FP32")
    x.set_data_from_numpy(np.ones(1, np.float32))
    md = {"my_header_1": "g1", "my-header-3": "g3", "other": "no"}

    def plain(p):
        return {k: v.string_param for k, v in p.items() if v.WhichOneof("parameter_choice") == "string_param"}
    with grpcclient.InferenceServerClient(f"127.0.0.1:{s.grpc}") as c:
        unary = plain(c.infer("echo", [x], headers=md, client_timeout=30).get_response().parameters)
        got = queue.Queue()
        c.start_stream(lambda result, error: got.put((result, error)), headers=md)
        try:
            for _ in range(2):
                c.async_stream_infer("echo", [x])
            streamed = []
            for _ in range(2):
                result, error = got.get(timeout=30)
                assert error is None, error
                streamed.append(plain(result.get_response().parameters))
        finally:
            c.stop_stream()
    return unary, streamed


def test_matching_headers_become_string_parameters(repo):
    # gRPC keys are lower case: RE2's (?i) (taken here too) lets an upper-case pattern match them.
    s = start(repo, "--http-header-forward-pattern=^my_header", "--grpc-header-forward-pattern=(?i)^MY[-_]HEADER")
    try:
        # HTTP: names matched in any case.
        got = {k.lower(): v for k, v in http_params(s).items()}
        assert got == {"my_header-1": "my value 1", "my_header_2": 'a "quoted" value\\'}, got
        # generate answers with the model's outputs only; its request got the same parameters
        # (checked through infer above), so here it must simply still work. By hand:
        # tritonclient has no call for the generate extension.
        req = urllib.request.Request(f"http://127.0.0.1:{s.http}/v2/models/echo/generate",
                                     data=json.dumps({"INPUT0": [1]}).encode(), headers=HEADERS)
        with urllib.request.urlopen(req, timeout=30) as r:
            assert json.loads(r.read())["OUTPUT0"] == 1
        unary, streamed = grpc_params(s)
        assert unary == {"my_header_1": "g1", "my-header-3": "g3"}, unary
        assert streamed == [unary, unary], streamed
    finally:
        assert s.stop() == 0, s.text()


def test_without_a_pattern_nothing_is_forwarded(repo):
    s = start(repo)
    try:
        assert http_params(s) == {}
        unary, streamed = grpc_params(s)
        assert unary == {} and streamed == [{}, {}]
    finally:
        assert s.stop() == 0, s.text()


def test_a_bad_pattern_is_refused():
    code, _, err = run([*common(), "--http-header-forward-pattern=my(header"])
    assert code == 2 and "--http-header-forward-pattern" in err and "is not a regular expression" in err, err
