"""End-to-end tests of the nereid binary: flags, the bundled example
repository, model load failures and shutdown by signal.

Run by ctest (see tests/CMakeLists.txt) as
    /usr/bin/python3 -m pytest -q tests/integration/test_nereid_cli.py
with NEREID_BIN (the binary), NEREID_BACKEND_DIR (build*/backends) and
NEREID_EXAMPLES (examples/models) in the environment. Every subprocess has a
timeout and is killed in a finally block if it is still running.
"""

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))

NEREID = os.environ.get("NEREID_BIN", os.path.join(SOURCE, "build", "src", "server", "nereid"))
BACKENDS = os.environ.get("NEREID_BACKEND_DIR", os.path.join(SOURCE, "build", "backends"))
# The test cache plugin sits beside the test backends (build/test_caches).
TEST_CACHES = os.path.join(os.path.dirname(os.environ.get("NEREID_TEST_BACKEND_DIR",
                                                          os.path.join(SOURCE, "build", "test_backends"))),
                           "test_caches")
# ... and the test repository agent (build/test_repoagents).
TEST_AGENTS = os.path.join(os.path.dirname(TEST_CACHES), "test_repoagents")
EXAMPLES = os.environ.get("NEREID_EXAMPLES", os.path.join(SOURCE, "examples", "models"))

EXAMPLE_MODELS = ["accumulate_onnx", "accumulate_stateful", "add_sub_python", "custom_identity_int32", "identity_bytes",
                  "identity_fp32", "repeat_int32", "simple", "simple_dyna_sequence", "simple_ensemble",
                  "simple_identity", "simple_int8", "simple_sequence", "simple_string",
                  "simple_string_dyna_sequence", "square_int32"]
READY_MARK = "nereid: server "  # start of the line printed once startup is done
START_TIMEOUT = 120  # generous: sanitizer builds start slowly on 2 cores
# Generous too: a stop unloads every model and, under ASan, runs the leak
# check; on a 2-core machine running other tests beside it that is slow.
STOP_TIMEOUT = 60

if not os.access(NEREID, os.X_OK):  # a missing binary fails the run, never skips it
    raise RuntimeError(f"no nereid binary at {NEREID!r} (ctest sets NEREID_BIN)")


