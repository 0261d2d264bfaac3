"""Memory and size bounds, and Triton's hardening fixes from r25.07 to
r26.08 checked against nereid (issue 53).

Every test runs nereid under the memory watchdog (security_helpers.py):
an attack that makes it swell past the limit fails the test. The raw
attack corpus, tests/security/corpus/ (written by
tests/security/make_corpus.py), is replayed in one test; the other tests
use tritonclient where it can send the request, and say why where they
build it by hand.
"""
import gzip
import json
import os
import queue
import shutil
import socket
import struct
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from security_helpers import SANITIZED, WatchedServer

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(os.path.dirname(HERE), "security", "corpus")
MIB = 1024 * 1024
ECHO_MAX = 4096  # NRD_SRV_ERROR_ECHO_MAX


@pytest.fixture(scope="module")
def srv():
    with WatchedServer() as s:
        yield s


def http_client(s):
    return httpclient.InferenceServerClient(s.url("http"), network_timeout=60)


def grpc_client(s):
    return grpcclient.InferenceServerClient(s.url("grpc"))


def grpc_stub(s):
    channel = grpc.insecure_channel(s.url("grpc"), options=[("grpc.max_send_message_length", -1),
                                                            ("grpc.max_receive_message_length", -1)])
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def raw_exchange(port, data, timeout=30):
    """Sends data on a new connection and reads until the server closes:
    (status, body, seconds)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered early and closed: read what came
        chunks = []
        while True:
            try:
                b = sock.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
    resp = b"".join(chunks)
    head, _, body = resp.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, body, time.monotonic() - t0


def rss_mib(s):
    with open(f"/proc/{s.server.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


# ---- the corpus ---------------------------------------------------------------------------------

def test_attack_corpus_replays_with_expected_outcomes(srv):
    """Each raw request of the corpus gets its expected status and text,
    in time, and the server stays up and under its memory limit."""
    with open(os.path.join(CORPUS, "expected.json")) as f:
        cases = json.load(f)
    assert len(cases) >= 25
    failures = []
    for name, want in sorted(cases.items()):
        with open(os.path.join(CORPUS, name), "rb") as f:
            data = f.read()
        status, body, secs = raw_exchange(srv.ports["http"], data)
        text = body.decode("utf-8", "replace")
        if status != want["status"] or want["contains"] not in text:
            failures.append(f"{name}: got {status} {text[:300]!r}, want {want['status']} {want['contains']!r}")
        if secs > want.get("max_seconds", 20):
            failures.append(f"{name}: took {secs:.1f} s")
        if "max_body" in want and len(body) > want["max_body"]:
            failures.append(f"{name}: reply of {len(body)} bytes")
        assert srv.alive(), f"{name} took the server down\n{srv.log()}"
    assert not failures, "\n".join(failures)
    assert http_client(srv).is_server_live()


# ---- finding 1: compressed gRPC messages ---------------------------------------------------------

def test_grpc_gzip_bomb_refused_at_the_decompression_limit():
    """A 70 KB gzip message that inflates to 68 MiB (past the default 64
    MiB) is refused with Triton's decompression sentence; before the
    limit, gRPC's 2 GiB message size was the only bound. The raw stub
    sends the bytes without building a tensor client-side."""
    with WatchedServer() as s:
        channel, stub = grpc_stub(s)
        n = (64 * MIB + 4 * MIB) // 4
        req = service_pb2.ModelInferRequest(model_name="identity_fp32")
        inp = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, n])
        del inp
        req.raw_input_contents.append(bytes(n * 4))
        for algo in (grpc.Compression.Gzip, grpc.Compression.Deflate):
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelInfer(req, timeout=60, compression=algo)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
            assert e.value.details().startswith(
                "Decompressed data size exceeds the maximum allowed value of 67108864 bytes."), e.value.details()
        channel.close()
        if not SANITIZED:  # shadow memory and quarantine make the figure meaningless there
            assert s.peak_mib() < 300, s.peak_mib()


def test_grpc_decompression_limit_flag():
    """--grpc-max-decompressed-size sets the bound; a message that fits is
    served compressed, one past it is refused."""
    with WatchedServer(["--grpc-max-decompressed-size=1048576"]) as s:
        c = grpc_client(s)
        for n, ok in ((1024 * 1024 // 4 - 64, True), (1024 * 1024 // 4 + 1024, False)):
            x = np.zeros((1, n), np.float32)
            i = grpcclient.InferInput("INPUT0", [1, n], "FP32")
            i.set_data_from_numpy(x)
            if ok:
                r = c.infer("identity_fp32", [i], compression_algorithm="gzip")
                assert r.as_numpy("OUTPUT0").shape == (1, n)
            else:
                with pytest.raises(InferenceServerException) as e:
                    c.infer("identity_fp32", [i], compression_algorithm="gzip")
                assert "Decompressed data size exceeds the maximum allowed value of 1048576 bytes." in str(e.value)
                assert e.value.status() == "StatusCode.RESOURCE_EXHAUSTED"


def test_http_gzip_bomb_sentence(srv):
    """HTTP's decompression limit, with Triton's sentence (server
    cd0e3a676). tritonclient compresses only what it builds, so the bomb
    goes by hand."""
    p = "/v2/models/identity_fp32/infer"
    bomb = gzip.compress(b" " * (65 * MIB), 9)
    data = (f"POST {p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(bomb)}\r\n\r\n").encode() + bomb
    status, body, _ = raw_exchange(srv.ports["http"], data)
    assert status == 400
    assert json.loads(body)["error"] == ("Decompressed data size exceeds the maximum allowed value of 67108864 "
                                         "bytes. Use --http-max-input-size to increase the limit.")


def test_failed_compressed_requests_keep_no_memory():
    """Triton's server 669cef083: every failed compressed request kept its
    buffer. Fifty bombs past an 8 MiB limit and fifty corrupt bodies: the
    resident set ends where it started (within allocator slack)."""
    with WatchedServer(["--http-max-input-size=8388608"]) as s:
        bomb = gzip.compress(b"\0" * (9 * MIB), 9)
        corrupt = gzip.compress(b"\0" * (4 * MIB), 9)[:-40] + b"x" * 40

        def send(body):
            data = (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
            return raw_exchange(s.ports["http"], data)[0]

        for _ in range(5):
            assert send(bomb) == 400 and send(corrupt) == 400
        base = rss_mib(s)
        for _ in range(50):
            assert send(bomb) == 400
            assert send(corrupt) == 400
        grown = rss_mib(s) - base
        # Under ASan freed memory waits in its quarantine; LeakSanitizer
        # checks the frees there instead.
        if not SANITIZED:
            assert grown < 24, f"resident set grew {grown:.1f} MiB over 100 failed compressed requests"


# ---- finding 2: classification ---------------------------------------------------------------------

def test_classification_beyond_the_bound_refused_http_and_grpc(srv):
    """Classifying 8 x 1,000,000 FP32 asks for 8 million strings (hundreds
    of MiB with their JSON); Triton refuses more than 1,000,000 elements
    (server 3ef606248) with INVALID_ARG."""
    n = 1000000
    x = np.zeros((8, n), np.float32)
    h = http_client(srv)
    i = httpclient.InferInput("INPUT0", [8, n], "FP32")
    i.set_data_from_numpy(x, binary_data=True)
    with pytest.raises(InferenceServerException) as e:
        h.infer("identity_fp32", [i], outputs=[httpclient.InferRequestedOutput("OUTPUT0", class_count=n)])
    assert e.value.status() == "400"
    assert "classification output tensor too large" in str(e.value)
    g = grpc_client(srv)
    gi = grpcclient.InferInput("INPUT0", [8, n], "FP32")
    gi.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as e:
        g.infer("identity_fp32", [gi], outputs=[grpcclient.InferRequestedOutput("OUTPUT0", class_count=n)])
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "classification output tensor too large" in str(e.value)
    assert srv.alive()


def test_classification_at_the_bound_served(srv):
    """Exactly 1,000,000 elements is still classified (Triton's bound is
    'more than')."""
    n = 1000000
    x = np.arange(n, dtype=np.float32).reshape(1, n)
    g = grpc_client(srv)
    gi = grpcclient.InferInput("INPUT0", [1, n], "FP32")
    gi.set_data_from_numpy(x)
    r = g.infer("identity_fp32", [gi], outputs=[grpcclient.InferRequestedOutput("OUTPUT0", class_count=2)])
    assert [v.decode() for v in r.as_numpy("OUTPUT0").reshape(-1)] == ["999999.000000:999999", "999998.000000:999998"]


# ---- finding 3: long messages end the call ------------------------------------------------------

def test_grpc_error_echoing_a_long_model_name_ends(srv):
    """A 200 KB model name echoed into grpc-message did not fit in the
    HTTP/2 header block: the call never ended. Now the message is cut at
    4 KiB, keeping the start of Triton's sentence."""
    g = grpc_client(srv)
    name = "m" * 200000
    for call in (lambda: g.get_model_metadata(name, client_timeout=15),
                 lambda: g.get_model_config(name, client_timeout=15),
                 lambda: g.is_model_ready(name, client_timeout=15)):
        try:
            call()
        except InferenceServerException as e:
            assert e.status() != "StatusCode.DEADLINE_EXCEEDED", "the call never ended"
            msg = e.message()
            assert msg.startswith("Request for unknown model: 'mmmm"), msg[:200]
            assert msg.endswith("..."), msg[-50:]
            assert len(msg) <= ECHO_MAX + 3, len(msg)
    i = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    i.set_data_from_numpy(np.zeros((1, 4), np.float32))
    with pytest.raises(InferenceServerException) as e:
        g.infer(name, [i], client_timeout=15)
    assert e.value.status() == "StatusCode.NOT_FOUND", e.value
    assert e.value.message().startswith("Request for unknown model: 'mmm")
    # Percent-encoded bytes count against the budget too.
    with pytest.raises(InferenceServerException) as e:
        g.get_model_metadata("\u00e9" * 50000, client_timeout=15)
    assert e.value.status() == "StatusCode.NOT_FOUND", e.value
    assert e.value.message().startswith("Request for unknown model: '\u00e9")


