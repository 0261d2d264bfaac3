"""The pytorch backend through Triton's own client, tritonclient, over HTTP
(binary and JSON tensors) and gRPC: TorchScript models compiled for each
run from the source below by pt_make_model (PT_MAKE_MODEL, on the fetched
wheel's libtorch), served by libtriton_pytorch.so.

Covers the ways Triton's pytorch backend binds a configuration to
forward() (argument names in any order, <name>__<index>, the
configuration's order, one Dict[str, Tensor]), outputs into a tuple,
BYTES as List[str] in and out, every datatype libtorch takes, batching
(dynamic batcher, several requests in one forward()), two instances
sharing weights, KIND_MODEL, implicit state with the sequence batcher,
the parameters; and the refusals: a model that throws inside forward()
(the request fails, the instance keeps serving), outputs that disagree
with the configuration, corrupt and truncated model files, a module
without forward(), signatures and parameters the configuration
contradicts, KIND_GPU.

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and PT_MAKE_MODEL set
(tests/CMakeLists.txt).
"""
import concurrent.futures
import os
import subprocess
import tempfile

import numpy as np
import pytest

from test_nereid_cli import running
from test_onnxruntime import load_error, settled_stats, start, take_ports
from test_python_backend import PROTOCOLS, client, datatypes_of, failure, infer, output_names, outputs_of

MAKER = os.environ.get("PT_MAKE_MODEL", "")

# One intra-op thread: libtorch then computes on the instance thread, so
# the sanitizers see every thread that touches our buffers.
THREADS = 'parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "1" } }\n'

