"""The stateful backend (backend: "stateful", docs/stateful.md) end to end:
the accumulate models of tools/onnx_models.py served by nereid, checked
against a Python simulation of the model, over the gRPC stream and HTTP,
all through tritonclient (sequence_id, sequence_start, sequence_end).

Covers interleaved sequences batched together, START resets, END frees
the slot, infer_end_requests 0 and 1, integer and string correlation ids,
states stored as fp16, lazy buffers growing and shrinking, the use-ratio
rejection, a request for a sequence without a slot, and configurations
that fail to load with a message naming the parameter or tensor.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import concurrent.futures
import contextlib
import os
import queue
import sys
import tempfile
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from test_nereid_cli import BACKENDS, Server, listening_ports, running

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import onnx_models  # noqa: E402

SEGMENTS, WIDTH = 4, 5
TIMEOUT = 60


def config(name, onnx="stateful_accumulate_fp32", dtype="TYPE_FP32", corrid="TYPE_UINT64",
           slots=64, max_batch=16, params=None, reset="ResetSequence", dims="4, -1, 5",
           control_extra="", idle_us=60000000, instances=1):
    p = {"onnx_file_name": f"{onnx}.onnx", "state_pairs": "<<<Accumulate_In, Accumulate_Out>>>",
         "intra_op_thread_count": "1", "inter_op_thread_count": "1"}
    p.update(params or {})
    ps = ",\n".join(f'  {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in p.items() if v is not None)
    start = (f'{{ name: "{reset}" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},'
             if reset else "")
    return f"""name: "{name}"
backend: "stateful"
max_batch_size: {max_batch}
sequence_batching {{
  max_sequence_idle_microseconds: {idle_us}
  oldest {{ max_candidate_sequences: {slots} max_queue_delay_microseconds: 20000 }}
  control_input [
    {start}
    {{ name: "EndSequence" control [ {{ kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid} }} ] }}
    {control_extra}
  ]
}}
input [ {{ name: "Input" data_type: {dtype} dims: [ {dims} ] }} ]
output [ {{ name: "Output" data_type: {dtype} dims: [ {dims} ] }} ]
parameters [
{ps}
]
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
"""


def make_repo(root, models):
    """models: {name: (onnx model name, config text)}."""
    for name, (source, text) in models.items():
        os.makedirs(os.path.join(root, name, "1"), exist_ok=True)
        onnx_models.write(os.path.join(root, name, "1"), source)
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(text)


@contextlib.contextmanager
def serve(models, *flags, grpc_on=False):
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, models)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--http-address=127.0.0.1", "--allow-metrics=false",
                    *(["--grpc-port=0", "--grpc-address=127.0.0.1"] if grpc_on else ["--allow-grpc=false"]),
                    *flags])
        with running(s) as lines:
            ports = listening_ports(lines)
            s.port = ports["http"]
            s.grpc_port = ports.get("grpc")
            yield s


class Simulation:
    """The accumulate model in numpy: per sequence a running sum of width 5."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.state = {}

    def step(self, seq, x, start):
        prev = np.zeros(WIDTH, self.dtype) if start else self.state[seq]
        self.state[seq] = (prev + x.reshape(SEGMENTS, WIDTH).sum(axis=0)).astype(self.dtype)
        return (x.reshape(SEGMENTS, WIDTH) + self.state[seq]).astype(self.dtype).reshape(1, SEGMENTS, 1, WIDTH)


def step_input(rng, dtype):
    if dtype == np.int32:
        return rng.integers(-50, 50, size=(1, SEGMENTS, 1, WIDTH)).astype(np.int32)
    return rng.random((1, SEGMENTS, 1, WIDTH)).astype(np.float32)


def client(s, protocol="http"):
    """A tritonclient client of s over HTTP or gRPC."""
    if protocol == "grpc":
        return grpcclient.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    return httpclient.InferenceServerClient(f"127.0.0.1:{s.port}", network_timeout=TIMEOUT)


def infer_inputs(inputs, protocol="http"):
    """tritonclient InferInputs of (name, numpy array) pairs."""
    module = grpcclient if protocol == "grpc" else httpclient
    out = []
    for name, array in inputs:
        i = module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        i.set_data_from_numpy(array)
        out.append(i)
    return out


STATUS = {"http": {400: "400", 503: "503"},
          "grpc": {400: "StatusCode.INVALID_ARGUMENT", 503: "StatusCode.UNAVAILABLE"}}


