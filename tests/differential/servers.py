"""Triton and Nereid started side by side on one model repository, for the
differential tests (tests/differential/README.md).

Triton is tritonserver 2.51 from PyTriton's wheel (scripts/fetch_pypi.sh puts
it in .deps/tritonserver). It serves our C backends (identity, add_sub,
square, repeat, onnxruntime, stateful) from a backend folder made here, and
its own Python backend. Our backends in a sanitizer build cannot load into a
process without the sanitizer runtime, so for Triton they are built once
more, plainly, in <build>/oracle-backends.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
NEREID = os.environ.get("NEREID_BIN", os.path.join(SOURCE, "build", "src", "server", "nereid"))
BACKENDS = os.environ.get("NEREID_BACKEND_DIR", os.path.join(SOURCE, "build", "backends"))
TRITON_TOP = os.environ.get("NRD_TRITON_DIR", os.path.join(SOURCE, ".deps", "tritonserver", "pytriton", "tritonserver"))
TRITON = os.path.join(TRITON_TOP, "bin", "tritonserver")
START_TIMEOUT = 120
C_BACKENDS = ("identity", "add_sub", "square", "repeat", "onnxruntime", "stateful")


def free_port():
    """A port free now (Triton cannot report the port it got for 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sanitized(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return "libasan" in out or "libtsan" in out


def plain_backends():
    """Our C backends as Triton can load them: the build's own, or when the
    build is sanitized a plain build of them (made once, kept)."""
    probe = os.path.join(BACKENDS, "identity", "libtriton_identity.so")
    if not sanitized(probe):
        return BACKENDS
    build = os.path.join(os.path.dirname(BACKENDS), "oracle-backends")
    subprocess.run(["cmake", "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DNRD_BUILD_TESTS=OFF"],
                   check=True, capture_output=True)
    targets = [f"triton_{b}" for b in C_BACKENDS]
    subprocess.run(["cmake", "--build", build, "-j2", "--target", *targets], check=True, capture_output=True)
    return os.path.join(build, "backends")


def triton_backend_dir(workdir):
    """A backend folder for Triton: our C backends and Triton's Python backend."""
    ours = plain_backends()
    top = os.path.join(workdir, "triton-backends")
    os.makedirs(top)
    for b in C_BACKENDS:
        os.symlink(os.path.join(ours, b), os.path.join(top, b))
    os.symlink(os.path.join(TRITON_TOP, "backends", "python"), os.path.join(top, "python"))
    return top


class Running:
    """One server process with its HTTP, gRPC and metrics ports."""

    def __init__(self, name, argv, ports, env=None):
        self.name = name
        self.http, self.grpc, self.metrics = ports
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode}\n{self.text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready within {START_TIMEOUT} s\n{self.text()}")

    def text(self):
        with open(f"/proc/self/fd/{self.log.fileno()}", errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.log.close()
        return self.proc.returncode


# Triton 2.51 serves client shared memory to any client; Nereid, as
# Triton 26.x, only with this flag (docs/security.md). The suite compares
# shared memory as 2.51 serves it.
NEREID_ONLY = ("--allow-client-shm=true",)


def start_pair(repo, extra=()):
    """Starts Triton and Nereid on `repo` with the same flags (Nereid also
    with NEREID_ONLY); returns (triton, nereid, workdir). The caller stops
    both and removes workdir."""
    work = tempfile.mkdtemp(prefix="nrd-diff-")
    common = ["--model-repository", repo, "--log-verbose=0", *extra]
    tports = (free_port(), free_port(), free_port())
    triton = Running("triton", [TRITON, *common, f"--backend-directory={triton_backend_dir(work)}",
                                f"--http-port={tports[0]}", f"--grpc-port={tports[1]}",
                                f"--metrics-port={tports[2]}"], tports)
    nports = (free_port(), free_port(), free_port())
    nereid = Running("nereid", [NEREID, *common, *NEREID_ONLY, f"--backend-directory={BACKENDS}", f"--http-port={nports[0]}",
                                f"--grpc-port={nports[1]}", f"--metrics-port={nports[2]}"], nports)
    try:
        triton.wait_ready()
        nereid.wait_ready()
    except BaseException:
        triton.stop()
        nereid.stop()
        shutil.rmtree(work, ignore_errors=True)
        raise
    return triton, nereid, work
