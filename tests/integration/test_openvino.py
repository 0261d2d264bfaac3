"""The openvino backend through tritonclient over HTTP and gRPC: models
made for each run, ONNX by tools/onnx_models.py (python3-onnx) and IR
(model.xml + model.bin) converted from them by the OpenVINO wheel's own
converter (openvino.convert_model under Debian's python, from
.deps/openvino/python), served by the wheel's libraries copied beside the
backend (scripts/fetch_pypi.sh, backends/CMakeLists.txt).

Covers IR and ONNX models, static and dynamic shapes, batching with the
dynamic batcher (padding to max_batch_size, ENABLE_BATCH_PADDING, and the
refusal without it), RESHAPE_IO_LAYERS, the CPU parameters of Triton's
openvino backend, and the refusals: bad model files, configurations that
disagree with the model, bad parameters, bad requests; the server keeps
serving through all of them.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import concurrent.futures
import contextlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from test_nereid_cli import BACKENDS, NEREID, SANITIZER_WORDS
from test_onnxruntime import load_error, settled_stats, start, take_ports
from test_python_backend import PROTOCOLS, client, failure, infer, output_names, outputs_of

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(SOURCE, "tools"))
import onnx_models  # noqa: E402

OV_PYTHON = os.path.join(SOURCE, ".deps", "openvino", "python")

if not os.path.exists(os.path.join(BACKENDS, "openvino", "libopenvino_c.so.2520")):
    pytest.skip("OpenVINO is not beside the backend (scripts/fetch_pypi.sh, then build)", allow_module_level=True)

# One inference thread and one stream: the tests share two cores.
LEAN = """
parameters { key: "INFERENCE_NUM_THREADS" value { string_value: "1" } }
parameters { key: "NUM_STREAMS" value { string_value: "1" } }
"""

ADD_SUB_IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ %s ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ %s ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ %s ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ %s ] } ]
"""


def add_sub(dims, head="", tail=""):
    return 'backend: "openvino"\n' + head + ADD_SUB_IO % ((dims,) * 4) + tail


FIXED = """backend: "openvino"
default_model_filename: "model.onnx"
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] },
         { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
"""

ONNX = 'default_model_filename: "model.onnx"\n'
BATCHER = "dynamic_batching { max_queue_delay_microseconds: 100000 }\n"
PAD = 'parameters { key: "ENABLE_BATCH_PADDING" value { string_value: "YES" } }\n'


def param(key, value):
    return 'parameters { key: "%s" value { string_value: "%s" } }\n' % (key, value)


def ir_available():
    return os.path.isdir(os.path.join(OV_PYTHON, "openvino"))


def to_ir(pairs):
    """Converts each (model.onnx, model.xml) with the wheel's converter, in
    one Debian python process."""
    script = ("import sys, openvino as ov\n"
              "args = sys.argv[1:]\n"
              "for src, dst in zip(args[0::2], args[1::2]):\n"
              "    ov.save_model(ov.convert_model(src), dst, compress_to_fp16=False)\n")
    env = dict(os.environ, PYTHONPATH=OV_PYTHON)
    subprocess.run(["/usr/bin/python3", "-c", script, *[p for pair in pairs for p in pair]], check=True, env=env,
                   timeout=300)


def make_repo(root, models):
    """models: {name: (source model, "onnx" or "ir", config text)}."""
    convert = []
    for name, (source, form, config) in models.items():
        d = os.path.join(root, name, "1")
        os.makedirs(d, exist_ok=True)
        if source is not None:
            onnx_models.write(d, source)
            os.rename(os.path.join(d, f"{source}.onnx"), os.path.join(d, "model.onnx"))
            if form == "ir":
                convert.append((os.path.join(d, "model.onnx"), os.path.join(d, "model.xml")))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            lean = "NUM_STREAMS" not in config and "INFERENCE_NUM_THREADS" not in config
            f.write(config + (LEAN if lean else ""))
    if convert:
        to_ir(convert)
        for src, _ in convert:
            os.remove(src)