# name: (TorchScript source, parameter shapes, config.pbtxt)
MODELS = {
    # Inputs named after forward()'s arguments, listed in another order.
    "add_sub": ("""
def forward(self, INPUT0, INPUT1):
    return INPUT0 + INPUT1, INPUT0 - INPUT1
""", [], """
backend: "pytorch"
max_batch_size: 8
input [ { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
"""),
    # <name>__<index>: IN__1 is forward()'s second argument, OUT__0 the
    # tuple's first element, whatever the configuration's order.
    "indexed": ("""
def forward(self, a, b):
    return a * 10 + b, a
""", [], """
platform: "pytorch_libtorch"
input [ { name: "IN__1" data_type: TYPE_INT64 dims: [ 3 ] },
        { name: "IN__0" data_type: TYPE_INT64 dims: [ 3 ] } ]
output [ { name: "OUT__1" data_type: TYPE_INT64 dims: [ 3 ] },
         { name: "OUT__0" data_type: TYPE_INT64 dims: [ 3 ] } ]
"""),
    # Neither: the configuration's order is forward()'s order.
    "ordered": ("""
def forward(self, a, b):
    return a * 10 + b
""", [], """
backend: "pytorch"
default_model_filename: "net.pt"
input [ { name: "first" data_type: TYPE_INT32 dims: [ 2 ] },
        { name: "second" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "result" data_type: TYPE_INT32 dims: [ 2 ] } ]
"""),
    "dict": ("""
def forward(self, inputs: Dict[str, Tensor]):
    return inputs["X"] * inputs["Y"]
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] },
        { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""),
    # BYTES in and out as List[str], beside a tensor in a tuple.
    "strings": ("""
def forward(self, words: List[str], n):
    out: List[str] = []
    for w in words:
        out.append(w + "!")
    return out, n * 2
""", [], """
backend: "pytorch"
input [ { name: "words" data_type: TYPE_STRING dims: [ -1 ] },
        { name: "n" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_STRING dims: [ -1 ] },
         { name: "OUTPUT__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""),
    # Batched strings: one per row (dims [1] reshaped to none, Triton's way).
    "batched_strings": ("""
def forward(self, words: List[str]):
    out: List[str] = []
    for w in words:
        out.append(w.upper())
    return out
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_STRING dims: [ 1 ] reshape { shape: [ ] } } ]
output [ { name: "OUTPUT__0" data_type: TYPE_STRING dims: [ 1 ] reshape { shape: [ ] } } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
"""),
    # A ragged input, flattened across the batch; the accumulated element
    # counts (a batch input) mark where each request's elements end.
    "ragged": ("""
def forward(self, x, ends):
    sums: List[Tensor] = []
    start = 0
    for i in range(ends.size(0)):
        end = int(ends[i])
        sums.append(x[start:end].sum().reshape(1))
        start = end
    return torch.cat(sums).reshape(-1, 1)
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "ends" data_type: TYPE_INT32
                source_input: "x" } ]
output [ { name: "sum__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 200000 }
"""),
    # The item-shape kinds: each request's row shape, as [items, 1] and flat.
    "item_shape": ("""
def forward(self, x, shapes, flat, largest):
    return shapes, flat.reshape(-1, 1), torch.zeros_like(shapes) + largest.size(0)
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: BATCH_ITEM_SHAPE target_name: "shapes" data_type: TYPE_INT32 source_input: "x" },
              { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "flat" data_type: TYPE_INT32 source_input: "x" },
              { kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "largest" data_type: TYPE_INT32
                source_input: "x" } ]
output [ { name: "s__0" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "f__1" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "m__2" data_type: TYPE_INT32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 200000 }
"""),
    # The same flattening out: each request gets its elements back (doubled)
    # in its input's shape (a batch output).
    "ragged_out": ("""
def forward(self, x, ends):
    return x * 2
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "ends" data_type: TYPE_FP32 source_input: "x" } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: "y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "x" } ]
dynamic_batching { max_queue_delay_microseconds: 200000 }
"""),
    # A model with weights; two instances share them.
    "linear": ("""
def forward(self, x):
    return torch.matmul(x, self.w)
""", ["w=4x3"], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
parameters { key: "ENABLE_WEIGHT_SHARING" value { string_value: "true" } }
parameters { key: "DISABLE_OPTIMIZED_EXECUTION" value { string_value: "TRUE" } }
parameters { key: "INFERENCE_MODE" value { string_value: "off" } }
parameters { key: "ENABLE_JIT_PROFILING" value { string_value: "false" } }
parameters { key: "ENABLE_JIT_EXECUTOR" value { string_value: "1" } }
parameters { key: "ENABLE_TENSOR_FUSER" value { string_value: "0" } }
parameters { key: "DISABLE_CUDNN" value { string_value: "true" } }
parameters { key: "ENABLE_CACHE_CLEANING" value { string_value: "true" } }
parameters { key: "INTER_OP_THREAD_COUNT" value { string_value: "0" } }
"""),
    "model_kind": ("""
def forward(self, x):
    return x + 1
""", [], """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
instance_group [ { kind: KIND_MODEL } ]
"""),
    # A running sum per sequence in an implicit state.
    "accumulate": ("""
def forward(self, x, state):
    total = state + x
    return total, total
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 20000 }
  state [ { input_name: "STATE_IN__1" output_name: "STATE_OUT__1" data_type: TYPE_INT32 dims: [ 1 ]
            initial_state { name: "zero" data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } ]
}
"""),
    # Sequence controls as arguments: start flag and correlation ID.
    "controls": ("""
def forward(self, x, start, corrid):
    return x + start * 100 + (corrid * 1000).int()
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  control_input [
    { name: "START__1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID__2" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64 } ] } ]
}
"""),
    # Throws for a negative sum; answers otherwise.
    "picky": ("""
def forward(self, x):
    assert bool(x.sum() >= 0), "negative input is not allowed"
    return x * 2
""", [], """
backend: "pytorch"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""),
    # Outputs the configuration contradicts, each found at run time as
    # Triton finds them.
    "wrong_out_type": ("""
def forward(self, x):
    return x.long()
""", [], """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""),
    "missing_out": ("""
def forward(self, x):
    return x
""", [], """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y__3" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""),
    "scalar_out": ("""
def forward(self, x):
    return x.sum()
""", [], """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""),
    "dict_out": ("""
def forward(self, x) -> Dict[str, Tensor]:
    return {"y": x}
""", [], """
backend: "pytorch"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""),
}

