"""Triton's test-only delay hooks, read from the environment when nereid
starts (docs/grpc.md, "Triton's test hooks"):

  TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC  non-inference RPCs answer late
  TRITONSERVER_DELAY_GRPC_PROCESS              ModelInfer reaches the core late
  TRITONSERVER_DELAY_GRPC_RESPONSE             each stream message is paced
  TRITONSERVER_DELAY_GRPC_NOTIFICATION         a cancellation is acted on late
  TRITONSERVER_DELAY_GRPC_ENQUEUE              a cancelled call's completion
                                               holds the delivering thread
  TRITONSERVER_DELAY_RESPONSE_COMPLETION       (core) every response completes late

Each test starts its own nereid with one hook set and speaks to it
through Triton's own Python client (tritonclient.grpc), whose
client_timeout and stream_timeout are the deadlines the hooks race. Timing checks are lower
bounds the server cannot beat when the hook works (a response no earlier
than the delay after its request), so a slow machine does not fail them;
without the hook each of them fails by seconds. Run by ctest (see
tests/CMakeLists.txt) with NRD_TEST_PYTHON, the python that has
tritonclient, as
    .deps/venv/bin/python -m pytest -q tests/integration/test_grpc_delays.py
"""
import contextlib
import os
import shutil
import tempfile
import threading
import time

import numpy as np
import pytest

from test_grpc import (BACKENDS, EXAMPLES, RPC_TIMEOUT, TEST_BACKENDS, InferenceServerException, Server,
                       grpcclient, square_call, stream_all, tc_inputs, write_identity_model)


