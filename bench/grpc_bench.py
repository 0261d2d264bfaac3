#!/usr/bin/python3
"""gRPC front-end benchmark: drives a running-for-the-occasion nereid with
h2load (Debian package nghttp2-client) sending real gRPC-framed messages.

  /usr/bin/python3 bench/grpc_bench.py BUILD_DIR [--requests N]

BUILD_DIR is a Release build tree (nereid + backends). Prints, for small
ModelInfer (identity_fp32, 16 x FP32) at 1, 16 and 64 concurrent streams
(on one connection and on as many connections): requests/s, mean/p50/p99
latency, and the server's CPU time per request (utime + stime from
/proc/<pid>/stat); then a streaming figure: square_int32 with n = 1000 over
ModelStreamInfer, in responses/s. Then the same ModelInfer series against
nrd_bench_grpc_bare (our transport answering canned bytes, no inference:
the practical limit) when BUILD_DIR/bench has it. Figures only, no
assertions.

  --tls: nereid serves gRPC over TLS (a certificate made with the openssl
  tool for the run) and h2load connects with https; the bare transport
  runs over TLS too, so the two stay comparable.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def stubs(tmp):
    from grpc_tools import protoc

    rc = protoc.main(["protoc", f"-I{SOURCE}/proto", f"--python_out={tmp}",
                      "grpc_service.proto", "model_config.proto"])
    assert rc == 0
    sys.path.insert(0, tmp)
    import grpc_service_pb2

    return grpc_service_pb2


def framed(msg):
    body = msg.SerializeToString()
    return b"\0" + len(body).to_bytes(4, "big") + body


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


SCHEME = "http"


def make_cert(tmp):
    """A self-signed certificate and key for 127.0.0.1; (cert, key) paths."""
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def h2load(port, path, body_file, n, clients, streams, log):
    cmd = ["h2load", f"{SCHEME}://127.0.0.1:{port}{path}", "-n", str(n), "-c", str(clients),
           "-m", str(streams), "-t", "1", "-d", body_file, "--log-file", log,
           "-H", "content-type: application/grpc", "-H", "te: trailers"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s", out)
    ok = re.search(r"(\d+) succeeded, (\d+) failed", out)
    if not m or not ok:
        raise RuntimeError("unexpected h2load output:\n" + out)
    secs = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    lat = []
    with open(log) as f:
        for line in f:
            cols = line.split("\t")
            if len(cols) >= 3:
                lat.append(int(cols[2]))
    lat.sort()
    return secs, float(m.group(3)), int(ok.group(1)), int(ok.group(2)), lat


def infer_series(port, pid, infer_file, requests, log):
    print(f"{'streams':>8} {'conns':>6} {'req/s':>10} {'mean us':>8} {'p50 us':>7} "
          f"{'p99 us':>7} {'srv CPU us/req':>15} {'failed':>7}")
    for conc in (1, 16, 64):
        for clients, streams in ((1, conc), (conc, 1)) if conc > 1 else ((1, 1),):
            c0 = cpu_seconds(pid)
            secs, rps, ok, failed, lat = h2load(port, "/inference.GRPCInferenceService/ModelInfer",
                                                infer_file, requests, clients, streams, log)
            c1 = cpu_seconds(pid)
            cpu_us = (c1 - c0) * 1e6 / max(ok, 1)
            print(f"{clients * streams:>8} {clients:>6} {rps:>10.0f} {statistics.mean(lat):>8.0f} "
                  f"{lat[len(lat) // 2]:>7} {lat[int(len(lat) * 0.99)]:>7} {cpu_us:>15.1f} {failed:>7}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tls", action="store_true")
    args = ap.parse_args()
    global SCHEME
    if not shutil.which("h2load"):
        sys.exit("h2load not found (apt-get install nghttp2-client)")
    tmp = tempfile.mkdtemp(prefix="nereid-grpc-bench-")
    pb = stubs(tmp)
    import numpy as np

    r = pb.ModelInferRequest(model_name="identity_fp32")
    t = r.inputs.add()
    t.name, t.datatype = "INPUT0", "FP32"
    t.shape.extend([1, 16])
    r.raw_input_contents.append(np.arange(16, dtype=np.float32).tobytes())
    infer_file = os.path.join(tmp, "infer.bin")
    with open(infer_file, "wb") as f:
        f.write(framed(r))
    s = pb.ModelInferRequest(model_name="square_int32")
    t = s.inputs.add()
    t.name, t.datatype = "IN", "INT32"
    t.shape.extend([1])
    t.contents.int_contents.append(1000)
    stream_file = os.path.join(tmp, "stream.bin")
    with open(stream_file, "wb") as f:
        f.write(framed(s))

    tls_flags = []
    if args.tls:
        SCHEME = "https"
        cert, key = make_cert(tmp)
        tls_flags = ["--grpc-use-ssl=true", f"--grpc-server-cert={cert}", f"--grpc-server-key={key}"]
    port = free_port()
    nereid = os.path.join(args.build, "src", "server", "nereid")
    srv = subprocess.Popen([nereid, "--model-repository", f"{SOURCE}/examples/models",
                            "--backend-directory", os.path.join(args.build, "backends"),
                            "--model-control-mode=explicit", "--load-model=identity_fp32",
                            "--load-model=square_int32", "--allow-http=false", "--allow-metrics=false", "--log-info=false",
                            f"--grpc-port={port}", "--grpc-address=127.0.0.1",
                            f"--grpc-thread-count={args.threads}", *tls_flags],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in srv.stdout:
            if line.startswith("nereid: server "):
                break
        log = os.path.join(tmp, "h2load.log")
        h2load(port, "/inference.GRPCInferenceService/ModelInfer", infer_file, 2000, 1, 1, log)
        print(f"ModelInfer identity_fp32 16 x FP32, {args.requests} requests, "
              f"{args.threads} server loop threads, h2load -t 1 on the same host"
              + (", over TLS" if args.tls else ""))
        infer_series(port, srv.pid, infer_file, args.requests, log)
        n_streams = 2000  # about a second: shorter runs swung 0.7-1.9 M responses/s
        c0 = cpu_seconds(srv.pid)
        secs, rps, ok, failed, lat = h2load(port, "/inference.GRPCInferenceService/ModelStreamInfer",
                                            stream_file, n_streams, 1, 4, log)
        c1 = cpu_seconds(srv.pid)
        print(f"ModelStreamInfer square_int32 n=1000: {n_streams} streams (4 concurrent) in {secs:.2f} s = "
              f"{n_streams * 1000 / secs:.0f} responses/s, server CPU "
              f"{(c1 - c0) * 1e6 / (n_streams * 1000):.2f} us/response, failed {failed}")
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
    bare_bin = os.path.join(args.build, "bench", "nrd_bench_grpc_bare")
    if os.access(bare_bin, os.X_OK):
        bport = free_port()
        bare = subprocess.Popen([bare_bin, str(bport), str(args.threads), *(tls_flags[1:] if args.tls else [])],
                                stdout=subprocess.PIPE, text=True)
        try:
            bare.stdout.readline()
            print("Bare transport (same bytes, no inference): the practical limit")
            infer_series(bport, bare.pid, infer_file, args.requests, os.path.join(tmp, "h2load.log"))
        finally:
            bare.send_signal(signal.SIGTERM)
            try:
                bare.wait(30)
            except subprocess.TimeoutExpired:
                bare.kill()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
