"""The python backend (backends/python) through nereid's HTTP endpoint:
Triton Python-backend model files (model.py, class TritonPythonModel,
triton_python_backend_utils) served unchanged, each instance in a stub
process of its own.

Covers add_sub over several datatypes, BYTES, the initialize() arguments,
request accessors, errors (a raising execute, a syntax error, a failing
initialize, a wrong output datatype, a missing requested output), a
crashing model.py (its requests fail, the server lives on), two instances
running at once, dynamic batching and an ensemble with a Python step.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import concurrent.futures
import contextlib
import json
import os
import tempfile
import time
import pytest

from test_nereid_cli import BACKENDS, Server, assert_stopped_clean, listening_ports
from test_vertex_ai import call

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
    """models: {name: (model.py text, config.pbtxt text)}."""
    with tempfile.TemporaryDirectory() as root:
        for name, (text, config) in models.items():
            model_file(root, name, text, config)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", *flags])
        with running(s) as lines:
            s.ports = listening_ports(lines)
            s.port = s.ports["http"]
            s.root = root
            yield s


def infer(s, model, inputs, outputs=None, parameters=None):
    body = {"inputs": inputs}
    if outputs is not None:
        body["outputs"] = [{"name": n} for n in outputs]
    if parameters is not None:
        body["parameters"] = parameters
    code, _, reply = call(s, f"/v2/models/{model}/infer", body)
    return code, json.loads(reply)


def outputs_of(reply):
    return {o["name"]: o["data"] for o in reply["outputs"]}


def fp32(name, data, shape=None):
    return {"name": name, "datatype": "FP32", "shape": shape or [len(data)], "data": data}


def test_add_sub_several_datatypes():
    models = {f"add_sub_{d.lower()}": (ADD_SUB, add_sub_config(d)) for d in ("FP32", "INT32", "INT64", "FP64", "UINT8")}
    with serve(models) as s:
        for name in models:
            d = name.split("_")[-1].upper()
            code, reply = infer(s, name, [{"name": "INPUT0", "datatype": d, "shape": [4], "data": [5, 6, 7, 8]},
                                          {"name": "INPUT1", "datatype": d, "shape": [4], "data": [1, 2, 3, 4]}])
            assert code == 200, reply
            out = outputs_of(reply)
            assert out["OUTPUT0"] == [6, 8, 10, 12] and out["OUTPUT1"] == [4, 4, 4, 4], reply
            assert {o["datatype"] for o in reply["outputs"]} == {d}
        # Only the requested output comes back.
        code, reply = infer(s, "add_sub_fp32", [fp32("INPUT0", [1, 2, 3, 4]), fp32("INPUT1", [1, 1, 1, 1])],
                            outputs=["OUTPUT1"])
        assert code == 200 and outputs_of(reply) == {"OUTPUT1": [0, 1, 2, 3]}, reply
    assert "add_sub finalized" in s.log


def test_bytes_and_request_accessors():
    with serve({"inspect": (INSPECT, BYTES_CONFIG)}) as s:
        body = {"id": "req-7", "parameters": {"p": "v", "n": 3},
                "inputs": [{"name": "INPUT", "datatype": "BYTES", "shape": [3], "data": ["a", "", "héllo"]}]}
        code, _, reply = call(s, "/v2/models/inspect/infer", body)
        assert code == 200, reply
        reply = json.loads(reply)
        info = json.loads(reply["outputs"][0]["data"][0])
        assert info["items"] == ["a", "", "héllo"] and info["shape"] == [3] and info["is_cpu"]
        assert info["id"] == "req-7" and info["parameters"] == {"p": "v", "n": 3}
        assert info["requested"] == ["OUTPUT"] and info["name"] == "INPUT"
        args = info["args"]
        assert args["model_name"] == "inspect" and args["model_version"] == "1"
        assert args["model_instance_kind"] == "CPU" and args["model_instance_device_id"] == "0"
        assert args["model_instance_name"].startswith("inspect") and args["model_repository"].endswith("inspect")
        assert json.loads(args["model_config"])["name"] == "inspect"


def test_errors_are_responses_and_a_crash_spares_the_server():
    with serve({"raising": (RAISING, ONE_FP32), "add_sub": (ADD_SUB, add_sub_config("FP32"))}) as s:
        code, reply = infer(s, "raising", [fp32("INPUT0", [-1])])
        assert code != 200 and "ValueError: negative input" in reply["error"], reply
        assert "model.py line 9" in reply["error"], reply
        assert "Traceback" in s.text()
        code, reply = infer(s, "raising", [fp32("INPUT0", [1])])
        assert code == 400 and reply["error"] == "one is refused", reply
        code, reply = infer(s, "raising", [fp32("INPUT0", [2])])
        assert code != 200 and "FP64" in reply["error"] and "FP32" in reply["error"], reply
        code, reply = infer(s, "raising", [fp32("INPUT0", [3])])
        assert code != 200 and "OUTPUT0" in reply["error"], reply
        code, reply = infer(s, "raising", [fp32("INPUT0", [7])])
        assert code == 200 and outputs_of(reply) == {"OUTPUT0": [7]}, reply
        # os._exit in model.py: its request fails; the stub is started again
        # (and initialized again) for the next one, as Triton does.
        assert call(s, "/v2/models/raising/ready")[0] == 200
        code, reply = infer(s, "raising", [fp32("INPUT0", [4])])
        assert code != 200 and "stub process" in reply["error"], reply
        # Between the crash and the next batch the model says it is not
        # ready (TRITONBACKEND_ModelInstanceReady), as Triton's does.
        assert call(s, "/v2/models/raising/ready")[0] == 400
        code, reply = infer(s, "raising", [fp32("INPUT0", [7])])
        assert code == 200 and outputs_of(reply) == {"OUTPUT0": [7]}, reply
        assert "is gone; starting it again" in s.text()
        assert call(s, "/v2/models/raising/ready")[0] == 200
        # A stub killed while idle is seen at the next readiness check.
        code, reply = infer(s, "raising", [fp32("INPUT0", [5])])
        assert code == 200, reply
        os.kill(int(outputs_of(reply)["OUTPUT0"][0]), 9)
        deadline = time.monotonic() + 30
        while call(s, "/v2/models/raising/ready")[0] == 200:
            assert time.monotonic() < deadline, "model still ready after its stub was killed"
            time.sleep(0.02)
        code, reply = infer(s, "raising", [fp32("INPUT0", [7])])
        assert code == 200 and outputs_of(reply) == {"OUTPUT0": [7]}, reply
        assert call(s, "/v2/models/raising/ready")[0] == 200
        code, reply = infer(s, "add_sub", [fp32("INPUT0", [1, 2, 3, 4]), fp32("INPUT1", [1, 1, 1, 1])])
        assert code == 200, reply


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
        assert "line 3: SyntaxError" in text, text
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
                replies = [f.result() for f in [pool.submit(infer, s, "busy", [fp32("INPUT0", [i])])
                                                for i in range(2)]]
            assert all(code == 200 for code, _ in replies), replies
            (a0, a1), (b0, b1) = [outputs_of(r)["TIMES"] for _, r in replies]
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
            replies = [f.result() for f in [pool.submit(infer, s, "batched", [fp32("INPUT0", [i], [1, 1])])
                                            for i in range(4)]]
        assert all(code == 200 for code, _ in replies), replies
        sizes = [outputs_of(r)["OUTPUT0"][0] for _, r in replies]
        assert max(sizes) > 1, sizes


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
        code, reply = infer(s, "pipeline", [fp32("A", [1, 2, 3, 4]), fp32("B", [10, 20, 30, 40])])
        assert code == 200 and outputs_of(reply) == {"SUM": [11, 22, 33, 44], "DIFF": [-9, -18, -27, -36]}, reply


def test_auto_complete_without_config():
    with serve({"auto": (AUTO, None)}) as s:
        code, _, body = call(s, "/v2/models/auto/config")
        config = json.loads(body)
        assert code == 200 and config["backend"] == "python" and config["max_batch_size"] == 4, config
        assert [i["name"] for i in config["input"]] == ["INPUT0"], config
        assert "dynamic_batching" in config, config
        code, reply = infer(s, "auto", [fp32("INPUT0", [1, 2], [1, 2])])
        assert code == 200 and outputs_of(reply) == {"OUTPUT0": [2, 4]}, reply


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
    stream, as Triton's clients read decoupled models."""
    from test_grpc import RPC_TIMEOUT, infer_request, output_array, pb, pbg
    import grpc
    import numpy as np

    models = {"repeat_py": (DECOUPLED, DECOUPLED_CONFIG),
              "returns_list": ("import triton_python_backend_utils as pb_utils\n\n\n"
                               "class TritonPythonModel:\n"
                               "    def execute(self, requests):\n"
                               "        return [pb_utils.InferenceResponse([]) for _ in requests]\n",
                               DECOUPLED_CONFIG)}
    with serve(models, "--allow-grpc=true", "--grpc-port=0", "--grpc-address=127.0.0.1") as s:
        with grpc.insecure_channel(f"127.0.0.1:{s.ports['grpc']}") as channel:
            stub = pbg.GRPCInferenceServiceStub(channel)

            def stream(model, n):
                req = infer_request(model, [("IN", "INT32", [1], np.array([n], np.int32))])
                return list(stub.ModelStreamInfer(iter([req]), timeout=RPC_TIMEOUT))

            got = stream("repeat_py", 3)
            assert [int(output_array(r.infer_response, "OUT", np.int32)[0]) for r in got] == [0, 1, 4], got
            assert all(not r.error_message for r in got)
            got = stream("repeat_py", 2)
            assert [int(output_array(r.infer_response, "OUT", np.int32)[0]) for r in got[:2]] == [0, 1]
            assert len(got) == 3 and "the third one failed" in got[2].error_message, got
            assert stream("repeat_py", 0) == []
            got = stream("repeat_py", -2)
            assert [int(output_array(r.infer_response, "OUT", np.int32)[0]) for r in got] == [100, 101], got
            got = stream("returns_list", 1)
            assert got and "must return None" in got[-1].error_message, got
    assert "after final: Unable to send response. Response sender has been closed." in s.log


