"""Shared by the security suites (test_security_*.py): a nereid started as
users start it, watched so that an attack which makes it swell fails the
test instead of taking the machine down.

The memory limit is a watchdog, not RLIMIT_AS: sanitizer builds reserve
terabytes of address space, so an address-space limit would stop them at
start. The watchdog reads the server's resident set every 20 ms and kills
it past the limit; `peak_mib()` reads the kernel's high-water mark
(VmHWM), which also catches a spike shorter than the polling period.
"""
import os
import threading
import time

from test_nereid_cli import BACKENDS, EXAMPLES, SANITIZER_WORDS, Server, listening_ports

# Sanitizer builds carry shadow memory and quarantines: a server that idles
# at 40 MiB in a release build idles near 200 MiB under ASan.
SANITIZED = "asan" in os.environ.get("NEREID_BIN", "") or "tsan" in os.environ.get("NEREID_BIN", "")
DEFAULT_LIMIT_MIB = 1536 if SANITIZED else 512


def _status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class WatchedServer:
    """nereid on port 0 with its ports read back, killed if its resident
    set passes limit_mib. Use as a context manager; `killed_for_memory`
    says whether the watchdog fired."""

    def __init__(self, args=(), repo=EXAMPLES, limit_mib=DEFAULT_LIMIT_MIB, env=None):
        base = ["--model-repository", repo, "--backend-directory", BACKENDS, "--http-port=0", "--grpc-port=0",
                "--metrics-port=0"]
        self.server = Server(base + list(args), env)
        self.limit_kib = limit_mib * 1024
        self.killed_for_memory = False
        self._stop = threading.Event()
        self.ports = {}

    def __enter__(self):
        try:
            self.ports = listening_ports(self.server.wait_ready())
        except BaseException:
            self.server.close()
            raise
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        pid = self.server.proc.pid
        while not self._stop.wait(0.02):
            rss = _status_kib(pid, "VmRSS")
            if rss is None:
                return
            if rss > self.limit_kib:
                self.killed_for_memory = True
                self.server.proc.kill()
                return

    def peak_mib(self):
        kib = _status_kib(self.server.proc.pid, "VmHWM")
        return (kib or 0) / 1024

    def alive(self):
        return self.server.proc.poll() is None

    def url(self, proto="http"):
        return f"127.0.0.1:{self.ports[proto]}"

    def log(self):
        return self.server.text()

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            assert not self.killed_for_memory, (
                f"nereid passed {self.limit_kib // 1024} MiB resident and was killed\n{self.server.text()}")
            if exc[0] is None:
                assert self.alive(), f"nereid died\n{self.server.text()}"
                code = self.server.stop()
                assert code == 0, f"nereid exited {code}\n{self.server.text()}"
                for bad in SANITIZER_WORDS:
                    assert bad not in self.server.text(), self.server.text()
        finally:
            self.server.close()
        return False