def run(args, timeout=START_TIMEOUT):
    """Runs nereid to completion; returns (exit code, stdout, stderr)."""
    p = subprocess.run([NEREID, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class Server:
    """A running nereid. stdout is read line by line until the ready line;
    stderr (the log) goes to a temporary file so it can never fill a pipe."""

    def __init__(self, args, env=None):
        self.errfile = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([NEREID, *args], stdout=subprocess.PIPE, stderr=self.errfile, env=env)
        self.out = []
        self.partial = b""

    def wait_ready(self, timeout=START_TIMEOUT):
        """Returns the stdout lines up to and including the ready line.
        Reads the pipe with os.read (no Python-side buffering, which would
        hide lines from select)."""
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"nereid exited before ready: {self.proc.wait(5)}\n{self.text()}")
                *lines, self.partial = (self.partial + chunk).split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace") + "\n"
                    self.out.append(line)
                    if line.startswith(READY_MARK):
                        return self.out
            raise AssertionError(f"no ready line within {timeout} s\n{self.text()}")
        finally:
            sel.close()

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Sends sig and returns the exit code; the rest of stdout is kept."""
        self.proc.send_signal(sig)
        rest, _ = self.proc.communicate(timeout=timeout)
        self.out.append((self.partial + rest).decode(errors="replace"))
        self.partial = b""
        return self.proc.returncode

    def text(self):
        # A new open file description: seeking the one nereid writes through
        # would move its offset, and a line written meanwhile would land
        # over earlier ones (seen: two log lines spliced into one).
        with open(f"/proc/self/fd/{self.errfile.fileno()}", errors="replace") as f:
            err = f.read()
        return "".join(self.out) + self.partial.decode(errors="replace") + "\n--- stderr ---\n" + err

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)
        self.proc.stdout.close()
        self.errfile.close()


@pytest.fixture
def server_factory():
    started = []

    def start(*args, env=None):
        s = Server(list(args), env)
        started.append(s)
        return s

    try:
        yield start
    finally:
        for s in started:
            s.close()


SANITIZER_WORDS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "ThreadSanitizer")


def assert_stopped_clean(s):
    """Stops the Server s (SIGTERM): exit status 0 and no sanitizer report."""
    assert s.stop() == 0, s.text()
    for bad in SANITIZER_WORDS:
        assert bad not in s.text(), s.text()


@contextlib.contextmanager
def running(s):
    """Waits until the Server s is ready and yields its start-up lines;
    then stops it clean (assert_stopped_clean), or kills it on a failure."""
    try:
        yield s.wait_ready()
        assert_stopped_clean(s)
    finally:
        s.close()


@contextlib.contextmanager
def refusing_port():
    """A local port that refuses connections for as long as the block runs:
    bound but not listening, so no other test's server can take it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def listening_ports(lines):
    """{"http": port, "grpc": port, "metrics": port, "sagemaker": port,
    "vertex_ai": port} from the start-up lines (only the endpoints that are
    on): the ports the kernel gave --*-port=0 endpoints."""
    names = {"HTTP/REST": "http", "gRPC endpoint": "grpc", "metrics": "metrics", "SageMaker": "sagemaker",
             "Vertex AI": "vertex_ai"}
    out = {}
    for line in lines:
        m = re.match(r"nereid: (HTTP/REST|gRPC endpoint|metrics|SageMaker|Vertex AI) listening on \S*:(\d+)", line)
        if m:
            out[names[m.group(1)]] = int(m.group(2))
    return out


def table_status(lines):
    """{model: status} from the printed table rows."""
    rows = {}
    for line in lines:
        if not line.startswith("| ") or line.startswith("| Model "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[2]
    return rows


@pytest.fixture
def broken_repo():
    """identity_fp32 from the examples plus a model whose config.pbtxt has an
    unknown field on line 4."""
    d = tempfile.mkdtemp(prefix="nereid-broken-")
    try:
        shutil.copytree(os.path.join(EXAMPLES, "identity_fp32"), os.path.join(d, "identity_fp32"))
        os.makedirs(os.path.join(d, "broken", "1"))
        with open(os.path.join(d, "broken", "config.pbtxt"), "w") as f:
            f.write('name: "broken"\nbackend: "identity"\nmax_batch_size: 8\nno_such_field: 1\n')
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def common(repo=EXAMPLES):
    # No network endpoints: these tests run beside others and must not fight
    # over the default ports (test_http.py covers the HTTP endpoints).
    return [f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
            "--allow-http=false", "--allow-metrics=false", "--allow-grpc=false"]


def test_examples_load_and_sigterm_stops(server_factory):
    s = server_factory(*common())
    lines = s.wait_ready()
    status = table_status(lines)
    assert status == {m: "READY" for m in EXAMPLE_MODELS}, s.text()
    assert "stop with SIGINT or SIGTERM" in lines[-1]
    n = len(EXAMPLE_MODELS)
    assert f"{n} of {n} models READY" in lines[-1]
    t0 = time.monotonic()
    assert s.stop(signal.SIGTERM) == 0, s.text()
    assert time.monotonic() - t0 < 10
    assert "nereid: stopped" in s.text()


def test_sigint_stops_with_zero(server_factory):
    # Every endpoint on a port the kernel picks: never the defaults, which
    # another server on the machine may hold.
    s = server_factory("--model-store", EXAMPLES, "--backend-directory", BACKENDS, "--log-info=false",
                       "--http-port=0", "--grpc-port=0", "--metrics-port=0", "--http-address=127.0.0.1",
                       "--grpc-address=127.0.0.1")
    s.wait_ready()
    assert s.stop(signal.SIGINT) == 0, s.text()


def tunables_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return env.get(b"GLIBC_TUNABLES")


def test_malloc_tunables_set_unless_the_user_set_them(server_factory):
    quiet = ["--model-repository", EXAMPLES, "--backend-directory", BACKENDS, "--log-info=false",
             "--allow-http=false", "--allow-grpc=false", "--allow-metrics=false",
             "--model-control-mode=explicit"]
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    s = server_factory(*quiet, env=env)
    s.wait_ready()
    # Same process (exec keeps the pid), now with the tunables.
    assert tunables_of(s.proc.pid) == b"glibc.malloc.tcache_count=64", s.text()
    assert s.stop(signal.SIGINT) == 0, s.text()
    mine = dict(env, GLIBC_TUNABLES="glibc.malloc.tcache_count=3")
    s = server_factory(*quiet, env=mine)
    s.wait_ready()
    assert tunables_of(s.proc.pid) == b"glibc.malloc.tcache_count=3", s.text()
    assert s.stop(signal.SIGINT) == 0, s.text()


def test_broken_config_exits_1_naming_file_and_line(broken_repo):
    code, out, err = run(common(broken_repo))
    assert code == 1, out + err
    where = os.path.join(broken_repo, "broken", "config.pbtxt") + ":4"
    assert where in err, err
    assert "no_such_field" in err
    assert table_status(out.splitlines()).get("broken", "").startswith("UNAVAILABLE"), out


def test_log_messages_are_json_strings_unless_turned_off(broken_repo):
    """As Triton writes them: each log message is a JSON-quoted string;
    TRITON_SERVER_ESCAPE_LOG_MESSAGES=0 writes it as it is."""
    code, out, err = run(common(broken_repo))
    assert code == 1, out + err
    lines = [l for l in err.splitlines() if re.match(r"^E\d{4} ", l) and "failed to load 'broken'" in l]
    assert lines, err
    assert re.search(r"\] \"failed to load 'broken'.*\"$", lines[0]), lines[0]
    env = dict(os.environ, TRITON_SERVER_ESCAPE_LOG_MESSAGES="0")
    p = subprocess.run([NEREID, *common(broken_repo)], capture_output=True, text=True, timeout=START_TIMEOUT,
                       env=env)
    lines = [l for l in p.stderr.splitlines() if re.match(r"^E\d{4} ", l) and "failed to load 'broken'" in l]
    assert lines, p.stderr
    assert "] failed to load 'broken'" in lines[0], lines[0]


def test_broken_config_keeps_serving_without_exit_on_error(server_factory, broken_repo):
    s = server_factory(*common(broken_repo), "--exit-on-error=false")
    lines = s.wait_ready()
    status = table_status(lines)
    assert status["identity_fp32"] == "READY", s.text()
    assert status["broken"].startswith("UNAVAILABLE:"), s.text()
    assert "config.pbtxt:4" in status["broken"] and "no_such_field" in status["broken"]
    assert "1 of 2 models READY" in lines[-1]
    assert s.stop() == 0, s.text()


def test_unknown_flag_exits_2_with_usage():
    code, out, err = run([*common(), "--no-such-flag=1"])
    assert code == 2
    assert "unknown flag '--no-such-flag'" in err
    assert "Usage:" in err and "--model-repository" in err
    assert out == ""


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--log-verbose", "abc"),
        ("--exit-on-error", "maybe"),
        ("--model-control-mode", "sometimes"),
        ("--exit-timeout-secs", "-1"),
        ("--repository-poll-secs", "5s"),
        ("--log-format", "json"),
        ("--backend-config", "identity,novalue"),
        ("--rate-limit", "sometimes"),
        ("--rate-limit-resource", "gpu"),
        ("--rate-limit-resource", "R:-1"),
        ("--rate-limit-resource", "R:2:x"),
        ("--cache-config", "size=100"),
        ("--cache-config", "local,size"),
        ("--response-cache-byte-size", "1k"),
        ("--reuse-http-port", "maybe"),
        ("--pinned-memory-pool-byte-size", "-1"),
        ("--cuda-memory-pool-byte-size", "268435456"),
        ("--model-load-gpu-limit", "0:1.5"),
        ("--metrics-config", "counter_latencies=maybe"),
        ("--host-policy", "numa-node=0"),
        ("--metrics-interval-ms", "0"),
    ],
)
def test_bad_value_exits_2_naming_flag(flag, value):
    code, _, err = run([*common(), f"{flag}={value}"])
    assert code == 2, err
    first = err.splitlines()[0]
    assert flag in first and value in first, first
    assert "Usage:" in err