def test_is_cancelled_sees_a_client_that_went_away():
    """request.is_cancelled() turns true when the core cancels the request
    (here: the HTTP client closed its connection)."""
    import socket
    import time

    config = '''
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''
    with serve({"cancellable": (CANCELLABLE, config)}) as s:
        body = json.dumps({"inputs": [{"name": "IN", "datatype": "FP32", "shape": [1], "data": [1]}]}).encode()
        with socket.create_connection(("127.0.0.1", s.port)) as c:
            c.sendall(b"POST /v2/models/cancellable/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % len(body) + body)
            deadline = time.monotonic() + 30  # the model runs the request before the client leaves
            while "executing" not in s.text() and time.monotonic() < deadline:
                time.sleep(0.02)
        deadline = time.monotonic() + 30
        while "is_cancelled=" not in s.text() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert "is_cancelled=True" in s.log, s.log[-2000:]


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
            values = [int(out(x, "OUT")[0]) for x in stream]
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
        code, reply = infer(s, "bls", [fp32("INPUT0", [5, 6, 7, 8]), fp32("INPUT1", [1, 2, 3, 4])])
        assert code == 200, reply
        out = outputs_of(reply)
        assert out["OUTPUT0"] == [18, 24, 30, 36], reply  # three times INPUT0 + INPUT1
        assert out["OUTPUT1"] == [0, 1, 4, 0], reply
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
        self.gauge = pb_utils.MetricFamily("py_last_value", "last input", pb_utils.MetricFamily.GAUGE).Metric()

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
        for round_ in (1, 2):
            code, reply = infer(s, "services", [fp32("IN", [7.5])])
            assert code == 200, reply
            assert outputs_of(reply)["OUT"] == [1, 0, 0, 1, 1, round_], reply
        code, reply = infer(s, "made_by_py", [fp32("IN", [3])])
        assert code == 200 and outputs_of(reply)["OUT"] == [3], reply
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
                    "--allow-grpc=false", "--allow-metrics=false"])
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
            for name in ("first", "second"):
                code, reply = infer(s, name, [fp32("INPUT0", [1.5, -2])])
                assert code == 200 and outputs_of(reply) == {"OUTPUT0": [3, -4]}, reply
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
    from test_grpc import RPC_TIMEOUT, infer_request, output_array, pb, pbg
    import grpc
    import numpy as np

    config = '''