# OpenVINO's libraries with thread-local storage (a TLS segment), and TBB.
PRELOAD = ("libtbb.so.12", "libopenvino.so.2520", "libopenvino_intel_cpu_plugin.so",
           "libopenvino_onnx_frontend.so.2520")


def sanitizer_env():
    """The environment for nereid. A sanitizer build gets PRELOAD preloaded
    (after the sanitizer's runtime, which must come first): their
    thread-local storage is then static. Left dynamic (as dlopen makes it),
    GCC 12's ASan runtime on glibc 2.36 sometimes crashes in its own
    thread-exit and allocator code when a thread that ran OpenVINO ends."""
    env = dict(os.environ)
    out = subprocess.run(["ldd", NEREID], capture_output=True, text=True).stdout
    runtime = [line.split()[2] for line in out.splitlines()
               if ("libasan.so" in line or "libtsan.so" in line) and "=>" in line]
    if runtime:
        lib = os.path.join(BACKENDS, "openvino")
        env["LD_PRELOAD"] = " ".join([runtime[0]] + [os.path.join(lib, name) for name in PRELOAD])
    return env


# What GCC 12's ASan runtime (Debian 12) prints when it crashes in its own
# code at the stop of a server that ran OpenVINO, seen in about one run in
# four even with PRELOAD: the faulting frames are the runtime's own
# (DTLS_Destroy or PlatformTSDDtor at a thread's exit, its signal handler
# crashing again, LeakSanitizer's tracer). Another signature, a SEGV writing ASan's stack
# depot from operator delete under ov_compiled_model_free, is not
# excused: it was seen once, with FORCE_TBB_TERMINATE, since dropped.
RUNTIME_CRASH = ("AddressSanitizer: nested bug in the same thread", "in __sanitizer::DTLS_Destroy()",
                 "in __asan::PlatformTSDDtor(void*)", "Tracer caught signal 11")
# Any of these is a real report, never excused.
REAL_REPORT = ("ERROR: AddressSanitizer: heap", "ERROR: AddressSanitizer: stack", "use-after", "double-free",
               "detected memory leaks", "runtime error:", "ThreadSanitizer")


@contextlib.contextmanager
def running(s):
    """test_nereid_cli's running(), stopping the server as strictly except
    for RUNTIME_CRASH at the stop (then only if nothing else was reported),
    which is the sanitizer runtime's, not the server's."""
    try:
        yield s.wait_ready()
        code = s.stop()
        text = s.text()
        excused = code != 0 and any(c in text for c in RUNTIME_CRASH) and not any(r in text for r in REAL_REPORT)
        if excused:
            seen = [c for c in RUNTIME_CRASH if c in text]
            print(f"test_openvino: the sanitizer runtime crashed at the stop ({seen}); excused")
        else:
            assert code == 0, text
            for bad in SANITIZER_WORDS:
                assert bad not in text, text
    finally:
        s.close()


def serve_explicit(root):
    return start(root, "--model-control-mode=explicit", env=sanitizer_env())


def load_all(s, names):
    with client(s) as c:
        for n in names:
            c.load_model(n)


GOOD = {
    # IR, batching to max_batch_size with padding: the dynamic batcher's
    # batches of any size run.
    "ir_batched": ("add_sub", "ir", add_sub("4", "max_batch_size: 8\n", BATCHER + PAD)),
    # ONNX, batching without padding: only full batches of 2 run.
    "onnx_full": ("add_sub", "onnx", add_sub("4", "max_batch_size: 2\n" + ONNX)),
    # ONNX with static shapes and no batching, INT32.
    "onnx_fixed": ("fixed_add_sub", "onnx", FIXED),
    # Dynamic shapes: the ONNX model's first dimension is symbolic.
    "onnx_dynamic": ("add_sub", "onnx", add_sub("-1, 4", ONNX)),
    # RESHAPE_IO_LAYERS: the dynamic model made [3, 4] by the configuration.
    "ir_reshaped": ("add_sub", "ir", add_sub("3, 4", "", param("RESHAPE_IO_LAYERS", "yes"))),
    # Inputs and outputs completed from the model (-1 where dynamic).
    "ir_auto": ("add_sub", "ir", 'backend: "openvino"\n'),
    "onnx_auto": ("fixed_add_sub", "onnx", 'backend: "openvino"\n' + ONNX),
    # Every CPU parameter of the README at once.
    "ir_params": ("add_sub", "ir", add_sub("4", "max_batch_size: 4\n", PAD + BATCHER +
                                           param("NUM_STREAMS", "2") + param("INFERENCE_NUM_THREADS", "1") +
                                           param("COMPILATION_NUM_THREADS", "1") +
                                           param("PERFORMANCE_HINT", "THROUGHPUT") +
                                           param("SKIP_OV_DYNAMIC_BATCHSIZE", "YES") +
                                           param("HINT_BF16", "YES"))),
}