# Every datatype libtorch takes, through an identity model each.
DATATYPES = {"BOOL": np.bool_, "UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
             "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64}
for _dt in DATATYPES:
    MODELS[f"identity_{_dt.lower()}"] = ("""
def forward(self, x):
    return x.clone()
""", [], f"""
backend: "pytorch"
max_batch_size: 2
input [ {{ name: "INPUT__0" data_type: TYPE_{_dt} dims: [ 3 ] }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_{_dt} dims: [ 3 ] }} ]
""")

# Configurations the module (or libtorch) refuses at load time:
# name: (source, params, config, words the error must hold).
REFUSED = {
    "too_many_inputs": (MODELS["add_sub"][0], [], MODELS["add_sub"][2].replace(
        "dims: [ 4 ] } ]", 'dims: [ 4 ] },\n { name: "INPUT2" data_type: TYPE_FP32 dims: [ 4 ] } ]', 1),
        ["unable to load model 'too_many_inputs', configuration expects 3 inputs, model provides 2",
         "forward(INPUT0: Tensor, INPUT1: Tensor)"]),
    "index_beyond": (MODELS["indexed"][0], [], MODELS["indexed"][2].replace("IN__1", "IN__5"),
                     ["input 'IN__5' names argument 5 of forward(a: Tensor, b: Tensor), which takes 2"]),
    "no_forward": ("""
def other(self, x):
    return x
""", [], MODELS["model_kind"][2].replace("instance_group [ { kind: KIND_MODEL } ]", ""),
        ["unable to load model 'no_forward': the TorchScript module has no forward() method"]),
    "two_dicts": ("""
def forward(self, a: Dict[str, Tensor], b: Dict[str, Tensor]):
    return a["x"]
""", [], MODELS["dict"][2], ["Multiple inputs of kind DictType were detected"]),
    "int_arg": ("""
def forward(self, x, k: int):
    return x * k
""", [], MODELS["add_sub"][2], ["An input of type 'int' was detected in the model"]),
    "bad_bool": (MODELS["picky"][0], [], MODELS["picky"][2] +
                 'parameters { key: "DISABLE_CUDNN" value { string_value: "maybe" } }',
                 ["failed to convert 'maybe' to boolean", "DISABLE_CUDNN"]),
    "bad_int": (MODELS["picky"][0], [], MODELS["picky"][2] +
                'parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "many" } }',
                ["failed to convert 'many' to integral number", "INTRA_OP_THREAD_COUNT"]),
    "uint16": (MODELS["picky"][0], [], MODELS["picky"][2].replace("TYPE_FP32", "TYPE_UINT16", 1),
               ["unsupported datatype TYPE_UINT16 for input 'x' for model 'uint16'"]),
    "string_2d": (MODELS["strings"][0], [], MODELS["strings"][2].replace("dims: [ -1 ] }", "dims: [ 2, 2 ] }", 1),
                  ["Triton only supports 1 dimensional List of String as input for 'words'"]),
    "state_unnamed": (MODELS["accumulate"][0], [], MODELS["accumulate"][2].replace(
        'input_name: "STATE_IN__1"', 'input_name: "STATE"'),
        ["is using sequence batching with state but state 'STATE' does not follow the <name>__<index>"]),
    "gpu": (MODELS["picky"][0], [], MODELS["picky"][2] + "instance_group [ { kind: KIND_GPU } ]",
            ["KIND_GPU", "does not support GPUs"]),  # the core refuses it first, for now
    "bad_kind": (MODELS["ragged"][0], [], MODELS["ragged"][2].replace("BATCH_ACCUMULATED_ELEMENT_COUNT",
                                                                       "BATCH_ITEM_COUNT"),
                 ["BATCH_ITEM_COUNT"]),  # the core refuses it first
    "batch_input_int64": (MODELS["ragged"][0], [], MODELS["ragged"][2].replace("TYPE_INT32", "TYPE_INT64"),
                          ["batch_input[0].data_type", "TYPE_INT64"]),  # the core refuses it first
    "inter_4": (MODELS["picky"][0], [], MODELS["picky"][2] +
                'parameters { key: "INTER_OP_THREAD_COUNT" value { string_value: "4" } }',
                ["inter-op thread pool already has 3 threads and cannot be resized to 4"]),
}


def make_models(root, models):
    """Writes <root>/<name>/1/<model file> and config.pbtxt for each model,
    compiling all of them in one pt_make_model run."""
    assert MAKER, "PT_MAKE_MODEL is not set (tests/CMakeLists.txt)"
    args = []
    for name, (source, params, config) in models.items():
        version = os.path.join(root, name, "1")
        os.makedirs(version, exist_ok=True)
        with open(os.path.join(root, name, "source.ts"), "w") as f:
            f.write(source)
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config + ("" if "INTRA_OP_THREAD_COUNT" in config else THREADS))
        file = "net.pt" if "net.pt" in config else "model.pt"
        args += ["--", os.path.join(version, file), os.path.join(root, name, "source.ts"), *params]
    # The maker is a helper: libtorch's process-lifetime allocations at its
    # exit are not ours to report.
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    proc = subprocess.run([MAKER, *args[1:]], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def server():
    with tempfile.TemporaryDirectory() as root:
        make_models(root, MODELS)
        s = start(root)
        with running(s) as lines:
            take_ports(s, lines)
            yield s


WAYS = (("http", True), ("http", False), ("grpc", True))  # (protocol, binary tensors)


def test_naming_conventions_dicts_and_strings(server):
    s = server
    a = np.array([[1.5, 2, 3, 4], [5, 6, 7, 8]], np.float32)
    b = np.array([[1, 1, 1, 1], [2, 2, 2, 2]], np.float32)
    for protocol, binary in WAYS:
        how = dict(protocol=protocol, binary=binary)
        r = infer(s, "add_sub", [("INPUT0", a), ("INPUT1", b)], **how)
        assert outputs_of(r)["OUTPUT__0"] == list((a + b).flat), how
        assert outputs_of(r)["OUTPUT__1"] == list((a - b).flat), how
        r = infer(s, "add_sub", [("INPUT0", a[:1]), ("INPUT1", b[:1])], outputs=["OUTPUT__1"], **how)
        assert output_names(r) == ["OUTPUT__1"], how

        r = infer(s, "indexed", [("IN__0", np.array([1, 2, 3])), ("IN__1", np.array([4, 5, 6]))], **how)
        assert outputs_of(r) == {"OUT__0": [14, 25, 36], "OUT__1": [1, 2, 3]}, how
        r = infer(s, "ordered", [("first", np.array([1, 2], np.int32)), ("second", np.array([3, 4], np.int32))],
                  **how)
        assert outputs_of(r)["result"] == [13, 24], how
        r = infer(s, "dict", [("X", np.array([[2, 3]], np.float32)), ("Y", np.array([[4, 5]], np.float32))], **how)
        assert outputs_of(r)["OUTPUT__0"] == [8, 15], how

        words = ["", "héllo", "a longer string with spaces", "x" * 1000]
        r = infer(s, "strings", [("words", np.array(words, np.object_)), ("n", np.array([21], np.int32))], **how)
        assert [w.decode() for w in outputs_of(r)["OUTPUT__0"]] == [w + "!" for w in words], how
        assert outputs_of(r)["OUTPUT__1"] == [42] and datatypes_of(r)["OUTPUT__0"] == "BYTES", how
        r = infer(s, "batched_strings", [("INPUT__0", np.array([["ab"], ["cd"], ["xy"]], np.object_))], **how)
        assert [w.decode() for w in outputs_of(r)["OUTPUT__0"]] == ["AB", "CD", "XY"], how


def test_every_datatype(server):
    for dt, np_type in DATATYPES.items():
        x = (np.arange(6).reshape(2, 3) % 2).astype(np_type) if dt == "BOOL" else np.arange(6, dtype=np_type).reshape(
            2, 3)
        for protocol in PROTOCOLS:
            r = infer(server, f"identity_{dt.lower()}", [("INPUT__0", x)], protocol=protocol)
            assert datatypes_of(r)["OUTPUT__0"] == dt, (dt, protocol)
            assert np.array_equal(r.as_numpy("OUTPUT__0"), x), (dt, protocol)


def test_batching_instances_and_kinds(server):
    s = server

    def one(i):
        return infer(s, "add_sub", [("INPUT0", np.full((1, 4), i, np.float32)), ("INPUT1", np.ones((1, 4), np.float32))],
                     protocol=PROTOCOLS[i % 2])

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    for i, r in enumerate(results):
        assert outputs_of(r)["OUTPUT__0"] == [i + 1.0] * 4
    stats = settled_stats(s, "add_sub", lambda st: st["inference_count"] >= 8)
    assert stats["execution_count"] < stats["inference_count"]  # the 100 ms queue delay gathered some

    # Two instances on one shared module, run from two threads at once.
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = infer(s, "linear", [("x", x)]).as_numpy("y__0")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda i: infer(s, "linear", [("x", x)]).as_numpy("y__0"), range(16)))
    assert all(np.array_equal(o, want) for o in outs) and want.shape == (2, 3)

    r = infer(s, "model_kind", [("x", np.array([1, 2], np.float32))])
    assert outputs_of(r)["y"] == [2, 3]

    # Batched List[str]: each request gets its own rows of the list.
    def words(i):
        batch = np.array([[f"r{i}a"], [f"r{i}b"]], np.object_)
        return [w.decode() for w in outputs_of(infer(s, "batched_strings", [("INPUT__0", batch)]))["OUTPUT__0"]]

    before = settled_stats(s, "batched_strings", lambda st: True)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        got = list(pool.map(words, range(3)))
    assert got == [[f"R{i}A", f"R{i}B"] for i in range(3)], got
    stats = settled_stats(s, "batched_strings",
                          lambda st: st["inference_count"] >= before["inference_count"] + 6)
    assert stats["execution_count"] - before["execution_count"] < 3, stats  # they ran together

    # Ragged: requests of different lengths in one forward(), the input
    # flattened, the batch input telling where each ends.
    def ragged(n):
        x = np.arange(1, n + 1, dtype=np.float32).reshape(1, n)
        return outputs_of(infer(s, "ragged", [("x", x)]))["sum__0"]

    before = settled_stats(s, "ragged", lambda st: True)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        got = list(pool.map(ragged, (3, 5, 1)))
    assert got == [[6.0], [15.0], [1.0]], got
    stats = settled_stats(s, "ragged", lambda st: st["inference_count"] >= before["inference_count"] + 3)
    assert stats["execution_count"] - before["execution_count"] < 3, stats  # they ran together

    def shapes(n):
        x = np.arange(1, n + 1, dtype=np.float32).reshape(1, n)
        return outputs_of(infer(s, "item_shape", [("x", x)]))

    before = settled_stats(s, "item_shape", lambda st: True)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        got = list(pool.map(shapes, (3, 5, 1)))
    stats = settled_stats(s, "item_shape", lambda st: st["inference_count"] >= before["inference_count"] + 3)
    together = stats["execution_count"] - before["execution_count"] == 1
    for n, g in zip((3, 5, 1), got):
        assert g["s__0"] == [n] and g["f__1"] == [n], (n, g)
        assert g["m__2"] == [5 if together else n], (n, g, stats)

    def doubled(n):
        x = np.arange(1, n + 1, dtype=np.float32).reshape(1, n)
        return infer(s, "ragged_out", [("x", x)]).as_numpy("y")

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        got = list(pool.map(doubled, (3, 5, 1)))
    for n, y in zip((3, 5, 1), got):
        assert y.shape == (1, n) and list(y.flat) == [2.0 * v for v in range(1, n + 1)], (n, y)