def test_http_error_echo_is_cut(srv):
    """An error that echoes a long input name is cut in the HTTP body too,
    on a UTF-8 boundary, and a short one is whole."""
    h = http_client(srv)
    for name in ("N" * 100000, "\u00e9" * 50000):
        i = httpclient.InferInput(name, [1, 4], "FP32")
        i.set_data_from_numpy(np.zeros((1, 4), np.float32), binary_data=False)
        with pytest.raises(InferenceServerException) as e:
            h.infer("identity_fp32", [i])
        msg = e.value.message()
        assert e.value.status() == "400"
        assert msg.endswith("...") and len(msg.encode()) <= ECHO_MAX + 3, len(msg)
        assert msg.encode().decode("utf-8")  # whole characters
    i = httpclient.InferInput("X" * 100, [1, 4], "FP32")
    i.set_data_from_numpy(np.zeros((1, 4), np.float32), binary_data=False)
    with pytest.raises(InferenceServerException) as e:
        h.infer("identity_fp32", [i])
    assert not e.value.message().endswith("...")


# ---- Triton's fixes, gRPC -------------------------------------------------------------------------

def test_grpc_many_bytes_contents_elements(srv):
    """Server 2f65837f7: a BYTES input of many bytes_contents elements is
    serialized without quadratic growth. tritonclient sends BYTES as raw
    contents, so the message is built with its protos."""
    channel, stub = grpc_stub(srv)
    n = 400000
    req = service_pb2.ModelInferRequest(model_name="identity_bytes")
    inp = req.inputs.add(name="INPUT0", datatype="BYTES", shape=[1, n])
    inp.contents.bytes_contents.extend([b"ab"] * n)
    t0 = time.monotonic()
    resp = stub.ModelInfer(req, timeout=60)
    assert time.monotonic() - t0 < 20
    raw = resp.raw_output_contents[0]
    assert len(raw) == n * 6 and raw[:6] == struct.pack("<I", 2) + b"ab"
    # Fewer strings than the shape says: refused, not read past.
    req2 = service_pb2.ModelInferRequest(model_name="identity_bytes")
    inp = req2.inputs.add(name="INPUT0", datatype="BYTES", shape=[1, 3])
    inp.contents.bytes_contents.extend([b"a"])
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req2, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    channel.close()


