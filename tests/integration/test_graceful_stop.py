"""Graceful shutdown: on SIGTERM nereid answers what it has already
received and then exits, well within --exit-timeout-secs, however busy its
clients keep it.

HTTP: requests already received are answered (with Connection: close),
idle keep-alive connections are closed at once, new connections are closed
as soon as accepted. gRPC: GOAWAY; unary calls already open complete; a
streaming call gets the responses of the requests it has in the core, an
error response for each request it sends after the signal, and then ends
with UNAVAILABLE "Server is stopping"."""
import contextlib
import http.client
import json
import shutil
import signal
import socket
import tempfile
import threading
import time

import numpy as np

from test_grpc import (BACKENDS, EXAMPLES, Server, free_port, grpc, infer_request, output_array, pbg,
                       write_identity_model)

SLOW_MS = 2000


def slow_repository():
    """slow: identity that sleeps SLOW_MS in every Execute."""
    d = tempfile.mkdtemp(prefix="nereid_stop_")
    write_identity_model(d, "slow", instances=2,
                         extra=f'parameters {{ key: "execute_delay_ms" value: {{ string_value: "{SLOW_MS}" }} }}\n')
    return d


@contextlib.contextmanager
def server():
    """A nereid on the example models and `slow`; yields (server, HTTP port,
    gRPC port). Afterwards: killed if the test left it running, and its
    output must hold no sanitizer report."""
    repo = slow_repository()
    http_port, grpc_port = free_port(), free_port()
    srv = Server(["--model-repository", EXAMPLES, "--model-repository", repo, "--backend-directory", BACKENDS,
                  f"--http-port={http_port}", "--http-address=127.0.0.1",
                  f"--grpc-port={grpc_port}", "--grpc-address=127.0.0.1",
                  "--allow-metrics=false", "--log-info=false"])
    try:
        srv.wait_ready()
        yield srv, http_port, grpc_port
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        shutil.rmtree(repo, ignore_errors=True)
    assert "Sanitizer" not in srv.text()