def test_implicit_state_keeps_a_running_sum_per_sequence(server):
    sums = {}
    for step in range(3):
        for seq in (11, 12):
            value = seq * 10 + step
            r = infer(server, "accumulate", [("INPUT__0", np.array([[value]], np.int32))], sequence_id=seq,
                      sequence_start=step == 0, sequence_end=step == 2, protocol=PROTOCOLS[seq % 2])
            sums[seq] = sums.get(seq, 0) + value
            assert outputs_of(r)["OUTPUT__0"] == [sums[seq]], (seq, step)


def test_sequence_controls_reach_forward(server):
    for step, value in enumerate((1, 2)):
        r = infer(server, "controls", [("INPUT__0", np.array([[value]], np.int32))], sequence_id=7,
                  sequence_start=step == 0, sequence_end=step == 1)
        assert outputs_of(r)["OUTPUT__0"] == [value + (100 if step == 0 else 0) + 7000], step


def test_a_throwing_forward_fails_its_request_and_the_instance_keeps_serving(server):
    s = server
    for protocol in PROTOCOLS:
        e = failure(s, "picky", [("x", np.array([[-1, -2]], np.float32))], protocol)
        assert "PyTorch execute failure" in e.message() and "negative input is not allowed" in e.message(), e
        r = infer(s, "picky", [("x", np.array([[1, 2]], np.float32))], protocol=protocol)
        assert outputs_of(r)["y__0"] == [2, 4]
    # Wrong datatype and shape: refused before the backend, as by Triton.
    e = failure(s, "picky", [("x", np.array([[1, 2]], np.int32))])
    assert e.status() == "400", e
    e = failure(s, "picky", [("x", np.array([[1, 2, 3]], np.float32))])
    assert e.status() == "400", e

    x = [("x", np.array([1, 2], np.float32))]
    assert "configuration expects datatype TYPE_FP32 for output 'y__0', model provides TYPE_INT64" in failure(
        s, "wrong_out_type", x).message()
    assert ("The output y__3 in the model configuration refers to an output index which doesn't exist. This "
            "model has 1 outputs") in failure(s, "missing_out", x).message()
    assert "output 'y__0' is a scalar which is not supported." in failure(s, "scalar_out", x).message()
    msg = failure(s, "dict_out", x).message()
    assert "PyTorch execute failure: output must be of type Tensor, List[str] or Tuple" in msg, msg
    # Still serving after all of these.
    assert outputs_of(infer(s, "picky", [("x", np.array([[3, 4]], np.float32))]))["y__0"] == [6, 8]