def test_ports_and_addresses_of_disabled_endpoints_are_not_checked(server_factory):
    """As Triton: --grpc-port=-47 with --allow-grpc=false starts; the same
    port, or an empty address, on an endpoint that is on stops it."""
    s = server_factory(*common(), "--grpc-port=-47", "--grpc-address=", "--sagemaker-port=70000",
                       "--metrics-port=-1")
    s.wait_ready()
    assert s.stop() == 0, s.text()
    for args, flag, value in ((["--allow-grpc=true", "--grpc-port=-47"], "--grpc-port", "-47"),
                              (["--allow-http=true", "--http-port=65536"], "--http-port", "65536"),
                              (["--allow-grpc=true", "--grpc-address="], "--grpc-address", "''")):
        code, _, err = run([*common(), *args])
        assert code == 2, err
        first = err.splitlines()[0]
        assert flag in first and value in first, first


def test_missing_value_and_missing_repository_exit_2():
    code, _, err = run(["--model-repository"])
    assert code == 2 and "--model-repository needs a value" in err
    code, _, err = run([f"--backend-directory={BACKENDS}"])
    assert code == 2 and "--model-repository is required" in err
    code, _, err = run([*common(), "stray"])
    assert code == 2 and "unexpected argument 'stray'" in err


def test_load_model_requires_explicit_mode():
    code, _, err = run([*common(), "--load-model=simple"])
    assert code == 2 and "--model-control-mode=explicit" in err