backend: "python"
max_batch_size: 1
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
model_transaction_policy { decoupled: true }
sequence_batching { iterative_sequence: true }
instance_group [ { count: 1 kind: KIND_CPU } ]
'''
    with serve({"iterative": (ITERATIVE, config)}, "--allow-grpc=true", "--grpc-port=0",
               "--grpc-address=127.0.0.1") as s:
        with grpc.insecure_channel(f"127.0.0.1:{s.ports['grpc']}") as channel:
            stub = pbg.GRPCInferenceServiceStub(channel)
            for rid in ("one", "two"):
                req = infer_request("iterative", [("IN", "INT32", [1, 1], np.array([[0]], np.int32))], rid=rid)
                got = list(stub.ModelStreamInfer(iter([req]), timeout=RPC_TIMEOUT))
                assert not any(r.error_message for r in got), got
                assert [int(output_array(r.infer_response, "OUT", np.int32).ravel()[0]) for r in got] == [1, 2, 3]


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
        jobs = [pool.submit(infer, s, "views", [fp32("INPUT0", [float(k * 3 + i) for i in range(n)], [1, n])])
                for k in range(3)]
        for k, job in enumerate(jobs):
            code, reply = job.result(timeout=120)
            assert code == 200, reply
            out = outputs_of(reply)
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
        return [{"name": "INPUT", "datatype": "BYTES", "shape": [1], "data": [json.dumps(value)]}]

    with serve(models) as s:
        code, reply = infer(s, "params", text_in(want))
        assert code == 200 and reply.get("parameters") == want, reply
        code, reply = infer(s, "params", text_in({}))
        assert code == 200 and not reply.get("parameters"), reply
        code, _, raw = call(s, "/v2/models/params_sender/infer", {"inputs": text_in({"a": "1", "d": False})})
        assert code == 200, raw
        assert json.loads(raw)["parameters"] == {"a": "1", "d": False}, raw
        code, reply = infer(s, "params_bls", text_in(want))
        assert code == 200 and json.loads(reply["outputs"][0]["data"][0]) == want, reply
        for bad, message in (({"f": 0.5}, "Expect parameters values to have type bool/int/str, found type "
                                          "<class 'float'>"),
                             ({"n": None}, "Expect parameters values to have type bool/int/str, found type "
                                           "<class 'NoneType'>"),
                             ({"l": ["x"]}, "Expect parameters values to have type bool/int/str, found type "
                                            "<class 'list'>"),
                             ([1], "Expect parameters to be a dictionary, got <class 'list'>"),
                             ({"big": 1 << 64}, "to fit in 64 bits")):
            code, reply = infer(s, "params", text_in(bad))
            assert code != 200 and message in reply["error"], (bad, reply)
        # The server is fine afterwards.
        code, reply = infer(s, "params", text_in({"k": 1}))
        assert code == 200 and reply["parameters"] == {"k": 1}, reply
