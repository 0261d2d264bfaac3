"""nrd_perf end to end: argument errors, the in-process mode on the bundled
identity_fp32 model (concurrency and request-rate, CSV and JSON reports),
the HTTP mode against a tiny KServe v2 server written here (JSON and
binary bodies, keep-alive, errors) and against nereid when it serves HTTP,
and the gRPC mode against nereid, in cleartext and over TLS (certificates
made for each run with the openssl tool; mutual TLS too).

Environment: NRD_PERF_BIN (the nrd_perf binary), NEREID_BACKEND_DIR,
NEREID_EXAMPLES (examples/models), NEREID_BIN (optional: nereid).
Run with /usr/bin/python3 -m pytest.
"""
import contextlib
import csv
import http.server
import json
import os
import shutil
import socket
import socketserver
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from test_nereid_cli import refusing_port

PERF = os.environ.get("NRD_PERF_BIN", "nrd_perf")
BACKENDS = os.environ.get("NEREID_BACKEND_DIR", "")
EXAMPLES = os.environ.get("NEREID_EXAMPLES", "")
NEREID = os.environ.get("NEREID_BIN", "")

CSV_COLUMNS = [
    "Inferences/Second", "Server Queue", "Server Compute Input", "Server Compute Infer",
    "Server Compute Output", "Server Overhead", "p50 latency", "p90 latency", "p95 latency",
    "p99 latency", "Avg latency", "Requests", "Errors", "Delayed", "Stable",
]

# Short windows: every run below finishes in a few seconds.
QUICK = ["--measurement-interval", "150", "--max-trials", "4", "--stability-percentage", "50"]


def run(args, timeout=120):
    return subprocess.run([PERF] + args, capture_output=True, text=True, timeout=timeout)


def inprocess(model="identity_fp32"):
    return ["--service-kind=inprocess", "-m", model, "--model-repository", EXAMPLES,
            "--backend-directory", BACKENDS]


# ---------------------------------------------------------------- arguments

@pytest.mark.parametrize("args,flag", [
    ([], "-m"),
    (["-m", "x", "--concurrency-range", "0:4"], "--concurrency-range"),
    (["-m", "x", "--concurrency-range", "4:2"], "--concurrency-range"),
    (["-m", "x", "--concurrency-range", "1:2:3:4"], "--concurrency-range"),
    (["-m", "x", "--request-rate-range", "abc"], "--request-rate-range"),
    (["-m", "x", "--measurement-interval", "-5"], "--measurement-interval"),
    (["-m", "x", "--stability-percentage", "0"], "--stability-percentage"),
    (["-m", "x", "--max-trials", "0"], "--max-trials"),
    (["-m", "x", "--shape", "INPUT0"], "--shape"),
    (["-m", "x", "--shape", "INPUT0:4,-1"], "--shape"),
    (["-m", "x", "--input-data", "ones"], "--input-data"),
    (["-m", "x", "-b", "0"], "-b"),
    (["-m", "x", "--percentile", "100"], "--percentile"),
    (["-m", "x", "--service-kind=carrier-pigeon"], "--service-kind"),
    (["-m", "x", "--bogus"], "--bogus"),
    (["-m", "x", "--concurrency-range"], "--concurrency-range"),
    (["-m", "x", "--service-kind=inprocess"], "--model-repository"),
    (["-m", "x", "--model-repository", "/tmp"], "--service-kind=inprocess"),
    (["-m", "x", "--concurrency-range", "2", "--request-rate-range", "10"], "--request-rate-range"),
    (["-m", "x", "--service-kind=inprocess", "--model-repository", "/tmp", "--http-binary"], "--http-binary"),
    (["-m", "x", "--ssl-grpc-use-ssl"], "--ssl-grpc-use-ssl"),
    (["-m", "x", "--service-kind=http", "--ssl-grpc-root-certifications-file", "ca.crt"],
     "--ssl-grpc-root-certifications-file"),
    (["-m", "x", "--service-kind=grpc", "--ssl-grpc-use-ssl=maybe"], "--ssl-grpc-use-ssl"),
    (["-m", "x", "--service-kind=grpc", "--ssl-grpc-use-ssl", "--ssl-grpc-private-key-file=c.key"],
     "--ssl-grpc-private-key-file"),
    (["-m", "x", "--service-kind=grpc", "--ssl-grpc-use-ssl", "--ssl-grpc-certificate-chain-file=c.crt"],
     "--ssl-grpc-certificate-chain-file"),
    (["-m", "x", "--service-kind=grpc", "--ssl-grpc-root-certifications-file=ca.crt"], "--ssl-grpc-use-ssl"),
])
def test_bad_arguments(args, flag):
    r = run(args)
    assert r.returncode == 2, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith("error:") and flag in first, r.stderr
    assert "usage:" in r.stderr


