"""The python backend (backends/python) through Triton's own client,
tritonclient, over HTTP and gRPC (decoupled models on the gRPC stream):
Triton Python-backend model files (model.py, class TritonPythonModel,
triton_python_backend_utils) served unchanged, each instance in a stub
process of its own.

Covers add_sub over several datatypes, BYTES, the initialize() arguments,
request accessors, errors (a raising execute, a syntax error, a failing
initialize, an output of another datatype than configured (sent as made), a
requested output not made (left out)), a
crashing model.py (its requests fail, the server lives on), two instances
running at once, dynamic batching and an ensemble with a Python step;
from the client's side also system shared memory inputs and outputs,
compressed bodies, and the asyncio clients (HTTP and the gRPC stream).

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import asyncio
import concurrent.futures
import contextlib
import json
import os
import queue
import tempfile
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from test_nereid_cli import BACKENDS, Server, assert_stopped_clean, listening_ports

ADD_SUB = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        config = json.loads(args["model_config"])
        out0 = pb_utils.get_output_config_by_name(config, "OUTPUT0")
        self.dtype = pb_utils.triton_string_to_numpy(out0["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out0 = pb_utils.Tensor("OUTPUT0", (a + b).astype(self.dtype))
            out1 = pb_utils.Tensor("OUTPUT1", (a - b).astype(self.dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out0, out1]))
        return responses

    def finalize(self):
        pb_utils.Logger.log_info("add_sub finalized")
'''


def add_sub_config(dtype, backend='backend: "python"'):
    return f'''
{backend}
input [ {{ name: "INPUT0" data_type: TYPE_{dtype} dims: [ 4 ] }},
        {{ name: "INPUT1" data_type: TYPE_{dtype} dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_{dtype} dims: [ 4 ] }},
         {{ name: "OUTPUT1" data_type: TYPE_{dtype} dims: [ 4 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
'''


# Echoes what the request and initialize() said, as BYTES of JSON.
INSPECT = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = dict(args)

    async def execute(self, requests):
        responses = []
        for r in requests:
            t = pb_utils.get_input_tensor_by_name(r, "INPUT")
            info = {"args": self.args, "id": r.request_id(), "flags": r.flags(),
                    "correlation_id": r.correlation_id(), "parameters": json.loads(r.parameters()),
                    "requested": r.requested_output_names(), "timeout": r.timeout(),
                    "name": t.name(), "shape": t.shape(), "is_cpu": t.is_cpu(),
                    "items": [x.decode() for x in t.as_numpy().reshape(-1)]}
            out = np.array([json.dumps(info).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
'''
BYTES_CONFIG = '''
backend: "python"
input [ { name: "INPUT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_STRING dims: [ 1 ] } ]
'''

RAISING = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy()
        if x[0] < 0:
            raise ValueError("negative input")
        if x[0] == 1:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("one is refused",
                                                                         pb_utils.TritonError.INVALID_ARG))]
        if x[0] == 2:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x.astype("float64"))])]
        if x[0] == 3:
            return [pb_utils.InferenceResponse([])]
        if x[0] == 4:
            import os
            os._exit(3)
        if x[0] == 5:
            import os
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 0 + os.getpid())])]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)])]
'''
ONE_FP32 = '''
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''

SYNTAX = '''
class TritonPythonModel:
    def execute(self, requests)
        return []
'''
FAILING_INIT = '''
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("no weights here")
'''

# Busy for 0.1 s of CPU in Python; answers when it started and ended.
BUSY = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            start = time.time()
            end = time.process_time() + 0.1
            while time.process_time() < end:
                pass
            times = np.array([start, time.time()], dtype=np.float64)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("TIMES", times)]))
        return out
'''

# Counts the requests of each execute() call into its output.
BATCHED = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.05)
        n = len(requests)
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", np.full(pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy().shape, n,
                               dtype=np.float32))]) for r in requests]
'''


# No config.pbtxt: auto_complete_config says everything.
AUTO = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [2]})
        auto_complete_model_config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [2]})
        auto_complete_model_config.set_max_batch_size(4)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * 2)]) for r in requests]
'''


def model_file(root, name, text, config, version="1"):
    os.makedirs(os.path.join(root, name, version), exist_ok=True)
    if config is not None:
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config)
    if text is not None:
        with open(os.path.join(root, name, version, "model.py"), "w") as f:
            f.write(text)


@contextlib.contextmanager
def running(s):
    """Waits until s is ready, yields its start-up lines, stops it clean;
    s.log keeps stdout and the log for checks after the stop."""
    try:
        yield s.wait_ready()
        assert_stopped_clean(s)
    finally:
        s.log = s.text()
        s.close()


@contextlib.contextmanager
def serve(models, *flags):
    """models: {name: (model.py text, config.pbtxt text)}. Serves HTTP
    (s.port) and gRPC (s.ports["grpc"]) on 127.0.0.1."""
    with tempfile.TemporaryDirectory() as root:
        for name, (text, config) in models.items():
            model_file(root, name, text, config)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                    "--allow-metrics=false", *flags])
        with running(s) as lines:
            s.ports = listening_ports(lines)
            s.port = s.ports["http"]
            s.root = root
            yield s


PROTOCOLS = ("http", "grpc")


def client(s, protocol="http"):
    """A tritonclient client of s: HTTP on s.port, gRPC on s.ports["grpc"]."""
    if protocol == "grpc":
        return grpcclient.InferenceServerClient(f"127.0.0.1:{s.ports['grpc']}")
    return httpclient.InferenceServerClient(f"127.0.0.1:{s.port}", network_timeout=300.0)


def infer_inputs(inputs, protocol="http", binary=True):
    """tritonclient InferInputs of (name, numpy array) pairs; an object
    array is BYTES. binary=False sends HTTP tensors as JSON data."""
    module = grpcclient if protocol == "grpc" else httpclient
    out = []
    for name, array in inputs:
        i = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        if protocol == "grpc":
            i.set_data_from_numpy(array)
        else:
            i.set_data_from_numpy(array, binary_data=binary)
        out.append(i)
    return out


def infer(s, model, inputs, outputs=None, protocol="http", binary=True, **kwargs):
    """Runs model through tritonclient (HTTP or gRPC) with inputs as
    (name, numpy array) pairs; only the outputs named, if any. Returns the
    InferResult; an error response raises InferenceServerException.
    kwargs go to InferenceServerClient.infer (request_id, parameters,
    timeout, sequence_id, ...)."""
    module = grpcclient if protocol == "grpc" else httpclient
    requested = None
    if outputs is not None:
        requested = [module.InferRequestedOutput(n) if protocol == "grpc"
                     else module.InferRequestedOutput(n, binary_data=binary) for n in outputs]
    with client(s, protocol) as c:
        return c.infer(model, infer_inputs(inputs, protocol, binary), outputs=requested, **kwargs)


def output_names(result):
    response = result.get_response()
    if isinstance(response, dict):
        return [o["name"] for o in response.get("outputs", [])]
    return [o.name for o in response.outputs]


def outputs_of(result):
    """{output name: flat list of its values} of an InferResult."""
    return {n: result.as_numpy(n).reshape(-1).tolist() for n in output_names(result)}


def datatypes_of(result):
    out = {}
    for n in output_names(result):
        o = result.get_output(n)
        out[n] = o["datatype"] if isinstance(o, dict) else o.datatype
    return out


def parameters_of(result):
    """The response's parameters as a dict, from either protocol."""
    response = result.get_response()
    if isinstance(response, dict):
        return response.get("parameters") or {}
    return {k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in response.parameters.items()}


