"""scripts/fetch_pypi.sh on bad wheels: a corrupt or missing wheel stops it
with a message naming the file and the hash it should have, and leaves
nothing where the build would take it for installed. Runs offline, from a
wheelhouse of our own making (NRD_WHEELHOUSE) into a scratch NRD_DEPS_DIR."""
import os
import re
import subprocess
import zipfile

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(SRC, "scripts", "fetch_pypi.sh")
ORT_REQ = os.path.join(SRC, "scripts", "pypi", "onnxruntime.txt")


def ort_pin():
    text = open(ORT_REQ).read()
    version = re.search(r"^onnxruntime==(\S+)", text, re.M).group(1)
    digest = re.search(r"--hash=sha256:([0-9a-f]{64})", text).group(1)
    return version, digest


def run_fetch(tmp_path, wheelhouse):
    deps = tmp_path / "deps"
    env = dict(os.environ, NRD_DEPS_DIR=str(deps), NRD_WHEELHOUSE=str(wheelhouse))
    proc = subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    return proc, deps


def assert_nothing_installed(deps):
    left = sorted(os.listdir(deps)) if deps.exists() else []
    assert "onnxruntime" not in left, left
    assert not [p for p in left if p.endswith(".partial")], left


def test_corrupt_wheel_names_file_and_expected_hash(tmp_path):
    version, digest = ort_pin()
    house = tmp_path / "house"
    house.mkdir()
    # A wheel with the pinned name whose bytes are not the pinned ones: a
    # valid zip, so only the hash can tell.
    name = f"onnxruntime-{version}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(house / name, "w") as z:
        z.writestr("onnxruntime/capi/libonnxruntime.so." + version, b"not a library")
    proc, deps = run_fetch(tmp_path, house)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert name in proc.stderr, proc.stderr
    assert digest in proc.stderr, proc.stderr
    assert "nothing was installed" in proc.stderr, proc.stderr
    assert_nothing_installed(deps)


def test_missing_wheel_names_requirements_file(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    proc, deps = run_fetch(tmp_path, house)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "scripts/pypi/onnxruntime.txt" in proc.stderr, proc.stderr
    assert "onnxruntime==" in proc.stderr, proc.stderr
    assert_nothing_installed(deps)


def test_stale_partial_and_changed_pin_are_replaced(tmp_path):
    """A folder left by an interrupted run, or one whose stamp names other
    requirements, is never taken for current: with no wheels to be had the
    script fails instead of reporting it up to date."""
    house = tmp_path / "house"
    house.mkdir()
    deps = tmp_path / "deps"
    (deps / "onnxruntime").mkdir(parents=True)
    (deps / "onnxruntime" / "libonnxruntime.so.1").write_bytes(b"old")
    (deps / "onnxruntime" / ".stamp").write_text("0" * 64 + "\n")
    (deps / "onnxruntime.partial").mkdir()
    proc, deps = run_fetch(tmp_path, house)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "up to date" not in proc.stdout
    assert_nothing_installed(deps)
