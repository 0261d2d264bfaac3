"""The onnxruntime backend through Triton's own client, tritonclient, over
HTTP (binary and JSON tensors) and gRPC: ONNX models built for each run
by tools/onnx_models.py (python3-onnx), served by ONNX Runtime (fetched by
scripts/fetch_pypi.sh, copied beside the backend).

Covers batching (dynamic batcher, several requests in one Run), a model
without batching, every datatype (BYTES as ONNX strings), scalars, implicit
state with the sequence batcher (several sequences interleaved), the
configuration completed from the model, and the refusals: a configuration
that disagrees with the model, a corrupt model file, bad BYTES data.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import concurrent.futures
import contextlib
import json
import os
import struct
import sys
import tempfile
import time

import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from test_nereid_cli import BACKENDS, Server, listening_ports, running
from test_python_backend import PROTOCOLS, client, datatypes_of, failure, infer, output_names, outputs_of
from test_vertex_ai import call

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import onnx_models  # noqa: E402

# One intra-op thread: ONNX Runtime then runs on the instance thread, so the
# sanitizers see every thread that touches our buffers.
THREADS = """
parameters { key: "intra_op_thread_count" value { string_value: "1" } }
parameters { key: "inter_op_thread_count" value { string_value: "1" } }
"""

CONFIGS = {
    "add_sub": """
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "fixed_add_sub": """
platform: "onnxruntime_onnx"
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
""",
    "strings": """
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_STRING dims: [ -1 ] } ]
""",
    "accumulate": """
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 20000 }
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32
            dims: [ 1 ] initial_state { name: "zero" data_type: TYPE_INT32 dims: [ 1 ]
            zero_data: true } } ]
}
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "ragged": """
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [
  { kind: BATCH_ELEMENT_COUNT target_name: "COUNT" data_type: TYPE_FP32 source_input: "INPUT" },
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "ACC" data_type: TYPE_FP32 source_input: "INPUT" },
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "ACC_ZERO" data_type: TYPE_FP32
    source_input: "INPUT" },
  { kind: BATCH_ITEM_SHAPE target_name: "ITEM" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "FLAT" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "MAX" data_type: TYPE_FP32 source_input: "INPUT" } ]