def fp32(name, data, shape=None):
    return name, np.array(data, np.float32).reshape(shape or [len(data)])


def text(name, values):
    """A BYTES tensor of str values."""
    return name, np.array(values, dtype=np.object_)


def stream(s, model, inputs, **kwargs):
    """One request on a gRPC ModelStreamInfer stream (start_stream,
    async_stream_infer); returns [(result, error)] in arrival order once
    the server has closed the stream."""
    got = queue.Queue()
    with client(s, "grpc") as c:
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        c.async_stream_infer(model, infer_inputs(inputs, "grpc"), **kwargs)
        c.stop_stream()  # half-closes; returns once every response came
    return [got.get_nowait() for _ in range(got.qsize())]


def test_add_sub_several_datatypes():
    """Over HTTP (binary and JSON tensors) and gRPC."""
    types = {"FP32": np.float32, "INT32": np.int32, "INT64": np.int64, "FP64": np.float64, "UINT8": np.uint8}
    models = {f"add_sub_{d.lower()}": (ADD_SUB, add_sub_config(d)) for d in types}
    with serve(models) as s:
        for protocol, binary in (("http", True), ("http", False), ("grpc", True)):
            for name in models:
                d = name.split("_")[-1].upper()
                result = infer(s, name, [("INPUT0", np.array([5, 6, 7, 8], types[d])),
                                         ("INPUT1", np.array([1, 2, 3, 4], types[d]))],
                               protocol=protocol, binary=binary)
                out = outputs_of(result)
                assert out["OUTPUT0"] == [6, 8, 10, 12] and out["OUTPUT1"] == [4, 4, 4, 4], (protocol, out)
                assert set(datatypes_of(result).values()) == {d}, protocol
                assert result.as_numpy("OUTPUT0").dtype == types[d], protocol
            # Only the requested output comes back.
            result = infer(s, "add_sub_fp32", [fp32("INPUT0", [1, 2, 3, 4]), fp32("INPUT1", [1, 1, 1, 1])],
                           outputs=["OUTPUT1"], protocol=protocol, binary=binary)
            assert outputs_of(result) == {"OUTPUT1": [0, 1, 2, 3]}, protocol
    assert "add_sub finalized" in s.log


