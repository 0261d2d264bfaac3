"""Graceful shutdown: on SIGTERM nereid answers what it has already
received and then exits, well within --exit-timeout-secs, however busy its
clients keep it.

HTTP: requests already received are answered (with Connection: close),
idle keep-alive connections are closed at once, new connections are closed
as soon as accepted. gRPC: GOAWAY; unary calls already open complete; a
streaming call gets the responses of the requests it has in the core, an
error response for each request it sends after the signal, and then ends
with UNAVAILABLE "Server is stopping". gRPC calls go through Triton's own
client, tritonclient.grpc, but for one test that reads the frames that end
a stream."""
import contextlib
import http.client
import json
import queue
import shutil
import signal
import socket
import tempfile
import threading
import time

import numpy as np

from test_grpc import (BACKENDS, EXAMPLES, STREAM_PATH, InferenceServerException, RawH2, Server, grpc_frame,
                       grpcclient, is_final, repeat_call, square_call, square_request, tc_inputs,
                       write_identity_model)
from test_nereid_cli import listening_ports

SLOW_MS = 2000
# What the identity backend logs (--log-verbose=1) as an Execute with
# execute_delay_ms begins: the tests wait for it instead of sleeping.
IN_EXECUTE = "identity: Execute of "
# Generous: a loaded 2-core machine running sanitizer builds is slow.
TIMEOUT = 60


def slow_repository():
    """slow: identity that sleeps SLOW_MS in every Execute."""
    d = tempfile.mkdtemp(prefix="nereid_stop_")
    write_identity_model(d, "slow", instances=2,
                         extra=f'parameters {{ key: "execute_delay_ms" value: {{ string_value: "{SLOW_MS}" }} }}\n')
    return d


@contextlib.contextmanager
def server(extra=()):
    """A nereid on the example models and `slow`; yields (server, HTTP port,
    gRPC port). Afterwards: killed if the test left it running, and its
    output must hold no sanitizer report."""
    repo = slow_repository()
    srv = Server(["--model-repository", EXAMPLES, "--model-repository", repo, "--backend-directory", BACKENDS,
                  "--http-port=0", "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                  "--allow-metrics=false", "--log-info=false", "--log-verbose=1", *extra])
    try:
        srv.wait_ready()
        ports = ports_of(srv)
        yield srv, ports["http"], ports["grpc"]
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        shutil.rmtree(repo, ignore_errors=True)
    assert "Sanitizer" not in srv.text()


def ports_of(srv):
    """The ports the kernel gave the server's --*-port=0 endpoints, from its
    start-up lines (ports picked by the test and passed in could be taken
    by another test's socket in between)."""
    return listening_ports(srv.out.decode(errors="replace").splitlines())


def wait_log(srv, text, count=1):
    """Polls the server's log until text appears count times."""
    deadline = time.monotonic() + TIMEOUT
    while srv.text().count(text) < count:
        assert srv.proc.poll() is None, srv.text()
        assert time.monotonic() < deadline, f"{text!r} not logged {count} times:\n{srv.text()}"
        time.sleep(0.02)


def assert_exits_soon(srv, t0):
    """Exit code 0 within 20 s of the signal sent at t0: well before the
    30 s exit timeout, with room for a slow sanitizer build's exit."""
    while srv.proc.poll() is None and time.monotonic() - t0 < 20:
        time.sleep(0.05)
    assert srv.proc.poll() == 0, srv.text()


def json_infer(values):
    return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, len(values)],
                                   "data": values}]})


def test_http_answers_what_it_received_then_closes_every_connection():
    with server() as (srv, port, _):
        idle = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        idle.request("GET", "/v2/health/ready")
        assert idle.getresponse().read() == b""
        busy = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        got = {}

        def slow_call():
            busy.request("POST", "/v2/models/slow/infer", body=json_infer([1.5, 2.5]),
                         headers={"Content-Type": "application/json"})
            r = busy.getresponse()
            got["status"], got["connection"], got["body"] = r.status, r.getheader("Connection"), r.read()

        t = threading.Thread(target=slow_call)
        t.start()
        wait_log(srv, IN_EXECUTE)  # the slow request is with the core (it takes SLOW_MS)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        # The idle keep-alive connection is closed at once.
        idle.sock.settimeout(5)
        assert idle.sock.recv(1) == b""
        # A new connection is closed as soon as it is accepted.
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            try:
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
                assert s.recv(100) == b""
            except ConnectionResetError:
                pass
        # The request received before the signal is answered, and is the last.
        t.join(TIMEOUT)
        assert got["status"] == 200, got
        assert got["connection"] == "close", got
        assert json.loads(got["body"])["outputs"][0]["data"] == [1.5, 2.5]
        assert_exits_soon(srv, t0)