def test_help_exits_0():
    code, out, err = run(["--help"])
    assert code == 0, err
    for flag in ("--model-repository", "--backend-config", "--model-control-mode", "--load-model",
                 "--exit-on-error", "--disable-auto-complete-config", "--log-verbose"):
        assert flag in out


def test_explicit_mode_loads_only_requested(server_factory):
    s = server_factory(*common(), "--model-control-mode", "explicit", "--load-model=simple")
    lines = s.wait_ready()
    status = table_status(lines)
    assert status == {"simple": "READY"}, s.text()
    assert any(l.startswith("Not loaded:") and "identity_fp32" in l for l in lines), s.text()
    assert s.stop() == 0, s.text()


def test_backend_config_and_other_flags_accepted(server_factory):
    s = server_factory(
        *common(),
        "--backend-config=identity,foo=bar",
        "--backend-config", "default-max-batch-size=4",
        "--log-verbose=1", "--log-format=ISO8601", "--log-warning=off", "--log-error=yes",
        "--strict-readiness=no", "--exit-timeout-secs=5", "--id=nereid-test",
        "--disable-auto-complete-config",
        # The example models need no resource: the limiter lets them all run.
        "--rate-limit=execution_count", "--rate-limit-resource=R:2", "--rate-limit-resource", "r:1:0",
    )
    lines = s.wait_ready()
    assert all(v == "READY" for v in table_status(lines).values()), s.text()
    assert len(table_status(lines)) == len(EXAMPLE_MODELS)
    assert s.stop() == 0, s.text()


def test_model_config_name_and_thread_flags(server_factory, tmp_path):
    """--model-config-name=NAME reads <model>/configs/NAME.pbtxt where it
    exists and config.pbtxt elsewhere; the thread-count flags and the
    deprecated --strict-model-config are taken (the latter with a warning)."""
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES, repo)
    (repo / "identity_fp32" / "configs").mkdir()
    text = (repo / "identity_fp32" / "config.pbtxt").read_text()
    (repo / "identity_fp32" / "configs" / "small.pbtxt").write_text(
        text.replace("max_batch_size: 8", "max_batch_size: 2"))
    s = server_factory(f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                       "--allow-metrics=false", "--http-port=0", "--http-address=127.0.0.1",
                       "--grpc-port=0", "--grpc-address=127.0.0.1",
                       "--http-thread-count=1", "--grpc-thread-count=3",
                       "--model-config-name=small", "--strict-model-config=false")
    lines = s.wait_ready()
    port = listening_ports(lines)["http"]
    def config(model):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{model}/config", timeout=30) as r:
            return json.loads(r.read())
    assert config("identity_fp32")["max_batch_size"] == 2
    assert config("identity_bytes")["max_batch_size"] == 8
    assert s.stop() == 0, s.text()
    assert "--strict-model-config is deprecated" in s.text()