def test_bytes_and_request_accessors():
    """A BYTES input (binary and JSON over HTTP, and gRPC), the request id
    and request parameters as the model sees them (quotes, backslashes,
    control characters and non-ASCII text kept: the server writes the
    execute message's JSON itself)."""
    rid = 'req-7 "q" \\ \t é€'
    params = {"p": 'v "w" \\ \n', "n": 3}
    with serve({"inspect": (INSPECT, BYTES_CONFIG)}) as s:
        for protocol, binary in (("http", True), ("http", False), ("grpc", True)):
            result = infer(s, "inspect", [text("INPUT", ["a", "", "héllo"])], protocol=protocol, binary=binary,
                           request_id=rid, parameters=params)
            info = json.loads(result.as_numpy("OUTPUT")[0])
            assert info["items"] == ["a", "", "héllo"] and info["shape"] == [3] and info["is_cpu"], protocol
            assert info["id"] == rid and info["parameters"] == params, (protocol, info)
            assert info["requested"] == ["OUTPUT"] and info["name"] == "INPUT", protocol
            args = info["args"]
            assert args["model_name"] == "inspect" and args["model_version"] == "1"
            assert args["model_instance_kind"] == "CPU" and args["model_instance_device_id"] == "0"
            assert args["model_instance_name"].startswith("inspect") and args["model_repository"].endswith("inspect")
            assert json.loads(args["model_config"])["name"] == "inspect"


def failure(s, model, inputs, protocol="http", **kwargs):
    """The InferenceServerException that running model raises."""
    with pytest.raises(InferenceServerException) as e:
        infer(s, model, inputs, protocol=protocol, **kwargs)
    return e.value


def ready(s, model):
    """Whether the model is ready, asked through tritonclient over HTTP and
    gRPC; the HTTP status is checked too (200 ready, 400 not)."""
    import urllib.error
    import urllib.request

    with client(s, "http") as h, client(s, "grpc") as g:
        answers = h.is_model_ready(model), g.is_model_ready(model)
    # Hand-built as well: tritonclient's is_model_ready() hides the status.
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{s.port}/v2/models/{model}/ready", timeout=30) as r:
            code = r.status
    except urllib.error.HTTPError as e:
        code = e.code
    assert code == (200 if answers[0] else 400), (code, answers)
    return answers


def test_errors_are_responses_and_a_crash_spares_the_server():
    with serve({"raising": (RAISING, ONE_FP32), "add_sub": (ADD_SUB, add_sub_config("FP32"))}) as s:
        for protocol, refused in (("http", "400"), ("grpc", "StatusCode.INVALID_ARGUMENT")):
            e = failure(s, "raising", [fp32("INPUT0", [-1])], protocol)
            assert "ValueError: negative input" in e.message(), (protocol, e)
            assert "model.py line 9" in e.message(), (protocol, e)
            assert "Traceback" in s.text()
            e = failure(s, "raising", [fp32("INPUT0", [1])], protocol)
            assert e.status() == refused and e.message() == "one is refused", (protocol, e)
            # An output of another datatype than the configuration's goes
            # out as the model made it, as Triton's Python backend sends it.
            result = infer(s, "raising", [fp32("INPUT0", [2])], protocol=protocol)
            assert datatypes_of(result) == {"OUTPUT0": "FP64"} and outputs_of(result) == {"OUTPUT0": [2]}
            # A requested output the model did not make is left out, as
            # Triton's Python backend answers.
            assert outputs_of(infer(s, "raising", [fp32("INPUT0", [3])], protocol=protocol)) == {}
            assert outputs_of(infer(s, "raising", [fp32("INPUT0", [7])], protocol=protocol)) == {"OUTPUT0": [7]}
        # os._exit in model.py: its request fails; the stub is started again
        # (and initialized again) for the next one, as Triton does.
        assert ready(s, "raising") == (True, True)
        e = failure(s, "raising", [fp32("INPUT0", [4])])
        assert "stub process" in e.message(), e
        # Between the crash and the next batch the model says it is not
        # ready (TRITONBACKEND_ModelInstanceReady), as Triton's does.
        assert ready(s, "raising") == (False, False)
        assert outputs_of(infer(s, "raising", [fp32("INPUT0", [7])], protocol="grpc")) == {"OUTPUT0": [7]}
        assert "is gone; starting it again" in s.text()
        assert ready(s, "raising") == (True, True)
        # A stub killed while idle is seen at the next readiness check.
        result = infer(s, "raising", [fp32("INPUT0", [5])])
        os.kill(int(outputs_of(result)["OUTPUT0"][0]), 9)
        deadline = time.monotonic() + 30
        with client(s) as c:
            while c.is_model_ready("raising"):
                assert time.monotonic() < deadline, "model still ready after its stub was killed"
                time.sleep(0.02)
        assert outputs_of(infer(s, "raising", [fp32("INPUT0", [7])])) == {"OUTPUT0": [7]}
        assert ready(s, "raising") == (True, True)
        infer(s, "add_sub", [fp32("INPUT0", [1, 2, 3, 4]), fp32("INPUT1", [1, 1, 1, 1])])