def test_grpc_shape_overflow_refused(srv):
    """Core 83aa1ef: element counts and byte sizes that overflow int64 are
    refused with INVALID_ARGUMENT, never computed with wrapped values.
    tritonclient derives the shape from the data, so the protos go by
    hand."""
    channel, stub = grpc_stub(srv)
    for shape in ([4294967296, 4294967296, 8], [1, 4611686018427387904], [1, 1 << 62]):
        req = service_pb2.ModelInferRequest(model_name="identity_fp32")
        req.inputs.add(name="INPUT0", datatype="FP32", shape=shape)
        req.raw_input_contents.append(bytes(16))
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(req, timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (shape, e.value)
    channel.close()
    assert srv.alive()


def test_grpc_duplicate_and_many_outputs(srv):
    """Core e93e4a9: a repeated output name is refused with Triton's
    sentence; 100,000 distinct names are refused quickly (the duplicate
    check is no longer quadratic)."""
    channel, stub = grpc_stub(srv)
    req = service_pb2.ModelInferRequest(model_name="identity_fp32")
    req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    req.raw_input_contents.append(bytes(16))
    req.outputs.add(name="OUTPUT0")
    req.outputs.add(name="OUTPUT0")
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "output 'OUTPUT0' already exists in request" in e.value.details()
    del req.outputs[:]
    for k in range(100000):
        req.outputs.add(name=f"O{k}")
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req, timeout=30)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert time.monotonic() - t0 < 5
    channel.close()