def step(s, model, seq, x, start=False, end=False, expect=200, protocol="http", c=None):
    """One step of sequence seq (tritonclient, HTTP unless protocol says
    gRPC): its output, or, where expect is an error status (400, 503), the
    error's message once its status is checked."""
    with contextlib.ExitStack() as stack:
        if c is None:
            c = stack.enter_context(client(s, protocol))
        run = lambda: c.infer(model, infer_inputs([("Input", x)], protocol), sequence_id=seq,  # noqa: E731
                              sequence_start=start, sequence_end=end)
        if expect == 200:
            return run().as_numpy("Output")
        with pytest.raises(InferenceServerException) as e:
            run()
        assert e.value.status() == STATUS[protocol][expect], e.value
        return e.value.message()


def stats(s, model, ready=lambda st: True):
    """The model's statistics once ready(stats) holds (TIMEOUT at most): a
    backend reports them after it sent the responses."""
    deadline = time.monotonic() + TIMEOUT
    with client(s) as c:
        while True:
            st = c.get_inference_statistics(model)["model_stats"][0]
            if ready(st) or time.monotonic() > deadline:
                return st
            time.sleep(0.02)


def wait_log(s, text, timeout=TIMEOUT):
    """Polls the server's log (stderr) for text."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in s.text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not logged:\n{s.text()}")


def grpc_stream(s, requests):
    """Sends requests (async_stream_infer keyword arguments) on one gRPC
    stream of tritonclient; returns the (result, error) pairs in arrival
    order once the server has answered them all."""
    got = queue.Queue()
    with client(s, "grpc") as c:
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        for r in requests:
            c.async_stream_infer(**r)
        c.stop_stream()  # half-closes; returns once every response came
    return [got.get_nowait() for _ in range(got.qsize())]


def grpc_step(model, seq, x, start, end, rid):
    return dict(model_name=model, inputs=infer_inputs([("Input", x)], "grpc"),
                outputs=[grpcclient.InferRequestedOutput("Output")], request_id=rid, sequence_id=seq,
                sequence_start=start, sequence_end=end)


def interleaved_over_stream(s, model, dtype, ids, steps, seed):
    rng = np.random.default_rng(seed)
    sim = Simulation(dtype)
    reqs, expected = [], {}
    for k in range(steps):
        for seq in ids:
            x = step_input(rng, dtype)
            rid = f"{seq}/{k}"
            expected[rid] = sim.step(seq, x, k == 0)
            reqs.append(grpc_step(model, seq, x, k == 0, k == steps - 1, rid))
    replies = grpc_stream(s, reqs)
    assert len(replies) == len(reqs)
    for r, error in replies:
        assert error is None, error
        np.testing.assert_allclose(r.as_numpy("Output"), expected[r.get_response().id], rtol=1e-5, atol=1e-5)


def test_interleaved_sequences_over_the_grpc_stream_run_batched():
    with serve({"acc": ("stateful_accumulate_fp32", config("acc"))}, grpc_on=True) as s:
        interleaved_over_stream(s, "acc", np.float32, list(range(1, 25)), 6, seed=1)
        st = stats(s, "acc", lambda st: st["inference_count"] == 24 * 6)
        assert st["inference_count"] == 24 * 6
        # Several sequences went through one model execution.
        assert st["execution_count"] < st["inference_count"], st


def test_two_instances_keep_their_own_sequences():
    """Each sequence stays on one instance, whose slots hold its state."""
    with serve({"acc2": ("stateful_accumulate_fp32", config("acc2", instances=2))}, grpc_on=True) as s:
        interleaved_over_stream(s, "acc2", np.float32, list(range(50, 66)), 5, seed=6)
        assert "instance 'acc2_0_0': ran" in s.text() and "instance 'acc2_0_1': ran" in s.text(), s.text()


def test_string_correlation_ids_over_the_grpc_stream():
    with serve({"acc_s": ("stateful_accumulate_fp32", config("acc_s", corrid="TYPE_STRING"))},
               grpc_on=True) as s:
        interleaved_over_stream(s, "acc_s", np.float32, [f"user-{i}" for i in range(10)], 4, seed=2)


def test_interleaved_int32_sequences_over_http():
    """Eight clients, one sequence each, stepping concurrently; each step's
    output is compared exactly with the simulation."""
    with serve({"acc_i": ("stateful_accumulate_int32",
                          config("acc_i", onnx="stateful_accumulate_int32", dtype="TYPE_INT32"))}) as s:
        def stepper(seq):
            rng = np.random.default_rng(seq)
            sim = Simulation(np.int32)
            with client(s) as c:
                for k in range(8):
                    x = step_input(rng, np.int32)
                    want = sim.step(seq, x, k == 0)
                    got = step(s, "acc_i", seq, x, start=k == 0, end=k == 7, c=c)
                    np.testing.assert_array_equal(got, want)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for f in [pool.submit(stepper, 1000 + i) for i in range(8)]:
                f.result(timeout=TIMEOUT)


def test_start_resets_the_state():
    with serve({"acc": ("stateful_accumulate_int32",
                        config("acc", onnx="stateful_accumulate_int32", dtype="TYPE_INT32"))}) as s:
        x = np.ones((1, SEGMENTS, 1, WIDTH), np.int32)
        assert step(s, "acc", 5, x, start=True)[0, 0, 0, 0] == 1 + 4
        assert step(s, "acc", 5, x)[0, 0, 0, 0] == 1 + 8
        # START again on the live sequence: back to the initial state.
        assert step(s, "acc", 5, x, start=True)[0, 0, 0, 0] == 1 + 4
        assert step(s, "acc", 5, x, end=True)[0, 0, 0, 0] == 1 + 8


def test_symbolic_dimensions_the_configuration_fixes_are_fixed():
    """As the Stateful Backend's own models: the ONNX input is [seq, batch,
    5] with seq symbolic; dims [4, -1, 5] fix it, and the model answers as
    the one with seq fixed in the file. A configuration that leaves seq
    open, or batches along a dimension the file fixes, fails naming both."""
    sim = Simulation(np.float32)
    x = np.arange(SEGMENTS * WIDTH, dtype=np.float32).reshape(1, SEGMENTS, 1, WIDTH)
    with serve({"sym": ("stateful_accumulate_symbolic_seq", config("sym", onnx="stateful_accumulate_symbolic_seq")),
                "open": ("stateful_accumulate_symbolic_seq",
                         config("open", onnx="stateful_accumulate_symbolic_seq", dims="-1, -1, 5")),
                "wrong": ("stateful_accumulate_fp32", config("wrong", dims="4, 5, -1"))},
               "--model-control-mode=explicit", "--load-model=sym") as s:
        np.testing.assert_array_equal(step(s, "sym", 11, x, start=True), sim.step(11, x, True))
        np.testing.assert_array_equal(step(s, "sym", 11, x, end=True), sim.step(11, x, False))
        msg = load_error(s, "open")
        assert "'Input'" in msg and "-1 dimensions" in msg, msg
        msg = load_error(s, "wrong")
        assert "[4,5,-1]" in msg and "[4,-1,5]" in msg, msg


def test_end_frees_the_slot_and_the_use_ratio_rejects_at_once():
    """max_candidate_sequences 4 at ratio 0.5: two sequences at most; a
    third START is refused at once (over HTTP and gRPC), and admitted once
    one has ended."""
    text = config("acc", onnx="stateful_accumulate_int32", dtype="TYPE_INT32", slots=4,
                  params={"max_candidate_sequence_use_ratio": "0.5"})
    with serve({"acc": ("stateful_accumulate_int32", text)}, grpc_on=True) as s:
        x = np.ones((1, SEGMENTS, 1, WIDTH), np.int32)
        step(s, "acc", 1, x, start=True)
        step(s, "acc", 2, x, start=True, protocol="grpc")
        for protocol in ("http", "grpc"):
            msg = step(s, "acc", 3, x, start=True, expect=503, protocol=protocol)
            assert "sequence 3 cannot start" in msg and "max_candidate_sequence_use_ratio" in msg, msg
            # The refused sequence has no slot: its next step is an error too.
            msg = step(s, "acc", 3, x, expect=400, protocol=protocol)
            assert "sequence 3 has no state slot" in msg, msg
        step(s, "acc", 1, x, end=True)
        assert step(s, "acc", 3, x, start=True)[0, 0, 0, 0] == 5
        # Sequence 2 kept its state through all of it.
        assert step(s, "acc", 2, x, end=True)[0, 0, 0, 0] == 9
        step(s, "acc", 3, x, end=True)


def test_idle_sequences_release_their_slots():
    """Two sequences admitted; both go idle past max_sequence_idle_microseconds
    (0.3 s); a new sequence then gets a slot, and the idle ones' next steps
    are clean errors."""
    text = config("acc", onnx="stateful_accumulate_int32", dtype="TYPE_INT32", slots=4, idle_us=300000,
                  params={"max_candidate_sequence_use_ratio": "0.5"})
    with serve({"acc": ("stateful_accumulate_int32", text)}) as s:
        x = np.ones((1, SEGMENTS, 1, WIDTH), np.int32)
        # Taken before sequence 1's request: the backend stamps its last use
        # later than this, so no slot frees before t0 + 0.3 s, however long
        # the two requests take (after them, as before, the margin was the
        # 50 ms a loaded sanitizer build can spend on sequence 2's request).
        t0 = time.monotonic()
        step(s, "acc", 1, x, start=True)
        step(s, "acc", 2, x, start=True)
        deadline = time.monotonic() + TIMEOUT
        with client(s) as c:
            while True:  # refused at once until the two are idle long enough
                try:
                    c.infer("acc", infer_inputs([("Input", x)]), sequence_id=3, sequence_start=True)
                    break
                except InferenceServerException as e:
                    assert e.status() == "503" and "cannot start" in e.message(), e
                assert time.monotonic() < deadline, s.text()
                time.sleep(0.05)
        assert time.monotonic() - t0 >= 0.3
        wait_log(s, "idle for longer than max_sequence_idle_microseconds")
        step(s, "acc", 1, x, expect=400)


@pytest.mark.parametrize("infer_end", ["0", "1"])
def test_infer_end_requests(infer_end):
    text = config("acc", onnx="stateful_accumulate_int32", dtype="TYPE_INT32", slots=2,
                  params={"infer_end_requests": infer_end, "max_candidate_sequence_use_ratio": "0.5"})
    with serve({"acc": ("stateful_accumulate_int32", text)}) as s:
        x = np.ones((1, SEGMENTS, 1, WIDTH), np.int32)
        step(s, "acc", 1, x, start=True)
        out = step(s, "acc", 1, x, end=True)
        if infer_end == "0":
            assert out.shape == (1, SEGMENTS, 0, WIDTH)  # no inference: empty output
        else:
            assert out[0, 0, 0, 0] == 9
        # Either way the slot is free: the only admitted sequence may start.
        assert step(s, "acc", 2, x, start=True)[0, 0, 0, 0] == 5
        # With infer_end_requests 0 the END request ran no inference.
        runs = 2 if infer_end == "0" else 3
        st = stats(s, "acc", lambda st: st["inference_count"] == runs)
        assert st["inference_count"] == runs, st


def test_states_stored_as_fp16_halve_the_slot_and_stay_close():
    text = config("acc16", params={"store_states_as_fp16": "1"})
    with serve({"acc16": ("stateful_accumulate_fp32", text)}, grpc_on=True) as s:
        wait_log(s, "10 bytes of state per sequence")
        rng = np.random.default_rng(3)
        sim = Simulation(np.float32)
        for k in range(10):
            x = step_input(rng, np.float32)
            want = sim.step(7, x, k == 0)
            got = step(s, "acc16", 7, x, start=k == 0, end=k == 9, protocol=("http", "grpc")[k % 2])
            # fp16 keeps about 3 significant digits of the running sum.
            np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
            sim.state[7] = sim.state[7].astype(np.float16).astype(np.float32)


def test_fp32_slot_size_without_fp16():
    with serve({"acc": ("stateful_accumulate_fp32", config("acc"))}) as s:
        wait_log(s, "20 bytes of state per sequence")
        # No GPU-only parameter in the configuration: no line about them.
        assert "only apply to GPU instances" not in s.text()


def test_lazy_buffers_grow_past_the_initial_size_and_shrink_back():
    text = config("lazy", onnx="stateful_accumulate_int32", dtype="TYPE_INT32", slots=8,
                  params={"max_candidate_sequence_use_ratio": "1.0", "initial_buffer_size": "2",
                          "subsequent_buffer_size": "2", "buffer_alloc_threshold": "1",
                          "buffer_dealloc_threshold": "2"})
    with serve({"lazy": ("stateful_accumulate_int32", text)}) as s:
        wait_log(s, "2 slots allocated of 8")
        x = np.ones((1, SEGMENTS, 1, WIDTH), np.int32)
        for seq in range(1, 6):
            assert step(s, "lazy", seq, x, start=True)[0, 0, 0, 0] == 5
        wait_log(s, "6 slots now")
        for seq in range(1, 6):
            assert step(s, "lazy", seq, x)[0, 0, 0, 0] == 9
        for seq in range(5, 0, -1):
            step(s, "lazy", seq, x, end=True)
        wait_log(s, "released, 2 slots now")


def load_error(s, name):
    """The message of the refused repository load of name."""
    with client(s) as c, pytest.raises(InferenceServerException) as e:
        c.load_model(name)
    assert e.value.status() == "400", e.value
    return e.value.message()


def test_bad_configurations_fail_to_load_naming_the_parameter_or_tensor():
    good = config("x")
    bad = {
        "pairs_syntax": good.replace("<<<Accumulate_In, Accumulate_Out>>>", "<<Accumulate_In Accumulate_Out>>"),
        "pairs_missing": good.replace('{ key: "state_pairs" value: { string_value: '
                                      '"<<<Accumulate_In, Accumulate_Out>>>" } },', ""),
        "state_unknown": good.replace("Accumulate_Out>>>", "Nope_Out>>>"),
        "state_mismatch": good.replace("Accumulate_Out>>>", "Output>>>").replace(
            'output [ { name: "Output" data_type: TYPE_FP32 dims: [ 4, -1, 5 ] } ]', "output [ ]"),
        "no_start": config("no_start", reset=None),
        "start_not_in_model": config("start_not_in_model", reset="Reset2"),
        "two_dynamic": config("two_dynamic", dims="-1, -1, 5"),
        "lazy_partial": config("lazy_partial", params={"initial_buffer_size": "4"}),
        "bad_ratio": config("bad_ratio", params={"max_candidate_sequence_use_ratio": "1.5"}),
        "bad_flag": config("bad_flag", params={"store_states_as_fp16": "yes"}),
        "bad_inject": config("bad_inject", params={"error_inject_rate": "101"}),
        "bad_level": config("bad_level", params={"logging_level": "LOUD"}),
        "bad_mode": config("bad_mode", params={"execution_mode": "2"}),
        "no_file": config("no_file", onnx="missing"),
        "wrong_type": config("wrong_type", dtype="TYPE_INT32"),
        "direct": config("direct").replace("oldest { max_candidate_sequences: 64", "direct {"),
        "no_batching": config("no_batching", max_batch=0),
        "state_listed": config("state_listed").replace(
            'output [ { name: "Output"', 'output [ { name: "Accumulate_Out" data_type: TYPE_FP32 dims: [ -1, 5 ] },'
            ' { name: "Output"'),
    }
    models = {name: ("stateful_accumulate_fp32", text.replace('name: "x"', f'name: "{name}"'))
              for name, text in bad.items()}
    models["state_two_dynamic"] = ("stateful_accumulate_fp32", config("state_two_dynamic"))
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, models)
        # The same model whose state input has a second dynamic dimension.
        import onnx
        path = os.path.join(root, "state_two_dynamic", "1", "stateful_accumulate_fp32.onnx")
        m = onnx.load(path)
        for t in m.graph.input:
            if t.name == "Accumulate_In":
                t.type.tensor_type.shape.dim[1].dim_param = "width"
        onnx.save(m, path)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", "--model-control-mode=explicit"])
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
            msg = load_error(s, "state_two_dynamic")
            assert "state input 'Accumulate_In'" in msg and "has 2 dynamic dimensions" in msg, msg
            assert "state_pairs: expected '<<<Input, Output>>>'" in load_error(s, "pairs_syntax")
            assert "parameter state_pairs is missing" in load_error(s, "pairs_missing")
            assert "state output 'Nope_Out' is not an output" in load_error(s, "state_unknown")
            msg = load_error(s, "state_mismatch")
            assert "state input 'Accumulate_In'" in msg and "differ in type or shape" in msg, msg
            assert "CONTROL_SEQUENCE_START" in load_error(s, "no_start")
            msg = load_error(s, "start_not_in_model")
            assert "control input 'Reset2' (CONTROL_SEQUENCE_START) is not an input" in msg, msg
            msg = load_error(s, "two_dynamic")
            assert "input 'Input' has 2 -1 dimensions" in msg, msg
            assert "buffer_alloc_threshold: missing" in load_error(s, "lazy_partial") or \
                "subsequent_buffer_size: missing" in load_error(s, "lazy_partial")
            assert "max_candidate_sequence_use_ratio" in load_error(s, "bad_ratio")
            assert "store_states_as_fp16" in load_error(s, "bad_flag")
            assert "error_inject_rate" in load_error(s, "bad_inject")
            assert "logging_level" in load_error(s, "bad_level")
            assert "execution_mode" in load_error(s, "bad_mode")
            msg = load_error(s, "no_file")
            assert "missing.onnx' (onnx_file_name) does not exist" in msg, msg
            assert "input 'Input' is TYPE_INT32 in the configuration, FP32" in load_error(s, "wrong_type")
            assert "sequence_batching with the oldest strategy is required" in load_error(s, "direct")
            assert "max_batch_size must be at least 1" in load_error(s, "no_batching")
            assert "state output 'Accumulate_Out' must not be listed" in load_error(s, "state_listed")


def test_readme_parameters_are_accepted_and_gpu_only_ones_logged():
    params = {"ort_ep": "trt", "compute_precision": "fp16", "always_pad_to_max_batch": "1",
              "metric_logging_frequency_seconds": "1", "enable_trt_caching": "1", "trt_cache_dir": "/tmp/x",
              "enable_cuda_graph": "0", "logging_level": "VERBOSE", "batch_info_logging_level": "INFO",
              "detailed_metrics_logging_level": "INFO", "error_inject_rate": "15",
              "infer_end_requests": "1", "store_states_as_fp16": "0"}
    with serve({"acc": ("stateful_accumulate_fp32", config("acc", params=params))}, grpc_on=True) as s:
        wait_log(s, "only apply to GPU instances")
        wait_log(s, "error_inject_rate 15 accepted")
        # Padded to max_batch_size 16 and still right.
        interleaved_over_stream(s, "acc", np.float32, [1, 2, 3], 3, seed=4)
        wait_log(s, "rows)")
        assert "(16 rows)" in s.text()


MIXED = """name: "mixed"
backend: "stateful"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 60000000
  oldest { max_candidate_sequences: 16 max_queue_delay_microseconds: 20000 }
  control_input [
    { name: "ResetSequence" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
  ]
}
input [ { name: "Input_I8" data_type: TYPE_INT8 dims: [ -1, 4 ] },
        { name: "Input_Bool" data_type: TYPE_BOOL dims: [ -1, 4 ] } ]