@pytest.fixture(scope="module")
def repo():
    """ident (identity), slow (costly: every execution takes 1 s and ignores
    cancellation), cw (cancel_wait: holds a request until the core cancels
    it, then answers CANCELLED) and square_int32 (decoupled), one instance
    each."""
    d = tempfile.mkdtemp(prefix="nereid_grpc_delays_")
    write_identity_model(d, "ident", max_batch_size=0)
    write_identity_model(d, "slow", max_batch_size=0, backend="costly",
                         extra='parameters { key: "exec_us" value: { string_value: "1000000" } }\n')
    shutil.copy(os.path.join(TEST_BACKENDS, "costly", "libtriton_costly.so"), os.path.join(d, "slow"))
    write_identity_model(d, "cw", max_batch_size=0, backend="cancel_wait",
                         extra='parameters { key: "max_wait_ms" value: { string_value: "20000" } }\n')
    shutil.copy(os.path.join(TEST_BACKENDS, "cancel_wait", "libtriton_cancel_wait.so"), os.path.join(d, "cw"))
    shutil.copytree(os.path.join(EXAMPLES, "square_int32"), os.path.join(d, "square_int32"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


HOOKS = ("TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC", "TRITONSERVER_DELAY_GRPC_PROCESS",
         "TRITONSERVER_DELAY_GRPC_RESPONSE", "TRITONSERVER_DELAY_GRPC_NOTIFICATION",
         "TRITONSERVER_DELAY_GRPC_ENQUEUE", "TRITONSERVER_DELAY_RESPONSE_COMPLETION")


@contextlib.contextmanager
def nereid(repo, **env):
    """A nereid serving `repo` over gRPC with exactly the hooks in env set;
    yields a tritonclient InferenceServerClient to it (with .server). It
    must stop cleanly."""
    saved = {k: os.environ.pop(k) for k in HOOKS if k in os.environ}
    os.environ.update(env)
    try:
        srv = Server(["--model-repository", repo, "--backend-directory", BACKENDS, "--allow-http=false",
                      "--allow-metrics=false", "--grpc-port=0", "--grpc-address=127.0.0.1"])
    finally:
        for k in env:
            del os.environ[k]
        os.environ.update(saved)
    client = None
    try:
        srv.wait_ready()
        client = grpcclient.InferenceServerClient(url=f"127.0.0.1:{srv.ports()['grpc']}")
        client.server = srv
        yield client
        client.close()
        client = None
        rc = srv.stop()
        log = srv.text()
        assert rc == 0, log
        for bad in ("AddressSanitizer", "LeakSanitizer", "ThreadSanitizer", "runtime error:"):
            assert bad not in log, log
    finally:
        if client is not None:
            client.close()
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


def ident_call(rid=""):
    return dict(model_name="ident", inputs=tc_inputs([("INPUT0", "FP32", [2], np.array([1, 2], np.float32))]),
                request_id=rid)


def model_call(model):
    return dict(model_name=model, inputs=tc_inputs([("INPUT0", "FP32", [1], np.array([7], np.float32))]))


def stats(client, model):
    """(success, fail) counts of the model's inference statistics. Only use
    on a server where non-inference RPCs are not delayed."""
    s = client.get_inference_statistics(model, client_timeout=RPC_TIMEOUT).model_stats[0]
    return s.inference_stats.success.count, s.inference_stats.fail.count


def expect_deadline(fn):
    with pytest.raises(InferenceServerException) as e:
        fn()
    assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED", e.value


def stream_arrivals(client, call):
    """Seconds from the call to each response of one streamed request."""
    t0 = time.monotonic()
    arrivals = []

    def callback(result, error):
        assert error is None, error
        arrivals.append(time.monotonic() - t0)

    client.start_stream(callback=callback, stream_timeout=RPC_TIMEOUT)
    try:
        client.async_stream_infer(**call)
    finally:
        client.stop_stream()
    return arrivals


def test_server_delay_grpc_response_sec_holds_non_inference_rpcs(repo):
    with nereid(repo, TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC="2") as client:
        # A client timeout shorter than the hook: DEADLINE_EXCEEDED, as
        # Triton's L0_client_timeout expects of every non-inference RPC.
        expect_deadline(lambda: client.is_server_live(client_timeout=1))
        expect_deadline(lambda: client.get_model_metadata("ident", client_timeout=1))
        t0 = time.monotonic()
        assert client.is_server_ready(client_timeout=RPC_TIMEOUT)
        assert time.monotonic() - t0 >= 2.0
        # Inference is not held.
        r = client.infer(**ident_call("fast"), client_timeout=1.5)
        assert r.get_response().id == "fast"
        assert "TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC=2" in client.server.text()


def test_delay_grpc_process_holds_model_infer_and_a_cancel_in_the_window_wins(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_PROCESS="1500") as client:
        before = stats(client, "ident")
        # Cancelled (its deadline) while held: the request never reaches the core.
        expect_deadline(lambda: client.infer(**ident_call("gone"), client_timeout=0.5))
        t0 = time.monotonic()
        assert client.infer(**ident_call("late"), client_timeout=RPC_TIMEOUT).get_response().id == "late"
        assert time.monotonic() - t0 >= 1.5
        # The first request's hold ended before the second's (held in due
        # order), and ident has one instance: had the first run, its
        # statistics would be in before the second's. Those come after the
        # second's response (the backend reports once it has sent it), so
        # they are polled for.
        def counted():
            now = stats(client, "ident")
            return now if now[0] > before[0] else None

        after = wait_for(counted)
        assert after == (before[0] + 1, before[1]), (before, after)
        # ModelStreamInfer is not held by this hook.
        got = stream_all(client, [ident_call("s")], stream_timeout=1.2)
        assert [(r.get_response().id, e) for r, e in got] == [("s", None)]


def test_delay_grpc_response_paces_each_stream_message(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_RESPONSE="400") as client:
        arrivals = stream_arrivals(client, square_call(3, "paced"))
        assert len(arrivals) == 3
        for k, t in enumerate(arrivals, 1):
            assert t >= 0.4 * k, arrivals
        # Pacing is per stream: a stream cancelled with paced messages
        # still waiting does not hold back the next one.
        first = threading.Event()
        client.start_stream(callback=lambda result, error: first.set(), stream_timeout=RPC_TIMEOUT)
        try:
            client.async_stream_infer(**square_call(8, "cut"))
            assert first.wait(RPC_TIMEOUT)
        finally:
            client.stop_stream(cancel_requests=True)
        t1 = time.monotonic()
        got = stream_all(client, [square_call(1, "next")])
        assert len(got) == 1 and got[0][1] is None
        assert 0.4 <= time.monotonic() - t1 < 0.4 * 7
        # Unary calls are not paced.
        assert client.infer(**ident_call("unary"), client_timeout=RPC_TIMEOUT).get_response().id == "unary"


def wait_for(cond, timeout=RPC_TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_delay_grpc_notification_holds_the_cancellation(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_NOTIFICATION="2000") as client:
        _, fail0 = stats(client, "cw")
        t0 = time.monotonic()
        expect_deadline(lambda: client.infer(**model_call("cw"), client_timeout=0.5))
        # cancel_wait answers as soon as the core cancels the request: that
        # happens only after the deadline plus the hook.
        wait_for(lambda: stats(client, "cw")[1] > fail0)
        assert time.monotonic() - t0 >= 2.5


def test_delay_grpc_enqueue_holds_the_thread_of_a_cancelled_calls_response(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_ENQUEUE="2000") as client:
        # slow's one instance runs the first request (1 s, deaf to the
        # cancel); its response finds the call cancelled and holds the
        # instance's thread 2 s more before the second request can run.
        t0 = time.monotonic()
        expect_deadline(lambda: client.infer(**model_call("slow"), client_timeout=0.3))
        r = client.infer(**model_call("slow"), client_timeout=RPC_TIMEOUT)
        assert r.get_response().model_name == "slow"
        assert time.monotonic() - t0 >= 3.0
        # A call that was not cancelled is not held.
        t1 = time.monotonic()
        client.infer(**ident_call(), client_timeout=RPC_TIMEOUT)
        assert time.monotonic() - t1 < 2.0


def test_delay_response_completion_holds_every_response(repo):
    with nereid(repo, TRITONSERVER_DELAY_RESPONSE_COMPLETION="1500") as client:
        t0 = time.monotonic()
        assert client.infer(**ident_call("held"), client_timeout=RPC_TIMEOUT).get_response().id == "held"
        assert time.monotonic() - t0 >= 1.5
        # A cancellation while the response is held: the client has its
        # status, the late response is dropped, the server goes on.
        expect_deadline(lambda: client.infer(**ident_call("cut"), client_timeout=0.5))
        # Decoupled: each response (and the final flag) completes 1.5 s
        # after the one before, on the backend's thread.
        arrivals = stream_arrivals(client, square_call(2, "sq"))
        assert len(arrivals) == 2 and arrivals[1] >= 3.0, arrivals


def test_bad_hook_values_are_ignored_with_a_warning(repo):
    env = {"TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC": "-1", "TRITONSERVER_DELAY_GRPC_PROCESS": "abc",
           "TRITONSERVER_DELAY_GRPC_RESPONSE": "5s", "TRITONSERVER_DELAY_GRPC_NOTIFICATION": "99999999999",
           "TRITONSERVER_DELAY_GRPC_ENQUEUE": "", "TRITONSERVER_DELAY_RESPONSE_COMPLETION": "1e3"}
    with nereid(repo, **env) as client:
        assert client.is_server_live(client_timeout=RPC_TIMEOUT)
        assert client.infer(**ident_call("x"), client_timeout=RPC_TIMEOUT).get_response().id == "x"
        log = client.server.text()
        for name, value in env.items():
            if value:
                assert f"{name}='{value}'" in log and "not delaying" in log, log