def test_http_clients_that_never_stop_do_not_hold_the_server():
    """Four keep-alive clients send back to back; the server still exits
    promptly (before, it waited for a moment with nothing in flight, up to
    the 30 s exit timeout)."""
    stop = threading.Event()
    bad = []

    def hammer():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while not stop.is_set():
            try:
                conn.request("POST", "/v2/models/simple/infer",
                             body=json.dumps({"inputs": [
                                 {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
                                 {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}]}))
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    bad.append(r.status)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                time.sleep(0.01)

    with server() as (srv, port, _):
        threads = [threading.Thread(target=hammer) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            time.sleep(1)
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            assert_exits_soon(srv, t0)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
    assert not bad, bad


def test_grpc_lets_open_calls_finish_and_ends_streams():
    with server() as (srv, _, port):
        busy = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
        idle = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
        x = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)

        def call(model, rid=""):
            return dict(model_name=model, inputs=tc_inputs([("INPUT0", "FP32", [1, 3], x)]), request_id=rid)

        unary = queue.Queue()
        busy.async_infer(**call("slow"), callback=lambda result, error: unary.put((result, error)),
                         client_timeout=30)
        busy_q, idle_q = queue.Queue(), queue.Queue()
        # Two streams the client keeps open (no stop_stream until the end):
        # a busy one, with a quick request (its answer shows the stream is
        # flowing), a slow one, and one more once the server drains; and an
        # idle one that sends nothing.
        busy.start_stream(callback=lambda result, error: busy_q.put((result, error)), stream_timeout=30)
        idle.start_stream(callback=lambda result, error: idle_q.put((result, error)), stream_timeout=30)
        try:
            busy.async_stream_infer(**call("identity_fp32", "warm"))
            result, error = busy_q.get(timeout=30)
            assert error is None and result.get_response().id == "warm", error
            busy.async_stream_infer(**call("slow", "early"))
            # Both slow requests are with the core (each takes SLOW_MS, one per instance).
            wait_log(srv, IN_EXECUTE, 2)
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            # The idle stream ends with UNAVAILABLE "Server is stopping": the
            # server is draining from here on.
            result, error = idle_q.get(timeout=30)
            assert result is None, "no request was sent"
            assert error.status() == "StatusCode.UNAVAILABLE", error
            assert "stopping" in (error.message() or "").lower(), error
            busy.async_stream_infer(**call("slow", "late"))
            # The unary call completes normally.
            result, error = unary.get(timeout=30)
            assert error is None, error
            assert np.array_equal(result.as_numpy("OUTPUT0"), x)
            # The busy stream answers its early request, refuses the late one
            # (an error response: tritonclient passes on no id with it), then
            # ends with UNAVAILABLE though its client keeps it open.
            got, refused = {}, []
            while True:
                result, error = busy_q.get(timeout=30)
                if result is not None:
                    got[result.get_response().id] = result
                elif error.status() is None:
                    refused.append(error.message())
                else:
                    assert error.status() == "StatusCode.UNAVAILABLE", error
                    break
            assert set(got) == {"early"}, got
            assert np.array_equal(got["early"].as_numpy("OUTPUT0"), x)
            assert refused == ["Server is stopping"], refused
        finally:
            busy.stop_stream()
            idle.stop_stream()
            busy.close()
            idle.close()
        assert_exits_soon(srv, t0)


def test_a_stream_its_client_keeps_open_is_reset_after_its_trailers():
    """At the stop, a stream whose client is still sending gets its
    responses, its trailers (UNAVAILABLE "Server is stopping"), then
    RST_STREAM with NO_ERROR before the connection closes, as gRPC's own
    servers end such a stream. Without the reset the stream was still open
    at the client when the connection closed, and grpc-core cancelled it
    there ("Socket closed"), dropping responses not read yet: issue 34's
    flake, a repeat_int32 request that lost its final response. Raw
    HTTP/2: the test reads the frames themselves, which grpcio hides."""
    with server() as (srv, _, port):
        h = RawH2(port)
        try:
            headers = [(":path", STREAM_PATH), *RawH2.BASE_HEADERS]
            h.send(1, 0x4, 1, b"".join(RawH2.literal(n, v) for n, v in headers))  # no END_STREAM
            h.send(0, 0, 1, grpc_frame(square_request(3, "open", empty_final=True).SerializeToString()))
            body, messages = b"", 0
            while messages < 4:  # three responses and the empty final one
                f = h.read_frame()
                assert f is not None, "the connection closed before the responses"
                if f[0] == 1:
                    h.decode(f[3])  # keeps the HPACK table in step for the trailers
                if f[0] == 0 and f[2] == 1:
                    body += f[3]
                    while len(body) >= 5 and len(body) >= 5 + int.from_bytes(body[1:5], "big"):
                        body = body[5 + int.from_bytes(body[1:5], "big"):]
                        messages += 1
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            frames = []
            while (f := h.read_frame()) is not None:
                frames.append(f)
            kinds = [(f[0], f[2]) for f in frames if f[0] != 6]  # PINGs aside
            trailers = [f for f in frames if f[0] == 1 and f[2] == 1]
            assert len(trailers) == 1 and trailers[0][1] & 0x1, frames  # END_STREAM
            assert dict(h.decode(trailers[0][3])).get("grpc-status") == "14", h.decode(trailers[0][3])
            rst = [f for f in frames if f[0] == 3 and f[2] == 1]
            assert len(rst) == 1 and int.from_bytes(rst[0][3], "big") == 0, frames  # NO_ERROR
            assert kinds.index((3, 1)) == kinds.index((1, 1)) + 1, kinds  # right after the trailers
            assert_exits_soon(srv, t0)
        finally:
            h.close()


def test_http_event_stream_begun_before_the_signal_runs_to_its_end():
    """generate_stream on repeat_int32 (three events 300 ms apart) started
    before SIGTERM delivers every event; then its connection closes and the
    server exits, though the stream's reply began as keep-alive."""
    with server() as (srv, port, _):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/v2/models/repeat_int32/generate_stream",
                     body=json.dumps({"IN": [7, 8, 9], "DELAY": [300, 300, 300], "WAIT": [0]}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200
        first = r.readline()
        assert first.startswith(b"data: "), first
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        rest = r.read()  # to the end of the stream
        events = [first] + [line for line in rest.split(b"\n") if line.startswith(b"data: ")]
        assert [json.loads(e[6:])["OUT"] for e in events] == [7, 8, 9], events
        conn.sock.settimeout(5)
        assert conn.sock.recv(1) == b""
        assert_exits_soon(srv, t0)


def test_both_front_ends_drain_at_once():
    """While a slow gRPC call keeps the gRPC side draining, the HTTP side
    is already refusing new connections (both drain from the signal on,
    within one exit timeout)."""
    with server() as (srv, http_port, grpc_port):
        client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{grpc_port}")
        x = np.array([[4.0]], dtype=np.float32)
        unary = queue.Queue()
        client.async_infer("slow", tc_inputs([("INPUT0", "FP32", [1, 1], x)]),
                           callback=lambda result, error: unary.put((result, error)), client_timeout=TIMEOUT)
        wait_log(srv, IN_EXECUTE)  # the slow call is with the core (it takes SLOW_MS)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        # The HTTP side refuses new connections while the slow call still
        # keeps the gRPC side draining: polled, as the signal takes a moment
        # to reach the drain on a loaded machine.
        while True:
            assert unary.empty(), "HTTP served new connections until the gRPC side was done"
            with socket.create_connection(("127.0.0.1", http_port), timeout=TIMEOUT) as s:
                try:
                    s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
                    got = s.recv(100)
                except ConnectionResetError:
                    got = b""
            if got == b"":
                break
            time.sleep(0.05)
        assert srv.proc.poll() is None  # still draining the slow call
        result, error = unary.get(timeout=30)
        assert error is None, error
        assert np.array_equal(result.as_numpy("OUTPUT0"), x)
        client.close()
        assert_exits_soon(srv, t0)


def test_http_reply_still_being_written_at_the_signal_closes_after_it():
    """A 16 MB reply that the client has not read yet when SIGTERM comes is
    written to the end; then the connection closes and the server exits."""
    with server() as (srv, port, _):
        n = 4 << 20
        x = np.arange(n, dtype=np.float32)
        header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, n],
                                         "parameters": {"binary_data_size": x.nbytes}}],
                             "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        conn.request("POST", "/v2/models/identity_fp32/infer", body=header + x.tobytes(),
                     headers={"Inference-Header-Content-Length": str(len(header))})
        # Answered (statistics are published after the response is handed
        # over); the reply fills the socket buffers and waits.
        stats = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while True:
            stats.request("GET", "/v2/models/identity_fp32/stats")
            st = json.loads(stats.getresponse().read())["model_stats"][0]
            if st["inference_stats"]["success"]["count"] >= 1:
                break
            assert time.monotonic() < deadline, st
            time.sleep(0.02)
        stats.close()
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        # Our own handle on the socket: when the reply says Connection:
        # close (the signal came before its head was written, as happens
        # on a loaded machine), http.client drops conn.sock once the body
        # is read; when it began as keep-alive, the server closes the
        # connection after it. Either way the client reads all of it, then
        # the end of the connection.
        sock = conn.sock.dup()
        try:
            r = conn.getresponse()
            body = r.read()
            assert r.status == 200
            assert r.getheader("Connection") in (None, "close"), r.getheaders()
            hlen = int(r.getheader("Inference-Header-Content-Length"))
            assert np.array_equal(np.frombuffer(body[hlen:], dtype=np.float32), x)
            sock.settimeout(5)
            assert sock.recv(1) == b""
        finally:
            sock.close()
        assert_exits_soon(srv, t0)


