#!/usr/bin/env python3
"""End-to-end GPU checks of a nereid binary over HTTP, with the Python
standard library only (a GPU machine may lack tritonclient and numpy):
the GPU identity model on KIND_GPU, CUDA shared memory (register, status,
inference in place, bounds, unregister, a bad handle), GPU metrics; with
--bench, 64 MB through CUDA shared memory against a device-to-device copy.

Usage: gpu_check_http.py --nereid BIN --backends DIR [--driver LIB] [--bench]
       gpu_check_http.py --nereid BIN --backends DIR --onnx MODEL [--ort-cuda | --ort-cuda-refused]
The second form checks only a KIND_GPU ONNX model (MODEL: an add/sub
model, INT32 [4] inputs INPUT0/INPUT1, as tools/onnx_models.py writes
fixed_add_sub) on the onnxruntime backend in DIR: with --ort-cuda, whose
library has ONNX Runtime's CUDA provider, it must load and compute; with
--ort-cuda-refused (that library over the stand-in driver), its load must
fail with the CUDA provider's reason and the server go on serving; with
neither, its load must fail with ONNX Runtime's "not enabled" reason.
--driver names the driver library the client side loads (default
libcuda.so.1; scripts/gpu_check.sh --stand-in passes the stand-in, and sets
NEREID_CUDA_LIBRARY for the server). Prints one line per check and last
"RESULT passed=N failed=M"."""

import argparse
import base64
import ctypes
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

MB = 1 << 20


class Cuda:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.check(self.lib.cuInit(0), "cuInit")
        self.ctx = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), 0), "cuDevicePrimaryCtxRetain")
        self.check(self.lib.cuCtxPushCurrent_v2(self.ctx), "cuCtxPushCurrent")  # GPU 0 stays current

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUDA error {rc}")

    def alloc(self, size):
        d = ctypes.c_ulonglong()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(size)), "cuMemAlloc")
        return d.value

    def free(self, ptr):
        self.lib.cuMemFree_v2(ctypes.c_ulonglong(ptr))

    def handle(self, ptr):
        h = (ctypes.c_char * 64)()
        self.check(self.lib.cuIpcGetMemHandle(h, ctypes.c_ulonglong(ptr)), "cuIpcGetMemHandle")
        return base64.b64encode(bytes(h)).decode()

    def write(self, ptr, data):
        buf = ctypes.create_string_buffer(data, len(data))
        self.check(self.lib.cuMemcpyHtoD_v2(ctypes.c_ulonglong(ptr), buf, ctypes.c_size_t(len(data))), "HtoD")

    def read(self, ptr, n):
        buf = ctypes.create_string_buffer(n)
        self.check(self.lib.cuMemcpyDtoH_v2(buf, ctypes.c_ulonglong(ptr), ctypes.c_size_t(n)), "DtoH")
        return buf.raw

    def copy_d2d(self, dst, src, n):
        self.check(self.lib.cuMemcpyDtoD_v2(ctypes.c_ulonglong(dst), ctypes.c_ulonglong(src), ctypes.c_size_t(n)),
                   "DtoD")
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")


class Server:
    def __init__(self, nereid, backends, repo, extra=()):
        self.err = tempfile.TemporaryFile(mode="w+")
        args = [nereid, f"--model-repository={repo}", f"--backend-directory={backends}", "--http-port=0",
                "--metrics-port=0", "--http-address=127.0.0.1", "--allow-grpc=false", "--allow-client-shm=true",
                *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.ports = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("nereid exited: " + self.log())
            m = re.match(r"nereid: (HTTP/REST|metrics) listening on \S*:(\d+)", line)
            if m:
                self.ports[m.group(1)] = int(m.group(2))
            if line.startswith("nereid: server "):
                break

    def log(self):
        with open(f"/proc/self/fd/{self.err.fileno()}", errors="replace") as f:
            return f.read()

    def call(self, method, path, body=None, port=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{port or self.ports['HTTP/REST']}{path}", data=data,
                                     method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


def infer_body(n, in_region="in", out_region="out", in_off=0):
    return {"inputs": [{"name": "INPUT0", "datatype": "UINT8", "shape": [n],
                        "parameters": {"shared_memory_region": in_region, "shared_memory_byte_size": n,
                                       "shared_memory_offset": in_off}}],
            "outputs": [{"name": "OUTPUT0",
                         "parameters": {"shared_memory_region": out_region, "shared_memory_byte_size": n}}]}


ONNX_CONFIG = """backend: "onnxruntime"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]
"""

ONNX_REQUEST = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [4], "data": [1, 2, 3, 4]},
                           {"name": "INPUT1", "datatype": "INT32", "shape": [4], "data": [10, 20, 30, 40]}]}


