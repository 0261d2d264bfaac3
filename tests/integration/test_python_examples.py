"""Triton python_backend's published examples (r25.07's examples/), as a
user runs them: for each, a model.py of our own that makes the same
pb_utils calls in the same order, and tritonclient as the client.

add_sub, auto_complete (batch and no-batch), bls (sync, async), bls_decoupled
(sync, async), custom_metrics, decoupled (repeat, square). Not here:
preprocessing, instance_kind and pytorch (they need PyTorch/torchvision and
a GPU model), jax (JAX is not packaged for the stub's Debian Python).

test_pb_utils_surface checks the names of Triton's pb_utils module and of
its C++ bindings (c_python_backend_utils) with the argument types they
take and the errors they raise; docs/python.md's table names the check
behind each row.

NRD_EXAMPLES_SERVER=triton runs the same tests against Triton 2.51's own
Python backend (.deps/tritonserver), to check the expectations.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import contextlib
import json
import os
import queue
import re
import socket
import subprocess
import tempfile
import time
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from security_helpers import WatchedServer
from test_nereid_cli import SOURCE

TARGET = os.environ.get("NRD_EXAMPLES_SERVER", "nereid")
TRITON_TOP = os.environ.get("NRD_TRITON_DIR", os.path.join(SOURCE, ".deps", "tritonserver", "pytriton",
                                                           "tritonserver"))


# ---- servers -----------------------------------------------------------------


class _Triton:
    """Triton 2.51 on `repo` with its own Python backend (the oracle)."""

    def __init__(self, repo, args):
        def free():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]
        self.ports = {"http": free(), "grpc": free(), "metrics": free()}
        self.logfile = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [os.path.join(TRITON_TOP, "bin", "tritonserver"), f"--model-repository={repo}",
             f"--backend-directory={os.path.join(TRITON_TOP, 'backends')}", f"--http-port={self.ports['http']}",
             f"--grpc-port={self.ports['grpc']}", f"--metrics-port={self.ports['metrics']}", *args],
            stdout=self.logfile, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['http']}/v2/health/ready", timeout=2):
                    return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("triton not ready\n" + self.log())

    def url(self, proto="http"):
        return f"127.0.0.1:{self.ports[proto]}"

    def log(self):
        with open(f"/proc/self/fd/{self.logfile.fileno()}", errors="replace") as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.logfile.close()


@contextlib.contextmanager
def serve(models, *args):
    """models: {name: (model.py text or None, config.pbtxt text or None)}.
    Yields the server (nereid under the memory watchdog, or Triton):
    .url(proto), .log()."""
    with tempfile.TemporaryDirectory() as repo:
        for name, (text, config) in models.items():
            os.makedirs(os.path.join(repo, name, "1"))
            if config is not None:
                with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                    f.write(config)
            with open(os.path.join(repo, name, "1", "model.py"), "w") as f:
                f.write(text)
        if TARGET == "triton":
            t = _Triton(repo, args)
            try:
                yield t
            finally:
                t.stop()
            return
        with WatchedServer(args=list(args), repo=repo) as s:
            yield s
            assert s.alive() and not s.killed_for_memory, s.log()


def http(s):
    return httpclient.InferenceServerClient(s.url("http"), network_timeout=120.0)


def grpc(s):
    return grpcclient.InferenceServerClient(s.url("grpc"))


def inputs_of(module, pairs):
    out = []
    for name, array, datatype in pairs:
        i = module.InferInput(name, list(array.shape), datatype)
        i.set_data_from_numpy(array)
        out.append(i)
    return out


def stream(s, model, pairs):
    """One request on a gRPC stream; [(result, error)] once the stream ends."""
    got = queue.Queue()
    with grpc(s) as c:
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        c.async_stream_infer(model, inputs_of(grpcclient, pairs))
        c.stop_stream()
    return [got.get_nowait() for _ in range(got.qsize())]


def config(name, inputs, outputs, extra=""):
    """A config.pbtxt: inputs / outputs as (name, TYPE_x, dims text)."""
    def tensors(items):
        return ",".join(f'{{ name: "{n}" data_type: {t} dims: [ {d} ] }}' for n, t, d in items)
    return (f'name: "{name}"\nbackend: "python"\ninput [ {tensors(inputs)} ]\noutput [ {tensors(outputs)} ]\n'
            f'instance_group [ {{ kind: KIND_CPU }} ]\n{extra}')


# ---- add_sub -------------------------------------------------------------------

# The add_sub example's calls: json.loads(args["model_config"]),
# get_output_config_by_name, triton_string_to_numpy; per request
# get_input_tensor_by_name, as_numpy, Tensor, InferenceResponse.
SUM_DIFF = '''
import json
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.types = [pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, n)["data_type"])
                      for n in ("OUTPUT0", "OUTPUT1")]

    def execute(self, requests):
        answers = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            answers.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", (a + b).astype(self.types[0])),
                pb_utils.Tensor("OUTPUT1", (a - b).astype(self.types[1]))]))
        return answers

    def finalize(self):
        print("sum_diff: finalize")
'''
ADD_SUB_IO = ([("INPUT0", "TYPE_FP32", "4"), ("INPUT1", "TYPE_FP32", "4")],
              [("OUTPUT0", "TYPE_FP32", "4"), ("OUTPUT1", "TYPE_FP32", "4")])


def two_inputs(shape=(4,)):
    a = np.random.rand(*shape).astype(np.float32)
    b = np.random.rand(*shape).astype(np.float32)
    return a, b, [("INPUT0", a, "FP32"), ("INPUT1", b, "FP32")]


def test_add_sub():
    with serve({"add_sub": (SUM_DIFF, config("add_sub", *ADD_SUB_IO))}) as s:
        a, b, pairs = two_inputs()
        with http(s) as c:
            r = c.infer("add_sub", inputs_of(httpclient, pairs),
                        outputs=[httpclient.InferRequestedOutput("OUTPUT0"),
                                 httpclient.InferRequestedOutput("OUTPUT1")])
        assert np.allclose(r.as_numpy("OUTPUT0"), a + b) and np.allclose(r.as_numpy("OUTPUT1"), a - b)


# ---- auto_complete -----------------------------------------------------------

# auto_complete_config: as_dict, add_input / add_output for what the
# configuration lacks, set_max_batch_size, set_dynamic_batching (the batch
# model only); then as add_sub.
AUTO = '''
import json
import triton_python_backend_utils as pb_utils

BATCH = {batch}


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        have = auto_complete_model_config.as_dict()
        known_in = [t["name"] for t in have["input"]]
        known_out = [t["name"] for t in have["output"]]
        for n in ("INPUT0", "INPUT1"):
            if n not in known_in:
                auto_complete_model_config.add_input({{"name": n, "data_type": "TYPE_FP32", "dims": [4]}})
        for n in ("OUTPUT0", "OUTPUT1"):
            if n not in known_out:
                auto_complete_model_config.add_output({{"name": n, "data_type": "TYPE_FP32", "dims": [4]}})
        auto_complete_model_config.set_max_batch_size(BATCH)
        if BATCH:
            auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.t0 = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, "OUTPUT0")["data_type"])
        self.t1 = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, "OUTPUT1")["data_type"])

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            y = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", (x + y).astype(self.t0)),
                                                                  pb_utils.Tensor("OUTPUT1", (x - y).astype(self.t1))]))
        return out
'''


def test_auto_complete():
    models = {"batch_model": (AUTO.format(batch=4), 'name: "batch_model"\nbackend: "python"\n'),
              "nobatch_model": (AUTO.format(batch=0), 'name: "nobatch_model"\nbackend: "python"\n')}
    with serve(models) as s:
        with http(s) as c:
            for name, batch in (("batch_model", 4), ("nobatch_model", 0)):
                cfg = c.get_model_config(name)
                assert cfg.get("max_batch_size", 0) == batch, cfg
                assert ("dynamic_batching" in cfg) == bool(batch), cfg
                assert sorted(t["name"] for t in cfg["input"]) == ["INPUT0", "INPUT1"], cfg
                assert sorted(t["name"] for t in cfg["output"]) == ["OUTPUT0", "OUTPUT1"], cfg
                assert all(t["data_type"] == "TYPE_FP32" and [int(d) for d in t["dims"]] == [4]
                           for t in cfg["input"]), cfg
                a, b, pairs = two_inputs((1, 4) if batch else (4,))
                r = c.infer(name, inputs_of(httpclient, pairs))
                assert np.allclose(r.as_numpy("OUTPUT0"), a + b) and np.allclose(r.as_numpy("OUTPUT1"), a - b)


# ---- bls ---------------------------------------------------------------------

# The sync BLS example: the model to call is named by a BYTES input, and
# its element (bytes) goes to InferenceRequest(model_name=...) as it is;
# exec, has_error, error().message(), output_tensors().
BLS_SYNC = '''
import json
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.cfg = json.loads(args["model_config"])

    def execute(self, requests):
        out = []
        for request in requests:
            first = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            second = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            target = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            call = pb_utils.InferenceRequest(model_name=target, requested_output_names=["OUTPUT0", "OUTPUT1"],
                                             inputs=[first, second])
            reply = call.exec()
            if reply.has_error():
                raise pb_utils.TritonModelException(reply.error().message())
            out.append(pb_utils.InferenceResponse(output_tensors=reply.output_tensors()))
        return out
'''
# The async BLS example: an async execute gathers two async_exec calls
# and takes OUTPUT0 of the first, OUTPUT1 of the second.
BLS_ASYNC = '''
import asyncio
import json
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.cfg = json.loads(args["model_config"])

    async def execute(self, requests):
        out = []
        for request in requests:
            first = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            second = pb_utils.get_input_tensor_by_name(request, "INPUT1")
            pending = []
            for target in ("diff_sum", "add_sub"):
                call = pb_utils.InferenceRequest(model_name=target, requested_output_names=["OUTPUT0", "OUTPUT1"],
                                                 inputs=[first, second])
                pending.append(call.async_exec())
            replies = await asyncio.gather(*pending)
            for reply in replies:
                if reply.has_error():
                    raise pb_utils.TritonModelException(reply.error().message())
            out.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.get_output_tensor_by_name(replies[0], "OUTPUT0"),
                pb_utils.get_output_tensor_by_name(replies[1], "OUTPUT1")]))
        return out
'''
# Stands in for the example's PyTorch model: OUTPUT0 = a - b, OUTPUT1 = a + b.
DIFF_SUM = SUM_DIFF.replace('"OUTPUT0", (a + b)', '"OUTPUT0", (a - b)').replace('"OUTPUT1", (a - b)',
                                                                                  '"OUTPUT1", (a + b)')


def bls_models():
    io_in = ADD_SUB_IO[0] + [("MODEL_NAME", "TYPE_STRING", "1")]
    return {"add_sub": (SUM_DIFF, config("add_sub", *ADD_SUB_IO)),
            "diff_sum": (DIFF_SUM, config("diff_sum", *ADD_SUB_IO)),
            "bls_sync": (BLS_SYNC, config("bls_sync", io_in, ADD_SUB_IO[1])),
            "bls_async": (BLS_ASYNC, config("bls_async", *ADD_SUB_IO))}


def test_bls_sync_takes_the_model_name_as_bytes():
    with serve(bls_models()) as s:
        for module, make in ((httpclient, http), (grpcclient, grpc)):
            with make(s) as c:
                for target, plus, minus in (("add_sub", 1, -1), ("diff_sum", -1, 1)):
                    a, b, pairs = two_inputs()
                    name = np.array([target.encode()], dtype=np.object_)
                    r = c.infer("bls_sync", inputs_of(module, pairs + [("MODEL_NAME", name, "BYTES")]))
                    assert np.allclose(r.as_numpy("OUTPUT0"), a + plus * b), (module, target)
                    assert np.allclose(r.as_numpy("OUTPUT1"), a + minus * b), (module, target)
                # A model that is not there: the BLS response's error, raised.
                a, b, pairs = two_inputs()
                name = np.array([b"no_such_model"], dtype=np.object_)
                try:
                    c.infer("bls_sync", inputs_of(module, pairs + [("MODEL_NAME", name, "BYTES")]))
                    raise AssertionError("no error")
                except InferenceServerException as e:
                    assert "no_such_model" in e.message(), e


def test_bls_async_gathers_two_calls():
    with serve(bls_models()) as s, http(s) as c:
        a, b, pairs = two_inputs()
        r = c.infer("bls_async", inputs_of(httpclient, pairs))
        assert np.allclose(r.as_numpy("OUTPUT0"), a - b) and np.allclose(r.as_numpy("OUTPUT1"), a - b)


# ---- decoupled: repeat, square ---------------------------------------------------

# The repeat example: using_decoupled_model_transaction_policy,
# get_output_config_by_name, triton_string_to_numpy, the model's
# parameters; execute hands get_response_sender() to a thread and returns
# None after WAIT ms; the thread sends one response per element of IN,
# after DELAY ms each, then the final flag alone.
REPEAT = '''
import json
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(cfg):
            raise pb_utils.TritonModelException(f"{args['model_name']} must be decoupled")
        self.out_type = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, "OUT")["data_type"])
        self.idx_type = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, "IDX")["data_type"])
        self.width = int(cfg.get("parameters", {}).get("output_num_elements", {}).get("string_value", 1))
        self.running = 0
        self.lock = threading.Lock()

    def execute(self, requests):
        req = requests[0]
        values = pb_utils.get_input_tensor_by_name(req, "IN").as_numpy()
        delays = pb_utils.get_input_tensor_by_name(req, "DELAY").as_numpy()
        if values.shape != delays.shape:
            raise pb_utils.TritonModelException("IN and DELAY differ in shape")
        worker = threading.Thread(target=self.answer, args=(req.get_response_sender(), values, delays), daemon=True)
        with self.lock:
            self.running += 1
        worker.start()
        time.sleep(pb_utils.get_input_tensor_by_name(req, "WAIT").as_numpy()[0] / 1000)
        return None

    def answer(self, sender, values, delays):
        for i, (v, d) in enumerate(zip(values, delays)):
            time.sleep(d / 1000)
            sender.send(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("IDX", np.array([i], self.idx_type)),
                pb_utils.Tensor("OUT", np.full((self.width,), v, dtype=self.out_type))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        with self.lock:
            self.running -= 1

    def finalize(self):
        while True:
            with self.lock:
                if not self.running:
                    return
            time.sleep(0.1)
'''
# The square example: IN responses of OUT = IN, then the final flag alone.
SQUARE = '''
import json
import threading
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(cfg):
            raise pb_utils.TritonModelException("square must be decoupled")
        self.out_type = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, "OUT")["data_type"])
        self.threads = []

    def execute(self, requests):
        for req in requests:
            n = pb_utils.get_input_tensor_by_name(req, "IN").as_numpy()
            t = threading.Thread(target=self.answer, args=(req.get_response_sender(), n), daemon=True)
            t.start()
            self.threads.append(t)
        return None

    def answer(self, sender, n):
        for _ in range(int(n[0])):
            sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", n.astype(self.out_type))]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for t in self.threads:
            t.join()
'''
DECOUPLED = "model_transaction_policy { decoupled: true }\n"


def repeat_config(name="repeat_int32"):
    return config(name, [("IN", "TYPE_INT32", "-1"), ("DELAY", "TYPE_UINT32", "-1"), ("WAIT", "TYPE_UINT32", "1")],
                  [("OUT", "TYPE_INT32", "-1"), ("IDX", "TYPE_UINT32", "1")], DECOUPLED)


def square_config(name="square_int32"):
    return config(name, [("IN", "TYPE_INT32", "1")], [("OUT", "TYPE_INT32", "1")], DECOUPLED)


def test_decoupled_repeat_and_square():
    with serve({"repeat_int32": (REPEAT, repeat_config()), "square_int32": (SQUARE, square_config())}) as s:
        values = np.array([4, 2, 0, 1], np.int32)
        got = stream(s, "repeat_int32", [("IN", values, "INT32"),
                                         ("DELAY", np.array([1, 2, 3, 4], np.uint32), "UINT32"),
                                         ("WAIT", np.array([5], np.uint32), "UINT32")])
        assert all(e is None for _, e in got), got
        pairs = [(int(r.as_numpy("IDX")[0]), int(r.as_numpy("OUT")[0])) for r, _ in got
                 if r.get_response().outputs]
        assert pairs == [(0, 4), (1, 2), (2, 0), (3, 1)], pairs
        for n in (3, 0):
            got = stream(s, "square_int32", [("IN", np.array([n], np.int32), "INT32")])
            assert all(e is None for _, e in got), got
            outs = [int(r.as_numpy("OUT")[0]) for r, _ in got if r.get_response().outputs]
            assert outs == [n] * n, (n, outs)


# ---- bls_decoupled -----------------------------------------------------------------

# exec(decoupled=True) on square_int32, summing OUT over the responses
# that carry outputs (the last one, with the final flag, has none).
BLS_DECOUPLED_SYNC = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.cfg = json.loads(args["model_config"])

    def execute(self, requests):
        count = pb_utils.get_input_tensor_by_name(requests[0], "IN")
        call = pb_utils.InferenceRequest(model_name="square_int32", inputs=[count], requested_output_names=["OUT"])
        total = np.array([0])
        empty = 0
        for reply in call.exec(decoupled=True):
            if reply.has_error():
                raise pb_utils.TritonModelException(reply.error().message())
            if len(reply.output_tensors()) > 0:
                total += pb_utils.get_output_tensor_by_name(reply, "OUT").as_numpy()
            else:
                empty += 1
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SUM", total),
                                                           pb_utils.Tensor("EMPTY", np.array([empty], np.int32))])]
'''
# Two async_exec(decoupled=True) gathered, every response of both summed.
BLS_DECOUPLED_ASYNC = '''
import asyncio
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.cfg = json.loads(args["model_config"])

    async def execute(self, requests):
        count = pb_utils.get_input_tensor_by_name(requests[0], "IN")
        pending = [pb_utils.InferenceRequest(model_name="square_int32", inputs=[count],
                                             requested_output_names=["OUT"]).async_exec(decoupled=True)
                   for _ in range(2)]
        total = np.array([0])
        for replies in await asyncio.gather(*pending):
            for reply in replies:
                if reply.has_error():
                    raise pb_utils.TritonModelException(reply.error().message())
                if len(reply.output_tensors()) > 0:
                    total += pb_utils.get_output_tensor_by_name(reply, "OUT").as_numpy()
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SUM", total)])]
'''


def test_bls_decoupled_sync_and_async():
    # SUM is INT32 in the configuration and the model returns it as int64
    # (np.array([0])), as the published example does: Triton sends it as
    # the model made it.
    models = {"square_int32": (SQUARE, square_config()),
              "bls_decoupled_sync": (BLS_DECOUPLED_SYNC, config(
                  "bls_decoupled_sync", [("IN", "TYPE_INT32", "1")],
                  [("SUM", "TYPE_INT32", "1"), ("EMPTY", "TYPE_INT32", "1")])),
              "bls_decoupled_async": (BLS_DECOUPLED_ASYNC, config(
                  "bls_decoupled_async", [("IN", "TYPE_INT32", "1")], [("SUM", "TYPE_INT32", "1")]))}
    with serve(models) as s, http(s) as c:
        for n in (4, 0):
            r = c.infer("bls_decoupled_sync", inputs_of(httpclient, [("IN", np.array([n], np.int32), "INT32")]))
            assert int(r.as_numpy("SUM")[0]) == n * n, n
            assert int(r.as_numpy("EMPTY")[0]) == 1, n  # the final flag's response, without outputs
            r = c.infer("bls_decoupled_async", inputs_of(httpclient, [("IN", np.array([n], np.int32), "INT32")]))
            assert int(r.as_numpy("SUM")[0]) == 2 * n * n, n


# ---- custom_metrics -----------------------------------------------------------------

# MetricFamily(name=, description=, kind=COUNTER), family.Metric(labels=),
# metric.increment, metric.value, Logger.log_info.
METRICS = '''
import json
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.t0 = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, "OUTPUT0")["data_type"])
        self.t1 = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(cfg, "OUTPUT1")["data_type"])
        self.family = pb_utils.MetricFamily(name="requests_process_latency_ns",
                                            description="Cumulative time spent processing requests",
                                            kind=pb_utils.MetricFamily.COUNTER)
        self.metric = self.family.Metric(labels={"model": "custom_metrics", "version": "1"})

    def execute(self, requests):
        start = time.time_ns()
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", (a + b).astype(self.t0)),
                                                                  pb_utils.Tensor("OUTPUT1", (a - b).astype(self.t1))]))
        self.metric.increment(time.time_ns() - start + 1)
        pb_utils.Logger.log_info(f"Cumulative requests processing latency: {self.metric.value()}")
        return out
'''


def test_custom_metrics():
    with serve({"custom_metrics": (METRICS, config("custom_metrics", *ADD_SUB_IO))}) as s:
        with http(s) as c:
            for _ in range(3):
                a, b, pairs = two_inputs()
                r = c.infer("custom_metrics", inputs_of(httpclient, pairs))
                assert np.allclose(r.as_numpy("OUTPUT0"), a + b) and np.allclose(r.as_numpy("OUTPUT1"), a - b)
        with urllib.request.urlopen(f"http://{s.url('metrics')}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert "# HELP requests_process_latency_ns Cumulative time spent processing requests" in text
        assert "# TYPE requests_process_latency_ns counter" in text
        m = re.search(r'requests_process_latency_ns\{model="custom_metrics",version="1"\} (\S+)', text)
        assert m and float(m.group(1)) >= 3, text


# ---- pb_utils: the names and their argument types ----------------------------------

# Each check runs in execute; the test compares its outcome: ["ok", value]
# or ["raise", exception type name, message].
SURFACE = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

F32 = np.array([1.5, 2.5], np.float32)


def run(checks):
    out = {}
    for name, fn in checks:
        try:
            value = fn()
            try:
                json.dumps(value)
            except TypeError:
                value = repr(value)  # an object where an error was expected
            out[name] = ["ok", value]
        except Exception as e:  # noqa: BLE001 - the outcome is the check's result
            out[name] = ["raise", type(e).__name__, str(e)]
    return out


def tensor():
    return pb_utils.Tensor("T", F32)


def req(**kw):
    args = dict(model_name="m", inputs=[tensor()], requested_output_names=["O"])
    args.update(kw)
    return pb_utils.InferenceRequest(**args)


def mc(**fields):
    cfg = {"name": "m", "max_batch_size": 0, "input": [], "output": []}
    cfg.update(fields)
    return pb_utils.ModelConfig(json.dumps(cfg))


def sender_rules(request):
    """A model that is not decoupled answering through its sender."""
    s = request.get_response_sender()
    ok = pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", np.array([b"sender"], np.object_))])
    final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    return run([
        ("sender_final_first", lambda: s.send(flags=final)),
        ("sender_bad_flag", lambda: s.send(ok, flags=2)),
        ("sender_no_response", lambda: s.send(None, 0)),
        ("sender_not_a_response", lambda: s.send("x")),
        ("sender_first", lambda: s.send(ok)),
        ("sender_second", lambda: s.send(ok)),
        # Before the final flag: Triton 2.51 crashes (SIGSEGV in
        # TRITONBACKEND_ResponseFactoryIsCancelled) when asked after it.
        ("sender_is_cancelled", lambda: s.is_cancelled()),
        ("sender_final", lambda: s.send(flags=final)),
        ("sender_closed", lambda: s.send(flags=final)),
    ])


class TritonPythonModel:
    def initialize(self, args):
        self.cfg = json.loads(args["model_config"])
        self.kept = {}

    def keep(self, key, family):
        self.kept[key] = family
        return family

    def execute(self, requests):
        r = requests[0]
        if r.request_id() == "sender":
            self.sender_results = sender_rules(r)
            return None
        if r.request_id() == "sender_results":
            return [pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUT", np.array([json.dumps(self.sender_results).encode()], np.object_))])]
        cfg = self.cfg
        C = pb_utils
        checks = [
            # module functions and constants
            ("flags", lambda: [C.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START, C.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
                               C.TRITONSERVER_RESPONSE_COMPLETE_FINAL, C.TRITONSERVER_REQUEST_RELEASE_ALL,
                               C.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE]),
            ("string_to_numpy_table", lambda: sorted(C.TRITON_STRING_TO_NUMPY)),
            ("string_to_numpy", lambda: [C.triton_string_to_numpy(t).__name__ for t in ("TYPE_BOOL", "TYPE_FP32",
                                                                                      "TYPE_STRING")]),
            ("string_to_numpy_unknown", lambda: C.triton_string_to_numpy("FP32")),
            ("to_numpy_type", lambda: [getattr(C.triton_to_numpy_type(i), "__name__", None) for i in (1, 11, 13, 14)]),
            ("numpy_to_triton", lambda: [C.numpy_to_triton_type(t) for t in (np.bool_, np.float32, np.dtype("int64"),
                                                                             np.object_, np.bytes_)]),
            ("numpy_to_triton_none", lambda: [C.numpy_to_triton_type(t) for t in (np.dtype("U3"), np.complex64)]),
            ("serialize", lambda: C.serialize_byte_tensor(np.array([b"ab", "c", 7], np.object_)).hex()),
            ("serialize_empty", lambda: list(C.serialize_byte_tensor(np.array([], np.object_)))),
            ("serialize_other", lambda: C.serialize_byte_tensor(F32)),
            ("deserialize", lambda: [x.decode() for x in C.deserialize_bytes_tensor(
                C.serialize_byte_tensor(np.array([b"x", b"yz"], np.object_)))]),
            ("decoupled_policy", lambda: [C.using_decoupled_model_transaction_policy(cfg),
                                          C.using_decoupled_model_transaction_policy(
                                              {"model_transaction_policy": {"decoupled": True}})]),
            ("config_by_name", lambda: [C.get_input_config_by_name(cfg, "IN")["data_type"],
                                        C.get_output_config_by_name(cfg, "OUT")["data_type"],
                                        C.get_input_config_by_name(cfg, "nope")]),
            ("tensor_by_name", lambda: [C.get_input_tensor_by_name(r, "IN").name(),
                                        C.get_input_tensor_by_name(r, "nope")]),
            # TritonError
            ("error_codes", lambda: [int(getattr(C.TritonError, n)) for n in (
                "UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS",
                "CANCELLED")]),
            ("error_default", lambda: [C.TritonError("m").message(), int(C.TritonError("m").code())]),
            ("error_code", lambda: int(C.TritonError(b"m", C.TritonError.NOT_FOUND).code())),
            ("error_none", lambda: C.TritonError(None)),
            ("error_code_int", lambda: int(C.TritonError("m", 3).code())),
            ("metric_kind_int", lambda: C.MetricFamily("surface_int_kind", "d", 0) is None),
            ("logger_level_int", lambda: C.Logger.log("m", 1)),
            ("model_exception", lambda: issubclass(C.TritonModelException, Exception)),
            # Tensor
            ("tensor", lambda: [tensor().name(), tensor().shape(), tensor().triton_dtype(), tensor().is_cpu(),
                                tensor().as_numpy().tolist()]),
            ("tensor_bytes_name", lambda: C.Tensor(b"B", F32).name()),
            ("tensor_bytes_array", lambda: [C.Tensor("S", np.array([b"a"], np.object_)).triton_dtype(),
                                            C.Tensor("S", np.array([b"a"], np.bytes_)).triton_dtype()]),
            ("tensor_empty_name", lambda: C.Tensor("", F32)),
            ("tensor_list", lambda: C.Tensor("L", [1, 2])),
            ("tensor_dtype", lambda: C.Tensor("X", np.zeros(2, np.complex64))),
            ("tensor_contiguous", lambda: C.Tensor("N", np.arange(6, dtype=np.int32).reshape(2, 3).T).as_numpy()
             .flags.c_contiguous),
            ("tensor_dlpack", lambda: C.Tensor.from_dlpack("D", tensor()).as_numpy().tolist()),
            ("tensor_dlpack_capsule", lambda: C.Tensor.from_dlpack("D", tensor().to_dlpack()).as_numpy().tolist()),
            ("tensor_dlpack_other", lambda: C.Tensor.from_dlpack("D", [1.0])),
            ("tensor_dlpack_bytes", lambda: C.Tensor("S", np.array([b"a"], np.object_)).to_dlpack()),
            # InferenceResponse
            ("response", lambda: [len(C.InferenceResponse().output_tensors()), C.InferenceResponse().has_error(),
                                  C.InferenceResponse().error(), C.InferenceResponse().parameters()]),
            ("response_tuple", lambda: len(C.InferenceResponse(output_tensors=(tensor(),)).output_tensors())),
            ("response_error", lambda: C.InferenceResponse(error=C.TritonError("bad")).error().message()),
            ("response_error_str", lambda: C.InferenceResponse(error="bad")),
            ("response_parameters", lambda: json.loads(C.InferenceResponse(parameters={"a": 1, "b": "x"})
                                                       .parameters())),
            ("response_parameters_str", lambda: C.InferenceResponse(parameters="{}")),
            ("response_parameters_float", lambda: C.InferenceResponse(parameters={"f": 0.5})),
            ("response_parameters_key", lambda: C.InferenceResponse(parameters={1: 1})),
            # InferenceRequest (built for BLS)
            ("request_bytes", lambda: [req(model_name=b"m", request_id=b"id", requested_output_names=[b"O"])
                                       .request_id(), sorted(req(requested_output_names=(b"O", "P"))
                                                             .requested_output_names())]),
            ("request_numpy_ints", lambda: [req(flags=np.uint32(1)).flags(), req(timeout=np.int64(5)).timeout()]),
            ("request_defaults", lambda: [req().request_id(), req().correlation_id(), req().flags(), req().timeout(),
                                          json.loads(req().parameters())]),
            ("request_correlation", lambda: [req(correlation_id="c").correlation_id(),
                                             req(correlation_id=7).correlation_id()]),
            ("request_correlation_float", lambda: req(correlation_id=1.5)),
            ("request_flags_float", lambda: req(flags=1.5)),
            ("request_no_inputs", lambda: C.InferenceRequest(model_name="m", requested_output_names=["O"])),
            ("request_model_name_none", lambda: req(model_name=None)),
            ("request_inputs_not_tensors", lambda: req(inputs=[F32])),
            ("request_parameters", lambda: json.loads(req(parameters={"k": True}).parameters())),
            ("request_parameters_str", lambda: req(parameters="{}")),
            ("request_set_flags", lambda: (lambda q: (q.set_flags(2), q.flags())[1])(req())),
            ("request_trace", lambda: req().trace().get_context()),
            ("request_preferred_memory", lambda: req(preferred_memory=C.PreferredMemory(C.TRITONSERVER_MEMORY_CPU, 0))
             .flags()),
            ("request_exec_decoupled_str", lambda: req().exec(decoupled="yes")),
            # the request being executed
            ("executed", lambda: [r.request_id(), r.correlation_id(), r.flags(), list(r.requested_output_names()),
                                  json.loads(r.parameters()), r.is_cancelled()]),
            # Logger
            ("logger", lambda: [C.Logger.log("surface log", C.Logger.WARNING), C.Logger.log_info("i"),
                                C.Logger.log_warn("w"), C.Logger.log_error("e"), C.Logger.log_verbose("v"),
                                int(C.Logger.LogLevel.VERBOSE), int(C.Logger.ERROR)]),
            ("logger_none", lambda: C.Logger.log(None)),
            # metrics
            ("metric_kinds", lambda: [int(C.MetricFamily.COUNTER), int(C.MetricFamily.GAUGE),
                                      int(C.MetricFamily.HISTOGRAM)]),
            ("metric_gauge", lambda: (lambda f: (lambda m: (m.set(np.float32(2.5)), m.value())[1])(
                f.Metric(labels={"k": "v"})))(self.keep("g", C.MetricFamily("surface_gauge", "a gauge",
                                                                            C.MetricFamily.GAUGE)))),
            ("metric_histogram", lambda: self.keep("h", C.MetricFamily("surface_hist", "h", C.MetricFamily.HISTOGRAM))
             .Metric(buckets=[1.0, 2.0]).observe(1) is None),
            ("metric_family_gone", lambda: C.MetricFamily("surface_gone", "c", C.MetricFamily.COUNTER)
             .Metric().increment(1)),
            ("metric_label_int", lambda: self.kept["g"].Metric(labels={"a": 1})),
            ("metric_labels", lambda: C.MetricFamily("surface_c1", "c", C.MetricFamily.COUNTER).Metric(labels=[1])),
            ("metric_buckets_counter", lambda: C.MetricFamily("surface_c2", "c", C.MetricFamily.COUNTER)
             .Metric(buckets=[1.0])),
            ("metric_no_buckets", lambda: C.MetricFamily("surface_h2", "h", C.MetricFamily.HISTOGRAM).Metric()),
            ("metric_buckets_tuple", lambda: C.MetricFamily("surface_h3", "h", C.MetricFamily.HISTOGRAM)
             .Metric(buckets=(1.0,))),
            # ModelConfig (auto-complete), built from a JSON text as the stub does
            ("mc_max_batch_down", lambda: mc(max_batch_size=8).set_max_batch_size(4)),
            ("mc_max_batch_up", lambda: (lambda m: (m.set_max_batch_size(16), m.as_dict()["max_batch_size"])[1])(
                mc(max_batch_size=8))),
            ("mc_dynamic_after_sequence", lambda: mc(sequence_batching={}).set_dynamic_batching()),
            ("mc_input_property", lambda: mc().add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [1],
                                                          "format": "FORMAT_NONE"})),
            ("mc_output_property", lambda: mc().add_output({"name": "B", "data_type": "TYPE_FP32", "dims": [1],
                                                            "optional": True})),
            ("mc_input_no_name", lambda: mc().add_input({"data_type": "TYPE_FP32", "dims": [1]})),
            ("mc_input_no_dims", lambda: mc().add_input({"name": "A", "data_type": "TYPE_FP32"})),
            ("mc_input_datatype", lambda: mc(input=[{"name": "A", "data_type": "TYPE_INT32", "dims": [1]}])
             .add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [1]})),
            ("mc_output_dims", lambda: mc(output=[{"name": "B", "data_type": "TYPE_FP32", "dims": [3]}])
             .add_output({"name": "B", "data_type": "TYPE_FP32", "dims": [2]})),
            ("mc_input_merge", lambda: (lambda m: (m.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [2]}),
                                                   m.as_dict()["input"])[1])(
                mc(input=[{"name": "A", "data_type": "TYPE_INVALID", "dims": []}]))),
            ("mc_policy_property", lambda: mc().set_model_transaction_policy({"sequence": True})),
            ("mc_policy_change", lambda: mc(model_transaction_policy={"decoupled": True})
             .set_model_transaction_policy({"decoupled": False})),
            # model control
            ("model_ready", lambda: [C.is_model_ready("surface"), C.is_model_ready(b"surface", "1")]),
            # the C++ module by its own name
            ("c_module", lambda: __import__("c_python_backend_utils").Tensor is C.Tensor),
            # the names pb_utils takes from c_python_backend_utils
            ("names", lambda: [n for n in ("TritonError", "TritonModelException", "Tensor", "InferenceRequest",
                                           "InferenceResponse", "Logger", "PreferredMemory",
                                           "TRITONSERVER_MEMORY_GPU", "TRITONSERVER_MEMORY_CPU", "MetricFamily",
                                           "load_model", "unload_model", "is_model_ready", "ModelConfig")
                               if not hasattr(C, n)]),
        ]
        results = run(checks)
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("OUT", np.array([json.dumps(results).encode()], np.object_))])]
'''

TYPE_ERROR_INIT = ("raise", "TypeError", "__init__(): incompatible constructor arguments.")
NOT_DICT = ("raise", "TritonModelException", "Expect N8pybind114dictE, got <class 'str'>")
SURFACE_WANT = {
    "flags": ("ok", [1, 2, 1, 1, 2]),
    "string_to_numpy_table": ("ok", sorted(["TYPE_BOOL", "TYPE_UINT8", "TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64",
                                            "TYPE_INT8", "TYPE_INT16", "TYPE_INT32", "TYPE_INT64", "TYPE_FP16",
                                            "TYPE_FP32", "TYPE_FP64", "TYPE_STRING"])),
    "string_to_numpy": ("ok", ["bool", "float32", "object_"]),
    "string_to_numpy_unknown": ("raise", "KeyError", "'FP32'"),
    "to_numpy_type": ("ok", ["bool_", "float32", "object_", None]),
    "numpy_to_triton": ("ok", [1, 11, 9, 13, 13]),
    "numpy_to_triton_none": ("ok", [None, None]),
    "serialize": ("ok", "0200000061620100000063010000003" + "7"),
    "serialize_empty": ("ok", []),
    "serialize_other": ("ok", None),
    "deserialize": ("ok", ["x", "yz"]),
    "decoupled_policy": ("ok", [False, True]),
    "config_by_name": ("ok", ["TYPE_STRING", "TYPE_STRING", None]),
    "tensor_by_name": ("ok", ["IN", None]),
    "error_codes": ("ok", [0, 1, 2, 3, 4, 5, 6, 7]),
    "error_default": ("ok", ["m", 1]),
    "error_code": ("ok", 2),
    "error_none": TYPE_ERROR_INIT,
    "error_code_int": TYPE_ERROR_INIT,  # an enum member, not an int, as pybind11 takes enums
    "metric_kind_int": TYPE_ERROR_INIT,
    "logger_level_int": ("raise", "TypeError", "log(): incompatible function arguments."),
    "model_exception": ("ok", True),
    "tensor": ("ok", ["T", [2], 11, True, [1.5, 2.5]]),
    "tensor_bytes_name": ("ok", "B"),
    "tensor_bytes_array": ("ok", [13, 13]),
    "tensor_empty_name": ("raise", "TritonModelException", "Tensor name cannot be an empty string."),
    "tensor_list": TYPE_ERROR_INIT,
    "tensor_dtype": ("raise", "TritonModelException", "NumPy dtype is not supported."),
    "tensor_contiguous": ("ok", True),
    "tensor_dlpack": ("ok", [1.5, 2.5]),
    "tensor_dlpack_capsule": ("ok", [1.5, 2.5]),
    "tensor_dlpack_other": ("raise", "TritonModelException", "Provided tensor is not supported. Tensor must be a "
                            "DLPack capsule"),
    "tensor_dlpack_bytes": ("raise", "TritonModelException", "DLPack does not have support for string tensors."),
    "response": ("ok", [0, False, None, "{}"]),
    "response_tuple": ("ok", 1),
    "response_error": ("ok", "bad"),
    "response_error_str": TYPE_ERROR_INIT,
    "response_parameters": ("ok", {"a": 1, "b": "x"}),
    "response_parameters_str": NOT_DICT,
    "response_parameters_float": ("raise", "TritonModelException",
                                  "Expect parameters values to have type bool/int/str, found type <class 'float'>"),
    "response_parameters_key": ("raise", "TritonModelException",
                                "Expect parameters keys to have type str, found type <class 'int'>"),
    "request_bytes": ("ok", ["id", ["O", "P"]]),  # sorted: Triton's is a set
    "request_numpy_ints": ("ok", [1, 5]),
    "request_defaults": ("ok", ["", 0, 0, 0, {}]),
    "request_correlation": ("ok", ["c", 7]),
    "request_correlation_float": ("raise", "TritonModelException", "Correlation ID must be integer or string"),
    "request_flags_float": TYPE_ERROR_INIT,
    "request_no_inputs": TYPE_ERROR_INIT,
    "request_model_name_none": TYPE_ERROR_INIT,
    "request_inputs_not_tensors": TYPE_ERROR_INIT,
    "request_parameters": ("ok", {"k": True}),
    "request_parameters_str": NOT_DICT,
    "request_set_flags": ("ok", 2),
    "request_trace": ("ok", None),
    "request_preferred_memory": ("ok", 0),
    "request_exec_decoupled_str": ("raise", "TypeError", "exec(): incompatible function arguments."),
    "executed": ("ok", ["rid", 42, 0, ["OUT"], {"p": "v"}, False]),
    "logger": ("ok", [None, None, None, None, None, 3, 2]),
    "logger_none": ("raise", "TypeError", "log(): incompatible function arguments."),
    "metric_kinds": ("ok", [0, 1, 2]),
    "metric_gauge": ("ok", 2.5),
    "metric_histogram": ("ok", True),
    "metric_family_gone": ("raise", "TritonModelException", "Failed to increment metric value: Invalid metric "
                           "operation as the corresponding 'MetricFamily' has been deleted."),
    "metric_label_int": ("raise", "TritonModelException", "Error when creating Metric: Failed to process the "
                         "request for model '"),
    "metric_labels": ("raise", "TritonModelException", "Failed to create metric. Labels must be a dictionary."),
    "metric_buckets_counter": ("raise", "TritonModelException", "Failed to create metric. Unexpected buckets found."),
    "metric_no_buckets": ("raise", "TritonModelException", "Failed to create metric. Missing required buckets."),
    "metric_buckets_tuple": ("raise", "TritonModelException", "Failed to create metric. Buckets must be a list."),
    "mc_max_batch_down": ("raise", "ValueError", "configuration specified max_batch_size 8, but in "
                          "auto-complete-config function for model 'm' specified max_batch_size 4"),
    "mc_max_batch_up": ("ok", 16),
    "mc_dynamic_after_sequence": ("raise", "ValueError", "Configuration specified scheduling_choice as "
                                  "'sequence_batching', but auto-complete-config function for model 'm' tries to "
                                  "set scheduling_choice as 'dynamic_batching'"),
    "mc_input_property": ("raise", "ValueError", "input 'A' in auto-complete-config function for model 'm' contains "
                          "property other than 'name', 'data_type', 'dims' and 'optional'."),
    "mc_output_property": ("raise", "ValueError", "output 'B' in auto-complete-config function for model 'm' "
                           "contains property other than 'name', 'data_type' and 'dims'."),
    "mc_input_no_name": ("raise", "ValueError", "input in auto-complete-config function for model 'm' is missing "
                         "'name' property."),
    "mc_input_no_dims": ("raise", "ValueError", "input 'A' in auto-complete-config function for model 'm' is "
                         "missing 'dims' property."),
    "mc_input_datatype": ("raise", "ValueError", "unable to load model 'm', configuration expects datatype "
                          "TYPE_INT32 for input 'A', model provides TYPE_FP32"),
    "mc_output_dims": ("raise", "ValueError", "model 'm', tensor 'B': the model expects dims [2] but the model "
                       "configuration specifies dims [3]"),
    "mc_input_merge": ("ok", [{"name": "A", "data_type": "TYPE_FP32", "dims": [2]}]),
    "mc_policy_property": ("raise", "ValueError", "model transaction property in auto-complete-config function for "
                           "model 'm' contains property other than 'decoupled'."),
    "mc_policy_change": ("raise", "ValueError", "trying to change decoupled property in auto-complete-config for "
                         "model 'm', which is already set to 'True'."),
    "model_ready": ("ok", [True, True]),
    "c_module": ("ok", True),
    "names": ("ok", []),
}
SENDER_WANT = {
    "sender_final_first": ("raise", "TritonModelException", "Unable to send response. Non-decoupled model cannot "
                           "send complete final before sending a response."),
    "sender_bad_flag": ("raise", "TritonModelException", "Unable to send response. Unsupported flag provided."),
    "sender_no_response": ("raise", "TritonModelException", "Inference Response object must be provided when the "
                           "response flags is set to zero."),
    "sender_not_a_response": ("raise", "TypeError", "send(): incompatible function arguments."),
    "sender_first": ("ok", None),
    "sender_second": ("raise", "TritonModelException", "Unable to send response. Non-decoupled model cannot send "
                      "more than one response."),
    "sender_final": ("ok", None),
    "sender_closed": ("raise", "TritonModelException", "Unable to send response. Response sender has been closed."),
    "sender_is_cancelled": ("ok", False),
}


# Rows Triton 2.51 (the oracle here, r24.10) cannot show: response
# parameters came in a later release, and its Tensor.triton_dtype() raises
# TypeError (its datatype enum is not registered with pybind11; r25.07 is
# the same), where ours returns the TRITONSERVER_TYPE_* number.
NOT_IN_TRITON_251 = {"tensor", "tensor_bytes_array", "response", "response_parameters", "response_parameters_str",
                     "response_parameters_float", "response_parameters_key"}


def compare(got, want):
    bad = []
    for name, expected in want.items():
        if TARGET == "triton" and name in NOT_IN_TRITON_251:
            continue
        outcome = got.get(name)
        if outcome is None:
            bad.append(f"{name}: not run")
        elif expected[0] == "ok":
            if outcome != list(expected):
                bad.append(f"{name}: {outcome} != {list(expected)}")
        elif outcome[:2] != list(expected[:2]) or not outcome[2].startswith(expected[2]):
            bad.append(f"{name}: {outcome} does not start {list(expected)}")
    return bad


def test_pb_utils_surface():
    cfg = config("surface", [("IN", "TYPE_STRING", "1")], [("OUT", "TYPE_STRING", "1")])
    with serve({"surface": (SURFACE, cfg)}) as s:
        with grpc(s) as c:
            r = c.infer("surface", inputs_of(grpcclient, [("IN", np.array([b"x"], np.object_), "BYTES")]),
                        request_id="rid", sequence_id=42, parameters={"p": "v"},
                        outputs=[grpcclient.InferRequestedOutput("OUT")])
            got = json.loads(r.as_numpy("OUT")[0])
            bad = compare(got, SURFACE_WANT)
            assert not bad, "\n".join(bad)
            assert "surface log" in s.log()
            # The sender's rules (a model that is not decoupled): the one
            # response it sent reaches the client; the next request fetches
            # the outcomes.
            r = c.infer("surface", inputs_of(grpcclient, [("IN", np.array([b"x"], np.object_), "BYTES")]),
                        request_id="sender")
            assert r.as_numpy("OUT")[0] == b"sender"
            r = c.infer("surface", inputs_of(grpcclient, [("IN", np.array([b"x"], np.object_), "BYTES")]),
                        request_id="sender_results")
            bad = compare(json.loads(r.as_numpy("OUT")[0]), SENDER_WANT)
            assert not bad, "\n".join(bad)


def test_async_exec_is_a_future_started_at_once():
    """async_exec returns an asyncio future already running (Triton's runs
    exec in the loop's executor when called), not a coroutine."""
    model = '''
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "INPUT0")
        y = pb_utils.get_input_tensor_by_name(requests[0], "INPUT1")
        fut = pb_utils.InferenceRequest(model_name="add_sub", inputs=[x, y],
                                        requested_output_names=["OUTPUT0"]).async_exec()
        kind = "future" if isinstance(fut, asyncio.Future) else type(fut).__name__
        reply = await fut
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.get_output_tensor_by_name(reply, "OUTPUT0"),
            pb_utils.Tensor("KIND", np.array([kind.encode()], np.object_))])]
'''
    models = {"add_sub": (SUM_DIFF, config("add_sub", *ADD_SUB_IO)),
              "caller": (model, config("caller", ADD_SUB_IO[0], [("OUTPUT0", "TYPE_FP32", "4"),
                                                                  ("KIND", "TYPE_STRING", "1")]))}
    with serve(models) as s, http(s) as c:
        a, b, pairs = two_inputs()
        r = c.infer("caller", inputs_of(httpclient, pairs))
        assert np.allclose(r.as_numpy("OUTPUT0"), a + b)
        assert r.as_numpy("KIND")[0] == b"future"


def test_response_iterator_iterates_again():
    """A finished ResponseIterator starts from its first response when
    iterated anew; cancel() is there."""
    model = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        n = pb_utils.get_input_tensor_by_name(requests[0], "IN")
        it = pb_utils.InferenceRequest(model_name="square_int32", inputs=[n],
                                       requested_output_names=["OUT"]).exec(decoupled=True)
        first = [len(r.output_tensors()) for r in it]
        second = [len(r.output_tensors()) for r in it]
        if hasattr(it, "cancel"):  # since r25.xx; Triton 2.51 has none
            it.cancel()
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("A", np.array(first, np.int32)), pb_utils.Tensor("B", np.array(second, np.int32))])]
'''
    models = {"square_int32": (SQUARE, square_config()),
              "iter": (model, config("iter", [("IN", "TYPE_INT32", "1")],
                                     [("A", "TYPE_INT32", "-1"), ("B", "TYPE_INT32", "-1")]))}
    with serve(models) as s, http(s) as c:
        r = c.infer("iter", inputs_of(httpclient, [("IN", np.array([2], np.int32), "INT32")]))
        assert r.as_numpy("A").tolist() == [1, 1, 0] and r.as_numpy("B").tolist() == [1, 1, 0]



def test_requested_output_not_made_is_left_out():
    """A requested output the model does not make is missing from the
    response, not an error (Triton 2.51's Python backend answers so)."""
    model = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT1", np.array([1.0], np.float32))])
                for _ in requests]
'''
    cfg = config("partial", [("INPUT0", "TYPE_FP32", "1")], [("OUTPUT0", "TYPE_FP32", "1"),
                                                            ("OUTPUT1", "TYPE_FP32", "1")])
    with serve({"partial": (model, cfg)}) as s, http(s) as c:
        for wanted, got in ((["OUTPUT0"], []), (["OUTPUT0", "OUTPUT1"], ["OUTPUT1"]), (None, ["OUTPUT1"])):
            r = c.infer("partial", inputs_of(httpclient, [("INPUT0", np.array([1], np.float32), "FP32")]),
                        outputs=[httpclient.InferRequestedOutput(n) for n in wanted] if wanted else None)
            assert [o["name"] for o in r.get_response().get("outputs", [])] == got, wanted