@pytest.fixture(scope="module")
def server():
    if not ir_available():
        pytest.skip("the openvino Python package is not in .deps/openvino/python (scripts/fetch_pypi.sh)")
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, GOOD)
        s = serve_explicit(root)
        with running(s) as lines:
            take_ports(s, lines)
            s.root = root
            load_all(s, GOOD)
            yield s


def pair(rows, start=0.0):
    a = (np.arange(rows * 4, dtype=np.float32) + start).reshape(rows, 4)
    b = np.full((rows, 4), 0.5, np.float32)
    return a, b


def test_ir_and_onnx_models_answer_on_both_protocols(server):
    for protocol in PROTOCOLS:
        a, b = pair(3)
        r = infer(server, "ir_batched", [("INPUT0", a), ("INPUT1", b)], protocol=protocol)
        assert r.as_numpy("OUTPUT0").tolist() == (a + b).tolist(), protocol
        assert r.as_numpy("OUTPUT1").tolist() == (a - b).tolist(), protocol
        # Only the requested output comes back.
        r = infer(server, "ir_batched", [("INPUT0", a), ("INPUT1", b)], outputs=["OUTPUT1"], protocol=protocol)
        assert output_names(r) == ["OUTPUT1"]
        a, b = pair(2, 10)
        r = infer(server, "onnx_full", [("INPUT0", a), ("INPUT1", b)], protocol=protocol)
        assert r.as_numpy("OUTPUT0").tolist() == (a + b).tolist(), protocol
        r = infer(server, "onnx_fixed", [("INPUT0", np.array([1, 2, 3, 4], np.int32)),
                                         ("INPUT1", np.array([4, 3, 2, 1], np.int32))], protocol=protocol)
        assert outputs_of(r) == {"OUTPUT0": [5, 5, 5, 5], "OUTPUT1": [-3, -1, 1, 3]}, protocol


def test_dynamic_shapes_and_reshaped_inputs(server):
    for rows in (1, 5, 2):
        a, b = pair(rows, rows)
        r = infer(server, "onnx_dynamic", [("INPUT0", a), ("INPUT1", b)])
        assert r.as_numpy("OUTPUT0").tolist() == (a + b).tolist(), rows
    a, b = pair(3)
    r = infer(server, "ir_reshaped", [("INPUT0", a), ("INPUT1", b)])
    assert r.as_numpy("OUTPUT1").tolist() == (a - b).tolist()
    with client(server) as c:
        config = c.get_model_config("ir_reshaped")
    assert config["input"][0]["dims"] == ["3", "4"] or config["input"][0]["dims"] == [3, 4], config
    # The core refuses a shape the configuration does not allow.
    a, b = pair(2)
    assert "unexpected shape" in str(failure(server, "ir_reshaped", [("INPUT0", a), ("INPUT1", b)]))


def test_configuration_completed_from_the_model(server):
    with client(server) as c:
        ir = c.get_model_config("ir_auto")
        onnx = c.get_model_config("onnx_auto")
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in ir["input"]] == \
        [("INPUT0", "TYPE_FP32", [-1, 4]), ("INPUT1", "TYPE_FP32", [-1, 4])], ir
    assert [o["name"] for o in ir["output"]] == ["OUTPUT0", "OUTPUT1"], ir
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in onnx["output"]] == \
        [("OUTPUT0", "TYPE_INT32", [4]), ("OUTPUT1", "TYPE_INT32", [4])], onnx
    a, b = pair(2)
    r = infer(server, "ir_auto", [("INPUT0", a), ("INPUT1", b)], protocol="grpc")
    assert r.as_numpy("OUTPUT0").tolist() == (a + b).tolist()


