"""gRPC over TLS (--grpc-use-ssl, --grpc-use-ssl-mutual, --grpc-server-cert,
--grpc-server-key, --grpc-root-cert), with tritonclient.grpc's own TLS
(ssl=True, root_certificates, private_key, certificate_chain): unary,
large and streamed calls;
clients that do not speak TLS, do not offer h2, do not trust the server,
or (mutual TLS) bring no certificate or one from another CA are refused
while the server goes on serving; a stalled handshake is closed; bad flags
and files stop the server with a message that names them. Raw TLS
sockets remain for what no gRPC client sends: junk, a stalled or partial
handshake, HTTP/1.1-only ALPN, a client that stops reading.

Certificates are made for each run with the openssl tool (scripts/setup.sh
installs it). Run by ctest (see tests/CMakeLists.txt).
"""
import concurrent.futures
import contextlib
import os
import queue
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

import numpy as np
import pytest

from test_nereid_cli import SANITIZER_WORDS, assert_stopped_clean
from test_grpc import (BACKENDS, EXAMPLES, InferenceServerException, RawH2, Server, fill_socket_then_read,
                       grpcclient, ok_results, square_call, stream_all, tc_inputs)

BIG = 64 << 20  # channel message limit for the large call


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}", cwd=d)


def make_cert(d, name, ca, ext):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="nereid_tls_")
    make_ca(d, "ca")
    make_ca(d, "other_ca")
    make_cert(d, "server", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    make_cert(d, "client", "ca", "extendedKeyUsage=clientAuth")
    make_cert(d, "stranger", "other_ca", "extendedKeyUsage=clientAuth")
    with open(os.path.join(d, "garbage.pem"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")

    def path(name):
        return os.path.join(d, name)

    def read(name):
        with open(path(name), "rb") as f:
            return f.read()

    path.read = read
    yield path
    shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def server(certs, *extra, mutual=False):
    flags = ["--grpc-use-ssl=true", f"--grpc-server-cert={certs('server.crt')}",
             f"--grpc-server-key={certs('server.key')}"]
    if mutual:
        flags += ["--grpc-use-ssl-mutual=true", f"--grpc-root-cert={certs('ca.crt')}"]
    srv = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS, "--allow-http=false",
                  "--allow-metrics=false", "--grpc-port=0", "--grpc-address=127.0.0.1",
                  "--log-verbose=1", *flags, *extra])
    try:
        srv.wait_ready()
        srv.port = srv.ports()["grpc"]
        yield srv
        assert_stopped_clean(srv)
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


def secure_client(port, certs, root="ca.crt", key=None, chain=None):
    """A tritonclient over TLS, trusting the CA in the file root, with the
    client key and certificate files key and chain (mutual TLS)."""
    # A connection of its own for each client (grpc shares them by default).
    args = [("grpc.max_receive_message_length", BIG), ("grpc.max_send_message_length", BIG),
            ("grpc.use_local_subchannel_pool", 1)]
    return grpcclient.InferenceServerClient(url=f"localhost:{port}", ssl=True, root_certificates=certs(root),
                                            private_key=key and certs(key), certificate_chain=chain and certs(chain),
                                            channel_args=args)


def assert_refused(client):
    with pytest.raises(InferenceServerException) as e:
        client.is_server_live(client_timeout=10)
    assert e.value.status() == "StatusCode.UNAVAILABLE", e.value


def identity(client, values):
    r = client.infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [1, len(values)], values)]), client_timeout=60)
    return r.as_numpy("OUTPUT0")