output [ { name: "OUT_COUNT" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "OUT_ACC" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "OUT_START" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "OUT_ITEM" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "OUT_FLAT" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "OUT_MAX" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "OUT_TOTAL" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 5000000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "ragged_out": """
backend: "onnxruntime"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: "Y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "X" } ]
dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 5000000 }
instance_group [ { count: 1 kind: KIND_CPU } ]
""",
    "scalar": """
backend: "onnxruntime"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
""",
}


def make_repo(root, models):
    """models: {name: (onnx model name, config text or None)}."""
    for name, (source, config) in models.items():
        os.makedirs(os.path.join(root, name, "1"), exist_ok=True)
        onnx_models.write(os.path.join(root, name, "1"), source)
        os.rename(os.path.join(root, name, "1", f"{source}.onnx"), os.path.join(root, name, "1", "model.onnx"))
        if config is not None:
            with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
                f.write(config + (THREADS if "parameters" not in config else ""))


def settled_stats(s, model, ready):
    """The model's statistics once ready(stats) holds (10 s at most). A
    backend reports them after it sent the responses, per request and per
    batch in separate calls: a client that just got its answer may read
    them before they are all in."""
    deadline = time.monotonic() + 10
    with client(s) as c:
        while True:
            stats = c.get_inference_statistics(model)["model_stats"][0]
            if ready(stats) or time.monotonic() > deadline:
                return stats
            time.sleep(0.02)


def start(root, *flags, backends=BACKENDS, env=None):
    return Server([f"--model-repository={root}", f"--backend-directory={backends}", "--http-port=0",
                   "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                   "--allow-metrics=false", *flags], env=env)


def take_ports(s, lines):
    s.ports = listening_ports(lines)
    s.port = s.ports["http"]


@contextlib.contextmanager
def serve(models, *flags):
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, models)
        s = start(root, *flags)
        with running(s) as lines:
            take_ports(s, lines)
            s.root = root
            yield s


def config_of(s, model):
    """The model's configuration as JSON (HTTP), checked against the gRPC
    answer's name and max_batch_size."""
    with client(s) as h, client(s, "grpc") as g:
        config = h.get_model_config(model)
        other = g.get_model_config(model).config
    assert (other.name, other.max_batch_size) == (config["name"], config.get("max_batch_size", 0)), other
    return config


def shapes_of(result):
    return {n: list(result.as_numpy(n).shape) for n in output_names(result)}


# The ONNX model each configuration serves: its own name but where noted.
SOURCES = {"ragged_out": "doubler"}
ALL = {name: (SOURCES.get(name, name), CONFIGS[name]) for name in CONFIGS}


WAYS = (("http", True), ("http", False), ("grpc", True))  # (protocol, binary tensors)


def test_batched_unbatched_strings_and_scalar():
    with serve(ALL) as s:
        a = np.array([[1.5, 2, 3, 4], [5, 6, 7, 8]], np.float32)
        b = np.array([[1, 1, 1, 1], [2, 2, 2, 2]], np.float32)
        for protocol, binary in WAYS:
            how = dict(protocol=protocol, binary=binary)
            r = infer(s, "add_sub", [("INPUT0", a), ("INPUT1", b)], **how)
            assert shapes_of(r)["OUTPUT0"] == [2, 4] and datatypes_of(r)["OUTPUT0"] == "FP32", how
            assert outputs_of(r)["OUTPUT0"] == list((a + b).flat), how
            assert outputs_of(r)["OUTPUT1"] == list((a - b).flat), how
            # Only the requested output comes back.
            r = infer(s, "add_sub", [("INPUT0", a[:1]), ("INPUT1", b[:1])], outputs=["OUTPUT1"], **how)
            assert output_names(r) == ["OUTPUT1"], how

            r = infer(s, "fixed_add_sub", [("INPUT0", np.array([1, 2, 3, 4], np.int32)),
                                           ("INPUT1", np.array([4, 3, 2, 1], np.int32))], **how)
            assert outputs_of(r)["OUTPUT0"] == [5, 5, 5, 5], how
            assert outputs_of(r)["OUTPUT1"] == [-3, -1, 1, 3], how

            words = ["", "héllo", "a longer string with spaces", "x" * 1000]
            r = infer(s, "strings", [("INPUT", np.array([words], np.object_))], **how)
            assert [w.decode() for w in outputs_of(r)["OUTPUT"]] == words and shapes_of(r)["OUTPUT"] == [1, 4], how

            r = infer(s, "scalar", [("X", np.array([2.5], np.float32))], **how)
            assert outputs_of(r)["Y"] == [5.0] and shapes_of(r)["Y"] == [1], how

        # Statistics count the executions.
        stats = settled_stats(s, "add_sub", lambda st: st["inference_stats"]["success"]["count"] >= 2 * len(WAYS))
        assert stats["inference_stats"]["success"]["count"] == 2 * len(WAYS)


def test_session_settings_load_and_serve():
    # Each optimization level and the parallel execution mode; the settings
    # themselves are ONNX Runtime's and not visible from outside.
    models = {}
    for name, extra in (("level_basic", "optimization { graph { level: -1 } }"),
                        ("level_extended", "optimization { graph { level: 1 } }"),
                        ("level_none", "optimization { graph { level: 2 } }"),
                        ("parallel", 'parameters { key: "execution_mode" value { string_value: "1" } }'),
                        # Triton's memory settings (its qa/L0_onnx_optimization "cpu_config").
                        ("no_arena", 'parameters { key: "enable_mem_arena" value { string_value: "0" } }\n'
                                     'parameters { key: "enable_mem_pattern" value { string_value: "OFF" } }'),
                        # (shrinking needs the arena: ONNX Runtime refuses the run without it)
                        ("memory", 'parameters { key: "enable_mem_arena" value { string_value: "1" } }\n'
                                   'parameters { key: "enable_mem_pattern" value { string_value: "true" } }\n'
                                   'parameters { key: "session.use_device_allocator_for_initializers" '
                                   'value { string_value: "1" } }\n'
                                   'parameters { key: "memory.enable_memory_arena_shrinkage" '
                                   'value { string_value: "cpu:0" } }'),
                        ("bad_bool", 'parameters { key: "enable_mem_pattern" value { string_value: "maybe" } }')):
        models[name] = ("fixed_add_sub", CONFIGS["fixed_add_sub"] + THREADS + extra)
    with serve(models, "--exit-on-error=false") as s:
        for k, name in enumerate(n for n in models if n != "bad_bool"):
            r = infer(s, name, [("INPUT0", np.array([1, 2, 3, 4], np.int32)), ("INPUT1", np.ones(4, np.int32))],
                      protocol=PROTOCOLS[k % 2])
            assert outputs_of(r)["OUTPUT0"] == [2, 3, 4, 5], name
        with client(s) as c:
            index = {m["name"]: m for m in c.get_model_repository_index()}
        assert "failed to convert 'maybe' to boolean" in index["bad_bool"].get("reason", ""), index["bad_bool"]


def test_global_thread_pools_from_the_backend_settings():
    # Triton's --backend-config=onnxruntime,enable-global-threadpool=1 with
    # its thread counts: the sessions share the environment's pools (the
    # model's own counts are ignored, as there).
    models = {"fixed_add_sub": ("fixed_add_sub", CONFIGS["fixed_add_sub"])}
    with serve(models, "--backend-config=onnxruntime,enable-global-threadpool=true",
               "--backend-config=onnxruntime,intra_op_thread_count=1",
               "--backend-config=onnxruntime,inter_op_thread_count=1") as s:
        r = infer(s, "fixed_add_sub", [("INPUT0", np.array([1, 2, 3, 4], np.int32)),
                                       ("INPUT1", np.ones(4, np.int32))])
        assert outputs_of(r)["OUTPUT0"] == [2, 3, 4, 5]
        assert "global thread pools" in s.text(), s.text()
    with serve(models, "--backend-config=onnxruntime,enable-global-threadpool=maybe",
               "--exit-on-error=false") as s:
        with client(s) as c:
            index = {m["name"]: m for m in c.get_model_repository_index()}
    assert "failed to convert 'maybe' to boolean" in index["fixed_add_sub"].get("reason", ""), index


def test_dynamic_batcher_runs_requests_together():
    with serve({"add_sub": ALL["add_sub"]}) as s:
        def one(i):
            return infer(s, "add_sub", [("INPUT0", np.full((1, 4), i, np.float32)),
                                        ("INPUT1", np.ones((1, 4), np.float32))], protocol=PROTOCOLS[i % 2])
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(one, range(8)))
        for i, r in enumerate(results):
            assert outputs_of(r)["OUTPUT0"] == [i + 1.0] * 4
        stats = settled_stats(s, "add_sub", lambda st: st["inference_count"] >= 8)
        assert stats["inference_count"] == 8
        assert stats["execution_count"] < 8  # the 100 ms queue delay gathered some


def test_ragged_batch_and_every_batch_input_kind():
    # Triton's ragged batching (its qa/L0_batch_input cases): three requests
    # of 2, 3 and 5 elements run as one batch; INPUT reaches the model
    # flattened, and each batch input the backend makes comes back per
    # request.
    with serve({"ragged": ALL["ragged"]}) as s:
        def one(n):
            return infer(s, "ragged", [("INPUT", np.arange(n, dtype=np.float32).reshape(1, n))],
                         protocol=PROTOCOLS[n % 2])
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            results = list(pool.map(one, (2, 3, 5)))
        got = [outputs_of(r) for r in results]
        # Each request starts where those before it in the batch ended.
        order = sorted(zip((2, 3, 5), got), key=lambda p: p[1]["OUT_START"][0])
        assert [g["OUT_START"][0] for _, g in order] == [0.0, order[0][0], order[0][0] + order[1][0]], got
        for n, g in zip((2, 3, 5), got):
            assert g["OUT_COUNT"] == [n], g
            assert g["OUT_ACC"] == [g["OUT_START"][0] + n], g
            assert g["OUT_ITEM"] == [n] and g["OUT_FLAT"] == [n], g
            assert g["OUT_MAX"] == [5.0] and g["OUT_TOTAL"] == [10.0], g
        stats = settled_stats(s, "ragged", lambda st: st["inference_count"] >= 3)
        assert stats["execution_count"] == 1, stats

    # A batch output: the flat result split by each request's input shape.
    with serve({"ragged_out": ALL["ragged_out"]}) as s:
        def doubled(n):
            x = np.arange(1, n + 1, dtype=np.float32).reshape(1, n)
            return infer(s, "ragged_out", [("X", x)], protocol=PROTOCOLS[n % 2]).as_numpy("Y")
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            got = list(pool.map(doubled, (2, 3, 5)))
        for n, y in zip((2, 3, 5), got):
            assert y.shape == (1, n) and list(y.flat) == [2.0 * v for v in range(1, n + 1)], (n, y)
        stats = settled_stats(s, "ragged_out", lambda st: st["inference_count"] >= 3)
        assert stats["execution_count"] == 1, stats


def test_a_ragged_input_must_be_flat_in_the_model():
    config = CONFIGS["add_sub"].replace('dims: [ 4 ] },\n        { name: "INPUT1"',
                                        'dims: [ 4 ] allow_ragged_batch: true },\n        { name: "INPUT1"')
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, {"rag": ("add_sub", config)})
        s = start(root, "--model-control-mode=explicit")
        with running(s) as lines:
            take_ports(s, lines)
            with client(s) as c, pytest.raises(InferenceServerException) as e:
                c.load_model("rag")
    assert ("unable to load model 'rag', configuration expects model provides input with shape [-1]  for ragged "
            "input 'INPUT0', model provides [-1,4]") in str(e.value), e.value