def test_help():
    r = run(["--help"])
    assert r.returncode == 0
    assert "--concurrency-range" in r.stdout and "usage:" in r.stdout


# --------------------------------------------------------------- in-process

def check_csv(path, first_column, levels):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0].keys()) == [first_column] + CSV_COLUMNS
    assert [float(r[first_column]) for r in rows] == levels
    for r in rows:
        assert float(r["Inferences/Second"]) > 0
        assert int(r["Requests"]) > 0 and int(r["Errors"]) == 0
        assert float(r["p50 latency"]) <= float(r["p90 latency"]) <= float(r["p95 latency"]) \
            <= float(r["p99 latency"])
    return rows


def check_json(path, mode, key, levels):
    with open(path) as f:
        doc = json.load(f)
    assert doc["mode"] == mode and doc["model"] == "identity_fp32"
    assert [r[key] for r in doc["results"]] == levels
    for r in doc["results"]:
        lat = r["latency_us"]
        assert r["throughput_infer_per_sec"] > 0 and r["requests"] > 0 and r["errors"] == 0
        assert lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"]
        srv = r["server"]
        assert srv is not None and srv["requests"] > 0
        for k in ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us"):
            assert srv[k] >= 0
    return doc


def test_inprocess_concurrency(tmp_path):
    c, j = tmp_path / "r.csv", tmp_path / "r.json"
    r = run(inprocess() + QUICK + ["--concurrency-range", "1:3:2", "-f", str(c), "--json", str(j)])
    assert r.returncode == 0, r.stderr
    assert "Concurrency: 1" in r.stdout and "Concurrency: 3" in r.stdout
    assert "Summary" in r.stdout and "Server:" in r.stdout
    assert r.stderr == ""  # no progress line when stderr is not a terminal
    check_csv(c, "Concurrency", [1, 3])
    doc = check_json(j, "concurrency", "concurrency", [1, 3])
    # The 150 ms windows were used: each row is measured over at most three
    # of them (the default 5 s windows would give 15 s). Not the wall time
    # of the run, which a loaded machine stretches.
    for res in doc["results"]:
        assert 0 < res["seconds"] < 3, res


def test_inprocess_batch_shape_zero(tmp_path):
    j = tmp_path / "r.json"
    r = run(inprocess() + QUICK + ["-b", "4", "--shape", "INPUT0:32", "--input-data", "zero",
                                   "--percentile", "95", "--json", str(j)])
    assert r.returncode == 0, r.stderr
    doc = json.load(open(j))
    assert doc["batch_size"] == 4 and doc["percentile"] == 95
    res = doc["results"][0]
    # 4 inferences per request
    assert abs(res["throughput_infer_per_sec"] - 4 * res["requests"] / res["seconds"]) < 1e-6 * \
        res["throughput_infer_per_sec"] + 1e-6


def test_inprocess_request_rate(tmp_path):
    c, j = tmp_path / "r.csv", tmp_path / "r.json"
    r = run(inprocess() + QUICK + ["--request-rate-range", "200:400:200", "-f", str(c), "--json", str(j)])
    assert r.returncode == 0, r.stderr
    rows = check_csv(c, "Request Rate", [200, 400])
    for row in rows:
        # Paced: never well above the rate asked for. Below it only as far
        # as the machine falls behind: an ASan build beside other tests on
        # 2 cores reached 270 of 400 a second, so the lower bound only
        # shows the rate's order.
        rate = float(row["Request Rate"])
        assert 0.3 * rate < float(row["Inferences/Second"]) < 1.25 * rate, row
    check_json(j, "request_rate", "request_rate", [200, 400])


