"""Triton's test-only delay hooks, read from the environment when nereid
starts (docs/grpc.md, "Triton's test hooks"):

  TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC  non-inference RPCs answer late
  TRITONSERVER_DELAY_GRPC_PROCESS              ModelInfer reaches the core late
  TRITONSERVER_DELAY_GRPC_RESPONSE             each stream message is paced
  TRITONSERVER_DELAY_GRPC_NOTIFICATION         a cancellation is acted on late
  TRITONSERVER_DELAY_GRPC_ENQUEUE              a cancelled call's completion
                                               holds the delivering thread
  TRITONSERVER_DELAY_RESPONSE_COMPLETION       (core) every response completes late

Each test starts its own nereid with one hook set. Timing checks are lower
bounds the server cannot beat when the hook works (a response no earlier
than the delay after its request), so a slow machine does not fail them;
without the hook each of them fails by seconds. Run by ctest (see
tests/CMakeLists.txt) as
    /usr/bin/python3 -m pytest -q tests/integration/test_grpc_delays.py
"""
import contextlib
import os
import shutil
import tempfile
import time

import numpy as np
import pytest

from test_grpc import (BACKENDS, EXAMPLES, RPC_TIMEOUT, TEST_BACKENDS, Server, grpc, infer_request, pb,
                       pbg, square_request, write_identity_model)


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
    yields its stub (with .server). It must stop cleanly."""
    saved = {k: os.environ.pop(k) for k in HOOKS if k in os.environ}
    os.environ.update(env)
    try:
        srv = Server(["--model-repository", repo, "--backend-directory", BACKENDS, "--allow-http=false",
                      "--allow-metrics=false", "--grpc-port=0", "--grpc-address=127.0.0.1"])
    finally:
        for k in env:
            del os.environ[k]
        os.environ.update(saved)
    ch = None
    try:
        srv.wait_ready()
        ch = grpc.insecure_channel(f"127.0.0.1:{srv.ports()['grpc']}")
        grpc.channel_ready_future(ch).result(timeout=RPC_TIMEOUT)
        stub = pbg.GRPCInferenceServiceStub(ch)
        stub.server = srv
        yield stub
        ch.close()
        ch = None
        rc = srv.stop()
        log = srv.text()
        assert rc == 0, log
        for bad in ("AddressSanitizer", "LeakSanitizer", "ThreadSanitizer", "runtime error:"):
            assert bad not in log, log
    finally:
        if ch is not None:
            ch.close()
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


def ident_request(rid=""):
    return infer_request("ident", [("INPUT0", "FP32", [2], np.array([1, 2], np.float32))], rid=rid)


def model_request(model):
    return infer_request(model, [("INPUT0", "FP32", [1], np.array([7], np.float32))])


def stats(stub, model):
    """(success, fail) counts of the model's inference statistics. Only use
    on a server where non-inference RPCs are not delayed."""
    s = stub.ModelStatistics(pb.ModelStatisticsRequest(name=model), timeout=RPC_TIMEOUT).model_stats[0]
    return s.inference_stats.success.count, s.inference_stats.fail.count


def expect_deadline(fn):
    with pytest.raises(grpc.RpcError) as e:
        fn()
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.value


def test_server_delay_grpc_response_sec_holds_non_inference_rpcs(repo):
    with nereid(repo, TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC="2") as stub:
        # A client timeout shorter than the hook: DEADLINE_EXCEEDED, as
        # Triton's L0_client_timeout expects of every non-inference RPC.
        expect_deadline(lambda: stub.ServerLive(pb.ServerLiveRequest(), timeout=1))
        expect_deadline(lambda: stub.ModelMetadata(pb.ModelMetadataRequest(name="ident"), timeout=1))
        t0 = time.monotonic()
        assert stub.ServerReady(pb.ServerReadyRequest(), timeout=RPC_TIMEOUT).ready
        assert time.monotonic() - t0 >= 2.0
        # Inference is not held.
        r = stub.ModelInfer(ident_request("fast"), timeout=1.5)
        assert r.id == "fast"
        assert "TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC=2" in stub.server.text()


def test_delay_grpc_process_holds_model_infer_and_a_cancel_in_the_window_wins(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_PROCESS="1500") as stub:
        before = stats(stub, "ident")
        # Cancelled (its deadline) while held: the request never reaches the core.
        expect_deadline(lambda: stub.ModelInfer(ident_request("gone"), timeout=0.5))
        t0 = time.monotonic()
        assert stub.ModelInfer(ident_request("late"), timeout=RPC_TIMEOUT).id == "late"
        assert time.monotonic() - t0 >= 1.5
        # The first request's hold ended before the second's (held in due
        # order), and ident has one instance: had the first run, its
        # statistics would be in before the second's. Those come after the
        # second's response (the backend reports once it has sent it), so
        # they are polled for.
        def counted():
            now = stats(stub, "ident")
            return now if now[0] > before[0] else None

        after = wait_for(counted)
        assert after == (before[0] + 1, before[1]), (before, after)
        # ModelStreamInfer is not held by this hook.
        got = list(stub.ModelStreamInfer(iter([ident_request("s")]), timeout=1.2))
        assert [g.infer_response.id for g in got] == ["s"]


def test_delay_grpc_response_paces_each_stream_message(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_RESPONSE="400") as stub:
        t0 = time.monotonic()
        arrivals = []
        for g in stub.ModelStreamInfer(iter([square_request(3, "paced")]), timeout=RPC_TIMEOUT):
            assert not g.error_message, g.error_message
            arrivals.append(time.monotonic() - t0)
        assert len(arrivals) == 3
        for k, t in enumerate(arrivals, 1):
            assert t >= 0.4 * k, arrivals
        # Pacing is per stream: a stream cancelled with paced messages
        # still waiting does not hold back the next one.
        call = stub.ModelStreamInfer(iter([square_request(8, "cut")]), timeout=RPC_TIMEOUT)
        next(call)
        call.cancel()
        t1 = time.monotonic()
        got = list(stub.ModelStreamInfer(iter([square_request(1, "next")]), timeout=RPC_TIMEOUT))
        assert len(got) == 1 and not got[0].error_message
        assert 0.4 <= time.monotonic() - t1 < 0.4 * 7
        # Unary calls are not paced.
        assert stub.ModelInfer(ident_request("unary"), timeout=RPC_TIMEOUT).id == "unary"


def wait_for(cond, timeout=RPC_TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_delay_grpc_notification_holds_the_cancellation(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_NOTIFICATION="2000") as stub:
        _, fail0 = stats(stub, "cw")
        t0 = time.monotonic()
        expect_deadline(lambda: stub.ModelInfer(model_request("cw"), timeout=0.5))
        # cancel_wait answers as soon as the core cancels the request: that
        # happens only after the deadline plus the hook.
        wait_for(lambda: stats(stub, "cw")[1] > fail0)
        assert time.monotonic() - t0 >= 2.5


def test_delay_grpc_enqueue_holds_the_thread_of_a_cancelled_calls_response(repo):
    with nereid(repo, TRITONSERVER_DELAY_GRPC_ENQUEUE="2000") as stub:
        # slow's one instance runs the first request (1 s, deaf to the
        # cancel); its response finds the call cancelled and holds the
        # instance's thread 2 s more before the second request can run.
        t0 = time.monotonic()
        expect_deadline(lambda: stub.ModelInfer(model_request("slow"), timeout=0.3))
        r = stub.ModelInfer(model_request("slow"), timeout=RPC_TIMEOUT)
        assert r.model_name == "slow"
        assert time.monotonic() - t0 >= 3.0
        # A call that was not cancelled is not held.
        t1 = time.monotonic()
        stub.ModelInfer(ident_request(), timeout=RPC_TIMEOUT)
        assert time.monotonic() - t1 < 2.0


def test_delay_response_completion_holds_every_response(repo):
    with nereid(repo, TRITONSERVER_DELAY_RESPONSE_COMPLETION="1500") as stub:
        t0 = time.monotonic()
        assert stub.ModelInfer(ident_request("held"), timeout=RPC_TIMEOUT).id == "held"
        assert time.monotonic() - t0 >= 1.5
        # A cancellation while the response is held: the client has its
        # status, the late response is dropped, the server goes on.
        expect_deadline(lambda: stub.ModelInfer(ident_request("cut"), timeout=0.5))
        # Decoupled: each response (and the final flag) completes 1.5 s
        # after the one before, on the backend's thread.
        t1 = time.monotonic()
        arrivals = [time.monotonic() - t1
                    for _ in stub.ModelStreamInfer(iter([square_request(2, "sq")]), timeout=RPC_TIMEOUT)]
        assert len(arrivals) == 2 and arrivals[1] >= 3.0, arrivals


def test_bad_hook_values_are_ignored_with_a_warning(repo):
    env = {"TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC": "-1", "TRITONSERVER_DELAY_GRPC_PROCESS": "abc",
           "TRITONSERVER_DELAY_GRPC_RESPONSE": "5s", "TRITONSERVER_DELAY_GRPC_NOTIFICATION": "99999999999",
           "TRITONSERVER_DELAY_GRPC_ENQUEUE": "", "TRITONSERVER_DELAY_RESPONSE_COMPLETION": "1e3"}
    with nereid(repo, **env) as stub:
        assert stub.ServerLive(pb.ServerLiveRequest(), timeout=RPC_TIMEOUT).live
        assert stub.ModelInfer(ident_request("x"), timeout=RPC_TIMEOUT).id == "x"
        log = stub.server.text()
        for name, value in env.items():
            if value:
                assert f"{name}='{value}'" in log and "not delaying" in log, log