def test_grpc_stream_with_triton_grpc_error_header_survives_errors_and_cancel(srv):
    """Server c1b7cb73c fixed a use-after-free when a stream in Triton's
    "triton_grpc_error" mode ended on an error while responses were in
    flight. Nereid does not implement that mode (the header is ignored:
    errors stay in-stream); the same race here is a stream of a decoupled
    model's many responses, errors among them, cancelled mid-flight. The
    sanitizer builds check the memory."""
    for _ in range(3):
        g = grpc_client(srv)
        got = queue.Queue()
        g.start_stream(callback=lambda result, error: got.put((result, error)), headers={"triton_grpc_error": "true"})
        ins = [grpcclient.InferInput("IN", [1000], "INT32"), grpcclient.InferInput("DELAY", [1000], "UINT32"),
               grpcclient.InferInput("WAIT", [1], "UINT32")]
        ins[0].set_data_from_numpy(np.arange(1000, dtype=np.int32))
        ins[1].set_data_from_numpy(np.zeros(1000, np.uint32))
        ins[2].set_data_from_numpy(np.zeros(1, np.uint32))
        g.async_stream_infer("repeat_int32", ins, request_id="a")
        g.async_stream_infer("no_such_model", ins, request_id="bad")
        g.async_stream_infer("repeat_int32", ins, request_id="b")
        errors = responses = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (errors == 0 or responses < 10):
            try:
                r, e = got.get(timeout=5)
            except queue.Empty:
                break
            errors += e is not None
            responses += r is not None
        # The unknown model's error arrived in-stream and the stream went on.
        assert errors == 1 and responses >= 10, (errors, responses)
        g.stop_stream(cancel_requests=True)
        g.close()
    assert http_client(srv).is_server_live()


# ---- Triton's fixes, HTTP ---------------------------------------------------------------------------

def test_chunk_count_capped_at_65536(srv):
    """Server 13480cbf3: a body of more than 65536 non-empty chunks gets
    400 and Triton's sentence, and the connection closes; 65536 chunks are
    served. tritonclient never sends chunked bodies, so they go by hand."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                   "data": [1, 2, 3, 4]}]}).encode()
    head = (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    for n, want in ((65536, 200), (65537, 400), (200000, 400)):
        padded = body + b" " * (n - len(body))
        data = head + b"".join(b"1\r\n%c\r\n" % c for c in padded) + b"0\r\n\r\n"
        status, out, _ = raw_exchange(srv.ports["http"], data)
        assert status == want, (n, status, out[:200])
        if want == 400:
            assert json.loads(out)["error"] == ("Chunked request body exceeds maximum of 65536 non-empty chunks. "
                                                "Send fewer or larger HTTP chunks.")
    # Empty chunk-extensions and large chunks do not count against it.
    data = head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    assert raw_exchange(srv.ports["http"], data)[0] == 200


def test_inference_header_length_read_as_triton_reads_it(srv):
    """Server 10f2a691a / 2d64d2deb: Inference-Header-Content-Length is
    read as std::stoi reads it, each bad value with Triton's sentence.
    tritonclient always sends a correct value, so these go by hand."""
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                   "data": [1, 2, 3, 4]}]}).encode()
    cases = {
        "99999999999": "Unable to parse Inference-Header-Content-Length, value is out of range "
                       "[ -2147483648, 2147483647 ], got: 99999999999",
        "-99999999999": "Unable to parse Inference-Header-Content-Length, value is out of range "
                        "[ -2147483648, 2147483647 ], got: -99999999999",
        "abc": "Unable to parse Inference-Header-Content-Length, got: abc",
        "-1": f"inference header size should be in range (0, {len(body)}), got: -1",
        str(len(body) + 1): f"inference header size should be in range (0, {len(body)}), got: {len(body) + 1}",
    }
    for value, want in cases.items():
        data = (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                f"Inference-Header-Content-Length: {value}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        status, out, _ = raw_exchange(srv.ports["http"], data)
        assert status == 400 and json.loads(out)["error"] == want, (value, status, out)
    # Digits followed by anything are read as their digits, as stoi does.
    data = (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Inference-Header-Content-Length: {len(body)}xyz\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    assert raw_exchange(srv.ports["http"], data)[0] == 200


def test_json_input_sizes_checked_before_allocation(srv):
    """Server e5aecb323 / be7d4b1a1 / 865432fcb: shapes whose element
    count or byte size overflow, or whose byte size passes
    --http-max-input-size, are refused with Triton's sentences before any
    buffer is made for them."""
    h = http_client(srv)
    cases = [([4294967296, 4294967296, 8], "invalid shape for input 'INPUT0': shape [4294967296,4294967296,8] "
              "causes total element count to exceed maximum size of 9223372036854775807"),
             ([1, 4611686018427387904], "byte size overflow for input 'INPUT0': element count "
              "(4611686018427387904) * data type size (4) exceeds maximum allowed size (9223372036854775807)"),
             ([1, 16777217], "JSON input 'INPUT0' has a byte_size (67108868 bytes) that exceeds the maximum "
              "allowed value of 67108864 bytes. Use --http-max-input-size to increase the limit.")]
    for shape, want in cases:
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": [1, 2]}]})
        # tritonclient checks the data against the shape, so the body goes by hand.
        data = (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}").encode()
        status, out, _ = raw_exchange(srv.ports["http"], data)
        assert status == 400 and json.loads(out)["error"] == want, (shape, out)
    assert h.is_server_live()


def test_duplicate_output_names_refused_http(srv):
    """Core e93e4a9 with tritonclient's own request."""
    h = http_client(srv)
    i = httpclient.InferInput("INPUT0", [1, 4], "FP32")
    i.set_data_from_numpy(np.zeros((1, 4), np.float32))
    with pytest.raises(InferenceServerException) as e:
        h.infer("identity_fp32", [i], outputs=[httpclient.InferRequestedOutput("OUTPUT0"),
                                               httpclient.InferRequestedOutput("OUTPUT0")])
    assert e.value.status() == "400"
    assert e.value.message() == "[request id: <id_unknown>] output 'OUTPUT0' already exists in request"