def test_every_datatype():
    dims = "[ 2 ]"
    config = "backend: \"onnxruntime\"\nmax_batch_size: 2\n"
    config += "input [" + ",".join(
        f'{{ name: "IN_{t}" data_type: TYPE_{"STRING" if t == "BYTES" else t} dims: {dims} }}'
        for t in onnx_models.TYPES) + "]\n"
    config += "output [" + ",".join(
        f'{{ name: "OUT_{t}" data_type: TYPE_{"STRING" if t == "BYTES" else t} dims: {dims} }}'
        for t in onnx_models.TYPES) + "]\n"
    values = {"BOOL": [True, False], "UINT8": [0, 255], "UINT16": [1, 65535], "UINT32": [2, 4294967295],
              "UINT64": [3, 18446744073709551615], "INT8": [-128, 127], "INT16": [-32768, 32767],
              "INT32": [-2147483648, 2147483647], "INT64": [-9223372036854775808, 9223372036854775807],
              "FP16": [0.5, -2.0], "FP32": [1.25, -3.5], "FP64": [1e300, -2.5], "BF16": [1.5, -4.0],
              "BYTES": ["ab", ""]}
    dtypes = {"BOOL": bool, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64,
              "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "FP16": np.float16,
              "FP32": np.float32, "FP64": np.float64, "BF16": ml_dtypes.bfloat16, "BYTES": np.object_}
    with serve({"identities": ("identities", config)}) as s:
        # Binary tensors over HTTP (the binary extension), JSON over HTTP
        # (BF16 stays binary: tritonclient sends it no other way), and gRPC.
        for protocol, binary in WAYS:
            module = grpcclient if protocol == "grpc" else httpclient
            inputs, outputs = [], []
            for t in onnx_models.TYPES:
                i = module.InferInput(f"IN_{t}", [1, 2], t)
                array = np.array([values[t]], dtypes[t])
                if protocol == "grpc":
                    i.set_data_from_numpy(array)
                    outputs.append(module.InferRequestedOutput(f"OUT_{t}"))
                else:
                    i.set_data_from_numpy(array, binary_data=binary or t == "BF16")
                    outputs.append(module.InferRequestedOutput(f"OUT_{t}", binary_data=binary or t == "BF16"))
                inputs.append(i)
            with client(s, protocol) as c:
                r = c.infer("identities", inputs, outputs=outputs)
            types, shapes = datatypes_of(r), shapes_of(r)
            for t in onnx_models.TYPES:
                assert types[f"OUT_{t}"] == t and shapes[f"OUT_{t}"] == [1, 2], (protocol, binary, t)
                got = r.as_numpy(f"OUT_{t}").reshape(-1).tolist()
                if t == "BYTES":  # bytes from binary tensors, str from JSON
                    got = [v.decode() if isinstance(v, bytes) else v for v in got]
                assert got == values[t], (protocol, binary, t, got)