def test_system_shared_memory_inputs_and_outputs():
    """Inputs read from and outputs written to system shared memory regions
    the client registered (tritonclient.utils.shared_memory), over HTTP and
    gRPC; the regions' status, and unregistering them."""
    import tritonclient.utils.shared_memory as shm

    a, b = np.array([5, 6, 7, 8], np.float32), np.array([1, 2, 3, 4], np.float32)
    with serve({"add_sub": (ADD_SUB, add_sub_config("FP32"))}, "--allow-client-shm=true") as s:
        for protocol in PROTOCOLS:
            module = grpcclient if protocol == "grpc" else httpclient
            key = f"/nrd_test_py_{protocol}_{os.getpid()}"
            ins = shm.create_shared_memory_region("py_in", key + "_in", 32)
            outs = shm.create_shared_memory_region("py_out", key + "_out", 32)
            try:
                shm.set_shared_memory_region(ins, [a, b])
                with client(s, protocol) as c:
                    c.register_system_shared_memory("py_in", key + "_in", 32)
                    c.register_system_shared_memory("py_out", key + "_out", 32)
                    status = c.get_system_shared_memory_status()
                    names = ({r["name"] for r in status} if protocol == "http" else set(status.regions))
                    assert names == {"py_in", "py_out"}, status
                    inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
                    inputs[0].set_shared_memory("py_in", 16)
                    inputs[1].set_shared_memory("py_in", 16, offset=16)
                    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
                    outputs[0].set_shared_memory("py_out", 16)
                    outputs[1].set_shared_memory("py_out", 16, offset=16)
                    result = c.infer("add_sub", inputs, outputs=outputs)
                    # Listed with its shape; its data is in the region.
                    for name in ("OUTPUT0", "OUTPUT1"):
                        o = result.get_output(name)
                        assert list(o["shape"] if protocol == "http" else o.shape) == [4], (protocol, o)
                        if protocol == "http":
                            assert "data" not in o, o
                    for name, offset, want in (("OUTPUT0", 0, a + b), ("OUTPUT1", 16, a - b)):
                        got = shm.get_contents_as_numpy(outs, np.float32, [4], offset=offset)
                        assert got.tolist() == want.tolist(), (protocol, name, got)
                    c.unregister_system_shared_memory()
                    status = c.get_system_shared_memory_status()
                    assert not (status if protocol == "http" else status.regions), status
            finally:
                shm.destroy_shared_memory_region(ins)
                shm.destroy_shared_memory_region(outs)


def test_compressed_requests_and_responses():
    """gzip and deflate bodies both ways over HTTP, and gRPC's compression,
    as tritonclient sends them."""
    a, b = np.array([5, 6, 7, 8], np.float32), np.array([1, 2, 3, 4], np.float32)
    with serve({"add_sub": (ADD_SUB, add_sub_config("FP32"))}) as s:
        for algorithm in ("gzip", "deflate"):
            for binary in (True, False):
                result = infer(s, "add_sub", [("INPUT0", a), ("INPUT1", b)], binary=binary,
                               request_compression_algorithm=algorithm, response_compression_algorithm=algorithm)
                out = outputs_of(result)
                assert out == {"OUTPUT0": [6, 8, 10, 12], "OUTPUT1": [4, 4, 4, 4]}, (algorithm, binary, out)
            result = infer(s, "add_sub", [("INPUT0", a), ("INPUT1", b)], protocol="grpc",
                           compression_algorithm=algorithm)
            assert outputs_of(result) == {"OUTPUT0": [6, 8, 10, 12], "OUTPUT1": [4, 4, 4, 4]}, algorithm


def test_load_failures_name_file_and_line():
    with tempfile.TemporaryDirectory() as root:
        model_file(root, "syntax", SYNTAX, ONE_FP32)
        model_file(root, "failing_init", FAILING_INIT, ONE_FP32)
        model_file(root, "no_file", None, ONE_FP32)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", "--exit-on-error=false"])
        with running(s):
            pass
        text = s.log
        assert "SyntaxError: expected ':' (model.py, line 3)" in text, text
        assert "RuntimeError: no weights here (model.py line 4)" in text, text
        assert "has no" in text and "model.py" in text, text


def test_two_instances_run_at_once():
    config = '''
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "TIMES" data_type: TYPE_FP64 dims: [ 2 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
'''
    with serve({"busy": (BUSY, config)}) as s:
        # Executions of the two processes overlap in time (wall-time ratios
        # are left to bench/: this machine's cores are shared).
        for _ in range(5):
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                replies = [f.result() for f in [pool.submit(infer, s, "busy", [fp32("INPUT0", [i])],
                                                            protocol=PROTOCOLS[i]) for i in range(2)]]
            (a0, a1), (b0, b1) = [outputs_of(r)["TIMES"] for r in replies]
            if a0 < b1 and b0 < a1:
                break
        else:
            pytest.fail("the two instances never ran at once")


def test_dynamic_batching():
    config = '''
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 200000 }
'''
    with serve({"batched": (BATCHED, config)}) as s:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            replies = [f.result() for f in [pool.submit(infer, s, "batched", [fp32("INPUT0", [i], [1, 1])],
                                                        protocol=PROTOCOLS[i % 2]) for i in range(4)]]
        sizes = [outputs_of(r)["OUTPUT0"][0] for r in replies]
        assert max(sizes) > 1, sizes
        # Batch statistics as Triton's Python backend reports them: every
        # request counts its batch size, every execute() one execution.
        with client(s) as c:
            st = c.get_inference_statistics("batched")["model_stats"][0]
        assert int(st["inference_count"]) == 4 and 1 <= int(st["execution_count"]) < 4, st
        by_size = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in st["batch_stats"]}
        assert sum(size * n for size, n in by_size.items()) == 4 and max(by_size) > 1, st