def test_tls_serves_unary_large_concurrent_and_streamed_calls(certs):
    with server(certs) as srv:
        assert "(2 threads, TLS)" in srv.text()
        client = secure_client(srv.port, certs)
        assert client.is_server_live(client_timeout=10)
        small = np.arange(16, dtype=np.float32)
        assert np.array_equal(identity(client, small)[0], small)
        # 16 MB each way: many TLS records, short writes and reads.
        big = np.random.default_rng(7).random(4 << 20, dtype=np.float32)
        assert np.array_equal(identity(client, big)[0], big)
        # Many calls in flight on one connection.
        done = queue.Queue()
        for i in range(64):
            client.async_infer("identity_fp32", tc_inputs([("INPUT0", "FP32", [1, 16], small + i)]),
                               request_id=str(i), callback=lambda result, error: done.put((result, error)),
                               client_timeout=60)
        for _ in range(64):
            result, error = done.get(timeout=60)
            assert error is None, error
            i = int(result.get_response().id)
            assert np.array_equal(result.as_numpy("OUTPUT0")[0], small + i)
        # A decoupled model's responses, streamed.
        got = ok_results(stream_all(client, [square_call(300, "sq")], stream_timeout=60))
        assert len(got) == 300
        assert all(r.as_numpy("OUT")[0] == 300 for r in got)
        client.close()


def test_tls_port_refuses_what_is_not_tls_and_goes_on(certs):
    with server(certs) as srv:
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{srv.port}") as client:
            assert_refused(client)
        # Cleartext HTTP/2 prior knowledge, as to a server without TLS.
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(9))
            data = b""
            with contextlib.suppress(ConnectionResetError):  # closed with our bytes unread
                while chunk := s.recv(4096):
                    data += chunk
            assert data[:1] in (b"", b"\x15")  # nothing, or a TLS alert record: no HTTP/2 SETTINGS
        # TLS, but offering only HTTP/1.1 by ALPN.
        ctx = ssl.create_default_context(cadata=certs.read("ca.crt").decode())
        ctx.set_alpn_protocols(["http/1.1"])
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:
            with pytest.raises(ssl.SSLError):
                ctx.wrap_socket(raw, server_hostname="localhost")
        # ALPN h2 is chosen, on TLS 1.2 or later.
        ctx.set_alpn_protocols(["http/1.1", "h2"])
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as t:
                assert t.selected_alpn_protocol() == "h2"
                assert t.version() in ("TLSv1.2", "TLSv1.3")
        # A client that does not trust the server's CA.
        with secure_client(srv.port, certs, root="other_ca.crt") as client:
            assert_refused(client)
        # Still serving.
        with secure_client(srv.port, certs) as client:
            assert client.is_server_live(client_timeout=10)
        assert "TLS handshake failed" in srv.text()


def test_full_tls_socket_resumes_when_the_client_reads(certs):
    """As test_grpc's test of the same name, over TLS: writes that would
    block wait for the socket, and every response arrives whole."""
    with server(certs) as srv:
        ctx = ssl.create_default_context(cadata=certs.read("ca.crt").decode())
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        h = RawH2(srv.port, sock=ctx.wrap_socket(raw, server_hostname="localhost"))
        with secure_client(srv.port, certs) as client:
            fill_socket_then_read(h, client)


def test_mutual_tls_needs_a_client_certificate_from_the_root(certs):
    with server(certs, mutual=True) as srv:
        assert "(2 threads, TLS with client certificates)" in srv.text()
        for key, chain in ((None, None), ("stranger.key", "stranger.crt")):
            with secure_client(srv.port, certs, key=key, chain=chain) as client:
                assert_refused(client)
        with secure_client(srv.port, certs, key="client.key", chain="client.crt") as client:
            assert client.is_server_live(client_timeout=10)
            small = np.arange(16, dtype=np.float32)
            assert np.array_equal(identity(client, small)[0], small)


def test_stalled_tls_handshake_is_closed(certs):
    limit = 2
    with server(certs, f"--grpc-handshake-timeout-secs={limit}") as srv:
        t0 = time.monotonic()
        silent = socket.create_connection(("127.0.0.1", srv.port))
        partial = socket.create_connection(("127.0.0.1", srv.port))
        partial.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello
        for s in (silent, partial):
            s.settimeout(limit + 8)
            while s.recv(4096):
                pass
            assert time.monotonic() - t0 < limit + 6
            s.close()
        with secure_client(srv.port, certs) as client:
            assert client.is_server_live(client_timeout=10)