def test_implicit_state_keeps_a_running_sum_per_sequence():
    with serve({"accumulate": ALL["accumulate"]}) as s:
        def step(seq, value, start=False, end=False):
            r = infer(s, "accumulate", [("INPUT", np.array([[value]], np.int32))], protocol=PROTOCOLS[seq % 2],
                      sequence_id=seq, sequence_start=start, sequence_end=end)
            return outputs_of(r)["OUTPUT"][0]

        assert step(1, 5, start=True) == 5
        assert step(2, 100, start=True) == 100
        assert step(1, 3) == 8
        assert step(2, 1) == 101
        assert step(1, -10, end=True) == -2
        # A new sequence with a reused id starts from the initial state.
        assert step(1, 4, start=True) == 4
        assert step(2, 1, end=True) == 102

        # Sequences running side by side (batched together by the sequence
        # batcher) each keep their own sum.
        def sequence(seq):
            total = 0
            for k in range(6):
                total += seq * 10 + k
                got = step(seq, seq * 10 + k, start=(k == 0), end=(k == 5))
                assert got == total, (seq, k, got, total)
            return total
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            totals = list(pool.map(sequence, [11, 12, 13, 14]))
        assert totals == [sum(s * 10 + k for k in range(6)) for s in [11, 12, 13, 14]]

        # The state is not an output of the model's configuration.
        for protocol, status in (("http", "400"), ("grpc", "StatusCode.INVALID_ARGUMENT")):
            e = failure(s, "accumulate", [("INPUT", np.array([[1]], np.int32))], protocol, outputs=["STATE_OUT"],
                        sequence_id=9, sequence_start=True)
            assert e.status() == status, (protocol, e)