def test_inprocess_model_errors():
    r = run(inprocess("no_such_model") + QUICK)
    assert r.returncode == 1 and "no_such_model" in r.stderr
    r = run(inprocess() + QUICK + ["-b", "9"])
    assert r.returncode == 1 and "max_batch_size" in r.stderr
    r = run(inprocess() + QUICK + ["--shape", "NOPE:3"])
    assert r.returncode == 1 and "NOPE" in r.stderr


# ------------------------------------------------ HTTP against a fake server

class FakeV2(http.server.BaseHTTPRequestHandler):
    """A KServe v2 identity model 'ident' (FP32 [-1], max_batch_size 8)."""
    protocol_version = "HTTP/1.1"
    bodies = []
    infer_count = 0
    fail = False

    def log_message(self, *a):
        pass

    def reply(self, code, obj, headers=None, raw=None):
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        cls = type(self)
        if self.path == "/v2/models/ident":
            self.reply(200, {"name": "ident", "versions": ["1"], "platform": "fake",
                             "inputs": [{"name": "IN", "datatype": "FP32", "shape": [-1, -1]}],
                             "outputs": [{"name": "OUT", "datatype": "FP32", "shape": [-1, -1]}]})
        elif self.path == "/v2/models/ident/config":
            self.reply(200, {"name": "ident", "max_batch_size": 8})
        elif self.path == "/v2/models/ident/stats":
            n = cls.infer_count
            sec = lambda ns: {"count": n, "ns": n * ns}
            self.reply(200, {"model_stats": [{
                "name": "ident", "version": "1", "inference_count": n, "execution_count": n,
                "inference_stats": {"success": sec(10000), "fail": {"count": 0, "ns": 0},
                                    "queue": sec(1000), "compute_input": sec(2000),
                                    "compute_infer": sec(3000), "compute_output": sec(4000)}}]})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        cls = type(self)
        n = int(self.headers["Content-Length"])
        body = self.rfile.read(n)
        if len(cls.bodies) < 4:
            cls.bodies.append((dict(self.headers), body))
        cls.infer_count += 1
        if cls.fail:
            self.reply(400, {"error": "fake failure"})
            return
        hlen = self.headers.get("Inference-Header-Content-Length")
        head = json.loads(body[:int(hlen)] if hlen else body)
        shape = head["inputs"][0]["shape"]
        if hlen:
            out = body[int(hlen):]
            js = json.dumps({"model_name": "ident", "outputs": [{
                "name": "OUT", "datatype": "FP32", "shape": shape,
                "parameters": {"binary_data_size": len(out)}}]}).encode()
            self.reply(200, None, {"Inference-Header-Content-Length": str(len(js))}, js + out)
        else:
            self.reply(200, {"model_name": "ident", "outputs": [{
                "name": "OUT", "datatype": "FP32", "shape": shape, "data": head["inputs"][0]["data"]}]})


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@pytest.fixture
def fake():
    FakeV2.bodies, FakeV2.infer_count, FakeV2.fail = [], 0, False
    srv = ThreadingServer(("127.0.0.1", 0), FakeV2)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield "127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_http_json_fake(fake, tmp_path):
    j = tmp_path / "r.json"
    r = run(["-m", "ident", "-u", fake, "--concurrency-range", "1:2", "--shape", "IN:3", "-b", "2",
             "--json", str(j)] + QUICK)
    assert r.returncode == 0, r.stderr
    hdrs, body = FakeV2.bodies[0]
    req = json.loads(body)
    assert req["inputs"][0]["shape"] == [2, 3] and req["inputs"][0]["datatype"] == "FP32"
    assert len(req["inputs"][0]["data"]) == 6
    assert req["outputs"] == [{"name": "OUT", "parameters": {"binary_data": False}}]
    doc = json.load(open(j))
    assert [x["concurrency"] for x in doc["results"]] == [1, 2]
    srv = doc["results"][0]["server"]
    assert abs(srv["queue_us"] - 1.0) < 1e-6 and abs(srv["compute_infer_us"] - 3.0) < 1e-6
    assert abs(srv["request_us"] - 10.0) < 1e-6