class _Stream:
    """One tritonclient stream (start_stream) on its own client, one request
    at a time (the next is sent from the callback when the previous one's
    final response or error came): repeat_int32 with IN = [0, 1, 2, 3] and
    DELAY = 150 ms each, or square_int32 with IN = 5, both asking for the
    empty final response. Records when each request was handed to the
    client, every response, and how the call ended."""

    def __init__(self, port, kind, n):
        self.kind, self.name = kind, f"{kind}{n}"
        self.sent = {}  # id -> monotonic time the client took it
        self.got = {}   # id -> [InferResult, or ("error", message)]
        self.status = None
        self.details = None  # the status message and the transport's error (tells the two apart)
        self.halt = threading.Event()  # send nothing more
        self.ended = threading.Event()  # the call ended with a status
        self.seq = 0
        self.current = None
        self.client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{port}")
        self.client.start_stream(callback=self.on_response, stream_timeout=60)
        self.send()

    def send(self):
        rid = f"{self.name}-{self.seq}"
        self.seq += 1
        if self.kind == "repeat":
            call = repeat_call([0, 1, 2, 3], [150] * 4, 0, rid)
        else:
            call = square_call(5, rid, empty_final=True)
        self.current = rid
        self.sent[rid] = time.monotonic()
        self.client.async_stream_infer(**call)

    def on_response(self, result, error):
        if error is not None and error.status() is not None:  # the call's status
            self.status, self.details = error.status(), (error.message(), error.debug_details())
            self.ended.set()
            return
        if error is not None:
            # No id comes with an error: with one request at a time, it is
            # the current request's.
            self.got.setdefault(self.current, []).append(("error", error.message()))
            done = True
        else:
            self.got.setdefault(result.get_response().id, []).append(result)
            done = is_final(result)
        if done and not self.halt.is_set():
            with contextlib.suppress(InferenceServerException):  # the stream ended meanwhile
                self.send()

    def close(self):
        self.client.stop_stream(cancel_requests=True)
        self.client.close()

    def check(self, t_signal):
        """Every request given to the client before t_signal has all of its
        responses, right, and its final flag, or an explicit error (only
        for one the server had not started: none of its responses came
        before the signal). Returns the number checked."""
        want = 4 if self.kind == "repeat" else 5
        for rid, t in self.sent.items():
            if t >= t_signal:
                continue
            got = self.got.get(rid, [])
            errors = [g[1] for g in got if isinstance(g, tuple)]
            if errors:
                assert errors == ["Server is stopping"] and len(got) == 1, (self.name, rid, got)
                continue
            assert got and is_final(got[-1]), (f"{self.name}: {rid} sent before the signal: {len(got)} responses; "
                                               f"the call ended {self.status} {self.details}")
            data = got[:-1]
            assert len(data) == want and len(got[-1].get_response().outputs) == 0, (self.name, rid, len(got),
                                                                                    self.details)
            outs = [g.as_numpy("OUT").tolist() for g in data]
            assert outs == ([[0], [1], [2], [3]] if self.kind == "repeat" else [[5]] * 5), (self.name, rid, outs)
        return sum(1 for t in self.sent.values() if t < t_signal)