def test_configuration_completed_from_the_model():
    # No config.pbtxt at all: inputs, outputs and batching come from model.onnx.
    with serve({"auto": ("add_sub", None), "auto_strings": ("strings", None),
                "auto_fixed": ("fixed_add_sub", None)}) as s:
        config = config_of(s, "auto")
        assert config["backend"] == "onnxruntime" and config["platform"] == "onnxruntime_onnx"
        assert config["max_batch_size"] == 4 and "dynamic_batching" in config
        assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
            ("INPUT0", "TYPE_FP32", [4]), ("INPUT1", "TYPE_FP32", [4])]
        assert [t["name"] for t in config["output"]] == ["OUTPUT0", "OUTPUT1"]
        for protocol in PROTOCOLS:
            r = infer(s, "auto", [("INPUT0", np.array([[1, 2, 3, 4]], np.float32)),
                                  ("INPUT1", np.ones((1, 4), np.float32))], protocol=protocol)
            assert outputs_of(r)["OUTPUT0"] == [2, 3, 4, 5], protocol
        config = config_of(s, "auto_strings")
        assert config["input"][0]["data_type"] == "TYPE_STRING" and config["max_batch_size"] == 4
        config = config_of(s, "auto_fixed")
        assert config["max_batch_size"] == 0 and config["input"][0]["dims"] == [4]
        assert config["input"][0]["data_type"] == "TYPE_INT32"


def test_reshape_between_the_configuration_and_the_model():
    # The server reshapes: clients use the configuration's dims, the model
    # gets (and gives) reshape.shape.
    reshaped = CONFIGS["fixed_add_sub"].replace("dims: [ 4 ] }", "dims: [ 2, 2 ] reshape: { shape: [ 4 ] } }")
    with serve({"reshaped": ("fixed_add_sub", reshaped), "doubler": ("doubler", None)}) as s:
        for protocol in PROTOCOLS:
            r = infer(s, "reshaped", [("INPUT0", np.array([[1, 2], [3, 4]], np.int32)),
                                      ("INPUT1", np.ones((2, 2), np.int32))], protocol=protocol)
            assert shapes_of(r)["OUTPUT0"] == [2, 2] and outputs_of(r)["OUTPUT0"] == [2, 3, 4, 5], protocol
        # A model taking [batch] is completed as dims [1] with an empty reshape.
        config = config_of(s, "doubler")
        assert config["max_batch_size"] == 4
        assert config["input"][0]["dims"] == [1] and config["input"][0]["reshape"] == {"shape": []}
        assert config["output"][0]["dims"] == [1] and config["output"][0]["reshape"] == {"shape": []}
        for protocol in PROTOCOLS:
            r = infer(s, "doubler", [("X", np.array([[1], [2], [3]], np.float32))], protocol=protocol)
            assert shapes_of(r)["Y"] == [3, 1] and outputs_of(r)["Y"] == [2, 4, 6], protocol


def test_default_max_batch_size_setting_completes_batching():
    auto = "backend: \"onnxruntime\"\n" + THREADS
    with serve({"auto2": ("add_sub", auto)}, "--backend-config=default-max-batch-size=2") as s:
        config = config_of(s, "auto2")
        assert config["max_batch_size"] == 2 and "dynamic_batching" in config
    with serve({"auto0": ("add_sub", auto)}, "--backend-config=onnxruntime,default-max-batch-size=0") as s:
        config = config_of(s, "auto0")
        assert config["max_batch_size"] == 0 and config["input"][0]["dims"] == [-1, 4]


def test_bad_requests_are_answered_and_the_server_keeps_serving():
    with serve({"strings": ALL["strings"], "add_sub": ALL["add_sub"]}) as s:
        # BYTES data whose length prefix runs past the end: hand-built,
        # tritonclient serializes BYTES only well-formed.
        header = {"inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "BYTES",
                              "parameters": {"binary_data_size": 6}}]}
        h = json.dumps(header).encode()
        code, _, body = call(s, "/v2/models/strings/infer", h + struct.pack("<I", 50) + b"ab",
                             {"Inference-Header-Content-Length": str(len(h))})
        assert code == 400 and "BYTES data ends inside element 1" in json.loads(body)["error"], body
        # Wrong datatype, rejected before the backend.
        for protocol, status in (("http", "400"), ("grpc", "StatusCode.INVALID_ARGUMENT")):
            e = failure(s, "add_sub", [("INPUT0", np.ones((1, 4), np.int32)), ("INPUT1", np.ones((1, 4), np.float32))],
                        protocol)
            assert e.status() == status, (protocol, e)
            r = infer(s, "strings", [("INPUT", np.array([["a"], ["b"]], np.object_))], protocol=protocol)
            assert outputs_of(r)["OUTPUT"] == [b"a", b"b"], protocol