def test_unbatched_model_reports_one_execution_per_request():
    with serve({"add_sub": (ADD_SUB, add_sub_config("FP32"))}) as s:
        for i in range(3):
            infer(s, "add_sub", [fp32("INPUT0", [i] * 4), fp32("INPUT1", [1] * 4)], protocol=PROTOCOLS[i % 2])
        with client(s) as c:
            st = c.get_inference_statistics("add_sub")["model_stats"][0]
        assert int(st["inference_count"]) == 3 and int(st["execution_count"]) == 3, st
        assert [(int(b["batch_size"]), int(b["compute_infer"]["count"])) for b in st["batch_stats"]] == [(1, 3)], st


def test_ensemble_with_python_step():
    ensemble = '''
platform: "ensemble"
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [ { model_name: "add_sub" model_version: -1
  input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "SUM" } output_map { key: "OUTPUT1" value: "DIFF" } } ] }
'''
    with serve({"add_sub": (ADD_SUB, add_sub_config("FP32")), "pipeline": (None, ensemble)}) as s:
        for protocol in PROTOCOLS:
            result = infer(s, "pipeline", [fp32("A", [1, 2, 3, 4]), fp32("B", [10, 20, 30, 40])], protocol=protocol)
            assert outputs_of(result) == {"SUM": [11, 22, 33, 44], "DIFF": [-9, -18, -27, -36]}, protocol


def test_auto_complete_without_config():
    with serve({"auto": (AUTO, None)}) as s:
        with client(s) as c:
            config = c.get_model_config("auto")
        assert config["backend"] == "python" and config["max_batch_size"] == 4, config
        assert [i["name"] for i in config["input"]] == ["INPUT0"], config
        assert "dynamic_batching" in config, config
        with client(s, "grpc") as c:
            config = c.get_model_config("auto").config
        assert config.backend == "python" and config.max_batch_size == 4, config
        assert [i.name for i in config.input] == ["INPUT0"] and config.HasField("dynamic_batching"), config
        for protocol in PROTOCOLS:
            assert outputs_of(infer(s, "auto", [fp32("INPUT0", [1, 2], [1, 2])], protocol=protocol)) == \
                {"OUTPUT0": [2, 4]}, protocol


DECOUPLED = '''
import threading
import numpy as np
import triton_python_backend_utils as pb_utils


def response(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            sender = request.get_response_sender()
            if n < 0:
                # From a thread of the model's own, after execute returned.
                def late(sender=sender, n=-n):
                    for i in range(n):
                        sender.send(response(100 + i))
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                threading.Thread(target=late).start()
                continue
            for i in range(n):
                sender.send(response(i * i))
            if n == 2:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("the third one failed")))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            try:
                sender.send(response(-1))
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_info(f"after final: {e}")
        return None
'''

DECOUPLED_CONFIG = '''
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
model_transaction_policy { decoupled: true }
instance_group [ { count: 1 kind: KIND_CPU } ]
'''

CANCELLABLE = '''
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        request = requests[0]
        pb_utils.Logger.log_info("executing")
        deadline = time.monotonic() + 30
        while not request.is_cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)
        pb_utils.Logger.log_info(f"is_cancelled={request.is_cancelled()}")
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("stopped"))]
'''


def test_decoupled_model_streams_through_its_response_sender():
    """A decoupled model.py answers through request.get_response_sender():
    any number of responses then the final flag, from execute or from a
    thread of its own after execute returned; an error response in the
    middle; a send after the final flag raises in the model. Over the gRPC
    stream (start_stream, async_stream_infer), as Triton's clients read
    decoupled models."""
    models = {"repeat_py": (DECOUPLED, DECOUPLED_CONFIG),
              "returns_list": ("import triton_python_backend_utils as pb_utils\n\n\n"
                               "class TritonPythonModel:\n"
                               "    def execute(self, requests):\n"
                               "        return [pb_utils.InferenceResponse([]) for _ in requests]\n",
                               DECOUPLED_CONFIG)}
    with serve(models) as s:
        def values(model, n):
            return stream(s, model, [("IN", np.array([n], np.int32))])

        got = values("repeat_py", 3)
        assert all(error is None for _, error in got), got
        assert [int(r.as_numpy("OUT")[0]) for r, _ in got] == [0, 1, 4], got
        got = values("repeat_py", 2)
        assert [int(r.as_numpy("OUT")[0]) for r, _ in got[:2]] == [0, 1], got
        assert len(got) == 3 and got[2][0] is None and "the third one failed" in got[2][1].message(), got
        assert values("repeat_py", 0) == []
        got = values("repeat_py", -2)
        assert [int(r.as_numpy("OUT")[0]) for r, _ in got] == [100, 101], got
        got = values("returns_list", 1)
        assert got and got[-1][1] is not None and "must return None" in got[-1][1].message(), got
        # The asyncio gRPC client: two requests on one stream, their
        # responses told apart by request id.
        assert asyncio.run(aio_stream(s, [("a", 3), ("b", -2)])) == {"a": [0, 1, 4], "b": [100, 101]}