BLS_ERRORS = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


def outcome(reply):
    return [reply.error().message(), int(reply.error().code())] if reply.has_error() else \\
        [t.name() for t in reply.output_tensors()]


class TritonPythonModel:
    def execute(self, requests):
        count = pb_utils.get_input_tensor_by_name(requests[0], "IN")
        zeros = [pb_utils.Tensor("INPUT0", np.zeros(4, np.float32)), pb_utils.Tensor("INPUT1", np.zeros(4, np.float32))]

        def call(model, inputs, outputs, decoupled=False, **kw):
            r = pb_utils.InferenceRequest(model_name=model, inputs=inputs, requested_output_names=outputs, **kw)
            if decoupled:
                return [outcome(x) for x in r.exec(decoupled=True)]
            return outcome(r.exec())

        got = {
            "decoupled_without_flag": call("square_int32", [count], ["OUT"]),
            "plain_with_flag": call("add_sub", zeros, ["OUTPUT0"], decoupled=True),
            "unknown": call("nope", zeros, ["OUTPUT0"]),
            "unknown_decoupled": call("nope", zeros, ["OUTPUT0"], decoupled=True),
            "version": call("add_sub", zeros, ["OUTPUT0"], model_version=7),
            "no_inputs": call("add_sub", [], ["OUTPUT0"]),
            "output_name": call("add_sub", zeros, ["NOPE"]),
        }
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([json.dumps(got).encode()], np.object_))])]
'''


def test_bls_errors_say_tritons_sentences():
    """A BLS request that never runs comes back as a response whose error
    is "Model <name> - Error when running inference: <reason>", with
    Triton's reasons for a model that is not ready and for a decoupled
    model called without exec(decoupled=True)."""
    models = {"square_int32": (SQUARE, square_config()), "add_sub": (SUM_DIFF, config("add_sub", *ADD_SUB_IO)),
              "bls_errors": (BLS_ERRORS, config("bls_errors", [("IN", "TYPE_INT32", "1")],
                                                [("OUT", "TYPE_STRING", "1")]))}
    run = "Model {} - Error when running inference: "
    not_ready = "Failed for execute the inference request. Model '{}' is not ready."
    want = {
        "decoupled_without_flag": run.format("square_int32") + "Model square_int32 is using the decoupled. The "
        "current BLS request call doesn't support models using the decoupled transaction policy. Please use "
        "'decoupled=True' argument to the 'exec' or 'async_exec' calls for decoupled models.'",
        "unknown": run.format("nope") + not_ready.format("nope"),
        "version": run.format("add_sub") + not_ready.format("add_sub"),
        # The core's own reasons follow the sentence (Triton's core words
        # them its way).
        "no_inputs": run.format("add_sub"),
        "output_name": run.format("add_sub"),
    }
    with serve(models) as s, http(s) as c:
        r = c.infer("bls_errors", inputs_of(httpclient, [("IN", np.array([2], np.int32), "INT32")]))
        got = json.loads(r.as_numpy("OUT")[0])
        assert got["plain_with_flag"] == [["OUTPUT0"]], got
        assert got["unknown_decoupled"] == [got["unknown"]], got
        for name, text in want.items():
            message, code = got[name]
            assert message.startswith(text) and code == 1, (name, message, code)


RETURNS = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        how = requests[0].request_id()
        if how == "raise":
            raise ValueError("boom")
        if how == "tuple":
            return tuple(pb_utils.InferenceResponse() for _ in requests)
        if how == "two":
            return [pb_utils.InferenceResponse(), pb_utils.InferenceResponse()]
        if how == "str":
            return ["x"]
        return [pb_utils.InferenceResponse()]
'''


