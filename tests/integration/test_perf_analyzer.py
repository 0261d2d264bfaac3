"""Triton's own load generator, perf_analyzer, against nereid: one test per
mode users run (HTTP and gRPC, sync and async, system shared memory over
both, streaming to a decoupled model, sequences, BYTES inputs, and the C API
mode that loads our libtritonserver.so in place of Triton's). Each test
fails when its mode fails. Where perf_analyzer can check the answers
(--input-data with validation_data) it does, and one test proves that a
wrong answer fails such a run.

perf_analyzer is the one in tritonclient 2.51.0's wheel, installed by
scripts/fetch_pypi.sh (NRD_PERF_ANALYZER); the C API mode needs
NRD_TRITONSERVER_LIB (our libtritonserver.so).
"""
import json
import os
import re
import shutil
import subprocess

import pytest

from test_nereid_cli import BACKENDS, EXAMPLES, Server, assert_stopped_clean, listening_ports

PA = os.environ.get("NRD_PERF_ANALYZER", "")
CORE_LIB = os.environ.get("NRD_TRITONSERVER_LIB", "")

if not os.access(PA, os.X_OK):  # a missing tool fails the run, never skips it
    raise RuntimeError(f"no perf_analyzer at {PA!r} (scripts/fetch_pypi.sh installs it; ctest sets NRD_PERF_ANALYZER)")

# Windows that end after 50 answers (a time window on a busy 2-core
# machine can close with none, and perf_analyzer then fails the run), and
# a stability bound nothing can miss: these tests check that each mode
# works, bench/perf_analyzer.sh measures.
QUICK = ["--measurement-mode", "count_windows", "--measurement-request-count", "50", "--measurement-interval", "300",
         "--stability-percentage", "1000", "--max-trials", "10"]
TIMEOUT = 240


@pytest.fixture(scope="module")
def nereid():
    # --allow-client-shm=true: perf_analyzer's --shared-memory runs register regions.
    s = Server(["--model-repository", EXAMPLES, "--backend-directory", BACKENDS, "--http-port=0", "--grpc-port=0",
                "--metrics-port=0", "--log-verbose=0", "--allow-client-shm=true"])
    try:
        ports = listening_ports(s.wait_ready())
        yield ports
        assert_stopped_clean(s)
    finally:
        s.close()