async def aio_stream(s, requests):
    """requests: (request id, IN value) on one stream of
    tritonclient.grpc.aio; returns {request id: OUT values}."""
    import tritonclient.grpc.aio as aiogrpcclient

    async def asks():
        for rid, n in requests:
            yield {"model_name": "repeat_py", "inputs": infer_inputs([("IN", np.array([n], np.int32))], "grpc"),
                   "request_id": rid}

    got = {}
    async with aiogrpcclient.InferenceServerClient(f"127.0.0.1:{s.ports['grpc']}") as c:
        async for result, error in c.stream_infer(asks()):
            assert error is None, error
            got.setdefault(result.get_response().id, []).append(int(result.as_numpy("OUT")[0]))
    return got
    assert "after final: Unable to send response. Response sender has been closed." in s.log


def wait_text(s, text, count=1, timeout=30):
    deadline = time.monotonic() + timeout
    while s.text().count(text) < count and time.monotonic() < deadline:
        time.sleep(0.02)


def test_is_cancelled_sees_a_client_that_went_away():
    """request.is_cancelled() turns true when the core cancels the request:
    the HTTP client (tritonclient.http.aio) closed its connection, or the
    gRPC client cancelled its call (async_infer's CallContext.cancel())."""
    import asyncio
    import tritonclient.http.aio as aiohttpclient

    config = '''
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''
    with serve({"cancellable": (CANCELLABLE, config)}) as s:
        async def leave_over_http():
            c = aiohttpclient.InferenceServerClient(f"127.0.0.1:{s.port}")
            try:
                task = asyncio.ensure_future(c.infer("cancellable", infer_inputs([fp32("IN", [1])])))
                # The model runs the request before the client leaves.
                deadline = time.monotonic() + 30
                while "executing" not in s.text() and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                task.cancel()
            finally:
                await c.close()  # closes the connection the request waits on

        asyncio.run(leave_over_http())
        wait_text(s, "is_cancelled=")
        assert "is_cancelled=True" in s.text(), s.text()[-2000:]
        with client(s, "grpc") as c:
            call = c.async_infer("cancellable", infer_inputs([fp32("IN", [1])], "grpc"), callback=lambda *_: None)
            wait_text(s, "executing", 2)
            call.cancel()
            wait_text(s, "is_cancelled=", 2)
    assert s.log.count("is_cancelled=True") == 2, s.log[-2000:]


BLS = '''
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils


def out(response, name):
    return pb_utils.get_output_tensor_by_name(response, name).as_numpy()


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            r = pb_utils.InferenceRequest(model_name="add_sub_fp32", inputs=[a, b],
                                          requested_output_names=["OUTPUT0"])
            first = r.exec()
            if first.has_error():
                raise pb_utils.TritonModelException(first.error().message())
            more = await asyncio.gather(r.async_exec(), r.async_exec())
            total = out(first, "OUTPUT0") + sum(out(x, "OUTPUT0") for x in more)
            missing = pb_utils.InferenceRequest(model_name="no_such_model", inputs=[a],
                                                requested_output_names=["X"]).exec()
            pb_utils.Logger.log_info(f"missing model: {missing.error().message()}")
            stream = pb_utils.InferenceRequest(model_name="repeat_py",
                                               inputs=[pb_utils.Tensor("IN", np.array([3], np.int32))],
                                               requested_output_names=["OUT"]).exec(decoupled=True)
            # The last response, the final flag's, has no outputs (Triton's too).
            values = [int(out(x, "OUT")[0]) for x in stream if x.output_tensors()]
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", total.astype(np.float32)),
                pb_utils.Tensor("OUTPUT1", np.array(values + [0], np.float32))]))
        return responses