output [ { name: "Output_I32" data_type: TYPE_INT32 dims: [ -1, 4 ] },
         { name: "Output_F16" data_type: TYPE_FP16 dims: [ -1, 4 ] } ]
parameters [
  { key: "state_pairs" value: { string_value: "<<<State_I32_In, State_I32_Out>>>,<<<State_F16_In, State_F16_Out>>>" } },
  { key: "onnx_file_name" value: { string_value: "stateful_mixed.onnx" } },
  { key: "store_states_as_fp16" value: { string_value: "1" } }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def test_two_state_pairs_of_different_types_with_bool_and_int8_inputs():
    """The batch dimension first this time; int32 and fp16 states (fp16
    storage leaves non-fp32 states as they are); 8 sequences interleaved
    on one stream."""
    with serve({"mixed": ("stateful_mixed", MIXED)}, grpc_on=True) as s:
        wait_log(s, "24 bytes of state per sequence")  # 4 int32 + 4 fp16
        rng = np.random.default_rng(5)
        reqs, want = [], {}
        si, sf = {}, {}
        for k in range(5):
            for seq in range(1, 9):
                a = rng.integers(-100, 100, size=(1, 1, 4)).astype(np.int8)
                b = rng.integers(0, 2, size=(1, 1, 4)).astype(bool)
                si[seq] = (0 if k == 0 else si[seq]) + a.astype(np.int32)
                sf[seq] = (0 if k == 0 else sf[seq]) + b.astype(np.float16)
                rid = f"{seq}/{k}"
                want[rid] = (si[seq].copy(), sf[seq].copy())
                reqs.append(dict(model_name="mixed", inputs=infer_inputs([("Input_I8", a), ("Input_Bool", b)], "grpc"),
                                 outputs=[grpcclient.InferRequestedOutput(n) for n in ("Output_I32", "Output_F16")],
                                 request_id=rid, sequence_id=seq, sequence_start=k == 0, sequence_end=k == 4))
        replies = grpc_stream(s, reqs)
        assert len(replies) == len(reqs)
        for r, error in replies:
            assert error is None, error
            wi, wf = want[r.get_response().id]
            assert r.as_numpy("Output_I32").dtype == np.int32 and r.as_numpy("Output_F16").dtype == np.float16
            np.testing.assert_array_equal(r.as_numpy("Output_I32"), wi)
            np.testing.assert_array_equal(r.as_numpy("Output_F16"), wf)


CLEAN_ERRORS = ("must specify the start flag", "has no state slot", "unknown model", "not found", "not ready",
                "unavailable", "unloading", "is not loaded", "being unloaded")


def test_reload_under_traffic_answers_every_request():
    """Four HTTP clients step sequences while the model is loaded again
    three times. Every answer is right or a clean error (after which the
    client starts a new sequence); the server stops without a sanitizer
    report (ASan's leak check covers the state buffers)."""
    import threading
    text = config("acc", onnx="stateful_accumulate_int32", dtype="TYPE_INT32", slots=16)
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, {"acc": ("stateful_accumulate_int32", text)})
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", "--model-control-mode=explicit",
                    "--load-model=acc"])
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
            stop = threading.Event()
            tally = {"ok": 0, "clean": 0, "bad": []}
            mu = threading.Lock()

            def stepper(n):
                rng = np.random.default_rng(n)
                seq, k, total = 100000 * n, 0, None
                with client(s) as c:
                    while not stop.is_set():
                        if k == 0:
                            seq += 1
                            total = np.zeros(WIDTH, np.int32)
                        x = step_input(rng, np.int32)
                        try:
                            got, error = c.infer("acc", infer_inputs([("Input", x)]), sequence_id=seq,
                                                 sequence_start=k == 0, sequence_end=k == 5).as_numpy("Output"), None
                        except InferenceServerException as e:
                            got, error = None, e
                        with mu:
                            if error is None:
                                total = total + x.reshape(SEGMENTS, WIDTH).sum(axis=0)
                                if not np.array_equal(got.reshape(SEGMENTS, WIDTH), x.reshape(SEGMENTS, WIDTH) + total):
                                    tally["bad"].append(("wrong", seq, k))
                                tally["ok"] += 1
                                k = (k + 1) % 6
                            elif any(w in error.message().lower() for w in CLEAN_ERRORS):
                                tally["clean"] += 1
                                k = 0
                            else:
                                tally["bad"].append((error.status(), error.message()))
                                k = 0

            threads = [threading.Thread(target=stepper, args=(n,)) for n in range(1, 5)]
            for t in threads:
                t.start()
            try:
                for _ in range(3):
                    deadline = time.monotonic() + TIMEOUT
                    start = tally["ok"]
                    while tally["ok"] < start + 20 and time.monotonic() < deadline:
                        time.sleep(0.02)
                    with client(s) as c:
                        c.load_model("acc")
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=TIMEOUT)
            assert not tally["bad"], tally["bad"][:5]
            assert tally["ok"] >= 60, tally
            # Each load made a new instance with its own state buffers.
            assert s.text().count("slots allocated of") == 4, s.text()