def test_model_namespacing_serves_one_name_from_two_repositories(server_factory, tmp_path):
    """--model-namespacing=true: identity_fp32 in two repositories loads
    twice (two index rows); asked for by name alone it is ambiguous (400
    naming the namespace), while a name found in one repository answers.
    Without the flag the same layout fails that model."""
    first, second = tmp_path / "a", tmp_path / "b"
    for repo in (first, second):
        repo.mkdir()
        shutil.copytree(os.path.join(EXAMPLES, "identity_fp32"), repo / "identity_fp32")
    shutil.copytree(os.path.join(EXAMPLES, "identity_bytes"), second / "identity_bytes")
    args = [f"--model-repository={first}", f"--model-repository={second}", f"--backend-directory={BACKENDS}",
            "--allow-metrics=false", "--allow-grpc=false", "--http-port=0", "--http-address=127.0.0.1"]
    s = server_factory(*args, "--model-namespacing=true")
    lines = s.wait_ready()
    port = listening_ports(lines)["http"]
    url = f"http://127.0.0.1:{port}"
    req = urllib.request.Request(f"{url}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        index = json.loads(r.read())
    assert [m["state"] for m in index if m["name"] == "identity_fp32"] == ["READY", "READY"], index
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{url}/v2/models/identity_fp32", timeout=30)
    assert e.value.code == 400
    assert "model namespace must be provided" in json.loads(e.value.read())["error"]
    with urllib.request.urlopen(f"{url}/v2/models/identity_bytes/ready", timeout=30) as r:
        assert r.status == 200
    assert_stopped_clean(s)

    s = server_factory(*args)
    code = s.proc.wait(timeout=START_TIMEOUT)
    text = s.proc.stdout.read().decode(errors="replace") + s.text()
    assert code != 0, text
    assert "exists in more than one repository" in text, text


def test_tritonserver_command_line_for_cpu_is_taken(server_factory, tmp_path):
    """Flags a CPU deployment of tritonserver commonly passes start nereid:
    GPU and pool settings (no effect), tracing off, TLS off, host policies."""
    s = server_factory(
        *common(),
        "--pinned-memory-pool-byte-size=0", "--cuda-memory-pool-byte-size=0:0",
        "--cuda-virtual-address-size=0:1073741824", "--model-load-gpu-limit=0:0.8",
        "--min-supported-compute-capability=6.0", "--enable-peer-access=false",
        "--allow-gpu-metrics=false", "--allow-cpu-metrics=false", "--metrics-interval-ms=1000",
        "--buffer-manager-thread-count=0", "--model-load-thread-count=2", "--model-load-retry-count=0",
        f"--repoagent-directory={tmp_path}", f"--cache-directory={tmp_path}",
        "--grpc-infer-allocation-pool-size=8", "--grpc-max-response-pool-size=16",
        "--trace-config", "triton,file=/tmp/trace.json", "--trace-config=level=OFF", "--trace-config=rate=1000",
        "--grpc-use-ssl=false", "--allow-sagemaker=false", "--allow-vertex-ai=false", "--model-namespacing=false",
        "--metrics-config=counter_latencies=true", "--host-policy=cpu,numa-node=0",
    )
    lines = s.wait_ready()
    assert all(v == "READY" for v in table_status(lines).values()), s.text()
    assert s.stop() == 0, s.text()


def test_reuse_http_port_lets_two_servers_share_it(server_factory, tmp_path):
    # The first server takes a port the kernel picks (one picked here and
    # passed in could be taken by another test's socket meanwhile).
    common_args = [f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-grpc=false",
                   "--allow-metrics=false", "--http-address=127.0.0.1"]
    first = server_factory(*common_args, "--http-port=0", "--reuse-http-port=true")
    port = listening_ports(first.wait_ready())["http"]
    args = [*common_args, f"--http-port={port}"]
    second = server_factory(*args, "--reuse-http-port=true")
    second.wait_ready()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=30) as r:
        assert r.status == 200
    # Without the flag, the port is taken.
    code, _, err = run([*args])
    assert code != 0 and "cannot listen" in err, err
    assert first.stop() == 0 and second.stop() == 0