'''


def test_bls_runs_other_models_sync_async_and_decoupled():
    """InferenceRequest.exec() and async_exec() run another model on the
    server from a model.py; exec(decoupled=True) iterates a decoupled
    model's responses; an unknown model comes back as a response with an
    error."""
    models = {"add_sub_fp32": (ADD_SUB, add_sub_config("FP32")),
              "repeat_py": (DECOUPLED, DECOUPLED_CONFIG),
              "bls": (BLS, add_sub_config("FP32"))}
    with serve(models) as s:
        for protocol in PROTOCOLS:
            out = outputs_of(infer(s, "bls", [fp32("INPUT0", [5, 6, 7, 8]), fp32("INPUT1", [1, 2, 3, 4])],
                                   protocol=protocol))
            assert out["OUTPUT0"] == [18, 24, 30, 36], out  # three times INPUT0 + INPUT1
            assert out["OUTPUT1"] == [0, 1, 4, 0], out
    assert "missing model: " in s.log and "no_such_model" in s.log.split("missing model: ")[1].splitlines()[0]


SERVICES = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily("py_requests_total", "requests seen by model.py",
                                            pb_utils.MetricFamily.COUNTER)
        self.counter = self.family.Metric(labels={"model": args["model_name"]})
        # The family is kept: a metric stops working once its family is
        # gone, as in Triton.
        self.gauge_family = pb_utils.MetricFamily("py_last_value", "last input", pb_utils.MetricFamily.GAUGE)
        self.gauge = self.gauge_family.Metric()

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            self.counter.increment(1)
            self.gauge.set(float(x[0]))
            steps = [pb_utils.is_model_ready("add_sub_fp32"), pb_utils.is_model_ready("no_such_model")]
            pb_utils.unload_model("add_sub_fp32")
            steps.append(pb_utils.is_model_ready("add_sub_fp32"))
            pb_utils.load_model("add_sub_fp32")
            steps.append(pb_utils.is_model_ready("add_sub_fp32"))
            config = json.dumps({"backend": "python", "max_batch_size": 0,
                                 "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
                                 "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}]})
            pb_utils.load_model("made_by_py", config=config, files={"file:1/model.py": ECHO.encode()})
            steps.append(pb_utils.is_model_ready("made_by_py"))
            try:
                pb_utils.load_model("no_such_model")
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_info(f"load failed: {e}")
            steps.append(self.counter.value())
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(steps, np.float32))]))
        return responses


ECHO = \'\'\'
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
\'\'\'
'''

SERVICES_CONFIG = '''
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 6 ] } ]
'''


def test_model_control_and_custom_metrics_from_model_py():
    """pb_utils.is_model_ready, unload_model and load_model (also with a
    config and files) act on the server; MetricFamily / Metric counters and
    gauges appear in /metrics with their labels."""
    import urllib.request

    models = {"add_sub_fp32": (ADD_SUB, add_sub_config("FP32")), "services": (SERVICES, SERVICES_CONFIG)}
    with serve(models, "--model-control-mode=explicit", "--load-model=*", "--allow-metrics=true",
               "--metrics-port=0", "--metrics-address=127.0.0.1") as s:
        for round_, protocol in ((1, "http"), (2, "grpc")):
            out = outputs_of(infer(s, "services", [fp32("IN", [7.5])], protocol=protocol))
            assert out["OUT"] == [1, 0, 0, 1, 1, round_], out
        for protocol in PROTOCOLS:
            assert outputs_of(infer(s, "made_by_py", [fp32("IN", [3])], protocol=protocol))["OUT"] == [3]
        # Prometheus text: no tritonclient call reads /metrics.
        with urllib.request.urlopen(f"http://127.0.0.1:{s.ports['metrics']}/metrics", timeout=30) as r:
            text = r.read().decode()
        assert 'py_requests_total{model="services"} 2' in text, text
        assert "py_last_value 7.5" in text, text
    assert "load failed: " in s.log and "no_such_model" in s.log


def test_python_based_backend_serves_models_without_model_py():
    """A Python-based backend: <backend dir>/<name>/model.py and the python
    backend's library serve every model with backend: "<name>"; the models
    carry no model.py of their own."""
    config = '''
backend: "twice_py"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2 ] } ]
'''
    twice = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_name"]

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", 2 * pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
'''
    with tempfile.TemporaryDirectory() as backends, tempfile.TemporaryDirectory() as root:
        for entry in os.listdir(BACKENDS):
            os.symlink(os.path.join(BACKENDS, entry), os.path.join(backends, entry))
        os.makedirs(os.path.join(backends, "twice_py"))
        with open(os.path.join(backends, "twice_py", "model.py"), "w") as f:
            f.write(twice)
        for name in ("first", "second"):
            model_file(root, name, None, config)
        s = Server([f"--model-repository={root}", f"--backend-directory={backends}", "--http-port=0",
                    "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                    "--allow-metrics=false"])
        with running(s) as lines:
            s.ports = listening_ports(lines)
            s.port = s.ports["http"]
            for name, protocol in (("first", "http"), ("second", "grpc")):
                result = infer(s, name, [fp32("INPUT0", [1.5, -2])], protocol=protocol)
                assert outputs_of(result) == {"OUTPUT0": [3, -4]}, name
    assert "loaded backend 'twice_py'" in s.log, s.log


ITERATIVE = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.passes = {}

    def execute(self, requests):
        for request in requests:
            key = request.request_id()
            n = self.passes.get(key, 0) + 1
            self.passes[key] = n
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([n], np.int32))]))
            if n < 3:
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
            else:
                del self.passes[key]
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


def test_rescheduled_requests_run_again_in_an_iterative_sequence():
    """set_release_flags(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) sends a
    request back to the scheduler (sequence_batching.iterative_sequence);
    a decoupled model answers it once per pass, then closes it."""
    config = '''
