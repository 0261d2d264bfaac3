#!/usr/bin/python3
"""Python backend benchmark over HTTP. Two modes:

One client (the default): the same add_sub model written as model.py
(backend: "python", one stub process) and served by our C add_sub backend
(the floor), one HTTP keep-alive client (http.client, JSON) sending small
requests one after the other.

    /usr/bin/python3 bench/python_bench.py [BUILD_DIR] [--requests N]

wrk (--connections N, e.g. 8): a blank identity model (FP32 [-1] in, the
same out, 16 values a request) as model.py with one stub process, the same
with two (instance count 2), and on our C identity backend (the floor),
driven by wrk at N connections with the binary tensor data extension
request bench/http_bench.sh sends; the models take turns, ROUNDS runs of
DURATION seconds each, and a row is the median of its rounds.

    /usr/bin/python3 bench/python_bench.py [BUILD_DIR] --connections 8 \
        [--duration 3] [--rounds 3] [--http-threads 2]

BUILD_DIR (default build-rel) holds a Release nereid with its backends:

    cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DNRD_BUILD_TESTS=OFF
    cmake --build build-rel -j2 --target nereid triton_python \
        triton_python_backend_stub triton_add_sub triton_identity

Prints, per model: requests/s, p50 and p99 latency, and the CPU time per
request of the server process and of its child processes, the stubs
(utime + stime from /proc; in wrk mode every stub of the server counts in
every row, idle ones included), and their total; then the ratio of the
Python model's total CPU per request to the C model's. The client shares
the machine's cores with the server. Figures only: asserts nothing, but
counts and prints any response that is not 200.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import struct
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


def descendants(pid):
    out = []
    for c in children(pid):
        out += [c] + descendants(c)
    return out


def ticks_or_zero(pid):
    try:
        return cpu_ticks(pid)
    except OSError:  # a process that exited during the run
        return 0


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


def one_client(args, nereid):
    with tempfile.TemporaryDirectory() as repo:
        for name, backend in (("add_sub_c", "add_sub"), ("add_sub_py", "python")):
            os.makedirs(os.path.join(repo, name, "1"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(config(backend))
        with open(os.path.join(repo, "add_sub_py", "1", "model.py"), "w") as f:
            f.write(MODEL_PY)
        port = args.port
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


# wrk mode -----------------------------------------------------------------

IDENTITY_PY = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
'''


def identity_config(backend, count):
    # examples/models/identity_fp32's config, backend and count aside.
    return f'''
backend: "{backend}"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ count: {count} kind: KIND_CPU }} ]
'''


# (row label, model name, backend, instance count)
WRK_MODELS = (("identity (C backend)", "identity_c", "identity", 1),
              ("identity (model.py)", "identity_py", "python", 1),
              ("identity (model.py) x2", "identity_py2", "python", 2))

# wrk posts the body file's bytes; response() counts every status but 200
# (wrk's own count takes only those above 399), done() prints one line.
WRK_LUA = '''
local f = assert(io.open("{body}", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "{hlen}"
local threads = {{}}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
function response(status, headers, body) if status ~= 200 then bad = bad + 1 end end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format("RESULT %d %d %.1f %.1f %d %d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), b, e.connect + e.read + e.write + e.timeout))
end
'''


def binary_body():
    """The binary tensor data extension request http_bench.sh sends: a
    JSON header, then 16 little-endian FP32 values; returns (body, hlen)."""
    head = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 64}}],
                       "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    return head + struct.pack("<16f", *range(16)), len(head)


def check_once(port, model, body, hlen):
    """One request by hand: the answer is 200 and echoes the 64 bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", f"/v2/models/{model}/infer", body,
                 {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(hlen)})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    if r.status != 200 or not data.endswith(body[hlen:]):
        raise RuntimeError(f"{model}: HTTP {r.status}: {data[:300]!r}")


def wrk_run(port, model, lua, conns, secs):
    out = subprocess.run(["wrk", "-t", str(min(conns, 2)), "-c", str(conns), "-d", f"{secs}s", "--latency",
                          "-s", lua, f"http://127.0.0.1:{port}/v2/models/{model}/infer"],
                         capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("RESULT "))
    reqs, dur_us, p50, p99, bad, sock = line.split()[1:]
    return int(reqs), int(dur_us) / 1e6, float(p50), float(p99), int(bad), int(sock)