def test_execute_failures_say_tritons_sentences():
    """What execute returns is checked as Triton's stub checks it, each
    failure answered with "Failed to process the request(s) for model
    '<instance>', message: <reason>"."""
    models = {"returns": (RETURNS, config("returns", [("IN", "TYPE_INT32", "1")], [("OUT", "TYPE_INT32", "1")])),
              "square_returns": (RETURNS, square_config("square_returns"))}
    # The instance's name differs: Triton's core names a lone instance
    # "<group>_0" ("returns_0_0"), ours "<group>" ("returns_0").
    lead = r"Failed to process the request\(s\) for model '(returns_0|returns_0_0)', message: "
    want = {
        "raise": lead + re.escape("ValueError: boom"),
        "tuple": lead + re.escape("Expected a list in the execute return, found type '<class 'tuple'>'."),
        "two": lead + re.escape("Number of InferenceResponse objects do not match the number of InferenceRequest "
                                "objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:2"),
        "str": lead + re.escape("Expected an 'InferenceResponse' object in the execute function return list, "
                                "found type '<class 'str'>'."),
    }
    with serve(models) as s:
        with http(s) as c:
            pairs = [("IN", np.array([1], np.int32), "INT32")]
            assert c.infer("returns", inputs_of(httpclient, pairs), request_id="ok").get_response()["outputs"] == []
            for how, text in want.items():
                try:
                    c.infer("returns", inputs_of(httpclient, pairs), request_id=how)
                    raise AssertionError(f"{how}: no error")
                except InferenceServerException as e:
                    assert re.match(text, e.message()), (how, e.message())
        got = stream(s, "square_returns", [("IN", np.array([1], np.int32), "INT32")])
        errors = [e.message() for _, e in got if e is not None]
        assert errors and re.match(
            r"Failed to process the request\(s\) for model '(square_returns_0(_0)?)', message: Python model "
            r"'\1' is using the decoupled mode and the execute function must return None\.", errors[-1]), got