TEST_BACKENDS = os.environ.get("NEREID_TEST_BACKEND_DIR", os.path.join(os.path.dirname(BACKENDS), "test_backends"))


def test_error_injection_in_the_test_build_fails_that_share_of_executions():
    """stateful_inject is this backend built with NRD_STATEFUL_ERROR_INJECT:
    at error_inject_rate 50 about half the executions fail, each request of
    them answered with the injected error; the others are right."""
    text = config("inj", onnx="stateful_accumulate_int32", dtype="TYPE_INT32",
                  params={"error_inject_rate": "50"}).replace('backend: "stateful"', 'backend: "stateful_inject"')
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, {"inj": ("stateful_accumulate_int32", text)})
        s = Server([f"--model-repository={root}", f"--backend-directory={TEST_BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false"])
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
            wait_log(s, "this test build fails that percentage of executions")
            x = np.ones((1, SEGMENTS, 1, WIDTH), np.int32)
            ok = failed = 0
            with client(s) as c:
                for seq in range(1, 41):
                    try:
                        result = c.infer("inj", infer_inputs([("Input", x)]), sequence_id=seq, sequence_start=True,
                                         sequence_end=True)
                    except InferenceServerException as e:
                        failed += 1
                        assert "injected error (error_inject_rate)" in e.message(), e
                    else:
                        ok += 1
                        assert result.as_numpy("Output").reshape(-1)[0] == 5
            assert ok >= 5 and failed >= 5, (ok, failed)