def test_counter_latencies_false_leaves_out_durations(server_factory):
    s = server_factory(f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-grpc=false",
                       "--allow-http=false", "--metrics-port=0", "--metrics-address=127.0.0.1",
                       "--metrics-config=counter_latencies=false")
    lines = s.wait_ready()
    port = listening_ports(lines)["metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    assert "nv_inference_request_success{" in text, text
    assert "_duration_us" not in text, text
    assert s.stop() == 0, s.text()


def test_cpu_metrics_and_histograms_follow_the_flags(server_factory):
    """The nv_cpu_* gauges are on by default and go with
    --allow-cpu-metrics=false; histogram_latencies=true adds the
    first-response histogram to decoupled models (only, as in Triton);
    every model shows its load time."""
    def scrape(*flags):
        s = server_factory(f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}",
                           "--model-control-mode=explicit", "--load-model=identity_fp32",
                           "--load-model=square_int32", "--allow-grpc=false",
                           "--allow-http=false", "--metrics-port=0", "--metrics-address=127.0.0.1", *flags)
        lines = s.wait_ready()
        port = listening_ports(lines)["metrics"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            text = r.read().decode()
        assert s.stop() == 0, s.text()
        return text

    text = scrape("--metrics-interval-ms=100")
    assert re.search(r"^nv_cpu_utilization [0-9.e+-]+$", text, re.M), text
    total = int(re.search(r"^nv_cpu_memory_total_bytes (\d+)$", text, re.M).group(1))
    used = int(re.search(r"^nv_cpu_memory_used_bytes (\d+)$", text, re.M).group(1))
    assert 0 < used <= total, text
    assert re.search(r'^nv_model_load_duration_secs\{model="identity_fp32",version="1"\} [0-9.e+-]+$', text, re.M)
    for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
        assert f'nv_inference_request_failure{{model="identity_fp32",reason="{reason}",version="1"}} 0' in text
    assert "nv_inference_first_response_histogram_ms" not in text, text

    text = scrape("--allow-cpu-metrics=false", "--metrics-config=histogram_latencies=true")
    assert "nv_cpu_" not in text, text
    assert 'nv_inference_first_response_histogram_ms_bucket{model="square_int32",version="1",le="5000"} 0' in text
    assert 'nv_inference_first_response_histogram_ms_bucket{model="identity_fp32"' not in text, text


def test_summary_latencies_add_summaries(server_factory):
    """summary_latencies=true: the five nv_inference_*_summary_us summaries
    with Triton's default quantiles, or those of summary_quantiles; their
    _count counts successful requests; bad quantiles stop the server."""
    for extra, quantiles in (([], ["0.5", "0.9", "0.95", "0.99"]),
                             (["--metrics-config=summary_quantiles=0.25:0.01,0.75:0.01"], ["0.25", "0.75"]),
                             # Triton's own documented value: "0.0.1" reads as 0.0, as std::stod reads it.
                             (["--metrics-config=summary_quantiles=0.1:0.0.1,0.5:0.05"], ["0.1", "0.5"])):
        s = server_factory(f"--model-repository={EXAMPLES}", f"--backend-directory={BACKENDS}", "--allow-grpc=false",
                           "--http-port=0", "--http-address=127.0.0.1", "--metrics-port=0",
                           "--metrics-address=127.0.0.1", "--metrics-config=summary_latencies=true", *extra)
        lines = s.wait_ready()
        ports = listening_ports(lines)
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]})
        for _ in range(3):
            req = urllib.request.Request(f"http://127.0.0.1:{ports['http']}/v2/models/identity_fp32/infer",
                                         data=body.encode())
            urllib.request.urlopen(req, timeout=30).read()
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['metrics']}/metrics", timeout=30) as r:
            text = r.read().decode()
        for fam in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
            name = f"nv_inference_{fam}_summary_us"
            assert f"# TYPE {name} summary" in text, text
            assert f'{name}_count{{model="identity_fp32",version="1"}} 3' in text, text
            got = re.findall(rf'{name}{{model="identity_fp32",version="1",quantile="([0-9.]+)"}} ([0-9.e+-]+)', text)
            assert [q for q, _ in got] == quantiles, got
            assert all(float(v) >= 0 for _, v in got), got
        # A model that ran nothing has an empty window.
        assert 'nv_inference_request_summary_us{model="simple",version="1",quantile="%s"} NaN' % quantiles[0] in text
        assert "_duration_us" in text  # the counters stay
        assert s.stop() == 0, s.text()
    code, _, err = run([*common(), "--metrics-config=summary_latencies=true", "--metrics-config=summary_quantiles=2:1"])
    assert code != 0 and "invalid summary_quantiles '2:1'" in err, err
    for bad in ("0.5", "x:0.1", "0.5:", "0.5:y"):
        code, _, err = run([*common(), "--metrics-config=summary_latencies=true",
                            f"--metrics-config=summary_quantiles={bad}"])
        assert code != 0 and f"invalid summary_quantiles '{bad}'" in err, (bad, err)


