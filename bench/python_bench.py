#!/usr/bin/python3
"""Python backend benchmark: the same add_sub model written as model.py
(backend: "python", one stub process) and served by our C add_sub backend
(the floor), one HTTP keep-alive client sending small requests one after
the other.

    /usr/bin/python3 bench/python_bench.py [BUILD_DIR] [--requests N]

BUILD_DIR (default build-rel) holds a Release nereid with its backends:

    cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DNRD_BUILD_TESTS=OFF
    cmake --build build-rel -j2 --target nereid triton_python triton_add_sub

Prints, per model: requests/s, p50 and p99 latency, and the CPU time per
request of the server and of the stub (utime + stime from /proc), then the
ratio of the Python model's total CPU per request to the C model's. The
client shares the machine's cores with the server. Figures only.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODEL_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]))
        return out
'''


def config(backend):
    return f'''
backend: "{backend}"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
'''


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def run(port, model, n):
    body = json.dumps({"inputs": [{"name": f"INPUT{i}", "datatype": "FP32", "shape": [16],
                                   "data": list(range(16))} for i in (0, 1)]}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    lat = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("POST", f"/v2/models/{model}/infer", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        lat.append(time.perf_counter() - t0)
        if r.status != 200:
            raise RuntimeError(data)
    conn.close()
    return lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build-rel"))
    ap.add_argument("--requests", type=int, default=3000)
    args = ap.parse_args()
    nereid = os.path.join(args.build, "src", "server", "nereid")
    with tempfile.TemporaryDirectory() as repo:
        for name, backend in (("add_sub_c", "add_sub"), ("add_sub_py", "python")):
            os.makedirs(os.path.join(repo, name, "1"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(config(backend))
        with open(os.path.join(repo, "add_sub_py", "1", "model.py"), "w") as f:
            f.write(MODEL_PY)
        port = 18790
        p = subprocess.Popen([nereid, f"--model-repository={repo}", f"--backend-directory={os.path.join(args.build, 'backends')}",
                              f"--http-port={port}", "--http-address=127.0.0.1", "--allow-grpc=false",
                              "--allow-metrics=false", "--http-thread-count=1"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            for line in p.stdout:
                if "server ready" in line:
                    break
            stubs = children(p.pid)
            hz = os.sysconf("SC_CLK_TCK")
            rows = {}
            for model in ("add_sub_c", "add_sub_py"):
                run(port, model, 200)  # warm up
                s0, c0 = cpu_ticks(p.pid), sum(cpu_ticks(c) for c in stubs)
                t0 = time.perf_counter()
                lat = run(port, model, args.requests)
                wall = time.perf_counter() - t0
                s1, c1 = cpu_ticks(p.pid), sum(cpu_ticks(c) for c in stubs)
                server_us = (s1 - s0) / hz / args.requests * 1e6
                stub_us = (c1 - c0) / hz / args.requests * 1e6
                lat.sort()
                rows[model] = server_us + stub_us
                print(f"{model:11s} {args.requests / wall:8.0f} req/s  p50 {lat[len(lat) // 2] * 1e6:7.0f} us  "
                      f"p99 {lat[int(len(lat) * 0.99)] * 1e6:7.0f} us  server CPU {server_us:6.1f} us/req  "
                      f"stub CPU {stub_us:6.1f} us/req")
            print(f"python / C total CPU per request: {rows['add_sub_py'] / rows['add_sub_c']:.2f}x "
                  f"(mean latency ratio of the two runs is in the rows above)")
        finally:
            p.terminate()
            p.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