backend: "python"
max_batch_size: 1
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
model_transaction_policy { decoupled: true }
sequence_batching { iterative_sequence: true }
instance_group [ { count: 1 kind: KIND_CPU } ]
'''
    with serve({"iterative": (ITERATIVE, config)}) as s:
        for rid in ("one", "two"):
            got = stream(s, "iterative", [("IN", np.array([[0]], np.int32))], request_id=rid)
            assert all(error is None for _, error in got), got
            assert [int(r.as_numpy("OUT").ravel()[0]) for r, _ in got] == [1, 2, 3], got
            assert {r.get_response().id for r, _ in got} == {rid}, got


# Returns its input itself (sent from where it lies), a view of it that
# starts one element in (also in place), reversed (a copy) and doubled.
VIEWS = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SAME", x), pb_utils.Tensor("TAIL", x[:, 1:]),
                pb_utils.Tensor("REVERSED", x[:, ::-1]), pb_utils.Tensor("DOUBLED", x * 2)]))
        return out
'''
VIEWS_CONFIG = '''
backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "SAME" data_type: TYPE_FP32 dims: [ -1 ] },
         { name: "TAIL" data_type: TYPE_FP32 dims: [ -1 ] },
         { name: "REVERSED" data_type: TYPE_FP32 dims: [ -1 ] },
         { name: "DOUBLED" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
'''


def test_large_outputs_that_are_inputs_come_back_whole():
    """Outputs of 64 KiB and more that are views of the batch's inputs are
    sent from the inputs' place in the shared memory; each request of a
    batch still gets its own values."""
    n = 40000
    with serve({"views": (VIEWS, VIEWS_CONFIG)}) as s, concurrent.futures.ThreadPoolExecutor(3) as pool:
        jobs = [pool.submit(infer, s, "views", [fp32("INPUT0", [float(k * 3 + i) for i in range(n)], [1, n])],
                            protocol=PROTOCOLS[k % 2]) for k in range(3)]
        for k, job in enumerate(jobs):
            out = outputs_of(job.result(timeout=120))
            x = [float(k * 3 + i) for i in range(n)]
            assert out["SAME"] == x and out["TAIL"] == x[1:], k
            assert out["REVERSED"] == x[::-1] and out["DOUBLED"] == [2 * v for v in x], k


# Answers with the parameters its input names (a JSON text): "params" as
# its response, "params_sender" through the request's response sender (a
# model that is not decoupled may use it too); "params_bls" asks "params"
# and returns the parameters of its response.
PARAMS = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            text = pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy()[0].decode()
            try:
                ok = pb_utils.Tensor("OUTPUT", np.array([text.encode()], dtype=np.object_))
                out.append(pb_utils.InferenceResponse([ok], parameters=json.loads(text)))
            except pb_utils.TritonModelException as e:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
        return out
'''

PARAMS_SENDER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            text = pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy()[0].decode()
            sender = r.get_response_sender()
            ok = pb_utils.Tensor("OUTPUT", np.array([text.encode()], dtype=np.object_))
            sender.send(pb_utils.InferenceResponse([ok], parameters=json.loads(text)),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

PARAMS_BLS = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT")
            reply = pb_utils.InferenceRequest(model_name="params", inputs=[x],
                                              requested_output_names=["OUTPUT"]).exec()
            text = reply.error().message() if reply.has_error() else reply.parameters()
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT", np.array([text.encode()], dtype=np.object_))]))
        return out
'''


def test_response_parameters_reach_the_client_and_bls_callers():
    """InferenceResponse(parameters=...) of bool, int and str values reach
    the client (plain and through a response sender) and a BLS caller's
    response.parameters(); other types are refused with Triton's message."""
    models = {"params": (PARAMS, BYTES_CONFIG), "params_sender": (PARAMS_SENDER, BYTES_CONFIG),
              "params_bls": (PARAMS_BLS, BYTES_CONFIG)}
    want = {"bool": True, "str": "Hello World!", "int": 1024, "neg": -(1 << 63)}

    def text_in(value):
        return [text("INPUT", [json.dumps(value)])]

    with serve(models) as s:
        for protocol in PROTOCOLS:
            assert parameters_of(infer(s, "params", text_in(want), protocol=protocol)) == want, protocol
            assert not parameters_of(infer(s, "params", text_in({}), protocol=protocol)), protocol
            result = infer(s, "params_sender", text_in({"a": "1", "d": False}), protocol=protocol)
            assert parameters_of(result) == {"a": "1", "d": False}, protocol
            result = infer(s, "params_bls", text_in(want), protocol=protocol)
            assert json.loads(result.as_numpy("OUTPUT")[0]) == want, protocol
            for bad, message in (({"f": 0.5}, "Expect parameters values to have type bool/int/str, found type "
                                              "<class 'float'>"),
                                 ({"n": None}, "Expect parameters values to have type bool/int/str, found type "
                                               "<class 'NoneType'>"),
                                 ({"l": ["x"]}, "Expect parameters values to have type bool/int/str, found type "
                                                "<class 'list'>"),
                                 ([1], "Expect N8pybind114dictE, got <class 'list'>"),
                                 ({"big": 1 << 64}, "to fit in 64 bits")):
                e = failure(s, "params", text_in(bad), protocol)
                assert message in e.message(), (protocol, bad, e)
            # The server is fine afterwards.
            assert parameters_of(infer(s, "params", text_in({"k": 1}), protocol=protocol)) == {"k": 1}