def test_bad_cache_settings_stop_the_server():
    code, _, err = run([*common(), "--cache-config=local,size=10", "--response-cache-byte-size=10"])
    assert code == 2 and "Incompatible flags --response-cache-byte-size and --cache-config" in err, err
    code, _, err = run([*common(), "--cache-config=local,size=abc"])
    assert code == 1 and "Failed to initialize LocalCache: 'size' must be a number of bytes" in err, err
    code, _, err = run([*common(), "--cache-config=redis,host=localhost"])
    assert code == 1 and "unable to load cache 'redis' from '/opt/tritonserver/caches/redis/" in err, err
    code, _, err = run([*common(), f"--cache-directory={TEST_CACHES}", "--cache-config=memory,fail_init=true"])
    assert code == 1 and "cache 'memory' failed to initialize: memory cache: asked to fail" in err, err


def test_response_cache_answers_repeats(server_factory, tmp_path):
    """--cache-config=local,size=N with a model that enables the cache: the
    repeat of a request is answered from the cache (statistics and metrics
    say so); the deprecated --response-cache-byte-size warns; a plugin from
    --cache-directory answers the same way."""
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(EXAMPLES, "identity_fp32"), repo / "identity_fp32")
    cfg = repo / "identity_fp32" / "config.pbtxt"
    cfg.write_text(cfg.read_text() + "response_cache { enable: true }\n")
    for flags in (["--cache-config", "local,size=1048576", "--metrics-config=summary_latencies=true"],
                  ["--response-cache-byte-size=1048576"],
                  [f"--cache-directory={TEST_CACHES}", "--cache-config=memory,note=x"]):
        s = server_factory(f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                           "--allow-grpc=false", "--http-port=0", "--http-address=127.0.0.1",
                           "--metrics-port=0", *flags)
        lines = s.wait_ready()
        ports = listening_ports(lines)
        http, metrics = ports["http"], ports["metrics"]
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "FP32",
                                       "data": [1.5, 2.5, 3.5]}]}).encode()
        for _ in range(3):
            req = urllib.request.Request(f"http://127.0.0.1:{http}/v2/models/identity_fp32/infer", data=body)
            with urllib.request.urlopen(req, timeout=30) as r:
                assert json.loads(r.read())["outputs"][0]["data"] == [1.5, 2.5, 3.5]
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/models/identity_fp32/stats", timeout=30) as r:
            st = json.loads(r.read())["model_stats"][0]
        assert st["execution_count"] == 1, st
        assert st["inference_stats"]["cache_hit"]["count"] == 2, st
        assert st["inference_stats"]["cache_miss"]["count"] == 1, st
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=30) as r:
            text = r.read().decode()
        assert 'nv_cache_num_hits_per_model{model="identity_fp32",version="1"} 2' in text, text
        assert ("nv_cache_num_entries 1" in text) == ("memory" not in " ".join(flags)), text
        summaries = "summary_latencies=true" in " ".join(flags)
        assert ('nv_cache_hit_summary_us_count{model="identity_fp32",version="1"} 2' in text) == summaries, text
        assert ('nv_cache_miss_summary_us_count{model="identity_fp32",version="1"} 1' in text) == summaries, text
        if summaries:  # cache hits are successful requests too
            assert 'nv_inference_request_summary_us_count{model="identity_fp32",version="1"} 3' in text, text
        assert s.stop() == 0, s.text()
        if "--response-cache-byte-size=1048576" in flags:
            assert "--response-cache-byte-size is deprecated" in s.text()
    assert "response cache: 'memory' from" in s.text(), s.text()


