"""OpenTelemetry trace mode (--trace-config mode=opentelemetry): spans as
Triton makes them (InferRequest > model > compute; an ensemble's steps
under the ensemble's span), exported as OTLP/HTTP JSON to a collector run
here; W3C traceparent propagation over HTTP and gRPC (always traced, rate
0 traces only those); resource attributes; the batch processor's size and
time triggers and its last export at shutdown; a collector that is down;
bad settings. Requests go through tritonclient (HTTP headers and gRPC
metadata carry the traceparent).

Run by ctest with NEREID_BIN, NEREID_BACKEND_DIR and NEREID_EXAMPLES set
(see tests/CMakeLists.txt).
"""
import contextlib
import http.server
import json
import queue
import threading
import time

import pytest

from test_nereid_cli import BACKENDS, EXAMPLES, Server, listening_ports, refusing_port, run, running
from test_tracing import client, inputs_of, simple_inputs

TRACEPARENT = "00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01"
ROOT_HTTP = ["HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE", "HTTP_SEND_START", "HTTP_SEND_END"]
ROOT_GRPC = ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END", "INFER_RESPONSE_COMPLETE", "GRPC_SEND_START",
             "GRPC_SEND_END"]
MODEL = ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
COMPUTE = ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]


class Collector:
    """An OTLP/HTTP receiver: keeps every POST (path, content type, JSON)."""

    def __init__(self):
        self.posts = []
        self.cv = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.cv:
                    outer.posts.append((self.path, self.headers["Content-Type"], json.loads(body)))
                    outer.cv.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spans(self):
        with self.cv:
            return self.spans_locked()

    def wait_spans(self, n, timeout=20):
        deadline = time.monotonic() + timeout
        with self.cv:
            while len(self.spans_locked()) < n and time.monotonic() < deadline:
                self.cv.wait(0.1)
        return self.spans()

    def spans_locked(self):
        return [sp for _, _, b in self.posts for rs in b["resourceSpans"] for ss in rs["scopeSpans"]
                for sp in ss["spans"]]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


@contextlib.contextmanager
def nereid(collector_port, *flags, delay_ms=100):
    s = Server([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-metrics=false",
                "--http-port=0", "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                "--trace-config", "mode=opentelemetry", "--trace-config", "level=TIMESTAMPS",
                "--trace-config", f"opentelemetry,url=http://127.0.0.1:{collector_port}/v1/traces",
                "--trace-config", f"opentelemetry,bsp_schedule_delay={delay_ms}", *flags])
    with running(s) as lines:
        ports = listening_ports(lines)
        s.http, s.grpc = ports["http"], ports["grpc"]
        yield s


def infer_simple(s, model="simple", headers=None):
    """simple (or model) over HTTP through tritonclient, with headers."""
    with client(s) as c:
        r = c.infer(model, inputs_of("http", **simple_inputs()), headers=headers)
    assert r.as_numpy("OUTPUT0").tolist() == [[2 * x for x in range(16)]]


def grpc_simple(s, headers=None, stream=False):
    """simple over gRPC through tritonclient, headers as call metadata;
    on the stream (start_stream, async_stream_infer) where stream says."""
    with client(s, "grpc") as c:
        if stream:
            got = queue.Queue()
            c.start_stream(callback=lambda result, error: got.put((result, error)), headers=headers)
            c.async_stream_infer("simple", inputs_of("grpc", **simple_inputs()))
            c.stop_stream()
            assert got.qsize() == 1
            _, error = got.get_nowait()
            assert error is None, error
        else:
            c.infer("simple", inputs_of("grpc", **simple_inputs()), headers=headers)


def names(span):
    return [e["name"] for e in span["events"]]


def tree(spans):
    """{parent name: sorted child names} and the root spans."""
    by_id = {sp["spanId"]: sp for sp in spans}
    kids = {}
    for sp in spans:
        parent = by_id.get(sp.get("parentSpanId", ""))
        if parent:
            kids.setdefault(parent["name"], []).append(sp["name"])
    return {k: sorted(v) for k, v in kids.items()}, [sp for sp in spans if sp.get("parentSpanId", "") not in by_id]