def with_wrk(args, nereid):
    if not shutil.which("wrk"):
        print("wrk is missing: run scripts/setup.sh", file=sys.stderr)
        return 1
    hz = os.sysconf("SC_CLK_TCK")
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as work:
        repo = os.path.join(work, "models")
        for _, name, backend, count in WRK_MODELS:
            os.makedirs(os.path.join(repo, name, "1"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(identity_config(backend, count))
            if backend == "python":
                with open(os.path.join(repo, name, "1", "model.py"), "w") as f:
                    f.write(IDENTITY_PY)
        body, hlen = binary_body()
        with open(os.path.join(work, "binary.body"), "wb") as f:
            f.write(body)
        lua = os.path.join(work, "binary.lua")
        with open(lua, "w") as f:
            f.write(WRK_LUA.format(body=os.path.join(work, "binary.body"), hlen=hlen))
        log = os.path.join(work, "nereid.out")
        with open(log, "w") as out:
            p = subprocess.Popen([nereid, f"--model-repository={repo}",
                                  f"--backend-directory={os.path.join(args.build, 'backends')}",
                                  f"--http-port={args.port}", "--http-address=127.0.0.1", "--allow-grpc=false",
                                  "--allow-metrics=false", f"--http-thread-count={args.http_threads}",
                                  "--log-info=false"],
                                 stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while "nereid: server ready" not in open(log).read():
                if p.poll() is not None or time.monotonic() > deadline:
                    print(open(log).read(), file=sys.stderr)
                    raise RuntimeError("nereid did not report ready")
                time.sleep(0.1)
            for _, name, _, _ in WRK_MODELS:
                check_once(args.port, name, body, hlen)
                wrk_run(args.port, name, lua, args.connections, 1)  # warm up
            runs = {name: [] for _, name, _, _ in WRK_MODELS}
            # The models take turns, so a slow spell of the machine hits all.
            for _ in range(args.rounds):
                for _, name, _, _ in WRK_MODELS:
                    stubs = descendants(p.pid)
                    s0, c0 = cpu_ticks(p.pid), sum(ticks_or_zero(c) for c in stubs)
                    reqs, secs, p50, p99, bad, sock = wrk_run(args.port, name, lua, args.connections, args.duration)
                    s1, c1 = cpu_ticks(p.pid), sum(ticks_or_zero(c) for c in stubs)
                    server = (s1 - s0) / hz / max(reqs, 1) * 1e6
                    stub = (c1 - c0) / hz / max(reqs, 1) * 1e6
                    runs[name].append({"rps": reqs / secs, "p50": p50, "p99": p99, "server": server,
                                       "stub": stub, "total": server + stub, "bad": bad, "sock": sock})
        finally:
            p.terminate()
            p.wait(timeout=60)
    print(f"nereid {os.path.basename(os.path.normpath(args.build))}, wrk {args.connections} connections, "
          f"--http-thread-count={args.http_threads}, binary tensor data request (16 x FP32), "
          f"{args.duration}s per run, {args.rounds} rounds, {os.cpu_count()} cores, "
          f"load average {' '.join(f'{x:.2f}' for x in load0)} before, "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} after")
    med = lambda rows, k: statistics.median(r[k] for r in rows)
    for label, name, _, _ in WRK_MODELS:
        rows = runs[name]
        bad, sock = sum(r["bad"] for r in rows), sum(r["sock"] for r in rows)
        print(f"{label:23s} {med(rows, 'rps'):7.0f} req/s  p50 {med(rows, 'p50'):7.0f} us  "
              f"p99 {med(rows, 'p99'):7.0f} us  CPU/req: server {med(rows, 'server'):6.1f} us  "
              f"stubs {med(rows, 'stub'):6.1f} us  total {med(rows, 'total'):6.1f} us"
              + (f"  NOT 200: {bad}" if bad else "") + (f"  SOCKET ERRORS: {sock}" if sock else ""))
    base = runs["identity_c"]
    for label, name, backend, _ in WRK_MODELS:
        if backend == "python":
            ratios = [r["total"] / c["total"] for r, c in zip(runs[name], base)]
            print(f"{label} / C total CPU per request: {statistics.median(ratios):.2f}x "
                  f"(per round: {' '.join(f'{x:.2f}' for x in ratios)})")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build-rel"))
    ap.add_argument("--requests", type=int, default=3000, help="one-client mode: requests per model")
    ap.add_argument("--connections", type=int, default=0, help="wrk mode at this many connections")
    ap.add_argument("--duration", type=int, default=3, help="wrk mode: seconds per run")
    ap.add_argument("--rounds", type=int, default=3, help="wrk mode: runs per model, alternated")
    ap.add_argument("--http-threads", type=int, default=2, help="wrk mode: --http-thread-count")
    ap.add_argument("--port", type=int, default=18790)
    args = ap.parse_args()
    nereid = os.path.join(args.build, "src", "server", "nereid")
    if args.connections > 0:
        return with_wrk(args, nereid)
    return one_client(args, nereid)


if __name__ == "__main__":
    sys.exit(main())