def test_logging_levels_and_metric_lines():
    """logging_level NONE silences the backend's per-execution line, which
    the default (INFO) writes; metric_logging_frequency_seconds 1 writes
    the average batch line once a second has passed."""
    quiet = config("quiet", onnx="stateful_accumulate_int32", dtype="TYPE_INT32",
                   params={"logging_level": "NONE"})
    loud = config("loud", onnx="stateful_accumulate_int32", dtype="TYPE_INT32",
                  params={"metric_logging_frequency_seconds": "1"})
    with serve({"quiet": ("stateful_accumulate_int32", quiet),
                "loud": ("stateful_accumulate_int32", loud)}) as s:
        x = np.ones((1, SEGMENTS, 1, WIDTH), np.int32)
        step(s, "quiet", 1, x, start=True, end=True)
        deadline = time.monotonic() + TIMEOUT
        seq = 1
        while "model 'loud': instance 'loud_0_0': average batch size" not in s.text():
            assert time.monotonic() < deadline, s.text()
            seq += 1
            step(s, "loud", seq, x, start=True, end=True)
            time.sleep(0.1)
        assert "model 'loud': instance 'loud_0_0': ran 1 sequences" in s.text()
        assert "model 'quiet': instance" not in s.text()


def test_ort_logging_level_backend_setting():
    ok = {"acc": ("stateful_accumulate_fp32", config("acc"))}
    with serve(ok, "--backend-config=stateful,ort-logging-level=3") as s:
        wait_log(s, "ort-logging-level 3")
        x = np.ones((1, SEGMENTS, 1, WIDTH), np.float32)
        assert step(s, "acc", 1, x, start=True, end=True)[0, 0, 0, 0] == 5
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, ok)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--allow-grpc=false", "--allow-metrics=false", "--model-control-mode=explicit",
                    "--backend-config=stateful,ort-logging-level=9"])
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
            assert "ort-logging-level: '9' is not a level" in load_error(s, "acc")