def run_pa(args, env=None):
    p = subprocess.run([PA, *args, *QUICK], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    return p.returncode, p.stdout + p.stderr


def assert_ran(rc, out):
    """A clean run: exit 0, a throughput line, no request in error, and the
    server's statistics read back (perf_analyzer prints them per run)."""
    assert rc == 0, out
    assert re.search(r"Throughput: [0-9.]+ infer/sec", out), out
    assert not re.search(r"(?i)thread \[\d+\] had error|^error:", out, re.M), out
    m = re.search(r"Server:\s*\n\s*Inference count: (\d+)", out)
    assert m and int(m.group(1)) > 0, out


def url(nereid, proto):
    return ["-u", f"localhost:{nereid[proto]}", "-i", proto]


def write_json(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def simple_data(tmp_path, off_by=0):
    """simple (add_sub) inputs and the outputs it must answer, for
    perf_analyzer's --input-data; off_by spoils the expected sum."""
    a, b = list(range(16)), [3] * 16
    return write_json(tmp_path, f"simple{off_by}.json", {
        "data": [{"INPUT0": {"content": a, "shape": [16]}, "INPUT1": {"content": b, "shape": [16]}}],
        "validation_data": [{"OUTPUT0": {"content": [x + 3 + off_by for x in a]},
                             "OUTPUT1": {"content": [x - 3 for x in a]}}]})


@pytest.mark.parametrize("proto,extra", [("http", []), ("grpc", []), ("http", ["-a"]), ("grpc", ["-a"])],
                         ids=["http", "grpc", "http-async", "grpc-async"])
def test_infer_answers_checked(nereid, tmp_path, proto, extra):
    assert_ran(*run_pa(["-m", "simple", *url(nereid, proto), "--input-data", simple_data(tmp_path), *extra]))


def test_wrong_answer_fails_the_run(nereid, tmp_path):
    """The checks above mean something: an expected output one off fails."""
    rc, out = run_pa(["-m", "simple", *url(nereid, "http"), "--input-data", simple_data(tmp_path, off_by=1)])
    assert rc != 0 and "Output doesn't match expected output" in out, out


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_system_shared_memory(nereid, proto):
    """Inputs and outputs in system shared memory regions perf_analyzer
    registers; over HTTP this failed every request while outputs in shared
    memory were answered with parameters (Triton answers none)."""
    assert_ran(*run_pa(["-m", "simple", *url(nereid, proto), "--shared-memory=system"]))


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_bytes_inputs(nereid, proto):
    assert_ran(*run_pa(["-m", "identity_bytes", *url(nereid, proto), "--string-length", "16",
                        "--shape", "INPUT0:4"]))


def test_bytes_in_shared_memory(nereid):
    assert_ran(*run_pa(["-m", "identity_bytes", *url(nereid, "grpc"), "--string-length", "7",
                        "--shape", "INPUT0:3", "--shared-memory=system", "--output-shared-memory-size", "1024"]))


def test_streaming_decoupled(nereid, tmp_path):
    """square_int32 answers IN = [3] with three responses: perf_analyzer
    counts them (response throughput about three times the request's)."""
    data = write_json(tmp_path, "square.json", {"data": [{"IN": [3]}]})
    rc, out = run_pa(["-m", "square_int32", *url(nereid, "grpc"), "--streaming", "--input-data", data])
    assert_ran(rc, out)
    req = float(re.search(r"  Throughput: ([0-9.]+) infer/sec", out).group(1))
    resp = float(re.search(r"Response Throughput: ([0-9.]+) infer/sec", out).group(1))
    assert 2.5 <= resp / req <= 3.5, out


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_sequences(nereid, proto):
    """accumulate_onnx: a sequence-batched ONNX model with implicit state;
    perf_analyzer sends sequences of 4 with start and end flags."""
    assert_ran(*run_pa(["-m", "accumulate_onnx", *url(nereid, proto), "--sequence-length", "4"]))


def sanitizer_preload():
    """perf_analyzer is not built with our sanitizers: when our library is,
    their runtime must be loaded first (and LeakSanitizer must not judge
    perf_analyzer's own allocations)."""
    needed = subprocess.run(["readelf", "-d", CORE_LIB], capture_output=True, text=True).stdout
    if "libtsan.so" in needed:
        path = subprocess.run(["gcc", "-print-file-name=libtsan.so"], capture_output=True, text=True).stdout.strip()
        supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf_analyzer.tsan.supp")
        return {"LD_PRELOAD": path, "TSAN_OPTIONS": f"suppressions={supp}"}
    for lib in ("libasan.so",):
        if lib in needed:
            path = subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
            # perf_analyzer 2.51's own bugs, not ours: its allocator
            # callbacks pair new with free, and it copies each output out of
            # a buffer its release callback already freed (memcpy, which
            # replace_intrin=0 leaves unchecked; our code's own loads and
            # stores stay checked, and every other suite checks its memcpy).
            return {"LD_PRELOAD": path,
                    "ASAN_OPTIONS": "detect_leaks=0:alloc_dealloc_mismatch=0:replace_intrin=0"}
    return {}


def test_c_api_mode(tmp_path):
    """--service-kind=triton_c_api loads <dir>/lib/libtritonserver.so and
    <dir>/backends: ours, laid out as Triton's /opt/tritonserver. No
    validation_data here: perf_analyzer 2.51 compares a C API response's
    outputs after it has deleted the response (RawData hands out the
    released buffer), so that check fails against any server."""
    assert os.path.exists(CORE_LIB), f"no libtritonserver.so at {CORE_LIB!r} (ctest sets NRD_TRITONSERVER_LIB)"
    top = tmp_path / "tritonserver"
    (top / "lib").mkdir(parents=True)
    os.symlink(CORE_LIB, top / "lib" / "libtritonserver.so")
    os.symlink(BACKENDS, top / "backends")
    repo = tmp_path / "repo"
    shutil.copytree(os.path.join(EXAMPLES, "simple"), repo / "simple")
    env = dict(os.environ, **sanitizer_preload())
    rc, out = run_pa(["-m", "simple", "--service-kind=triton_c_api", f"--triton-server-directory={top}",
                      f"--model-repository={repo}"], env=env)
    assert_ran(rc, out)


def test_bench_script_prints_a_row_per_mode():
    """bench/perf_analyzer.sh, cut to one model and short windows: a row
    with figures for HTTP, gRPC and the C API mode, none failed."""
    if sanitizer_preload():
        pytest.skip("a benchmark of release builds: a sanitizer build measures the sanitizer")
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.environ["NEREID_BIN"])))
    script = os.path.join(os.path.dirname(os.path.dirname(EXAMPLES)), "bench", "perf_analyzer.sh")
    env = dict(os.environ, MODELS="identity_fp32", CONC="1", WINDOW_MS="200")
    p = subprocess.run(["bash", script, build], capture_output=True, text=True, timeout=TIMEOUT, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [line.split() for line in p.stdout.splitlines() if line.startswith("identity_fp32 ")]
    assert [r[1] for r in rows] == ["http", "grpc", "capi"], p.stdout
    assert all(float(r[3]) > 0 for r in rows), p.stdout
    assert all(r[6] != "-" for r in rows[:2]) and rows[0][7] == "1.00x", p.stdout