def load_error(s, name):
    """The message of the refused repository load of name, the same over
    HTTP (status 400) and gRPC."""
    messages = []
    for protocol, status in (("http", "400"), ("grpc", "StatusCode.INVALID_ARGUMENT")):
        with client(s, protocol) as c, pytest.raises(InferenceServerException) as e:
            c.load_model(name)
        assert e.value.status() == status, (protocol, e.value)
        messages.append(e.value.message())
    assert messages[0] == messages[1], messages
    return messages[0]


def test_configurations_that_disagree_with_the_model_fail_to_load():
    bad = {
        "wrong_type": ("fixed_add_sub", CONFIGS["fixed_add_sub"].replace("TYPE_INT32", "TYPE_FP32", 1)),
        "wrong_name": ("fixed_add_sub", CONFIGS["fixed_add_sub"].replace('"INPUT1"', '"INPUT9"')),
        "wrong_dims": ("fixed_add_sub", CONFIGS["fixed_add_sub"].replace("dims: [ 4 ]", "dims: [ 5 ]", 1)),
        "no_batch_dim": ("fixed_add_sub", "max_batch_size: 4\n" + CONFIGS["fixed_add_sub"]),
        "missing_input": ("fixed_add_sub", CONFIGS["fixed_add_sub"].replace(
            '{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] }', "").replace("] },\n", "] }\n", 1)),
        "bad_state": ("accumulate", CONFIGS["accumulate"].replace('"STATE_OUT"', '"NOPE"')),
        "bad_threads": ("add_sub", CONFIGS["add_sub"] +
                        'parameters { key: "intra_op_thread_count" value { string_value: "many" } }'),
        "bad_mode": ("add_sub", CONFIGS["add_sub"] +
                     'parameters { key: "execution_mode" value { string_value: "5" } }'),
    }
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, bad)
        os.makedirs(os.path.join(root, "corrupt", "1"))
        with open(os.path.join(root, "corrupt", "1", "model.onnx"), "wb") as f:
            f.write(b"this is not an onnx model")
        with open(os.path.join(root, "corrupt", "config.pbtxt"), "w") as f:
            f.write(CONFIGS["fixed_add_sub"])
        os.makedirs(os.path.join(root, "no_file", "1"))
        with open(os.path.join(root, "no_file", "config.pbtxt"), "w") as f:
            f.write(CONFIGS["fixed_add_sub"])
        s = start(root, "--model-control-mode=explicit")
        with running(s) as lines:
            take_ports(s, lines)
            msg = load_error(s, "wrong_type")
            assert "input 'INPUT0' has data_type TYPE_FP32 in the configuration but INT32 in model.onnx" in msg
            assert "is not an input of model.onnx" in load_error(s, "wrong_name")
            assert "dimension 0 is 5 in the configuration but 4 in model.onnx" in load_error(s, "wrong_dims")
            assert "max_batch_size is 4 but input 'INPUT0' of model.onnx has no batch dimension" in load_error(
                s, "no_batch_dim")
            assert "input 'INPUT1' of model.onnx is missing from the configuration" in load_error(s, "missing_input")
            assert "state output 'NOPE'" in load_error(s, "bad_state")
            assert "intra_op_thread_count" in load_error(s, "bad_threads")
            assert "execution_mode" in load_error(s, "bad_mode")
            msg = load_error(s, "corrupt")
            assert "cannot load" in msg and "corrupt/1/model.onnx" in msg
            assert "does not exist" in load_error(s, "no_file")
            with client(s) as c:
                states = {m["name"]: m.get("state") for m in c.get_model_repository_index()}
            assert states["corrupt"] == "UNAVAILABLE"
            with client(s, "grpc") as c:
                states = {m.name: m.state for m in c.get_model_repository_index().models}
            assert states["corrupt"] == "UNAVAILABLE"


def test_without_the_library_only_onnx_models_fail():
    # A backend directory holding the backend but not libonnxruntime.so.1:
    # the ONNX model fails to load, naming where the library was looked for;
    # the identity model beside it serves.
    import shutil
    with tempfile.TemporaryDirectory() as backends, tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(backends, "onnxruntime"))
        shutil.copy(os.path.join(BACKENDS, "onnxruntime", "libtriton_onnxruntime.so"),
                    os.path.join(backends, "onnxruntime"))
        shutil.copytree(os.path.join(BACKENDS, "identity"), os.path.join(backends, "identity"))
        make_repo(root, {"fixed_add_sub": ALL["fixed_add_sub"]})
        shutil.copytree(os.path.join(HERE, "..", "..", "examples", "models", "identity_fp32"),
                        os.path.join(root, "identity_fp32"))
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        s = start(root, "--exit-on-error=false", backends=backends, env=env)
        with running(s) as lines:
            table = "".join(lines)
            assert "| identity_fp32 | 1       | READY" in table, table
            assert "cannot load ONNX Runtime" in table and "onnxruntime/libonnxruntime.so.1" in table, table
            take_ports(s, lines)
            for protocol in PROTOCOLS:
                r = infer(s, "identity_fp32", [("INPUT0", np.array([[1, 2]], np.float32))], protocol=protocol)
                assert outputs_of(r)["OUTPUT0"] == [1, 2], protocol


