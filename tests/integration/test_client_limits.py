"""Clients that are slow, stalled, or too many: nereid ends what they hold
and keeps serving everyone else.

HTTP (--http-client-timeout-secs): an idle connection is closed; a request
head that has not arrived in time, or a body that stalls, gets 408 and the
connection closes; a client that stops reading its replies is dropped; a
request with the core longer than the limit is not cut while its client
waits. gRPC (--grpc-handshake-timeout-secs): a connection that never sends
its HTTP/2 preface is closed; one that did may idle (raw sockets: no
client stalls on purpose), and tritonclient is served beside them. Out of file
descriptors, neither front end spins: clients wait in the backlog and are
served once descriptors are free."""
import concurrent.futures
import contextlib
import json
import os
import resource
import select
import shutil
import socket
import tempfile
import time

from test_grpc import (BACKENDS, EXAMPLES, LIVE_PATH, RawH2, Server, grpc_frame, grpcclient, pb,
                       write_identity_model)
from test_nereid_cli import listening_ports

LIMIT = 2  # seconds, for both timeouts
SLOW_MS = 3500  # a request the core holds longer than LIMIT
SETTLE = 30  # seconds allowed for descriptors to be released: generous, for loaded sanitizer builds


def repository():
    d = tempfile.mkdtemp(prefix="nereid_limits_")
    write_identity_model(d, "fast", max_batch_size=0)
    write_identity_model(d, "slow", max_batch_size=0,
                         extra=f'parameters {{ key: "execute_delay_ms" value: {{ string_value: "{SLOW_MS}" }} }}\n')
    return d


@contextlib.contextmanager
def server(*extra):
    repo = repository()
    # Port 0: a port picked here and passed in could be taken by another
    # test's socket before nereid binds it.
    srv = Server(["--model-repository", repo, "--backend-directory", BACKENDS,
                  "--http-port=0", "--http-address=127.0.0.1", "--http-thread-count=2",
                  "--grpc-port=0", "--grpc-address=127.0.0.1",
                  "--allow-metrics=false", "--log-info=false", *extra])
    try:
        srv.wait_ready()
        ports = listening_ports(srv.out.decode(errors="replace").splitlines())
        srv.http_port, srv.grpc_port = ports["http"], ports["grpc"]
        yield srv
        assert srv.stop() == 0, srv.text()
        for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "ThreadSanitizer"):
            assert bad not in srv.text(), srv.text()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        shutil.rmtree(repo, ignore_errors=True)


def open_fds(srv):
    return len(os.listdir(f"/proc/{srv.proc.pid}/fd"))


def cpu_seconds(srv):
    with open(f"/proc/{srv.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def infer_body(n=4):
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [n], "datatype": "FP32",
                                   "data": [float(i) for i in range(n)]}]}).encode()


def post(model, body, extra=b""):
    return (b"POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n"
            % (model.encode(), len(body), extra) + body)


def read_until_closed(s, budget):
    """Everything the server sends until it closes the connection; the
    seconds that took. A reset counts as closed."""
    t0 = time.monotonic()
    s.settimeout(budget)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    return data, time.monotonic() - t0


def health(port):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(65536).split(b"\r\n", 1)[0]


# ---- HTTP ------------------------------------------------------------------

def idle_connection(port):
    s = socket.create_connection(("127.0.0.1", port))
    data, took = read_until_closed(s, LIMIT + 8)
    s.close()
    return data, took