def test_load_and_execute_failures_start_with_pythons_text():
    """A model.py that cannot load fails with the exception as Python
    prints it first, as in Triton (whose core words the lead of a failed
    load its own way); a model without execute answers Triton's sentence."""
    def cfg(name):
        return config(name, [("IN", "TYPE_INT32", "1")], [("OUT", "TYPE_INT32", "1")])
    models = {
        "init_raises": ("class TritonPythonModel:\n    def initialize(self, args):\n"
                        "        raise ValueError('no init')\n\n"
                        "    def execute(self, requests):\n        return None\n", cfg("init_raises")),
        "syntax": ("class TritonPythonModel:\n    def execute(self, r)\n        return None\n", cfg("syntax")),
        "noclass": ("x = 1\n", cfg("noclass")),
        "import_fails": ("import no_such_module_xyz\n", cfg("import_fails")),
        "noexecute": ("class TritonPythonModel:\n    pass\n", cfg("noexecute")),
    }
    want = {"init_raises": "ValueError: no init",
            "syntax": "SyntaxError: expected ':' (model.py, line 2)",
            "noclass": "AttributeError: module '1.model' has no attribute 'TritonPythonModel'",
            "import_fails": "ModuleNotFoundError: No module named 'no_such_module_xyz'"}
    with serve(models, "--model-control-mode=explicit") as s, http(s) as c:
        for name, text in want.items():
            try:
                c.load_model(name)
                raise AssertionError(f"{name} loaded")
            except InferenceServerException as e:
                assert text in e.message(), (name, e.message())
        c.load_model("noexecute")
        try:
            c.infer("noexecute", inputs_of(httpclient, [("IN", np.array([1], np.int32), "INT32")]))
            raise AssertionError("no error")
        except InferenceServerException as e:
            assert re.match(r"Failed to process the request\(s\) for model 'noexecute_0(_0)?', message: Python model "
                            r"\S+/noexecute/1/model\.py does not implement `execute` method\.", e.message()), e