def assert_exits_soon(srv, t0):
    """Exit code 0 within 10 s of the signal sent at t0 (the exit timeout is 30 s)."""
    while srv.proc.poll() is None and time.monotonic() - t0 < 10:
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
        time.sleep(0.8)  # the slow request is with the core (it takes SLOW_MS)
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
        t.join(30)
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
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = pbg.GRPCInferenceServiceStub(ch)
        x = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
        unary = stub.ModelInfer.future(infer_request("slow", [("INPUT0", "FP32", [1, 3], x)]), timeout=30)
        warm, signalled, gate = threading.Event(), threading.Event(), threading.Event()

        def busy_requests():
            """A quick request (its answer shows the stream is flowing), a
            slow one, then, once the server drains, one more; then the
            stream stays open until the gate opens."""
            yield infer_request("identity_fp32", [("INPUT0", "FP32", [1, 3], x)], rid="warm")
            warm.wait(30)
            yield infer_request("slow", [("INPUT0", "FP32", [1, 3], x)], rid="early")
            signalled.wait(30)
            yield infer_request("slow", [("INPUT0", "FP32", [1, 3], x)], rid="late")
            gate.wait(30)

        def idle_requests():
            gate.wait(30)
            return
            yield

        busy_stream = stub.ModelStreamInfer(busy_requests(), timeout=30)
        idle_stream = stub.ModelStreamInfer(idle_requests(), timeout=30)
        assert next(busy_stream).infer_response.id == "warm"
        warm.set()
        time.sleep(0.8)  # the slow requests are with the core (they take SLOW_MS)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        # The idle stream ends with UNAVAILABLE "Server is stopping": the
        # connection is draining from here on.
        try:
            for _ in idle_stream:
                raise AssertionError("no request was sent")
            raise AssertionError("the idle stream ended without a status")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            assert "stopping" in (e.details() or "").lower(), e
        signalled.set()
        # The unary call completes normally.
        assert np.array_equal(output_array(unary.result(timeout=30), "OUTPUT0", np.float32), x)
        # The busy stream answers its early request, refuses the late one,
        # then ends with UNAVAILABLE though its client keeps it open.
        got = {}
        try:
            for r in busy_stream:
                got[r.infer_response.id] = r
            raise AssertionError("the busy stream ended without a status")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        assert set(got) == {"early", "late"}, got
        assert not got["early"].error_message
        assert np.array_equal(output_array(got["early"].infer_response, "OUTPUT0", np.float32), x)
        assert got["late"].error_message == "Server is stopping", got["late"]
        gate.set()
        ch.close()
        assert_exits_soon(srv, t0)


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
        ch = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        stub = pbg.GRPCInferenceServiceStub(ch)
        x = np.array([[4.0]], dtype=np.float32)
        unary = stub.ModelInfer.future(infer_request("slow", [("INPUT0", "FP32", [1, 1], x)]), timeout=30)
        time.sleep(0.8)  # the slow call is with the core (it takes SLOW_MS)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert srv.proc.poll() is None  # still draining the slow call
        with socket.create_connection(("127.0.0.1", http_port), timeout=5) as s:
            try:
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
                assert s.recv(100) == b"", "HTTP served a new connection while shutting down"
            except ConnectionResetError:
                pass
        assert np.array_equal(output_array(unary.result(timeout=30), "OUTPUT0", np.float32), x)
        ch.close()
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
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/v2/models/identity_fp32/infer", body=header + x.tobytes(),
                     headers={"Inference-Header-Content-Length": str(len(header))})
        time.sleep(0.5)  # answered; the reply fills the socket buffers and waits
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200
        hlen = int(r.getheader("Inference-Header-Content-Length"))
        assert np.array_equal(np.frombuffer(body[hlen:], dtype=np.float32), x)
        conn.sock.settimeout(5)
        assert conn.sock.recv(1) == b""
        assert_exits_soon(srv, t0)


def test_a_backend_holding_requests_past_the_exit_timeout_does_not_hold_the_exit():
    """A model whose Execute outlasts --exit-timeout-secs, with a call in it
    and an unload waiting on it: nereid exits soon after the timeout, without
    freeing the server under the unload still running (no sanitizer
    report)."""
    d = tempfile.mkdtemp(prefix="nereid_stuck_")
    write_identity_model(d, "stuck", extra='parameters { key: "execute_delay_ms" value: { string_value: "20000" } }\n')
    port = free_port()
    srv = Server(["--model-repository", d, "--backend-directory", BACKENDS, "--model-control-mode=explicit",
                  "--load-model=*", "--allow-http=false", "--allow-metrics=false", "--log-info=false",
                  f"--grpc-port={port}", "--grpc-address=127.0.0.1", "--exit-timeout-secs=1"])
    try:
        srv.wait_ready()
        ch = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = pbg.GRPCInferenceServiceStub(ch)
        x = np.array([[1.0]], dtype=np.float32)
        call = stub.ModelInfer.future(infer_request("stuck", [("INPUT0", "FP32", [1, 1], x)]), timeout=30)
        time.sleep(0.5)  # in Execute now
        unload = stub.RepositoryModelUnload.future(pb_unload("stuck"), timeout=30)
        time.sleep(0.3)  # the unload waits for the request
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        while srv.proc.poll() is None and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        assert srv.proc.poll() == 0, srv.text()
        assert time.monotonic() - t0 < 12, "the exit waited for the backend"
        for f in (call, unload):
            with contextlib.suppress(grpc.RpcError):
                f.result(timeout=5)
        ch.close()
        text = srv.text()
        assert "Sanitizer" not in text and "runtime error" not in text, text
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def pb_unload(name):
    from test_grpc import pb

    return pb.RepositoryModelUnloadRequest(model_name=name)