def check_simple_trace(spans, root_events):
    assert sorted(sp["name"] for sp in spans) == ["InferRequest", "compute", "simple"], spans
    assert len({sp["traceId"] for sp in spans}) == 1
    kids, roots = tree(spans)
    assert kids == {"InferRequest": ["simple"], "simple": ["compute"]}, spans
    by_name = {sp["name"]: sp for sp in spans}
    assert names(by_name["InferRequest"]) == root_events
    assert names(by_name["simple"]) == MODEL
    assert names(by_name["compute"]) == COMPUTE
    attrs = {a["key"]: a["value"] for a in by_name["simple"]["attributes"]}
    assert attrs["triton.model_name"] == {"stringValue": "simple"}
    assert attrs["triton.model_version"] == {"intValue": "1"}
    for sp in spans:
        assert int(sp["startTimeUnixNano"]) <= int(sp["endTimeUnixNano"])
        # Wall-clock times: within a minute of now.
        assert abs(int(sp["startTimeUnixNano"]) / 1e9 - time.time()) < 60
    root, model, compute = by_name["InferRequest"], by_name["simple"], by_name["compute"]
    assert int(root["startTimeUnixNano"]) <= int(model["startTimeUnixNano"]) <= int(compute["startTimeUnixNano"])
    assert int(compute["endTimeUnixNano"]) <= int(model["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])
    return roots[0]


def test_http_grpc_and_streamed_requests_become_triton_spans(collector):
    with nereid(collector.port, "--trace-config", "rate=1", "--trace-config",
                "opentelemetry,resource=service.name=test_triton", "--trace-config",
                "opentelemetry,resource=test.key=test.value") as s:
        infer_simple(s)
        root = check_simple_trace(collector.wait_spans(3), ROOT_HTTP)
        assert "parentSpanId" not in root and len(root["traceId"]) == 32 and root["traceId"] != "0" * 32
        path, ctype, body = collector.posts[0]
        assert path == "/v1/traces" and ctype == "application/json"
        res = body["resourceSpans"][0]["resource"]["attributes"]
        assert {"key": "service.name", "value": {"stringValue": "test_triton"}} in res
        assert {"key": "test.key", "value": {"stringValue": "test.value"}} in res
        grpc_simple(s)
        check_simple_trace(collector.wait_spans(6)[3:], ROOT_GRPC)
        grpc_simple(s, stream=True)
        check_simple_trace(collector.wait_spans(9)[6:], ROOT_GRPC)


def test_client_context_is_propagated_and_always_traced(collector):
    # rate=0: only requests that bring a context are traced.
    with nereid(collector.port, "--trace-config", "rate=0") as s:
        infer_simple(s)
        grpc_simple(s)
        time.sleep(0.5)
        assert collector.spans() == []
        infer_simple(s, headers={"traceparent": TRACEPARENT})
        root = check_simple_trace(collector.wait_spans(3), ROOT_HTTP)
        assert root["traceId"] == TRACEPARENT.split("-")[1]
        assert root["parentSpanId"] == TRACEPARENT.split("-")[2]
        grpc_simple(s, headers={"traceparent": TRACEPARENT})
        root = check_simple_trace(collector.wait_spans(6)[3:], ROOT_GRPC)
        assert root["traceId"] == TRACEPARENT.split("-")[1] and root["parentSpanId"] == TRACEPARENT.split("-")[2]
        # A malformed traceparent is ignored (and so, at rate 0, not traced).
        for bad in ("00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424", "zz", "00-" + "0" * 32 + "-b7ad6b7169242424-01"):
            infer_simple(s, headers={"traceparent": bad})
        time.sleep(0.5)
        assert len(collector.spans()) == 6
        # The trace extension: the mode, and rate 0 is valid here.
        with client(s) as c:
            setting = c.get_trace_settings()
        assert setting["trace_mode"] == "opentelemetry" and setting["trace_rate"] == "0"


def test_ensemble_steps_are_children_of_the_ensemble_span(collector):
    with nereid(collector.port, "--trace-config", "rate=1") as s:
        infer_simple(s, model="simple_ensemble", headers={"traceparent": TRACEPARENT})
        spans = collector.wait_spans(6)
        assert len(spans) == 6, spans
        kids, roots = tree(spans)
        assert kids == {"InferRequest": ["simple_ensemble"], "simple_ensemble": ["simple", "simple"],
                        "simple": ["compute", "compute"]}, spans
        assert len(roots) == 1 and roots[0]["name"] == "InferRequest"
        ens = next(sp for sp in spans if sp["name"] == "simple_ensemble")
        assert names(ens) == MODEL
        attrs = {a["key"]: a["value"] for a in ens["attributes"]}
        steps = [sp for sp in spans if sp["name"] == "simple"]
        for st in steps:
            sa = {a["key"]: a["value"] for a in st["attributes"]}
            assert sa["triton.trace_parent_id"] == attrs["triton.trace_id"]


def test_a_full_batch_is_exported_at_once_and_the_rest_at_shutdown(collector):
    with nereid(collector.port, "--trace-config", "rate=1", "--trace-config",
                "opentelemetry,bsp_max_export_batch_size=3", delay_ms=600000) as s:
        # 60 s: generous for a loaded machine, and still far from the
        # 10-minute schedule delay a batch that is not full waits for.
        infer_simple(s)
        assert len(collector.wait_spans(3, timeout=60)) == 3  # the batch is full: no 10-minute wait
        infer_simple(s)
        assert len(collector.wait_spans(6, timeout=60)) == 6
        # Half a batch waits for the schedule delay, or for the shutdown.
        s_spans = len(collector.spans())
        infer_simple(s)  # 3 spans: a full batch again
        infer_simple(s, headers={"traceparent": TRACEPARENT})
        assert len(collector.wait_spans(s_spans + 6, timeout=60)) == s_spans + 6


def test_spans_left_at_shutdown_are_exported(collector):
    with nereid(collector.port, "--trace-config", "rate=1", delay_ms=600000):
        pass
    assert collector.spans() == []
    with nereid(collector.port, "--trace-config", "rate=1", delay_ms=600000) as s:
        infer_simple(s)
        time.sleep(0.3)
        assert collector.spans() == []  # the next export is 10 minutes away
    assert len(collector.spans()) == 3


def test_a_collector_that_is_down_costs_nothing_but_the_spans():
    with refusing_port() as dead:
        with nereid(dead, "--trace-config", "rate=1") as s:
            for _ in range(3):
                infer_simple(s)
            # The export (100 ms schedule delay) fails: polled, not a 1 s sleep.
            deadline = time.monotonic() + 60
            while not ("OpenTelemetry export of" in s.text() and "failed" in s.text()):
                assert time.monotonic() < deadline, s.text()
                time.sleep(0.05)
            infer_simple(s)
            t0 = time.monotonic()
        assert time.monotonic() - t0 < 15  # the last export's one short try


@pytest.mark.parametrize("flags,code,message", [
    (["--trace-config=opentelemetry,url=https://collector:4318/v1/traces"], 1, "https is not supported"),
    (["--trace-config=opentelemetry,url=ftp://collector/v1/traces"], 1, "only http:// URLs"),
    (["--trace-config=opentelemetry,url=http://collector:99999/v1/traces"], 1, "bad port"),
    (["--trace-config=opentelemetry,bsp_max_queue_size=4", "--trace-config=opentelemetry,bsp_max_export_batch_size=8"],
     1, "must not exceed bsp_max_queue_size"),
    (["--trace-config=opentelemetry,bsp_schedule_delay=soon"], 2, "opentelemetry,bsp_schedule_delay=soon"),
    (["--trace-config=opentelemetry,resource=novalue"], 2, "opentelemetry,resource=<key>=<value>"),
    (["--trace-config=mode=jaeger"], 2, "mode=triton or mode=opentelemetry"),
])
def test_bad_opentelemetry_settings_stop_the_server(flags, code, message):
    got, _, err = run([f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-http=false",
                       "--allow-grpc=false", "--allow-metrics=false", "--trace-config=mode=opentelemetry", *flags])
    assert got == code and message in err, (got, err)