def test_a_new_sequence_reusing_an_ended_id_gets_its_own_slot():
    """A START right behind its id's END request begins a new sequence in
    the sequence batcher while the old one still runs; both run in the same
    executions (all requests queued at once on one stream). Each keeps its
    own state, and the old one's END does not free the new one's slot."""
    with serve({"acc_r": ("stateful_accumulate_fp32", config("acc_r"))}, grpc_on=True) as s:
        rng = np.random.default_rng(12)
        sim = Simulation(np.float32)
        reqs, expected = [], {}
        for seq in (9, 10, 11):
            for gen in ("a", "b"):
                for k in range(3):
                    x = step_input(rng, np.float32)
                    rid = f"{seq}{gen}/{k}"
                    expected[rid] = sim.step((seq, gen), x, k == 0)
                    reqs.append(grpc_step("acc_r", seq, x, k == 0, k == 2, rid))
        replies = grpc_stream(s, reqs)
        assert len(replies) == len(reqs)
        for r, error in replies:
            assert error is None, error
            np.testing.assert_allclose(r.as_numpy("Output"), expected[r.get_response().id], rtol=1e-5, atol=1e-5)


def test_kind_gpu_follows_ort_ep():
    # KIND_GPU where the core finds GPUs (the stand-in driver, two devices):
    # ort_ep cuda asks ONNX Runtime for its CUDA provider on the instance's
    # device, which the CPU-only library refuses (the load fails with its
    # reason, the instance and the device); trt, the default, is refused
    # (no TensorRT here); cpu runs the CPU provider and serves.
    def gpu(name, ep, gpus="1"):
        text = config(name, params={"ort_ep": ep}).replace(
            "kind: KIND_CPU", f"kind: KIND_GPU gpus: [ {gpus} ]")
        return ("stateful_accumulate_fp32", text)

    fake = os.environ["NRD_FAKE_CUDA"]
    env = dict(os.environ, NEREID_CUDA_LIBRARY=fake, NEREID_NVML_LIBRARY=fake, NRD_FAKE_CUDA_DEVICES="2")
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, {"cuda": gpu("cuda", "cuda"), "trt": gpu("trt", None), "cpu": gpu("cpu", "cpu", "0")})
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--http-address=127.0.0.1", "--allow-metrics=false", "--allow-grpc=false",
                    "--model-control-mode=explicit", "--allow-client-shm=true"], env=env)
        with running(s) as lines:
            s.port = listening_ports(lines)["http"]
            with client(s) as c:
                with pytest.raises(InferenceServerException) as e:
                    c.load_model("cuda")
                for w in ("onnx runtime error 1: CUDA execution provider is not enabled in this build.",
                          "stateful: instance 'cuda_0_0' on GPU 1: CreateCUDAProviderOptions failed"):
                    assert w in e.value.message(), e.value.message()
                with pytest.raises(InferenceServerException) as e:
                    c.load_model("trt")
                assert "instance 'trt_0_0' on GPU 1: ort_ep 'trt': this build has no TensorRT" in e.value.message()
                c.load_model("cpu")
            sim = Simulation(np.float32)
            x = np.arange(SEGMENTS * WIDTH, dtype=np.float32).reshape(1, SEGMENTS, 1, WIDTH)
            got = step(s, "cpu", 7, x, start=True, end=True)
            assert np.allclose(got, sim.step(7, x, True)), got
            # The output into a client's CUDA shared memory region (the
            # stand-in's device memory), copied there by the driver.
            from test_gpu_shm import Cuda
            cuda = Cuda()
            p_out = cuda.alloc(0, x.nbytes)
            with client(s) as c:
                c.register_cuda_shared_memory("out", cuda.handle(p_out), 0, x.nbytes)
                try:
                    o = httpclient.InferRequestedOutput("Output")
                    o.set_shared_memory("out", x.nbytes)
                    c.infer("cpu", infer_inputs([("Input", x)]), outputs=[o], sequence_id=8, sequence_start=True,
                            sequence_end=True)
                    got = cuda.read(p_out, np.float32, x.size).reshape(x.shape)
                    assert np.allclose(got, sim.step(8, x, True)), got
                finally:
                    c.unregister_cuda_shared_memory()