def test_http_binary_fake(fake):
    r = run(["-m", "ident", "-u", fake, "--http-binary", "--shape", "IN:5", "--input-data", "zero"] + QUICK)
    assert r.returncode == 0, r.stderr
    hdrs, body = FakeV2.bodies[0]
    hlen = int(hdrs["Inference-Header-Content-Length"])
    head = json.loads(body[:hlen])
    assert head["inputs"][0]["parameters"]["binary_data_size"] == 20
    assert body[hlen:] == struct.pack("<5f", *[0.0] * 5)


def test_http_rate_fake(fake):
    r = run(["-m", "ident", "-u", fake, "--request-rate-range", "100"] + QUICK)
    assert r.returncode == 0, r.stderr
    assert "Request rate: 100" in r.stdout


def test_http_errors_fake(fake):
    FakeV2.fail = True
    r = run(["-m", "ident", "-u", fake] + QUICK)
    assert r.returncode == 1 and "fake failure" in r.stderr
    r = run(["-m", "nope", "-u", fake] + QUICK)
    assert r.returncode == 1 and "404" in r.stderr


def test_http_connection_refused():
    with refusing_port() as port:
        r = run(["-m", "ident", "-u", "127.0.0.1:%d" % port] + QUICK)
    assert r.returncode == 1 and "connect" in r.stderr


# ------------------------------------------------------- HTTP against nereid

@contextlib.contextmanager
def nereid_server(flags):
    """nereid on three of the examples with `flags`, started up (the models
    loaded: the ready line, within test_nereid_cli's generous START_TIMEOUT).
    Yields {"http": port, "grpc": port} for the endpoints on; listening on
    port 0, as a port picked here could be taken by another test's socket
    before nereid binds it. Stopped (killed if need be) on the way out."""
    if not NEREID or not os.path.exists(NEREID):
        pytest.fail("NEREID_BIN not set (ctest sets it)")
    from test_nereid_cli import Server, listening_ports  # needs NEREID_BIN

    # Only the models the tests use: the python and ORT ones would make
    # each start several seconds slower on a sanitizer build.
    models = [f"--load-model={m}" for m in ("identity_fp32", "simple", "repeat_int32")]
    s = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS, "--allow-metrics=false",
                "--model-control-mode=explicit", *models, *flags])
    try:
        yield listening_ports(s.wait_ready())
    finally:
        if s.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                s.stop(timeout=30)
        s.close()


@pytest.fixture
def nereid():
    with nereid_server(["--http-port=0", "--http-address=127.0.0.1", "--allow-grpc=false"]) as ports:
        yield "127.0.0.1:%d" % ports["http"]


@pytest.mark.parametrize("binary", [False, True])
def test_http_nereid(nereid, binary, tmp_path):
    c = tmp_path / "r.csv"
    args = ["-m", "identity_fp32", "-u", nereid, "--concurrency-range", "1:2", "-f", str(c)] + QUICK
    r = run(args + (["--http-binary"] if binary else []))
    assert r.returncode == 0, r.stderr
    rows = check_csv(c, "Concurrency", [1, 2])
    assert float(rows[0]["Server Compute Infer"]) >= 0


def test_http_nereid_rate(nereid):
    r = run(["-m", "simple", "-u", nereid, "--request-rate-range", "200"] + QUICK)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------- gRPC against nereid

@contextlib.contextmanager
def grpc_server(flags=(), client=()):
    """nereid serving gRPC only (nereid_server), with more `flags`; ready
    when a one-window nrd_perf run (with the `client` flags) gets through.
    Yields "127.0.0.1:PORT"; the server is stopped (killed if need be) on
    the way out."""
    with nereid_server(["--grpc-port=0", "--grpc-address=127.0.0.1", "--allow-http=false", *flags]) as ports:
        port = ports["grpc"]
        # Ready when a one-window run on identity_fp32 gets through.
        why = "no time left"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            probe = run(["--service-kind=grpc", "-m", "identity_fp32", "-u", "127.0.0.1:%d" % port,
                         "--measurement-interval", "10", "--max-trials", "1", *client], timeout=60)
            if probe.returncode == 0:
                break
            why = probe.stderr[-500:]
            time.sleep(0.2)
        else:
            pytest.fail("nereid did not become ready: " + why)
        yield "127.0.0.1:%d" % port