def test_dynamic_batcher_pads_batches_to_max_batch_size(server):
    def one(i):
        a, b = pair(1, i)
        r = infer(server, "ir_batched", [("INPUT0", a), ("INPUT1", b)], protocol=PROTOCOLS[i % 2])
        return r.as_numpy("OUTPUT0").tolist() == (a + b).tolist() and r.as_numpy("OUTPUT0").shape == (1, 4)

    before = settled_stats(server, "ir_batched", lambda st: True)["inference_count"]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        assert all(pool.map(one, range(6)))
    stats = settled_stats(server, "ir_batched", lambda st: st["inference_count"] >= before + 6)
    assert stats["inference_count"] == before + 6
    assert stats["execution_count"] < stats["inference_count"]  # some ran together


def test_parameters_load_and_serve(server):
    a, b = pair(4)
    r = infer(server, "ir_params", [("INPUT0", a), ("INPUT1", b)])
    # bf16 is a hint: where the CPU has it the sums round to bfloat16.
    assert np.allclose(r.as_numpy("OUTPUT0"), a + b, rtol=1e-2)
    a, b = pair(1)
    r = infer(server, "ir_params", [("INPUT0", a), ("INPUT1", b)])
    assert np.allclose(r.as_numpy("OUTPUT1"), a - b, rtol=1e-2)


def test_bad_requests_are_answered_and_the_server_keeps_serving(server):
    # A batch smaller than max_batch_size without ENABLE_BATCH_PADDING:
    # Triton's backend refuses it with this sentence.
    a, b = pair(1)
    for protocol in PROTOCOLS:
        msg = str(failure(server, "onnx_full", [("INPUT0", a), ("INPUT1", b)], protocol=protocol))
        assert "expected requests with batch size '2', got '1'... this error can be avoided by setting " \
               "'ENABLE_BATCH_PADDING' parameter in model configuration to 'YES' at a performance cost." in msg, msg
    # Requests the core refuses before the backend sees them.
    a, b = pair(9)
    assert "batch" in str(failure(server, "ir_batched", [("INPUT0", a), ("INPUT1", b)]))
    assert "INPUT1" in str(failure(server, "ir_batched", [("INPUT0", pair(1)[0])]))
    bad = np.zeros((1, 5), np.float32)
    assert "unexpected shape" in str(failure(server, "ir_batched", [("INPUT0", bad), ("INPUT1", bad)]))
    assert "INPUT0" in str(failure(server, "ir_batched", [("INPUT0", pair(1)[0].astype(np.int32)),
                                                         ("INPUT1", pair(1)[1])]))
    # Zero rows: the core refuses them before the backend.
    empty = np.zeros((0, 4), np.float32)
    assert "INPUT" in str(failure(server, "ir_batched", [("INPUT0", empty), ("INPUT1", empty)]))
    a, b = pair(2)
    r = infer(server, "onnx_full", [("INPUT0", a), ("INPUT1", b)])
    assert r.as_numpy("OUTPUT0").tolist() == (a + b).tolist()