def run_nereid(*flags):
    from test_grpc import NEREID

    repo = tempfile.mkdtemp(prefix="nereid_tls_repo_")
    try:
        p = subprocess.run([NEREID, f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                            "--allow-http=false", "--allow-metrics=false", "--grpc-port=0",
                            "--grpc-address=127.0.0.1", *flags], capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    return p.returncode, p.stderr


def test_tls_flags_and_files_are_checked(certs):
    cert, key, root = (f"--grpc-server-cert={certs('server.crt')}", f"--grpc-server-key={certs('server.key')}",
                       f"--grpc-root-cert={certs('ca.crt')}")
    cases = [
        (2, ["--grpc-use-ssl=true", key], "--grpc-use-ssl needs --grpc-server-cert"),
        (2, ["--grpc-use-ssl=true", cert], "--grpc-use-ssl needs --grpc-server-key"),
        (2, ["--grpc-use-ssl-mutual=true", cert, key], "--grpc-use-ssl-mutual needs --grpc-root-cert"),
        (2, ["--grpc-use-ssl=maybe", cert, key], "--grpc-use-ssl"),
        (1, ["--grpc-use-ssl=true", "--grpc-server-cert=/nonexistent/cert.pem", key],
         "--grpc-server-cert '/nonexistent/cert.pem': No such file or directory"),
        (1, ["--grpc-use-ssl=true", f"--grpc-server-cert={certs('garbage.pem')}", key],
         f"--grpc-server-cert '{certs('garbage.pem')}'"),
        (1, ["--grpc-use-ssl=true", cert, f"--grpc-server-key={certs('garbage.pem')}"],
         f"--grpc-server-key '{certs('garbage.pem')}'"),
        (1, ["--grpc-use-ssl=true", cert, f"--grpc-server-key={certs('client.key')}"],
         "is not the key of --grpc-server-cert"),
        (1, ["--grpc-use-ssl-mutual=true", cert, key, f"--grpc-root-cert={certs('garbage.pem')}"],
         f"--grpc-root-cert '{certs('garbage.pem')}'"),
    ]
    for code, flags, message in cases:
        got, err = run_nereid(*flags)
        assert got == code and message in err, (flags, got, err)
        for bad in SANITIZER_WORDS:
            assert bad not in err, err
    # The files are read only when TLS is on, as in tritonserver.
    srv = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS, "--allow-http=false",
                  "--allow-metrics=false", "--grpc-port=0", "--grpc-address=127.0.0.1",
                  "--grpc-use-ssl=false", "--grpc-server-cert=/nonexistent", root])
    try:
        srv.wait_ready()
        with grpcclient.InferenceServerClient(url=f"127.0.0.1:{srv.ports()['grpc']}") as client:
            assert client.is_server_live(client_timeout=10)
        assert srv.stop() == 0, srv.text()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


def test_many_tls_clients_at_once(certs):
    with server(certs) as srv:
        def one(i):
            with secure_client(srv.port, certs) as client:
                v = np.full(16, i, dtype=np.float32)
                return np.array_equal(identity(client, v)[0], v)

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            assert all(ex.map(one, range(32)))


def test_junk_before_and_after_the_handshake_closes_only_that_connection(certs):
    """Random bytes instead of a ClientHello, and random bytes instead of
    the HTTP/2 preface once TLS is up: each such connection is closed
    (after a GOAWAY in the second case); the server goes on."""
    import random

    rng = random.Random(11)
    ctx = ssl.create_default_context(cadata=certs.read("ca.crt").decode())
    ctx.set_alpn_protocols(["h2"])
    with server(certs) as srv:
        for i in range(20):
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                if i % 2:
                    s = ctx.wrap_socket(s, server_hostname="localhost")
                # Reset or a TLS alert are fine; a connection left open is not
                # (the recv would time out).
                with contextlib.suppress(ConnectionResetError, BrokenPipeError, ssl.SSLError):
                    s.sendall(junk)
                    while s.recv(4096):
                        pass
        with secure_client(srv.port, certs) as client:
            assert client.is_server_live(client_timeout=10)
