"""scripts/fetch_pypi.sh on bad wheels: a corrupt or missing wheel stops it
with a message naming the file and the hash it should have, and leaves
nothing where the build would take it for installed. Runs offline, from a
wheelhouse of our own making (NRD_WHEELHOUSE) into a scratch NRD_DEPS_DIR.
The first part (onnxruntime) and the part after it (onnxruntime-gpu, ONNX
Runtime's GPU build), each on its own: for the second, the first is laid
in place with a current stamp, so that the script skips it as up to date."""
import hashlib
import os
import re
import subprocess
import zipfile

import pytest

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(SRC, "scripts", "fetch_pypi.sh")
PYPI = os.path.join(SRC, "scripts", "pypi")

# part: (requirements file, the wheel's name for a version, a member of it),
# in the order the script fetches them.
PARTS = {
    "onnxruntime": ("onnxruntime.txt",
                    "onnxruntime-{}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
                    "onnxruntime/capi/libonnxruntime.so.{}"),
    "onnxruntime-gpu": ("onnxruntime-gpu.txt", "onnxruntime_gpu-{}-cp311-cp311-manylinux_2_28_x86_64.whl",
                        "onnxruntime/capi/libonnxruntime_providers_cuda.so"),
}


def pin(part):
    req = PARTS[part][0]
    text = open(os.path.join(PYPI, req)).read()
    version = re.search(r"^" + re.escape(part) + r"==(\S+)", text, re.M).group(1)
    digest = re.search(r"--hash=sha256:([0-9a-f]{64})", text).group(1)
    return version, digest


def ort_pin():
    return pin("onnxruntime")


def parts_before_are_current(deps, part):
    """Lays every part the script fetches before 'part' in place with the
    stamp of its requirements file, as a finished run leaves it."""
    for name in PARTS:
        if name == part:
            return
        (deps / name).mkdir(parents=True)
        stamp = hashlib.sha256(open(os.path.join(PYPI, PARTS[name][0]), "rb").read()).hexdigest()
        (deps / name / ".stamp").write_text(stamp + "\n")


def run_fetch(tmp_path, wheelhouse):
    deps = tmp_path / "deps"
    env = dict(os.environ, NRD_DEPS_DIR=str(deps), NRD_WHEELHOUSE=str(wheelhouse))
    proc = subprocess.run(["bash", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    return proc, deps


def assert_nothing_installed(deps, part="onnxruntime"):
    left = sorted(os.listdir(deps)) if deps.exists() else []
    assert part not in left, left
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


def test_gpu_part_corrupt_wheel_names_file_and_expected_hash(tmp_path):
    # onnxruntime-gpu's wheel, faked as above: the script stops at it with
    # its name and pinned hash, and leaves no .deps/onnxruntime-gpu.
    version, digest = pin("onnxruntime-gpu")
    _, wheel, member = PARTS["onnxruntime-gpu"]
    house = tmp_path / "house"
    house.mkdir()
    name = wheel.format(version)
    with zipfile.ZipFile(house / name, "w") as z:
        z.writestr(member, b"not a library")
    parts_before_are_current(tmp_path / "deps", "onnxruntime-gpu")
    proc, deps = run_fetch(tmp_path, house)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "fetch_pypi: onnxruntime up to date" in proc.stdout, proc.stdout
    assert name in proc.stderr, proc.stderr
    assert digest in proc.stderr, proc.stderr
    assert "nothing was installed" in proc.stderr, proc.stderr
    assert_nothing_installed(deps, "onnxruntime-gpu")


@pytest.mark.parametrize("stale", ["missing", "old_stamp"])
def test_gpu_part_missing_wheel_or_old_stamp_names_requirements_file(tmp_path, stale):
    # No wheel to be had: the message names onnxruntime-gpu's requirements;
    # a part left with another pin's stamp is removed, not reported current.
    house = tmp_path / "house"
    house.mkdir()
    deps = tmp_path / "deps"
    parts_before_are_current(deps, "onnxruntime-gpu")
    if stale == "old_stamp":
        (deps / "onnxruntime-gpu").mkdir()
        (deps / "onnxruntime-gpu" / "libonnxruntime.so.1").write_bytes(b"old")
        (deps / "onnxruntime-gpu" / ".stamp").write_text("0" * 64 + "\n")
        (deps / "onnxruntime-gpu.partial").mkdir()
    proc, deps = run_fetch(tmp_path, house)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "onnxruntime-gpu up to date" not in proc.stdout
    assert "scripts/pypi/onnxruntime-gpu.txt" in proc.stderr, proc.stderr
    assert "onnxruntime-gpu==" in proc.stderr, proc.stderr
    assert_nothing_installed(deps, "onnxruntime-gpu")
