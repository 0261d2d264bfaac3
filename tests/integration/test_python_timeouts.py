"""Timeouts with the python backend: a request whose timeout expires while
it waits behind a busy Python model gets Triton's "Request timeout
expired"; a model.py that runs past its client's patience leaves the
server serving; a BLS InferenceRequest(timeout=...) from model.py that
expires while queued comes back as a response with that error. Requests
go through tritonclient, over HTTP and gRPC.

No sleep synchronises the test: the slow model announces each execution
in a file the test polls for and holds its instance until the test
creates another; the test sees a request queued in /metrics
(nv_inference_pending_request_count) before it lets the model go.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import concurrent.futures
import contextlib
import os
import tempfile
import time
import urllib.request

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from test_nereid_cli import BACKENDS, Server, listening_ports
from test_python_backend import (ONE_FP32, PROTOCOLS, client, fp32, infer, infer_inputs, model_file,
                                 outputs_of, running, serve)

# Writes "x" to "started" in its model directory, then, for a positive
# INPUT0, holds its instance until the test creates "release" there.
SLOW = '''
import os
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.marker = os.path.join(args["model_repository"], "started")
        self.release = os.path.join(args["model_repository"], "release")

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            with open(self.marker, "a") as f:
                f.write("x")
            deadline = time.monotonic() + 120
            while x.reshape(-1)[0] > 0 and not os.path.exists(self.release) and time.monotonic() < deadline:
                time.sleep(0.01)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return out
'''
SLOW_BATCHED = '''
backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching {
  default_queue_policy { default_timeout_microseconds: 60000000 allow_timeout_override: true }
}
'''

# (Under the dynamic batcher, as in Triton, a request's own timeout counts
# only where the queue policy allows it to shorten a default one.)

# Calls "slow" with INPUT0 and the timeout (microseconds) INPUT1 gives;
# answers the output, or -1 and logs the error.
BLS_TIMEOUT = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            t = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            r = pb_utils.InferenceRequest(model_name="slow", inputs=[pb_utils.Tensor("INPUT0", a)],
                                          requested_output_names=["OUTPUT0"], timeout=int(t[0]))
            reply = r.exec()
            if reply.has_error():
                pb_utils.Logger.log_info("bls error: " + reply.error().message())
                value = np.array([-1], np.float32)
            else:
                value = pb_utils.get_output_tensor_by_name(reply, "OUTPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", value)]))
        return responses
'''
BLS_CONFIG = '''
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''


def wait_started(s, model, count, timeout=120):
    path = os.path.join(s.root, model, "started")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and len(open(path).read()) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{model} did not start execution {count}\n{s.text()}")


def pending(s, model):
    """nv_inference_pending_request_count of `model` from /metrics
    (Prometheus text, which no tritonclient call reads)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{s.metrics}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("nv_inference_pending_request_count{") and f'model="{model}"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_queued(s, model, timeout=120):
    """Until a request of `model` waits for an instance, then past the
    50 ms timeout the tests give it."""
    deadline = time.monotonic() + timeout
    while pending(s, model) < 1:
        assert time.monotonic() < deadline, f"no request of {model} queued\n{s.text()}"
        time.sleep(0.02)
    time.sleep(0.2)  # the timeout's own time, not a synchronisation


def release(s, model):
    open(os.path.join(s.root, model, "release"), "w").close()


def hold_again(s, model):
    os.remove(os.path.join(s.root, model, "release"))


@contextlib.contextmanager
def serve_with_metrics(models):
    with tempfile.TemporaryDirectory() as root:
        for name, (text, config) in models.items():
            model_file(root, name, text, config)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1", "--metrics-port=0"])
        with running(s) as lines:
            s.ports = listening_ports(lines)
            s.port, s.metrics, s.root = s.ports["http"], s.ports["metrics"], root
            yield s


UNAVAILABLE = {"http": "503", "grpc": "StatusCode.UNAVAILABLE"}