BAD = {
    "no_file": (None, "onnx", add_sub("4", "max_batch_size: 2\n")),
    "wrong_name": ("add_sub", "onnx", add_sub("-1, 4", ONNX).replace('"INPUT1"', '"INPUT9"')),
    "wrong_dims": ("fixed_add_sub", "onnx", FIXED.replace("dims: [ 4 ]", "dims: [ 5 ]", 1)),
    "wrong_count": ("fixed_add_sub", "onnx", FIXED.replace(
        '{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] }', "").replace("] },\n", "] }\n", 1)),
    "no_batch_dim": ("fixed_add_sub", "onnx", "max_batch_size: 4\n" + FIXED),
    "fp64": ("fixed_add_sub", "onnx", FIXED.replace("TYPE_INT32", "TYPE_FP64", 1)),
    "streams": ("add_sub", "onnx", add_sub("-1, 4", ONNX, param("NUM_STREAMS", "lots"))),
    "threads": ("add_sub", "onnx", add_sub("-1, 4", ONNX, param("INFERENCE_NUM_THREADS", "-2"))),
    "hint": ("add_sub", "onnx", add_sub("-1, 4", ONNX, param("PERFORMANCE_HINT", "fast"))),
    "bf16": ("add_sub", "onnx", add_sub("-1, 4", ONNX, param("HINT_BF16", "maybe"))),
    "extension": ("add_sub", "onnx", add_sub("-1, 4", ONNX, param("CPU_EXTENSION_PATH", "/nonexistent/libext.so"))),
    "gpu": ("add_sub", "onnx", add_sub("-1, 4", ONNX, "instance_group [ { count: 1 kind: KIND_GPU } ]\n")),
}


def test_bad_models_and_configurations_fail_to_load_clearly():
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, {**BAD, "onnx_fixed": GOOD["onnx_fixed"]})
        for name, content in (("corrupt_onnx", b"this is not an onnx model"),
                              ("corrupt_xml", b"<net name='x' version='11'><layers><layer")):
            os.makedirs(os.path.join(root, name, "1"))
            file = "model.onnx" if name == "corrupt_onnx" else "model.xml"
            with open(os.path.join(root, name, "1", file), "wb") as f:
                f.write(content)
            with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
                f.write(add_sub("4", ONNX if name == "corrupt_onnx" else ""))
        s = serve_explicit(root)
        with running(s) as lines:
            take_ports(s, lines)
            load_all(s, ["onnx_fixed"])
            msg = load_error(s, "no_file")
            assert "unable to find '" in msg and "no_file/1/model.xml' for model 'no_file'" in msg, msg
            msg = load_error(s, "corrupt_onnx")
            assert "openvino error in reading model : " in msg, msg
            assert "openvino error in reading model : " in load_error(s, "corrupt_xml")
            assert "unexpected inference input 'INPUT9', allowed inputs are: INPUT0, INPUT1" in load_error(
                s, "wrong_name")
            msg = load_error(s, "wrong_dims")
            assert "model 'wrong_dims', tensor 'INPUT0': the model expects 1 dimensions (shape [4]) but the model " \
                   "configuration specifies 1 dimensions (shape [5])" in msg, msg
            assert "unable to load model 'wrong_count', configuration expects 1 inputs, model provides 2" in \
                load_error(s, "wrong_count")
            assert "an initial batch dimension because max_batch_size > 0" in load_error(s, "no_batch_dim")
            assert "unsupported datatype TYPE_FP64 for input 'INPUT0' for model 'fp64'" in load_error(s, "fp64")
            assert "expected the parameter 'NUM_STREAMS' to be either AUTO/NUMA/<int_value>, got lots" in \
                load_error(s, "streams")
            assert "expected the parameter 'INFERENCE_NUM_THREADS' to be a non-negative number, got -2" in \
                load_error(s, "threads")
            assert "expected the parameter 'PERFORMANCE_HINT' to be LATENCY/THROUGHPUT/CUMULATIVE_THROUGHPUT, " \
                   "got fast" in load_error(s, "hint")
            assert "expected the parameter 'HINT_BF16' to be YES, got maybe" in load_error(s, "bf16")
            assert "loading custom CPU extensions" in load_error(s, "extension")
            assert "gpu" in load_error(s, "gpu").lower()
            # The server kept serving the good model through all of it.
            for protocol in PROTOCOLS:
                r = infer(s, "onnx_fixed", [("INPUT0", np.array([1, 2, 3, 4], np.int32)),
                                            ("INPUT1", np.ones(4, np.int32))], protocol=protocol)
                assert outputs_of(r)["OUTPUT0"] == [2, 3, 4, 5]
            with client(s) as c:
                states = {m["name"]: m.get("state") for m in c.get_model_repository_index()}
            assert states["onnx_fixed"] == "READY" and states["corrupt_onnx"] == "UNAVAILABLE", states