def onnx_checks(a, check):
    """A KIND_GPU ONNX model on GPU 0: served on the CUDA provider
    (--ort-cuda) or refused with ONNX Runtime's reason."""
    repo = tempfile.mkdtemp(prefix="nrd-gpucheck-onnx-")
    srv = None
    try:
        os.makedirs(os.path.join(repo, "onnx_gpu", "1"))
        shutil.copy(a.onnx, os.path.join(repo, "onnx_gpu", "1", "model.onnx"))
        with open(os.path.join(repo, "onnx_gpu", "config.pbtxt"), "w") as f:
            f.write(ONNX_CONFIG)
        os.makedirs(os.path.join(repo, "onnx_cpu", "1"))
        shutil.copy(a.onnx, os.path.join(repo, "onnx_cpu", "1", "model.onnx"))
        with open(os.path.join(repo, "onnx_cpu", "config.pbtxt"), "w") as f:
            f.write(ONNX_CONFIG.replace("kind: KIND_GPU gpus: [ 0 ]", "kind: KIND_CPU"))
        srv = Server(a.nereid, a.backends, repo, ("--model-control-mode=explicit",))
        st, body = srv.call("POST", "/v2/repository/models/onnx_gpu/load")
        if a.ort_cuda_refused:
            check("onnxruntime: KIND_GPU refused by ONNX Runtime's CUDA provider over the stand-in",
                  st == 400 and b"onnx runtime error 1:" in body and b"CUDA failure" in body
                  and b"on GPU 0: UpdateCUDAProviderOptions failed" in body, body)
            st, body = srv.call("POST", "/v2/repository/models/onnx_cpu/load")
            if st == 200:
                st, body = srv.call("POST", "/v2/models/onnx_cpu/infer", ONNX_REQUEST)
            outs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]} if st == 200 else {}
            check("onnxruntime: a KIND_CPU model on the same library serves after the refusal",
                  outs.get("OUTPUT0") == [11, 22, 33, 44] and outs.get("OUTPUT1") == [-9, -18, -27, -36], body)
            return
        if not a.ort_cuda:
            check("onnxruntime: KIND_GPU refused without ONNX Runtime's CUDA provider",
                  st == 400 and b"CUDA execution provider is not enabled in this build" in body
                  and b"on GPU 0" in body, body)
            return
        check("onnxruntime: KIND_GPU model loads on the CUDA provider", st == 200, body + srv.log()[-2000:].encode())
        st, body = srv.call("POST", "/v2/models/onnx_gpu/infer", ONNX_REQUEST)
        outs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]} if st == 200 else {}
        check("onnxruntime: add/sub computed on the CUDA provider",
              outs.get("OUTPUT0") == [11, 22, 33, 44] and outs.get("OUTPUT1") == [-9, -18, -27, -36], body)
    except Exception as e:  # a crash of the harness is one failed check
        check("onnxruntime harness", False, repr(e) + ("\n" + srv.log()[-3000:] if srv else ""))
    finally:
        if srv:
            srv.stop()
            log = srv.log()
            check("server log has no sanitizer report (onnxruntime)",
                  not any(b in log for b in ("ERROR: AddressSanitizer", "runtime error:", "ThreadSanitizer")),
                  log[-2000:])
        shutil.rmtree(repo, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nereid", required=True)
    ap.add_argument("--backends", required=True, help="a folder holding identity and gpu_identity")
    ap.add_argument("--driver", default="libcuda.so.1")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--onnx", help="check only a KIND_GPU ONNX model (this file) on the onnxruntime backend")
    ap.add_argument("--ort-cuda", action="store_true", help="the backend's ONNX Runtime has the CUDA provider")
    ap.add_argument("--ort-cuda-refused", action="store_true",
                    help="the same library over the stand-in driver: the CUDA provider refuses it")
    a = ap.parse_args()
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {name}{'' if ok else ': ' + str(detail)[:400]}", flush=True)

    if a.onnx:
        onnx_checks(a, check)
        print(f"RESULT passed={sum(results)} failed={len(results) - sum(results)}")
        return 0 if all(results) else 1

    repo = tempfile.mkdtemp(prefix="nrd-gpucheck-")
    srv = None
    try:
        for name, backend in (("gid", "gpu_identity"), ("id", "identity")):
            os.makedirs(os.path.join(repo, name, "1"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(f'name: "{name}"\nbackend: "{backend}"\nmax_batch_size: 0\n'
                        'input [ { name: "INPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]\n'
                        'output [ { name: "OUTPUT0" data_type: TYPE_UINT8 dims: [ -1 ] } ]\n'
                        'instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]\n')
        cuda = Cuda(a.driver)
        srv = Server(a.nereid, a.backends, repo)
        st, _ = srv.call("GET", "/v2/health/ready")
        check("server ready with KIND_GPU models", st == 200, srv.log())
        st, body = srv.call("GET", "/v2/models/gid/config")
        check("KIND_GPU instance group on GPU 0", st == 200 and b'"kind":"KIND_GPU"' in body, body)

        n = 4096
        p_in, p_out = cuda.alloc(2 * n), cuda.alloc(n)
        payload = bytes((i * 7 + 3) % 256 for i in range(n))
        cuda.write(p_in + n, payload)
        st, body = srv.call("POST", "/v2/cudasharedmemory/region/in/register",
                            {"raw_handle": {"b64": cuda.handle(p_in)}, "device_id": 0, "byte_size": 2 * n})
        check("register a CUDA region (input)", st == 200, body)
        st, body = srv.call("POST", "/v2/cudasharedmemory/region/out/register",
                            {"raw_handle": {"b64": cuda.handle(p_out)}, "device_id": 0, "byte_size": n})
        check("register a CUDA region (output)", st == 200, body)
        st, body = srv.call("GET", "/v2/cudasharedmemory/status")
        check("CUDA region status", st == 200 and sorted(r["name"] for r in json.loads(body)) == ["in", "out"], body)
        bad = base64.b64encode(bytes(64)).decode()
        st, body = srv.call("POST", "/v2/cudasharedmemory/region/bad/register",
                            {"raw_handle": {"b64": bad}, "device_id": 0, "byte_size": 16})
        check("a bad IPC handle is refused", st == 400 and b"failed to open CUDA IPC handle" in body, body)
        for model in ("gid", "id"):
            cuda.write(p_out, bytes(n))
            st, body = srv.call("POST", f"/v2/models/{model}/infer", infer_body(n, in_off=n))
            got = cuda.read(p_out, n) if st == 200 else b""
            check(f"{model}: input and output in CUDA shared memory", st == 200 and got == payload, body)
        st, body = srv.call("POST", "/v2/models/gid/infer", infer_body(n, in_off=n + 1))
        check("offset past the region is refused", st == 400 and b"Invalid offset + byte size" in body, body)
        st, body = srv.call("POST", "/v2/cudasharedmemory/region/in/unregister")
        st2, body2 = srv.call("POST", "/v2/models/gid/infer", infer_body(n, in_off=n))
        check("an unregistered region is unknown", st == 200 and st2 in (400, 404), body2)
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.ports['metrics']}/metrics", timeout=60) as r:
            text = r.read().decode()
        ok = all(re.search(rf'^{m}{{gpu_uuid="[^"]+"}} \S+$', text, re.M)
                 for m in ("nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes",
                           "nv_gpu_power_usage", "nv_gpu_power_limit", "nv_energy_consumption"))
        check("GPU metrics from NVML", ok, text[-2000:])

        if a.bench:
            size, iters = 64 * MB, 20
            b_in, b_out, b_tmp = cuda.alloc(size), cuda.alloc(size), cuda.alloc(size)
            srv.call("POST", "/v2/cudasharedmemory/region/bin/register",
                     {"raw_handle": {"b64": cuda.handle(b_in)}, "device_id": 0, "byte_size": size})
            srv.call("POST", "/v2/cudasharedmemory/region/bout/register",
                     {"raw_handle": {"b64": cuda.handle(b_out)}, "device_id": 0, "byte_size": size})
            body = infer_body(size, "bin", "bout")
            srv.call("POST", "/v2/models/gid/infer", body)  # warm-up
            t0 = time.perf_counter()
            for _ in range(iters):
                st, _ = srv.call("POST", "/v2/models/gid/infer", body)
            t_infer = (time.perf_counter() - t0) / iters
            cuda.copy_d2d(b_tmp, b_in, size)
            t0 = time.perf_counter()
            for _ in range(iters):
                cuda.copy_d2d(b_tmp, b_in, size)
            t_copy = (time.perf_counter() - t0) / iters
            gbs_infer, gbs_copy = size / t_infer / 1e9, size / t_copy / 1e9
            print(f"BENCH 64 MB through CUDA shared memory into gpu_identity: {gbs_infer:.2f} GB/s "
                  f"({t_infer * 1e3:.2f} ms/request); device-to-device copy floor: {gbs_copy:.2f} GB/s "
                  f"({t_copy * 1e3:.2f} ms); ratio {gbs_infer / gbs_copy:.3f}", flush=True)
            check("bench requests succeeded", st == 200)
    except Exception as e:  # a crash of the harness is one failed check, not a silent stop
        check("harness", False, repr(e) + ("\n" + srv.log()[-3000:] if srv else ""))
    finally:
        if srv:
            srv.stop()
            log = srv.log()
            check("server log has no sanitizer report",
                  not any(b in log for b in ("ERROR: AddressSanitizer", "runtime error:", "ThreadSanitizer")),
                  log[-2000:])
        shutil.rmtree(repo, ignore_errors=True)
    print(f"RESULT passed={sum(results)} failed={len(results) - sum(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