def test_a_queued_request_times_out_behind_a_busy_python_model():
    """The request's timeout (microseconds) as tritonclient sends it, over
    HTTP and gRPC."""
    models = {"slow": (SLOW, ONE_FP32), "slow_batched": (SLOW, SLOW_BATCHED)}
    with serve_with_metrics(models) as s, concurrent.futures.ThreadPoolExecutor(2) as pool:
        for round_, protocol in enumerate(PROTOCOLS):
            for model, shape in (("slow", [1]), ("slow_batched", [1, 1])):
                busy = pool.submit(infer, s, model, [fp32("INPUT0", [1], shape)], protocol=protocol)
                wait_started(s, model, 2 * round_ + 1)  # two executions a round: busy and the last one
                # Queued behind the held execution with 50 ms to live.
                timed = pool.submit(infer, s, model, [fp32("INPUT0", [0], shape)], protocol=protocol,
                                    timeout=50000)
                wait_queued(s, model)
                release(s, model)
                with pytest.raises(InferenceServerException) as e:
                    timed.result(timeout=120)
                assert e.value.status() == UNAVAILABLE[protocol], (model, protocol, e.value)
                assert e.value.message() == "Request timeout expired", (model, protocol, e.value)
                assert outputs_of(busy.result(timeout=120)) == {"OUTPUT0": [1]}
                # A timeout long enough is no error.
                infer(s, model, [fp32("INPUT0", [0], shape)], protocol=protocol, timeout=60000000)
                hold_again(s, model)


def test_a_model_past_its_clients_timeout_does_not_hang_the_server():
    """The HTTP client gives up after its network_timeout, the gRPC one
    after its client_timeout (the call's deadline)."""
    models = {"slow": (SLOW, ONE_FP32), "slow_grpc": (SLOW, ONE_FP32), "other": (SLOW, ONE_FP32)}
    with serve(models) as s:
        with httpclient.InferenceServerClient(f"127.0.0.1:{s.port}", network_timeout=0.3) as impatient:
            with pytest.raises(TimeoutError):  # no answer came
                impatient.infer("slow", infer_inputs([fp32("INPUT0", [1])]))
        wait_started(s, "slow", 1)
        with pytest.raises(InferenceServerException) as e:
            with client(s, "grpc") as c:
                c.infer("slow_grpc", infer_inputs([fp32("INPUT0", [1])], "grpc"), client_timeout=0.3)
        assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED", e.value
        wait_started(s, "slow_grpc", 1)
        # The server answers others while the models hold their instances,
        # and the same models once they let go.
        for protocol in PROTOCOLS:
            assert outputs_of(infer(s, "other", [fp32("INPUT0", [0])], protocol=protocol)) == {"OUTPUT0": [0]}
        release(s, "slow")
        release(s, "slow_grpc")
        for model in ("slow", "slow_grpc"):
            for protocol in PROTOCOLS:
                result = infer(s, model, [fp32("INPUT0", [0])], protocol=protocol)
                assert outputs_of(result) == {"OUTPUT0": [0]}, (model, protocol)


def test_bls_request_timeout():
    models = {"slow": (SLOW, ONE_FP32), "bls": (BLS_TIMEOUT, BLS_CONFIG)}
    with serve_with_metrics(models) as s, concurrent.futures.ThreadPoolExecutor(2) as pool:
        busy = pool.submit(infer, s, "slow", [fp32("INPUT0", [1])])
        wait_started(s, "slow", 1)
        timed = pool.submit(infer, s, "bls", [fp32("INPUT0", [0]), fp32("INPUT1", [50000])], protocol="grpc")
        wait_queued(s, "slow")
        release(s, "slow")
        assert outputs_of(timed.result(timeout=120)) == {"OUTPUT0": [-1]}
        assert outputs_of(busy.result(timeout=120)) == {"OUTPUT0": [1]}
        for protocol in PROTOCOLS:
            result = infer(s, "bls", [fp32("INPUT0", [0]), fp32("INPUT1", [60000000])], protocol=protocol)
            assert outputs_of(result) == {"OUTPUT0": [0]}, protocol
    assert "bls error: Request timeout expired" in s.log, s.log