def test_repoagent_directory_finds_agents(server_factory, tmp_path):
    """--repoagent-directory: a model whose config names the test agent is
    loaded from the folder the agent gives (version 7 exists only there);
    without the flag the load fails naming Triton's default folder."""
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(EXAMPLES, "identity_fp32"), repo / "identity_fp32")
    cfg = repo / "identity_fp32" / "config.pbtxt"
    cfg.write_text(cfg.read_text() + 'model_repository_agents { agents [ { name: "recorder" '
                   'parameters { key: "new_version" value: "7" } } ] }\n')
    log = tmp_path / "agent.log"
    os.environ["NRD_RECORDER_AGENT_LOG"] = str(log)
    try:
        s = server_factory(f"--model-repository={repo}", f"--backend-directory={BACKENDS}",
                           f"--repoagent-directory={TEST_AGENTS}", "--allow-grpc=false", "--http-port=0",
                           "--http-address=127.0.0.1", "--allow-metrics=false")
        http = listening_ports(s.wait_ready())["http"]
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/models/identity_fp32/versions/7/ready",
                                    timeout=30) as r:
            assert r.status == 200
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32",
                                       "data": [1.5, 2.5]}]}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{http}/v2/models/identity_fp32/infer", data=body)
        with urllib.request.urlopen(req, timeout=30) as r:
            out = json.loads(r.read())
        assert out["model_version"] == "7" and out["outputs"][0]["data"] == [1.5, 2.5], out
        assert s.stop() == 0, s.text()
        events = log.read_text().split("\n")
        for e in ("LOAD identity_fp32 -", "LOAD_COMPLETE identity_fp32 -", "UNLOAD_COMPLETE identity_fp32 -",
                  "Finalize"):
            assert e in events, events
        code, _, err = run([f"--model-repository={repo}", f"--backend-directory={BACKENDS}", "--allow-grpc=false",
                            "--allow-http=false", "--allow-metrics=false"])
        assert code != 0 and ("unable to find 'libtritonrepoagent_recorder.so' for repo agent 'recorder', "
                              "searched: /opt/tritonserver/repoagents") in err, err
    finally:
        del os.environ["NRD_RECORDER_AGENT_LOG"]


def test_poll_mode_picks_up_new_model(server_factory):
    d = tempfile.mkdtemp(prefix="nereid-poll-")
    try:
        shutil.copytree(os.path.join(EXAMPLES, "identity_fp32"), os.path.join(d, "identity_fp32"))
        logfile = os.path.join(d, "..", os.path.basename(d) + ".log")
        s = server_factory(*common(d), "--model-control-mode=poll", "--repository-poll-secs=1",
                           f"--log-file={logfile}")
        s.wait_ready()
        # Copied beside the repository, then renamed into it: a poll never
        # sees half a model.
        staged = d + ".simple"
        shutil.copytree(os.path.join(EXAMPLES, "simple"), staged)
        os.rename(staged, os.path.join(d, "simple"))
        deadline = time.monotonic() + 60
        seen = ""
        while time.monotonic() < deadline:
            with open(logfile) as f:
                seen = f.read()
            if "successfully loaded 'simple'" in seen:
                break
            time.sleep(0.2)
        assert "successfully loaded 'simple'" in seen, seen
        assert s.stop() == 0, s.text()
    finally:
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(d + ".simple", ignore_errors=True)
        try:
            os.unlink(os.path.join(os.path.dirname(d), os.path.basename(d) + ".log"))
        except OSError:
            pass