def idle_after_a_request(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(post("fast", infer_body()))
    data, took = read_until_closed(s, LIMIT + 8)
    s.close()
    return data, took


def trickled_head(port):
    """One byte of header every 0.4 s: each arrives well within the limit,
    the head as a whole does not. Then the answer, and the connection
    closes even though the bytes keep coming."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n")
    t0 = time.monotonic()
    took = None
    data = b""
    try:
        while time.monotonic() - t0 < LIMIT + 12:
            s.sendall(b"X")
            if select.select([s], [], [], 0.4)[0]:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                took = took or time.monotonic() - t0
    except (BrokenPipeError, ConnectionResetError):
        pass
    closed_after = time.monotonic() - t0
    s.close()
    return data, took, closed_after


def stalled_body(port):
    s = socket.create_connection(("127.0.0.1", port))
    body = infer_body()
    s.sendall(post("fast", body)[:-10])  # all but the last 10 bytes
    data, took = read_until_closed(s, LIMIT + 8)
    s.close()
    return data, took


def slow_request(port):
    """The core holds it longer than the limit; the client waits."""
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    s.sendall(post("slow", infer_body(), b"Connection: close\r\n"))
    data, _ = read_until_closed(s, SLOW_MS / 1000 + 10)
    s.close()
    return data, time.monotonic() - t0


def reader_that_stops(port):
    """Pipelines requests for 256 KB replies and reads none of them: the
    server queues what it can, then drops the connection."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    one = post("fast", infer_body(32768))
    t0 = time.monotonic()
    s.settimeout(LIMIT + 10)
    sent = 0
    try:
        for _ in range(64):  # 16 MB of replies: more than the server queues
            s.sendall(one)
            sent += 1
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    # The server must end it on its own; nothing is read until then. The
    # socket's TCP state tells: CLOSE after a reset, CLOSE_WAIT after a FIN.
    # LIMIT + 60: the server first answers what it read (several MB) under
    # a sanitizer; a TSan build at a load of 20 needed more than LIMIT + 12.
    closed = False
    while time.monotonic() - t0 < LIMIT + 60 and not closed:
        state = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        closed = state in (7, 8)
        time.sleep(0.2)
    took = time.monotonic() - t0
    s.close()
    return closed, took, sent


def test_http_slow_and_stalled_clients():
    with server(f"--http-client-timeout-secs={LIMIT}") as srv:
        port = srv.http_port
        fds = open_fds(srv)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            idle = pool.submit(idle_connection, port)
            after = pool.submit(idle_after_a_request, port)
            trickle = pool.submit(trickled_head, port)
            stall = pool.submit(stalled_body, port)
            slow = pool.submit(slow_request, port)
            stops = pool.submit(reader_that_stops, port)

            data, took = idle.result()
            assert data == b"" and LIMIT - 0.5 <= took < LIMIT + 4, (data, took)

            data, took = after.result()
            assert data.startswith(b"HTTP/1.1 200 "), data
            assert LIMIT - 0.5 <= took < LIMIT + 4, took

            data, took, closed_after = trickle.result()
            assert data.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), data
            assert b"request head not received in time" in data and b"Connection: close" in data, data
            assert LIMIT - 0.5 <= took < LIMIT + 4, took
            assert closed_after < took + 5, (took, closed_after)  # lingering is bounded

            data, took = stall.result()
            assert data.startswith(b"HTTP/1.1 408 "), data
            assert b"request body stalled" in data, data
            assert LIMIT - 0.5 <= took < LIMIT + 4, took

            data, took = slow.result()
            assert data.startswith(b"HTTP/1.1 200 "), data
            assert took >= SLOW_MS / 1000, took

            closed, took, sent = stops.result()
            assert closed, f"a client that reads nothing kept its connection ({sent} requests sent)"
            assert took < LIMIT + 60, took
        assert health(port) == b"HTTP/1.1 200 OK"
        deadline = time.monotonic() + SETTLE
        while open_fds(srv) > fds and time.monotonic() < deadline:
            time.sleep(0.1)
        assert open_fds(srv) == fds, "descriptors still held after the clients were dropped"


def test_timeout_flags_checked():
    for flag in ("--http-client-timeout-secs", "--grpc-handshake-timeout-secs"):
        for bad in ("0", "-1", "x", "86401", ""):
            s = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS,
                        "--http-port=0", "--grpc-port=0", f"{flag}={bad}"])
            s.proc.communicate(timeout=30)
            assert s.proc.returncode == 2, s.text()
            assert f"invalid value '{bad}' for {flag}: expected seconds 1..86400" in s.text(), s.text()


# ---- gRPC ------------------------------------------------------------------

def test_grpc_handshake_timeout():
    with server(f"--grpc-handshake-timeout-secs={LIMIT}") as srv:
        port = srv.grpc_port
        fds = open_fds(srv)
        t0 = time.monotonic()
        silent = socket.create_connection(("127.0.0.1", port))
        partial = socket.create_connection(("127.0.0.1", port))
        partial.sendall(b"PRI * HTTP/2.0\r\n")  # half a preface
        # Raw: a connection stopped right after its preface and SETTINGS,
        # which a gRPC client never leaves idle on purpose; it may idle.
        greeted = RawH2(port)
        for s in (silent, partial):
            data, _ = read_until_closed(s, LIMIT + 8)
            took = time.monotonic() - t0
            assert LIMIT - 0.5 <= took < LIMIT + 4, took
            s.close()
        time.sleep(1)
        greeted.request(1, LIVE_PATH, grpc_frame(pb.ServerLiveRequest().SerializeToString()))
        assert greeted.response(1)[0]["grpc-status"] == "0"
        greeted.close()
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}") as client:
            assert client.is_server_live(client_timeout=30)
        deadline = time.monotonic() + SETTLE
        while open_fds(srv) > fds and time.monotonic() < deadline:
            time.sleep(0.1)
        assert open_fds(srv) == fds


# ---- out of descriptors ----------------------------------------------------

def test_out_of_descriptors_neither_front_end_spins():
    with server() as srv:
        fds = open_fds(srv)
        resource.prlimit(srv.proc.pid, resource.RLIMIT_NOFILE, (fds + 6, fds + 6))
        for port in (srv.http_port, srv.grpc_port):
            held = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
            time.sleep(0.3)
            cpu0 = cpu_seconds(srv)
            time.sleep(2)
            used = cpu_seconds(srv) - cpu0
            # Spinning on the listener would burn about 2 CPU-seconds per second.
            assert used < 0.5, f"port {port}: {used:.2f} CPU-seconds in 2 s with descriptors exhausted"
            for s in held:
                s.close()
            time.sleep(0.3)
        # Descriptors are free again: both ports serve.
        deadline = time.monotonic() + SETTLE
        while True:
            try:
                assert health(srv.http_port) == b"HTTP/1.1 200 OK"
                break
            except (OSError, AssertionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{srv.grpc_port}") as client:
            assert client.is_server_live(client_timeout=30)
        assert "cannot accept connections" in srv.text() and "ulimit -n" in srv.text(), srv.text()
