#!/usr/bin/python3
"""Stateful backend benchmark: many concurrent sequences of the accumulate
model, served by the stateful backend against the same computation served
by the onnxruntime backend with implicit state (sequence_batching.state).

    /usr/bin/python3 bench/stateful_bench.py [BUILD_DIR] [--sequences N]
        [--steps S] [--streams T] [--max-batch B]

BUILD_DIR (default build) holds a Release nereid and both backends:

    cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DNRD_BUILD_TESTS=OFF
    cmake --build build-rel -j2 --target nereid triton_stateful triton_onnxruntime

Both models compute Output = Input + the running sum of each step's Input
summed over its 4 segments (state width 5). stateful: Input [4, -1, 5],
the backend keeps the state in its slots. implicit: Input [4, 5] with
Triton's batch dimension first, the state travels through the sequence
batcher (STATE_IN/STATE_OUT). Both: one instance, Oldest strategy,
max_candidate_sequences = sequences, max_batch_size B, 2 ms queue delay,
one ONNX Runtime thread.

T client threads, each with one gRPC stream, own sequences/T sequences;
every step each thread sends one request per sequence and waits for all
their responses. Prints steps/s and p50/p99 of the per-request latency
(send to response), the server's average batch per execution and the
cost of one Execute call of the backend (the statistics' batch_stats:
compute_input + compute_infer + compute_output), on average and by batch
size, and the CPU time of the model's instance thread per step (from
/proc: batch forming in the sequence batcher, the implicit state's copies
around Execute, and Execute itself; CPU time, so other load on the
machine does not inflate it). On a small machine the Python client sets
steps/s; the execution cost and the instance thread's CPU are the
server's part.
Prints figures only.
"""
import argparse
import json
import os
import queue
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tools"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "integration"))

STATEFUL = """name: "stateful"
backend: "stateful"
max_batch_size: {mbs}
sequence_batching {{
  max_sequence_idle_microseconds: 600000000
  oldest {{ max_candidate_sequences: {seqs} max_queue_delay_microseconds: 2000 }}
  control_input [ {{ name: "ResetSequence" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }} ]
}}
input [ {{ name: "Input" data_type: TYPE_FP32 dims: [ 4, -1, 5 ] }} ]
output [ {{ name: "Output" data_type: TYPE_FP32 dims: [ 4, -1, 5 ] }} ]
parameters [
  {{ key: "onnx_file_name" value: {{ string_value: "stateful_accumulate_fp32.onnx" }} }},
  {{ key: "state_pairs" value: {{ string_value: "<<<Accumulate_In, Accumulate_Out>>>" }} }},
  {{ key: "max_candidate_sequence_use_ratio" value: {{ string_value: "1.0" }} }},
  {{ key: "batch_info_logging_level" value: {{ string_value: "VERBOSE" }} }},
  {{ key: "intra_op_thread_count" value: {{ string_value: "1" }} }},
  {{ key: "inter_op_thread_count" value: {{ string_value: "1" }} }}
]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

IMPLICIT = """name: "implicit"
backend: "onnxruntime"
max_batch_size: {mbs}
sequence_batching {{
  max_sequence_idle_microseconds: 600000000
  oldest {{ max_candidate_sequences: {seqs} max_queue_delay_microseconds: 2000 }}
  state [ {{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 5 ]
            initial_state {{ name: "zero" data_type: TYPE_FP32 dims: [ 5 ] zero_data: true }} }} ]
}}
input [ {{ name: "Input" data_type: TYPE_FP32 dims: [ 4, 5 ] }} ]
output [ {{ name: "Output" data_type: TYPE_FP32 dims: [ 4, 5 ] }} ]
parameters [
  {{ key: "intra_op_thread_count" value: {{ string_value: "1" }} }},
  {{ key: "inter_op_thread_count" value: {{ string_value: "1" }} }}
]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def implicit_model():
    """The same computation with Triton's batch dimension first and the
    state as plain input/output (the sequence batcher starts it at zero)."""
    import onnx_models
    from onnx import TensorProto, helper
    f = TensorProto.FLOAT
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    return onnx_models.model("implicit_accumulate",
                             [helper.make_node("Constant", [], ["Axes"], value=axes),
                              helper.make_node("ReduceSum", ["Input", "Axes"], ["Segment"], keepdims=0),
                              helper.make_node("Add", ["STATE_IN", "Segment"], ["STATE_OUT"]),
                              helper.make_node("Unsqueeze", ["STATE_OUT", "Axes"], ["Wide"]),
                              helper.make_node("Add", ["Input", "Wide"], ["Output"])],
                             [onnx_models.tensor("Input", f, ["batch", 4, 5]),
                              onnx_models.tensor("STATE_IN", f, ["batch", 5])],
                             [onnx_models.tensor("Output", f, ["batch", 4, 5]),
                              onnx_models.tensor("STATE_OUT", f, ["batch", 5])])


SIZES = (1, 2, 4, 8, 16, 32, 64)


def execution_costs(st):
    """{batch size: (ns, executions)} of whole Execute calls (the
    statistics' compute_input + compute_infer + compute_output: from the
    backend's execution start to its end, whatever each backend counts as
    its compute window)."""
    out = {}
    for b in st.get("batch_stats", []):
        ns = sum(int(b[k]["ns"]) for k in ("compute_input", "compute_infer", "compute_output"))
        out[int(b["batch_size"])] = (ns, int(b["compute_infer"]["count"]))
    return out