@pytest.fixture
def nereid_grpc():
    with grpc_server() as url:
        yield url


def grpc_args(url, streaming):
    return ["--service-kind=grpc", "-u", url] + (["--streaming"] if streaming else [])


@pytest.mark.parametrize("streaming", [False, True])
def test_grpc_nereid(nereid_grpc, streaming, tmp_path):
    c, j = tmp_path / "r.csv", tmp_path / "r.json"
    r = run(grpc_args(nereid_grpc, streaming) + ["-m", "identity_fp32", "--concurrency-range", "1:2",
                                                 "-f", str(c), "--json", str(j)] + QUICK)
    assert r.returncode == 0, r.stderr
    assert "service grpc" in r.stdout
    rows = check_csv(c, "Concurrency", [1, 2])
    assert float(rows[0]["Server Compute Infer"]) >= 0
    check_json(j, "concurrency", "concurrency", [1, 2])


@pytest.mark.parametrize("streaming", [False, True])
def test_grpc_nereid_rate_batch(nereid_grpc, streaming):
    r = run(grpc_args(nereid_grpc, streaming) + ["-m", "identity_fp32", "-b", "2",
                                                 "--request-rate-range", "200"] + QUICK)
    assert r.returncode == 0, r.stderr


def test_grpc_streaming_decoupled(nereid_grpc, tmp_path):
    # repeat_int32 sends 3 responses then a flags-only final per request:
    # a request ends only at triton_final_response.
    c = tmp_path / "r.csv"
    r = run(grpc_args(nereid_grpc, True) + ["-m", "repeat_int32", "--input-data", "zero", "--shape", "IN:3",
                                            "--shape", "DELAY:3", "-f", str(c)] + QUICK)
    assert r.returncode == 0, r.stderr
    with open(c) as f:
        row = next(csv.DictReader(f))
    assert float(row["Inferences/Second"]) > 0 and int(row["Errors"]) == 0


def test_grpc_errors(nereid_grpc):
    r = run(grpc_args(nereid_grpc, False) + ["-m", "no_such_model"] + QUICK)
    assert r.returncode == 1 and "gRPC status 5" in r.stderr, r.stderr
    # A decoupled model refuses unary ModelInfer: every request fails.
    r = run(grpc_args(nereid_grpc, False) + ["-m", "repeat_int32", "--input-data", "zero", "--shape", "IN:1",
                                             "--shape", "DELAY:1"] + QUICK)
    assert r.returncode == 1 and "gRPC status 12" in r.stderr, r.stderr


def test_grpc_connection_refused():
    with refusing_port() as port:
        r = run(grpc_args("127.0.0.1:%d" % port, False) + ["-m", "x"] + QUICK)
    assert r.returncode == 1 and "connect" in r.stderr, r.stderr


def test_streaming_needs_grpc():
    r = run(["-m", "x", "--streaming"])
    assert r.returncode == 2
    assert r.stderr.startswith("error:") and "--streaming" in r.stderr.splitlines()[0], r.stderr


# ------------------------------------------------ gRPC over TLS against nereid