def gpu_config(gpus="0", accelerator="", parameters=""):
    """fixed_add_sub on KIND_GPU, with a gpu_execution_accelerator block and
    model parameters (pbtxt text)."""
    text = CONFIGS["fixed_add_sub"] + f"instance_group [ {{ kind: KIND_GPU gpus: [ {gpus} ] }} ]\n"
    if accelerator:
        text += f"optimization {{ execution_accelerators {{ gpu_execution_accelerator [ {accelerator} ] }} }}\n"
    return text + THREADS + parameters


def cuda(**params):
    body = " ".join(f'parameters {{ key: "{k}" value: "{v}" }}' for k, v in params.items())
    return f'{{ name: "cuda" {body} }}'


def param(key, value):
    return f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n'


# ONNX Runtime's own words where the library has no CUDA provider (the
# CPU library scripts/fetch_pypi.sh installs), after Triton's prefix.
NO_CUDA = "onnx runtime error 1: CUDA execution provider is not enabled in this build."


def test_kind_gpu_asks_for_the_cuda_provider_and_fails_clearly_without_it():
    # KIND_GPU ONNX models where the core finds GPUs (the stand-in NVIDIA
    # driver, tests/gpu_stub, two devices): each instance asks ONNX Runtime
    # for its CUDA execution provider on its own device, with Triton's
    # options checked first; the CPU-only library refuses, and the load
    # fails with ONNX Runtime's reason, the instance and the device
    # (docs/gpu.md). A model without instance groups beside them gets the
    # backend's preferred CPU group (not KIND_AUTO's GPU) and serves.
    fake = os.environ["NRD_FAKE_CUDA"]
    models = {
        "gpu0": gpu_config(),
        "gpu1": gpu_config(gpus="1"),
        # every option valid: refused only for want of the provider
        "good_options": gpu_config(accelerator=cuda(
            cudnn_conv_algo_search="HEURISTIC", gpu_mem_limit="1073741824", arena_extend_strategy="kSameAsRequested",
            do_copy_in_default_stream="false", cudnn_conv_use_max_workspace="1", enable_cuda_graph="0"),
            parameters=param("cudnn_conv_algo_search", "2") + param("arena_extend_strategy", "1") +
            param("gpu_mem_limit", "4096") + param("do_copy_in_default_stream", "true")),
        "tensorrt": gpu_config(accelerator='{ name: "tensorrt" }'),
        "openvino": gpu_config(accelerator='{ name: "openvino" }'),
        "bad_search": gpu_config(accelerator=cuda(cudnn_conv_algo_search="SLOW")),
        "bad_strategy": gpu_config(accelerator=cuda(arena_extend_strategy="kDouble")),
        "bad_limit": gpu_config(accelerator=cuda(gpu_mem_limit="-1")),
        "bad_bool": gpu_config(accelerator=cuda(enable_cuda_graph="maybe")),
        "unknown_key": gpu_config(accelerator=cuda(cuda_speed="11")),
        "legacy_search": gpu_config(parameters=param("cudnn_conv_algo_search", "3")),
        "legacy_strategy": gpu_config(parameters=param("arena_extend_strategy", "2")),
        "legacy_not_int": gpu_config(parameters=param("cudnn_conv_algo_search", "fast")),
        "legacy_limit": gpu_config(parameters=param("gpu_mem_limit", "lots")),
        "legacy_copy": gpu_config(parameters=param("do_copy_in_default_stream", "perhaps")),
        # Triton reads these only for GPU instances: a CPU model loads
        "cpu_ignores": (CONFIGS["fixed_add_sub"] + THREADS + "optimization { execution_accelerators { "
                        "gpu_execution_accelerator [ { name: \"tensorrt\" } ] } }\n" +
                        param("cudnn_conv_algo_search", "9")),
    }
    expected = {
        "gpu0": [NO_CUDA, "instance 'gpu0_0_0' on GPU 0: CreateCUDAProviderOptions failed"],
        "gpu1": [NO_CUDA, "instance 'gpu1_0_0' on GPU 1"],
        "good_options": [NO_CUDA, "instance 'good_options_0_0' on GPU 0"],
        "tensorrt": ["unknown Execution Accelerator 'tensorrt' is requested",
                     "this build has no TensorRT execution provider"],
        "openvino": ["unknown Execution Accelerator 'openvino' is requested"],
        "bad_search": ["parameter 'cudnn_conv_algo_search': 'SLOW' is not EXHAUSTIVE, HEURISTIC or DEFAULT"],
        "bad_strategy": ["parameter 'arena_extend_strategy': 'kDouble' is not kNextPowerOfTwo, kSameAsRequested"],
        "bad_limit": ["parameter 'gpu_mem_limit': '-1' is not a byte count"],
        "bad_bool": ["parameter 'enable_cuda_graph': 'maybe' is not true or false"],
        "unknown_key": ["unknown parameter 'cuda_speed'", "cudnn_conv_use_max_workspace"],
        "legacy_search": ["unsupported cudnn_conv_algo_search value '3' is requested"],
        "legacy_strategy": ["unsupported arena_extend_strategy value '2' is requested"],
        "legacy_not_int": ["parameter cudnn_conv_algo_search: 'fast' is not an integer"],
        "legacy_limit": ["parameter gpu_mem_limit: 'lots' is not a byte count"],
        "legacy_copy": ["parameter do_copy_in_default_stream: 'perhaps' is not true or false"],
    }
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, {name: ("fixed_add_sub", text) for name, text in models.items()})
        make_repo(root, {"fixed_add_sub": ALL["fixed_add_sub"]})
        env = dict(os.environ, NEREID_CUDA_LIBRARY=fake, NEREID_NVML_LIBRARY=fake, NRD_FAKE_CUDA_DEVICES="2")
        s = start(root, "--model-control-mode=explicit", env=env)
        with running(s) as lines:
            take_ports(s, lines)
            for name, words in expected.items():
                # both protocols for the first; HTTP for the rest (time)
                for protocol in PROTOCOLS if name == "gpu0" else ("http",):
                    with client(s, protocol) as c, pytest.raises(InferenceServerException) as e:
                        c.load_model(name)
                    for w in words:
                        assert w in e.value.message(), (name, protocol, w, e.value.message())
            for protocol in PROTOCOLS:
                with client(s, protocol) as c:
                    c.load_model("fixed_add_sub")
                    assert c.is_model_ready("fixed_add_sub")
            with client(s) as c:
                c.load_model("cpu_ignores")
                r = infer(s, "cpu_ignores", [("INPUT0", np.array([1, 2, 3, 4], np.int32)),
                                             ("INPUT1", np.array([1, 1, 1, 1], np.int32))])
                assert outputs_of(r)["OUTPUT0"] == [2, 3, 4, 5], outputs_of(r)
            group = config_of(s, "fixed_add_sub")["instance_group"][0]
            assert (group["kind"], group["count"]) == ("KIND_CPU", 2), group



