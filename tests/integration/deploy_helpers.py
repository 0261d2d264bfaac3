"""Shared by the deployment tests (test_install.py, test_deb.py,
test_deploy_manifests.py): start a nereid binary and wait for its ready
line, read the ports it listens on, send a request (through tritonclient,
Triton's own client), stop it cleanly."""
import os
import re
import selectors
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import triton_to_np_dtype

READY_MARK = "nereid: server "  # start of the line printed once startup is done
START_TIMEOUT = 60  # sanitizer builds start slowly on a loaded machine
STOP_TIMEOUT = 40   # the manifests' --exit-timeout-secs=25 and some margin
SANITIZER_WORDS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "ThreadSanitizer")
SOURCE = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("NRD_BUILD_DIR", "")
EXAMPLES = os.environ.get("NEREID_EXAMPLES", os.path.join(SOURCE, "examples", "models"))


def clean_env():
    """The environment without anything pointing into the build tree: no
    loader path, no NEREID_* variables (the sanitizer options stay)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LD_", "NEREID_", "NRD_"))}
    return env


class Server:
    """A running nereid: stdout read until the ready line, stderr (the log)
    in a temporary file so it can never fill a pipe."""

    def __init__(self, argv, env=None, cwd=None):
        self.errfile = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.errfile,
                                     env=env if env is not None else clean_env(), cwd=cwd)
        self.out = []
        self.partial = b""

    def wait_ready(self, timeout=START_TIMEOUT):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"nereid exited before ready: {self.proc.wait(5)}\n{self.text()}")
                *lines, self.partial = (self.partial + chunk).split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace") + "\n"
                    self.out.append(line)
                    if line.startswith(READY_MARK):
                        return self.out
            raise AssertionError(f"no ready line within {timeout} s\n{self.text()}")
        finally:
            sel.close()

    def ports(self):
        """{"http": port, "grpc": port, "metrics": port} of the endpoints that are on."""
        names = {"HTTP/REST": "http", "gRPC endpoint": "grpc", "metrics": "metrics"}
        found = {}
        for line in self.out:
            m = re.match(r"nereid: (HTTP/REST|gRPC endpoint|metrics) listening on .*:(\d+)", line)
            if m:
                found[names[m.group(1)]] = int(m.group(2))
        return found

    def stop_clean(self):
        """SIGTERM; asserts exit status 0 and no sanitizer report."""
        self.proc.send_signal(signal.SIGTERM)
        rest, _ = self.proc.communicate(timeout=STOP_TIMEOUT)
        self.out.append((self.partial + rest).decode(errors="replace"))
        self.partial = b""
        assert self.proc.returncode == 0, self.text()
        text = self.text()
        for bad in SANITIZER_WORDS:
            assert bad not in text, text

    def text(self):
        # A new open file description: seeking the one nereid writes through
        # would move its offset, and a line written meanwhile would land
        # over earlier ones (seen: two log lines spliced into one).
        with open(f"/proc/self/fd/{self.errfile.fileno()}", errors="replace") as f:
            err = f.read()
        return "".join(self.out) + self.partial.decode(errors="replace") + "\n--- stderr ---\n" + err

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
        self.proc.stdout.close()
        self.errfile.close()


def http_get(port, path, timeout=30):
    """(status, body bytes) of GET http://127.0.0.1:<port><path>: a plain
    GET, as a kubelet probe or a Prometheus scrape sends it (not a
    tritonclient call on purpose)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def infer(port, model, inputs, timeout=30):
    """Runs model over HTTP through tritonclient; inputs as v2 JSON tensors
    ({"name", "datatype", "shape", "data"}), sent as JSON. Returns
    {output name: flat list of its values}."""
    tensors = []
    for t in inputs:
        i = httpclient.InferInput(t["name"], t["shape"], t["datatype"])
        i.set_data_from_numpy(np.array(t["data"], triton_to_np_dtype(t["datatype"])).reshape(t["shape"]),
                              binary_data=False)
        tensors.append(i)
    with httpclient.InferenceServerClient(f"127.0.0.1:{port}", network_timeout=timeout) as c:
        result = c.infer(model, tensors)
    return {o["name"]: result.as_numpy(o["name"]).reshape(-1).tolist() for o in result.get_response()["outputs"]}


def infer_simple(port):
    """One inference on the example model 'simple' (add_sub backend), checked."""
    a = list(range(16))
    b = [1] * 16
    out = infer(port, "simple", [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": a},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": b}])
    assert out["OUTPUT0"] == [x + 1 for x in a]
    assert out["OUTPUT1"] == [x - 1 for x in a]


def elf_files(root):
    """Paths of the ELF files under root (symbolic links left out)."""
    for dirpath, _, files in os.walk(root):
        for f in files:
            path = os.path.join(dirpath, f)
            if os.path.islink(path):
                continue
            with open(path, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    yield path


def local_ports():
    """Flags that put every endpoint on a port the kernel picks, on loopback."""
    return ["--http-port=0", "--grpc-port=0", "--metrics-port=0", "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1"]


def run(argv, **kw):
    """Runs a command, returns its CompletedProcess; fails the test with
    the command's output when it fails."""
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"{argv} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p