def make_cert(d, name, signer=None, ext=()):
    """NAME.key (P-256) and NAME.crt in d: a self-signed CA without
    `signer`, else a leaf signed by the CA `signer` with extensions `ext`."""
    args = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-days", "2", "-subj", "/CN=" + name, "-keyout", name + ".key", "-out", name + ".crt"]
    if signer:
        args += ["-CA", signer + ".crt", "-CAkey", signer + ".key", "-addext", "basicConstraints=critical,CA:FALSE"]
    for e in ext:
        args += ["-addext", e]
    subprocess.run(args, cwd=d, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs():
    """A CA, another CA, a server certificate for 127.0.0.1 and localhost
    and a client certificate, both from the first CA: certs(NAME) is the
    path of NAME ("ca.crt", "server.key", ...)."""
    d = tempfile.mkdtemp(prefix="nrd_perf_tls_")
    try:
        make_cert(d, "ca")
        make_cert(d, "other_ca")
        make_cert(d, "server", "ca", ["subjectAltName=DNS:localhost,IP:127.0.0.1"])
        make_cert(d, "client", "ca", ["extendedKeyUsage=clientAuth"])
        yield lambda name: os.path.join(d, name)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tls_server_flags(certs):
    return ["--grpc-use-ssl=true", "--grpc-server-cert=" + certs("server.crt"),
            "--grpc-server-key=" + certs("server.key")]


def tls_client(certs, root="ca.crt", client=None):
    args = ["--ssl-grpc-use-ssl", "--ssl-grpc-root-certifications-file=" + certs(root)]
    if client:
        args += ["--ssl-grpc-private-key-file=" + certs(client + ".key"),
                 "--ssl-grpc-certificate-chain-file=" + certs(client + ".crt")]
    return args


@pytest.fixture(scope="module")
def nereid_tls(certs):
    with grpc_server(tls_server_flags(certs), tls_client(certs)) as url:
        yield url


@pytest.fixture(scope="module")
def nereid_mtls(certs):
    flags = tls_server_flags(certs) + ["--grpc-use-ssl-mutual=true", "--grpc-root-cert=" + certs("ca.crt")]
    with grpc_server(flags, tls_client(certs, client="client")) as url:
        yield url


@pytest.mark.parametrize("streaming", [False, True])
def test_grpc_tls(nereid_tls, certs, streaming, tmp_path):
    c = tmp_path / "r.csv"
    url = nereid_tls
    if streaming:  # by name this time: the certificate holds both
        url = url.replace("127.0.0.1", "localhost")
    r = run(grpc_args(url, streaming) + tls_client(certs) + ["-m", "identity_fp32", "--concurrency-range", "1:2",
                                                           "-f", str(c)] + QUICK)
    assert r.returncode == 0, r.stderr
    assert "service grpc at %s (TLS)" % url in r.stdout
    check_csv(c, "Concurrency", [1, 2])


def test_grpc_tls_refuses_an_untrusted_server(nereid_tls, certs):
    r = run(grpc_args(nereid_tls, False) + tls_client(certs, root="other_ca.crt") + ["-m", "identity_fp32"] + QUICK)
    assert r.returncode == 1, r.stderr
    assert "TLS handshake" in r.stderr and "certificate verify failed" in r.stderr, r.stderr
    # Cleartext to the TLS port fails too (and fast).
    r = run(grpc_args(nereid_tls, False) + ["-m", "identity_fp32"] + QUICK)
    assert r.returncode == 1, r.stderr


def test_grpc_mutual_tls(nereid_mtls, certs):
    r = run(grpc_args(nereid_mtls, True) + tls_client(certs, client="client") + ["-m", "identity_fp32"] + QUICK)
    assert r.returncode == 0, r.stderr
    assert "(TLS, client certificate)" in r.stdout
    # Without a client certificate the server ends the session with an
    # alert, which nrd_perf reports.
    r = run(grpc_args(nereid_mtls, False) + tls_client(certs) + ["-m", "identity_fp32"] + QUICK)
    assert r.returncode == 1 and "certificate required" in r.stderr, r.stderr


@pytest.mark.parametrize("flag", ["--ssl-grpc-root-certifications-file", "--ssl-grpc-certificate-chain-file",
                                  "--ssl-grpc-private-key-file"])
def test_grpc_tls_missing_file(certs, flag, tmp_path):
    missing = str(tmp_path / "missing.pem")
    files = {"--ssl-grpc-root-certifications-file": certs("ca.crt"),
             "--ssl-grpc-certificate-chain-file": certs("client.crt"),
             "--ssl-grpc-private-key-file": certs("client.key")}
    files[flag] = missing
    with refusing_port() as port:  # it must fail on the file before it connects
        r = run(grpc_args("127.0.0.1:%d" % port, False) + ["-m", "x", "--ssl-grpc-use-ssl"] +
                ["%s=%s" % kv for kv in files.items()] + QUICK)
    assert r.returncode == 1, r.stderr
    assert "%s '%s'" % (flag, missing) in r.stderr and "No such file" in r.stderr, r.stderr