def test_inputs_and_outputs_in_cuda_shared_memory():
    # Over the stand-in driver: inputs read from a client's CUDA region
    # (gathered to host memory for ONNX Runtime's CPU provider) and outputs
    # written into one (ONNX Runtime's host results copied by the driver).
    from test_gpu_shm import Cuda
    fake = os.environ["NRD_FAKE_CUDA"]
    env = dict(os.environ, NEREID_CUDA_LIBRARY=fake, NEREID_NVML_LIBRARY=fake)
    a, b = np.array([1, 2, 3, 4], np.int32), np.array([10, 20, 30, 40], np.int32)
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, {"fixed_add_sub": ALL["fixed_add_sub"]})
        s = start(root, "--allow-client-shm=true", env=env)
        with running(s) as lines:
            take_ports(s, lines)
            cuda = Cuda()
            for protocol in PROTOCOLS:
                mod = grpcclient if protocol == "grpc" else httpclient
                p_in, p_out = cuda.alloc(0, 32), cuda.alloc(0, 32)
                cuda.write(p_in, np.concatenate([a, b]))
                with client(s, protocol) as c:
                    c.register_cuda_shared_memory("in", cuda.handle(p_in), 0, 32)
                    c.register_cuda_shared_memory("out", cuda.handle(p_out), 0, 32)
                    try:
                        inputs = [mod.InferInput("INPUT0", [4], "INT32"), mod.InferInput("INPUT1", [4], "INT32")]
                        inputs[0].set_shared_memory("in", 16)
                        inputs[1].set_shared_memory("in", 16, offset=16)
                        outputs = [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]
                        outputs[0].set_shared_memory("out", 16)
                        outputs[1].set_shared_memory("out", 16, offset=16)
                        c.infer("fixed_add_sub", inputs, outputs=outputs)
                        got = cuda.read(p_out, np.int32, 8).tolist()
                        assert got == [11, 22, 33, 44, -9, -18, -27, -36], (protocol, got)
                    finally:
                        c.unregister_cuda_shared_memory()