def test_refusals_name_the_model_the_file_and_the_reason():
    with tempfile.TemporaryDirectory() as root:
        inter_3 = (MODELS["picky"][0], [], MODELS["picky"][2] +
                   'parameters { key: "INTER_OP_THREAD_COUNT" value { string_value: "3" } }')
        make_models(root, {name: spec[:3] for name, spec in REFUSED.items()} |
                    {"good": MODELS["picky"], "inter_3": inter_3})
        for name, text in (("corrupt", b"this is not a TorchScript file"), ("truncated", None)):
            os.makedirs(os.path.join(root, name, "1"))
            with open(os.path.join(root, "good", "1", "model.pt"), "rb") as f:
                good = f.read()
            with open(os.path.join(root, name, "1", "model.pt"), "wb") as f:
                f.write(text if text is not None else good[:len(good) // 2])
            with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
                f.write(MODELS["picky"][2] + THREADS)
        os.makedirs(os.path.join(root, "no_file", "1"))
        with open(os.path.join(root, "no_file", "config.pbtxt"), "w") as f:
            f.write(MODELS["picky"][2] + THREADS)
        s = start(root, "--model-control-mode=explicit")
        with running(s) as lines:
            take_ports(s, lines)
            with client(s) as c:
                c.load_model("inter_3")  # sets libtorch's inter-op pool: inter_4 then fails
            for name, (_, _, _, words) in REFUSED.items():
                msg = load_error(s, name)
                for w in words:
                    assert w in msg, (name, msg)
            for name in ("corrupt", "truncated"):
                msg = load_error(s, name)
                assert f"failed to load model '{name}'" in msg and f"{name}/1/model.pt" in msg, msg
            assert "unable to find '" in load_error(s, "no_file")
            with client(s) as c:
                c.load_model("good")
                assert c.is_model_ready("good")
                states = {m["name"]: m.get("state") for m in c.get_model_repository_index()}
            assert states["corrupt"] == "UNAVAILABLE" and states["good"] == "READY"


def test_kind_gpu_is_refused_by_the_backend_where_the_core_finds_gpus():
    """With a GPU in sight (the stand-in NVIDIA driver, tests/gpu_stub) the
    core places a KIND_GPU instance on GPU 0; this CPU build of the backend
    refuses it and says why, and a model without instance groups beside it
    gets the backend's CPU group and serves (docs/gpu.md)."""
    fake = os.environ["NRD_FAKE_CUDA"]
    with tempfile.TemporaryDirectory() as root:
        make_models(root, {"gpu": (MODELS["picky"][0], [], MODELS["picky"][2] +
                                   "instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]\n"),
                           "good": MODELS["picky"]})
        env = dict(os.environ, NEREID_CUDA_LIBRARY=fake, NEREID_NVML_LIBRARY=fake)
        s = start(root, "--model-control-mode=explicit", env=env)
        with running(s) as lines:
            take_ports(s, lines)
            msg = load_error(s, "gpu")
            assert "instance 'gpu_0_0' is GPU; this build runs the pytorch backend on the CPU only" in msg, msg
            with client(s) as c:
                c.load_model("good")
                assert c.is_model_ready("good")
                assert c.get_model_config("good")["instance_group"][0]["kind"] == "KIND_CPU"