def thread_cpu_ns(pid, prefix):
    """CPU time (ns, /proc schedstat) of the server's threads whose name
    starts with 'prefix': a model's instance threads run its batcher's
    batch forming, the state handling around Execute and Execute itself."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith(prefix):
                    continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            continue
    return total


def make_repo(root, seqs, mbs):
    import onnx
    import onnx_models
    os.makedirs(os.path.join(root, "stateful", "1"))
    onnx_models.write(os.path.join(root, "stateful", "1"), "stateful_accumulate_fp32")
    with open(os.path.join(root, "stateful", "config.pbtxt"), "w") as f:
        f.write(STATEFUL.format(seqs=seqs, mbs=mbs))
    os.makedirs(os.path.join(root, "implicit", "1"))
    onnx.save(implicit_model(), os.path.join(root, "implicit", "1", "model.onnx"))
    with open(os.path.join(root, "implicit", "config.pbtxt"), "w") as f:
        f.write(IMPLICIT.format(seqs=seqs, mbs=mbs))


def run_model(stub, pb, model, seqs, steps, streams, base_id):
    """Returns (steps/s, latencies in ms)."""
    shape = [1, 4, 1, 5] if model == "stateful" else [1, 4, 5]
    x = np.ones(shape, np.float32).tobytes()
    lat = []
    mu = threading.Lock()
    errors = []

    def worker(t):
        mine = list(range(base_id + t, base_id + seqs, streams))
        q = queue.Queue()

        def gen():
            while True:
                r = q.get()
                if r is None:
                    return
                yield r

        replies = stub.ModelStreamInfer(gen(), timeout=600)
        sent = {}
        local = []
        for k in range(steps):
            for seq in mine:
                r = pb.ModelInferRequest(model_name=model, id=f"{seq}/{k}")
                i = r.inputs.add()
                i.name, i.datatype = "Input", "FP32"
                i.shape.extend(shape)
                r.raw_input_contents.append(x)
                r.parameters["sequence_id"].int64_param = seq
                r.parameters["sequence_start"].bool_param = k == 0
                r.parameters["sequence_end"].bool_param = k == steps - 1
                sent[r.id] = time.perf_counter()
                q.put(r)
            for _ in mine:
                resp = next(replies)
                now = time.perf_counter()
                if resp.error_message:
                    errors.append(resp.error_message)
                    continue
                local.append((now - sent.pop(resp.infer_response.id)) * 1000.0)
        q.put(None)
        for _ in replies:
            pass
        with mu:
            lat.extend(local)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(streams)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"{model}: {len(errors)} errors, first: {errors[0]}")
    return seqs * steps / wall, lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--sequences", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--models", default="stateful,implicit",
                    help="which models to run, in order, each twice (comma-separated)")
    args = ap.parse_args()
    os.environ.setdefault("NEREID_BIN", os.path.join(args.build, "src", "server", "nereid"))
    os.environ.setdefault("NEREID_BACKEND_DIR", os.path.join(args.build, "backends"))
    from test_grpc import Server, free_port, grpc, pb, pbg  # noqa: E402 (after NEREID_BIN)
    with tempfile.TemporaryDirectory() as root:
        make_repo(root, args.sequences, args.max_batch)
        port, http = free_port(), free_port()
        s = Server([f"--model-repository={root}", f"--backend-directory={os.environ['NEREID_BACKEND_DIR']}",
                    f"--grpc-port={port}", f"--http-port={http}", "--allow-metrics=false"])
        try:
            s.wait_ready()
            ch = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(ch).result(timeout=60)
            stub = pbg.GRPCInferenceServiceStub(ch)
            print(f"{args.sequences} sequences x {args.steps} steps, {args.streams} gRPC streams, "
                  f"max_batch_size {args.max_batch}")
            order = args.models.split(",") * 2
            for n, model in enumerate(order):
                cpu0 = thread_cpu_ns(s.proc.pid, f"nrd-{model}")
                rate, lat = run_model(stub, pb, model, args.sequences, args.steps, args.streams,
                                      1 + n * 10 * args.sequences)
                cpu_us = (thread_cpu_ns(s.proc.pid, f"nrd-{model}") - cpu0) / 1000.0 / (args.sequences * args.steps)
                with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/models/{model}/stats") as r:
                    st = json.loads(r.read())["model_stats"][0]
                batch = st["inference_count"] / max(1, st["execution_count"])
                execs = execution_costs(st)
                total_ns = sum(ns for ns, _ in execs.values())
                total_n = sum(n for _, n in execs.values())
                sizes = "  ".join(f"b{b}: {execs[b][0] / execs[b][1] / 1000.0:.1f}" for b in SIZES
                                  if b in execs and execs[b][1] >= 20)
                print(f"  {model:9s} {rate:8.0f} steps/s  p50 {np.percentile(lat, 50):7.2f} ms  "
                      f"p99 {np.percentile(lat, 99):7.2f} ms  instance thread CPU {cpu_us:.1f} us per step  "
                      f"(cumulative: avg batch {batch:.1f}, "
                      f"execute {total_ns / max(1, total_n) / 1000.0:.1f} us per execution; "
                      f"by batch size, us: {sizes})")
            ch.close()
        finally:
            s.stop()


if __name__ == "__main__":
    main()