def test_requests_in_flight_under_mixed_load_are_all_answered():
    """Issue 34's case, shortened: keep-alive HTTP clients hammer
    identity_fp32 while four streams run repeat_int32 (each request 600 ms)
    and two run square_int32, one request at a time. The server is then
    frozen (SIGSTOP) while the clients go on sending, so requests sit
    unread in its sockets, and gets SIGTERM before it runs again. Every
    request sent before the signal, HTTP or gRPC, is answered (a stream's
    with all its responses and the final flag, or an explicit error for
    one never started); every stream then ends with a status; the server
    exits soon. Before, requests that had arrived but were not read yet
    when the drain began were dropped with their connection or stream."""
    stop = threading.Event()
    http_sent, http_bad = [], []

    def http_client(port):
        body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4],
                                       "data": [1.0, 2.0, 3.0, 4.0]}]}).encode()
        req = (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
        while not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
            except OSError:
                time.sleep(0.01)
                continue
            with s:
                f = s.makefile("rb")
                while not stop.is_set():
                    try:
                        s.sendall(req)
                    except OSError:
                        break
                    sent = time.monotonic()
                    http_sent.append(sent)
                    try:
                        status = f.readline()
                        headers = {}
                        while True:
                            line = f.readline()
                            if line in (b"\r\n", b""):
                                break
                            k, _, v = line.decode().partition(":")
                            headers[k.strip().lower()] = v.strip()
                        out = json.loads(f.read(int(headers["content-length"])))
                        if not status.startswith(b"HTTP/1.1 200") or out["outputs"][0]["data"] != [1, 2, 3, 4]:
                            http_bad.append((sent, status, out))
                    except (OSError, KeyError, ValueError) as e:
                        http_bad.append((sent, "no reply", repr(e)))
                        break
                    if headers.get("connection") == "close":
                        break

    with server(["--http-thread-count=2"]) as (srv, http_port, grpc_port):
        clients = [threading.Thread(target=http_client, args=(http_port,), daemon=True) for _ in range(4)]
        for t in clients:
            t.start()
        streams = [_Stream(grpc_port, "repeat", i) for i in range(4)] + [_Stream(grpc_port, "square", i)
                                                                         for i in range(2)]
        try:
            # Every stream and HTTP client is flowing (before, a fixed 1.5 s
            # that a loaded sanitizer build could spend starting them).
            deadline = time.monotonic() + TIMEOUT
            while not (all(st.got for st in streams) and len(http_sent) > 10 + len(clients)):
                assert time.monotonic() < deadline, ([len(st.got) for st in streams], len(http_sent))
                time.sleep(0.02)
            srv.proc.send_signal(signal.SIGSTOP)
            time.sleep(0.3)  # the clients send what they have to send
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            srv.proc.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + 20
            for st in streams:
                assert st.ended.wait(max(0.1, deadline - time.monotonic())), f"{st.name}: the stream did not end"
            stop.set()
            for st in streams:
                st.halt.set()
            assert_exits_soon(srv, t0)
        finally:
            stop.set()
            for st in streams:
                st.halt.set()
        for t in clients:
            t.join(10)
        checked = 0
        for st in streams:
            checked += st.check(t0)
            assert st.status == "StatusCode.UNAVAILABLE", (st.name, st.status)
            st.close()
        assert checked >= 6
        lost = [b for b in http_bad if b[0] < t0]
        assert not lost, lost
        assert sum(1 for t in http_sent if t < t0) > 10


def test_a_backend_holding_requests_past_the_exit_timeout_does_not_hold_the_exit():
    """A model whose Execute outlasts --exit-timeout-secs, with a call in it
    and an unload waiting on it: nereid exits soon after the timeout, without
    freeing the server under the unload still running (no sanitizer
    report)."""
    d = tempfile.mkdtemp(prefix="nereid_stuck_")
    write_identity_model(d, "stuck", extra='parameters { key: "execute_delay_ms" value: { string_value: "20000" } }\n')
    srv = Server(["--model-repository", d, "--backend-directory", BACKENDS, "--model-control-mode=explicit",
                  "--load-model=*", "--allow-http=false", "--allow-metrics=false", "--log-info=false",
                  "--log-verbose=1", "--grpc-port=0", "--grpc-address=127.0.0.1", "--exit-timeout-secs=1"])
    try:
        srv.wait_ready()
        client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{ports_of(srv)['grpc']}")
        x = np.array([[1.0]], dtype=np.float32)
        answered = threading.Event()
        client.async_infer("stuck", tc_inputs([("INPUT0", "FP32", [1, 1], x)]),
                           callback=lambda result, error: answered.set(), client_timeout=30)
        wait_log(srv, IN_EXECUTE)  # in Execute now

        def unload_stuck():
            with contextlib.suppress(InferenceServerException):
                client.unload_model("stuck", client_timeout=30)

        unload = threading.Thread(target=unload_stuck, daemon=True)
        unload.start()
        time.sleep(0.3)  # the unload waits for the request
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        while srv.proc.poll() is None and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        assert srv.proc.poll() == 0, srv.text()
        assert time.monotonic() - t0 < 12, "the exit waited for the backend"
        answered.wait(5)
        unload.join(5)
        client.close()
        text = srv.text()
        assert "Sanitizer" not in text and "runtime error" not in text, text
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        shutil.rmtree(d, ignore_errors=True)
