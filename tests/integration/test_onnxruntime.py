"""The onnxruntime backend through nereid's HTTP endpoint: ONNX models built
for each run by tools/onnx_models.py (python3-onnx), served by ONNX Runtime
(fetched by scripts/fetch_pypi.sh, copied beside the backend).

Covers batching (dynamic batcher, several requests in one Run), a model
without batching, every datatype (BYTES as ONNX strings), scalars, implicit
state with the sequence batcher (several sequences interleaved), the
configuration completed from the model, and the refusals: a configuration
that disagrees with the model, a corrupt model file, bad BYTES data.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import base64
import concurrent.futures
import contextlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from test_nereid_cli import BACKENDS, Server, listening_ports, running
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
    while True:
        code, _, body = call(s, f"/v2/models/{model}/stats")
        assert code == 200, body
        stats = json.loads(body)["model_stats"][0]
        if ready(stats) or time.monotonic() > deadline:
            return stats
        time.sleep(0.02)


@contextlib.contextmanager
def serve(models, *flags):
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, models)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", *flags])
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
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
    return {o["name"]: o for o in reply["outputs"]}


ALL = {name: (name, CONFIGS[name]) for name in CONFIGS}


def test_batched_unbatched_strings_and_scalar():
    with serve(ALL) as s:
        a = [[1.5, 2, 3, 4], [5, 6, 7, 8]]
        b = [[1, 1, 1, 1], [2, 2, 2, 2]]
        code, r = infer(s, "add_sub", [{"name": "INPUT0", "shape": [2, 4], "datatype": "FP32", "data": a},
                                       {"name": "INPUT1", "shape": [2, 4], "datatype": "FP32", "data": b}])
        assert code == 200, r
        out = outputs_of(r)
        assert out["OUTPUT0"]["shape"] == [2, 4] and out["OUTPUT0"]["datatype"] == "FP32"
        assert out["OUTPUT0"]["data"] == list((np.array(a) + np.array(b)).flat)
        assert out["OUTPUT1"]["data"] == list((np.array(a) - np.array(b)).flat)
        # Only the requested output comes back.
        code, r = infer(s, "add_sub", [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": a[0]},
                                       {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": b[0]}],
                        outputs=["OUTPUT1"])
        assert code == 200 and [o["name"] for o in r["outputs"]] == ["OUTPUT1"]

        code, r = infer(s, "fixed_add_sub", [{"name": "INPUT0", "shape": [4], "datatype": "INT32", "data": [1, 2, 3, 4]},
                                             {"name": "INPUT1", "shape": [4], "datatype": "INT32", "data": [4, 3, 2, 1]}])
        assert code == 200, r
        assert outputs_of(r)["OUTPUT0"]["data"] == [5, 5, 5, 5]
        assert outputs_of(r)["OUTPUT1"]["data"] == [-3, -1, 1, 3]

        words = ["", "héllo", "a longer string with spaces", "x" * 1000]
        code, r = infer(s, "strings", [{"name": "INPUT", "shape": [1, 4], "datatype": "BYTES", "data": words}])
        assert code == 200, r
        assert outputs_of(r)["OUTPUT"]["data"] == words and outputs_of(r)["OUTPUT"]["shape"] == [1, 4]

        code, r = infer(s, "scalar", [{"name": "X", "shape": [1], "datatype": "FP32", "data": [2.5]}])
        assert code == 200, r
        assert outputs_of(r)["Y"]["data"] == [5.0] and outputs_of(r)["Y"]["shape"] == [1]

        # Statistics count the executions.
        stats = settled_stats(s, "add_sub", lambda st: st["inference_stats"]["success"]["count"] >= 2)
        assert stats["inference_stats"]["success"]["count"] == 2


def test_session_settings_load_and_serve():
    # Each optimization level and the parallel execution mode; the settings
    # themselves are ONNX Runtime's and not visible from outside.
    models = {}
    for name, extra in (("level_basic", "optimization { graph { level: -1 } }"),
                        ("level_extended", "optimization { graph { level: 1 } }"),
                        ("level_none", "optimization { graph { level: 2 } }"),
                        ("parallel", 'parameters { key: "execution_mode" value { string_value: "1" } }')):
        models[name] = ("fixed_add_sub", CONFIGS["fixed_add_sub"] + THREADS + extra)
    with serve(models) as s:
        for name in models:
            code, r = infer(s, name, [{"name": "INPUT0", "shape": [4], "datatype": "INT32", "data": [1, 2, 3, 4]},
                                      {"name": "INPUT1", "shape": [4], "datatype": "INT32", "data": [1, 1, 1, 1]}])
            assert code == 200 and outputs_of(r)["OUTPUT0"]["data"] == [2, 3, 4, 5], (name, r)


def test_dynamic_batcher_runs_requests_together():
    with serve({"add_sub": ALL["add_sub"]}) as s:
        def one(i):
            return infer(s, "add_sub", [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [i] * 4},
                                        {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1] * 4}])
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(one, range(8)))
        for i, (code, r) in enumerate(results):
            assert code == 200, r
            assert outputs_of(r)["OUTPUT0"]["data"] == [i + 1.0] * 4
        stats = settled_stats(s, "add_sub", lambda st: st["inference_count"] >= 8)
        assert stats["inference_count"] == 8
        assert stats["execution_count"] < 8  # the 100 ms queue delay gathered some


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
    with serve({"identities": ("identities", config)}) as s:
        inputs = [{"name": f"IN_{t}", "shape": [1, 2], "datatype": t, "data": values[t]} for t in onnx_models.TYPES]
        code, r = infer(s, "identities", inputs)
        assert code == 200, r
        out = outputs_of(r)
        for t in onnx_models.TYPES:
            assert out[f"OUT_{t}"]["datatype"] == t and out[f"OUT_{t}"]["shape"] == [1, 2]
            assert out[f"OUT_{t}"]["data"] == values[t], t
        # The binary extension: FP32 in and out as raw bytes.
        raw = struct.pack("<2f", 7.0, 8.0)
        header = {"inputs": [dict(i, parameters={"binary_data_size": len(raw)}) if i["name"] == "IN_FP32" else i
                             for i in inputs],
                  "outputs": [{"name": "OUT_FP32", "parameters": {"binary_data": True}}]}
        for i in header["inputs"]:
            if i["name"] == "IN_FP32":
                del i["data"]
        h = json.dumps(header).encode()
        code, headers, body = call(s, "/v2/models/identities/infer", h + raw,
                                   {"Inference-Header-Content-Length": str(len(h))})
        assert code == 200, body
        n = int(headers["Inference-Header-Content-Length"])
        assert body[n:] == raw


def test_implicit_state_keeps_a_running_sum_per_sequence():
    with serve({"accumulate": ALL["accumulate"]}) as s:
        def step(seq, value, start=False, end=False):
            params = {"sequence_id": seq, "sequence_start": start, "sequence_end": end}
            code, r = infer(s, "accumulate", [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32",
                                               "data": [value]}], parameters=params)
            assert code == 200, r
            return outputs_of(r)["OUTPUT"]["data"][0]

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
        code, r = infer(s, "accumulate", [{"name": "INPUT", "shape": [1, 1], "datatype": "INT32", "data": [1]}],
                        outputs=["STATE_OUT"], parameters={"sequence_id": 9, "sequence_start": True})
        assert code == 400, r


def test_configuration_completed_from_the_model():
    # No config.pbtxt at all: inputs, outputs and batching come from model.onnx.
    with serve({"auto": ("add_sub", None), "auto_strings": ("strings", None),
                "auto_fixed": ("fixed_add_sub", None)}) as s:
        code, _, body = call(s, "/v2/models/auto/config")
        config = json.loads(body)
        assert code == 200 and config["backend"] == "onnxruntime" and config["platform"] == "onnxruntime_onnx"
        assert config["max_batch_size"] == 4 and "dynamic_batching" in config
        assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
            ("INPUT0", "TYPE_FP32", [4]), ("INPUT1", "TYPE_FP32", [4])]
        assert [t["name"] for t in config["output"]] == ["OUTPUT0", "OUTPUT1"]
        code, r = infer(s, "auto", [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
                                    {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1, 1, 1, 1]}])
        assert code == 200 and outputs_of(r)["OUTPUT0"]["data"] == [2, 3, 4, 5]
        config = json.loads(call(s, "/v2/models/auto_strings/config")[2])
        assert config["input"][0]["data_type"] == "TYPE_STRING" and config["max_batch_size"] == 4
        config = json.loads(call(s, "/v2/models/auto_fixed/config")[2])
        assert config["max_batch_size"] == 0 and config["input"][0]["dims"] == [4]
        assert config["input"][0]["data_type"] == "TYPE_INT32"


def test_reshape_between_the_configuration_and_the_model():
    # The server reshapes: clients use the configuration's dims, the model
    # gets (and gives) reshape.shape.
    reshaped = CONFIGS["fixed_add_sub"].replace("dims: [ 4 ] }", "dims: [ 2, 2 ] reshape: { shape: [ 4 ] } }")
    with serve({"reshaped": ("fixed_add_sub", reshaped), "doubler": ("doubler", None)}) as s:
        code, r = infer(s, "reshaped", [{"name": "INPUT0", "shape": [2, 2], "datatype": "INT32", "data": [1, 2, 3, 4]},
                                        {"name": "INPUT1", "shape": [2, 2], "datatype": "INT32", "data": [1, 1, 1, 1]}])
        assert code == 200, r
        assert outputs_of(r)["OUTPUT0"]["shape"] == [2, 2] and outputs_of(r)["OUTPUT0"]["data"] == [2, 3, 4, 5]
        # A model taking [batch] is completed as dims [1] with an empty reshape.
        config = json.loads(call(s, "/v2/models/doubler/config")[2])
        assert config["max_batch_size"] == 4
        assert config["input"][0]["dims"] == [1] and config["input"][0]["reshape"] == {"shape": []}
        assert config["output"][0]["dims"] == [1] and config["output"][0]["reshape"] == {"shape": []}
        code, r = infer(s, "doubler", [{"name": "X", "shape": [3, 1], "datatype": "FP32", "data": [1, 2, 3]}])
        assert code == 200, r
        assert outputs_of(r)["Y"]["shape"] == [3, 1] and outputs_of(r)["Y"]["data"] == [2, 4, 6]


def test_default_max_batch_size_setting_completes_batching():
    auto = "backend: \"onnxruntime\"\n" + THREADS
    with serve({"auto2": ("add_sub", auto)}, "--backend-config=default-max-batch-size=2") as s:
        config = json.loads(call(s, "/v2/models/auto2/config")[2])
        assert config["max_batch_size"] == 2 and "dynamic_batching" in config
    with serve({"auto0": ("add_sub", auto)}, "--backend-config=onnxruntime,default-max-batch-size=0") as s:
        config = json.loads(call(s, "/v2/models/auto0/config")[2])
        assert config["max_batch_size"] == 0 and config["input"][0]["dims"] == [-1, 4]


def test_bad_requests_are_answered_and_the_server_keeps_serving():
    with serve({"strings": ALL["strings"], "add_sub": ALL["add_sub"]}) as s:
        # BYTES data whose length prefix runs past the end.
        header = {"inputs": [{"name": "INPUT", "shape": [1, 1], "datatype": "BYTES",
                              "parameters": {"binary_data_size": 6}}]}
        h = json.dumps(header).encode()
        code, _, body = call(s, "/v2/models/strings/infer", h + struct.pack("<I", 50) + b"ab",
                             {"Inference-Header-Content-Length": str(len(h))})
        assert code == 400 and "BYTES data ends inside element 1" in json.loads(body)["error"], body
        # Wrong datatype, rejected before the backend.
        code, r = infer(s, "add_sub", [{"name": "INPUT0", "shape": [1, 4], "datatype": "INT32", "data": [1] * 4},
                                       {"name": "INPUT1", "shape": [1, 4], "datatype": "FP32", "data": [1] * 4}])
        assert code == 400, r
        code, r = infer(s, "strings", [{"name": "INPUT", "shape": [2, 1], "datatype": "BYTES", "data": ["a", "b"]}])
        assert code == 200 and outputs_of(r)["OUTPUT"]["data"] == ["a", "b"]


def load_error(s, name):
    code, _, body = call(s, f"/v2/repository/models/{name}/load", b"{}")
    assert code == 400, body
    return json.loads(body)["error"]


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
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", "--model-control-mode=explicit"])
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
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
            code, _, body = call(s, "/v2/repository/index", b"{}")
            states = {m["name"]: m.get("state") for m in json.loads(body)}
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
        s = Server([f"--model-repository={root}", f"--backend-directory={backends}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", "--exit-on-error=false"], env=env)
        with running(s) as lines:
            table = "".join(lines)
            assert "| identity_fp32 | 1       | READY" in table, table
            assert "cannot load ONNX Runtime" in table and "onnxruntime/libonnxruntime.so.1" in table, table
            s.port = listening_ports(lines)["http"]
            code, r = infer(s, "identity_fp32", [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32",
                                                  "data": [1, 2]}])
            assert code == 200, r