def test_many_requests_in_parallel_stay_bounded(srv):
    """The corpus's heavier attacks at once from 4 clients: the server
    answers each and stays under its memory limit."""
    with open(os.path.join(CORPUS, "expected.json")) as f:
        cases = json.load(f)
    heavy = ["gzip_bomb", "classify_too_large", "outputs_150000", "echo_long_input_name"]
    errors = []

    def worker():
        for name in heavy:
            with open(os.path.join(CORPUS, name), "rb") as f:
                status, _, _ = raw_exchange(srv.ports["http"], f.read())
            if status != cases[name]["status"]:
                errors.append((name, status))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert srv.alive()


def test_cached_dynamically_batched_model_keeps_no_memory_per_request(tmp_path):
    """Core b06d69b: Triton's dynamic batcher kept a completion slot per
    cached request, so memory grew with every hit. 3000 requests of 50
    distinct inputs (hits and misses) through the dynamic batcher and the
    local cache: the resident set stays where it was after the first 500."""
    repo = tmp_path / "models"
    shutil.copytree(os.path.join(os.environ.get("NEREID_EXAMPLES", os.path.join(HERE, "..", "..", "examples",
                                                                                  "models")), "identity_fp32"),
                    repo / "identity_fp32")
    cfg = repo / "identity_fp32" / "config.pbtxt"
    cfg.write_text(cfg.read_text() + "\ndynamic_batching { max_queue_delay_microseconds: 100 }\n"
                   "response_cache { enable: true }\n")
    with WatchedServer(["--cache-config=local,size=1048576"], repo=str(repo)) as s:
        c = grpc_client(s)
        inputs = []
        for k in range(50):
            i = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
            i.set_data_from_numpy(np.full((1, 16), k, np.float32))
            inputs.append(i)
        for n in range(500):
            c.infer("identity_fp32", [inputs[n % 50]])
        base = rss_mib(s)
        for n in range(3000):
            r = c.infer("identity_fp32", [inputs[n % 50]])
        assert r.as_numpy("OUTPUT0")[0, 0] == 49
        stats = c.get_inference_statistics("identity_fp32", as_json=True)["model_stats"][0]["inference_stats"]
        assert int(stats["cache_hit"]["count"]) >= 3000
        if not SANITIZED:
            grown = rss_mib(s) - base
            assert grown < 8, f"resident set grew {grown:.1f} MiB over 3000 cached requests"
