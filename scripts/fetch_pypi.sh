#!/usr/bin/env bash
# Puts what Nereid takes from PyPI where the build and the tests find it,
# each from a wheel pinned by version and sha256 in scripts/pypi/*.txt:
#   .deps/onnxruntime/libonnxruntime.so.1    (onnxruntime.txt; the backends)
#   .deps/onnxruntime-gpu/                   (onnxruntime-gpu.txt; ONNX
#                                             Runtime's GPU build and its
#                                             CUDA provider, for KIND_GPU
#                                             models: see docs/gpu.md)
#   .deps/perf_analyzer/bin/perf_analyzer    (perf_analyzer.txt; the tests)
#   .deps/venv/                              (clients.txt; tritonclient for the
#                                             tests, over Debian's python)
#   .deps/tritonserver/pytriton/tritonserver/bin/tritonserver
#                                            (oracle.txt; Triton itself, for
#                                             the differential tests only)
#   .deps/pytorch/{lib,include}/             (torch.txt; libtorch's CPU
#                                             libraries and headers, for the
#                                             pytorch backend)
#   .deps/openvino/lib/, .deps/openvino/python/
#                                            (openvino.txt; the openvino
#                                             backend and its tests)
#   .deps/nvml/include/nvml.h                (nvml.txt; the check of the
#                                             core's NVML declarations)
# Nothing is installed into Debian's python. Each part is laid out in a
# ".partial" folder and moved into place only once complete, with a stamp
# naming the requirements it came from: an interrupted run, a corrupt wheel
# or a changed pin leaves nothing the build would take for finished.
#
# NRD_DEPS_DIR   where to put them (default: .deps in the checkout)
# NRD_WHEELHOUSE a folder of wheels to use instead of PyPI (offline machines,
#                and the tests of this script)
# Idempotent: a part whose stamp matches its requirements file is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
deps=${NRD_DEPS_DIR:-$src/.deps}
pyreq=$src/scripts/pypi
python=/usr/bin/python3
mkdir -p "$deps"

fail() { echo "fetch_pypi: $*" >&2; exit 1; }

# The stamp of a part: the sha256 of the requirements file it came from.
req_stamp() { sha256sum "$1" | cut -d' ' -f1; }

# True when a part is in place from these requirements. Otherwise what is
# there (another pin, or no stamp) is removed first, so that a failure below
# leaves nothing rather than something the build would take for current.
part_current() { # part reqfile
  if [ -f "$deps/$1/.stamp" ] && [ "$(cat "$deps/$1/.stamp")" = "$(req_stamp "$2")" ]; then
    return 0
  fi
  rm -rf "${deps:?}/$1"
  return 1
}

# Downloads every wheel of a requirements file into a folder, letting pip
# check each against its --hash, then checks them again ourselves so that
# the message names the file and the hash it should have had.
download() { # reqfile dir
  local req=$1 dir=$2 index=()
  [ -n "${NRD_WHEELHOUSE:-}" ] && index=(--no-index --find-links "$NRD_WHEELHOUSE")
  if ! "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
       --only-binary=:all: --require-hashes "${index[@]}" -r "$req" -d "$dir" >&2; then
    fail "a wheel of ${req#"$src"/} could not be had or failed its sha256 check" \
         "(pip's message above names it); nothing was installed"
  fi
  "$python" - "$req" "$dir" <<'EOF' || fail "nothing was installed"
import hashlib, os, re, sys
req, folder = sys.argv[1], sys.argv[2]
text = open(req).read().replace("\\\n", " ")
want = {}
for line in text.splitlines():
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name = re.split(r"[=<> \[]", line, 1)[0]
    want[re.sub(r"[-_.]+", "_", name).lower()] = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
bad = 0
for wheel in sorted(os.listdir(folder)):
    key = re.sub(r"[-_.]+", "_", wheel.split("-", 1)[0]).lower()
    got = hashlib.sha256(open(os.path.join(folder, wheel), "rb").read()).hexdigest()
    if got not in want.get(key, []):
        print(f"fetch_pypi: {wheel}: sha256 {got}, expected {' or '.join(want.get(key, ['(not in ' + req + ')']))}",
              file=sys.stderr)
        bad = 1
sys.exit(bad)
EOF
}

# Copies members of a wheel (a zip) to paths under a folder.
extract() { # wheel dest member=path...
  "$python" - "$@" <<'EOF'
import os, shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for pair in sys.argv[3:]:
        member, path = pair.split("=", 1)
        out = os.path.join(dest, path)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(member) as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        os.chmod(out, 0o755 if "/bin/" in "/" + path else 0o644)
EOF
}

# Moves a finished ".partial" folder into place with its stamp.
publish() { # part reqfile
  req_stamp "$2" >"$deps/$1.partial/.stamp"
  rm -rf "$deps/$1"
  mv "$deps/$1.partial" "$deps/$1"
  echo "fetch_pypi: $1 ready in $deps/$1 (${2#"$src"/})"
}

work=$(mktemp -d)
trap 'rm -rf "$work"; rm -rf "$deps"/*.partial' EXIT

fetch_onnxruntime() {
  local req=$pyreq/onnxruntime.txt
  part_current onnxruntime "$req" && { echo "fetch_pypi: onnxruntime up to date"; return; }
  [ "$(uname -m)" = x86_64 ] || { echo "fetch_pypi: the pinned ONNX Runtime wheel is for x86_64 only; the onnxruntime backend will not load" >&2; return; }
  mkdir -p "$work/ort"
  download "$req" "$work/ort"
  rm -rf "$deps/onnxruntime.partial"
  extract "$work"/ort/onnxruntime-*.whl "$deps/onnxruntime.partial" \
    onnxruntime/capi/libonnxruntime.so.1.24.3=libonnxruntime.so.1
  publish onnxruntime "$req"
}

# ONNX Runtime's GPU build, beside the CPU one: its libonnxruntime.so.1
# serves KIND_CPU models as well, and opens the two provider libraries
# from its own folder when a KIND_GPU instance asks for the CUDA
# provider. The CUDA provider NEEDs libcuda.so.1 (the driver), so only
# the other two can be loaded on a machine without one.
fetch_onnxruntime_gpu() {
  local req=$pyreq/onnxruntime-gpu.txt
  part_current onnxruntime-gpu "$req" && { echo "fetch_pypi: onnxruntime-gpu up to date"; return; }
  [ "$(uname -m)" = x86_64 ] || { echo "fetch_pypi: the pinned onnxruntime-gpu wheel is for x86_64 only; KIND_GPU ONNX models will not load" >&2; return; }
  mkdir -p "$work/ortgpu"
  download "$req" "$work/ortgpu"
  local dest=$deps/onnxruntime-gpu.partial lib
  rm -rf "$dest"
  extract "$work"/ortgpu/onnxruntime_gpu-*.whl "$dest" \
    onnxruntime/capi/libonnxruntime.so.1.31.1=libonnxruntime.so.1 \
    onnxruntime/capi/libonnxruntime_providers_cuda.so=libonnxruntime_providers_cuda.so \
    onnxruntime/capi/libonnxruntime_providers_shared.so=libonnxruntime_providers_shared.so
  for lib in libonnxruntime.so.1 libonnxruntime_providers_shared.so; do
    "$python" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$dest/$lib" ||
      fail "$lib from ${req#"$src"/} does not load here (ldd $dest/$lib); nothing was installed"
  done
  publish onnxruntime-gpu "$req"
}

fetch_perf_analyzer() {
  local req=$pyreq/perf_analyzer.txt
  part_current perf_analyzer "$req" && { echo "fetch_pypi: perf_analyzer up to date"; return; }
  [ "$(uname -m)" = x86_64 ] || { echo "fetch_pypi: no perf_analyzer for $(uname -m); its tests are skipped" >&2; return; }
  mkdir -p "$work/pa"
  download "$req" "$work/pa"
  rm -rf "$deps/perf_analyzer.partial"
  extract "$work"/pa/tritonclient-*.whl "$deps/perf_analyzer.partial" \
    tritonclient-2.51.0.data/data/bin/perf_analyzer=bin/perf_analyzer
  extract "$work"/pa/nvidia_cuda_runtime_cu12-*.whl "$deps/perf_analyzer.partial" \
    nvidia/cuda_runtime/lib/libcudart.so.12=lib/libcudart.so.12
  # The binary finds the CUDA runtime beside it, not through the environment.
  patchelf --set-rpath '$ORIGIN/../lib' "$deps/perf_analyzer.partial/bin/perf_analyzer"
  "$deps/perf_analyzer.partial/bin/perf_analyzer" --version >/dev/null 2>&1 ||
    "$deps/perf_analyzer.partial/bin/perf_analyzer" -h 2>&1 | grep -q "perf_analyzer" ||
    fail "perf_analyzer from ${req#"$src"/} does not start here (ldd it); nothing was installed"
  publish perf_analyzer "$req"
}

fetch_venv() {
  local req=$pyreq/clients.txt index=()
  part_current venv "$req" && { echo "fetch_pypi: venv up to date"; return; }
  mkdir -p "$work/venv"
  download "$req" "$work/venv"
  rm -rf "$deps/venv.partial"
  # Moved after it is built: the venv's python finds pyvenv.cfg beside it
  # wherever the folder lies (only bin/ scripts' shebangs keep the old
  # path, and the tests run "python -m").
  "$python" -m venv --system-site-packages "$deps/venv.partial"
  "$deps/venv.partial/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-deps --no-index --require-hashes -r "$req" --find-links "$work/venv" >&2 ||
    fail "installing ${req#"$src"/} into the tests' venv failed; nothing was installed"
  publish venv "$req"
}

# Triton from PyTriton's wheel, as the tests' oracle. The wheel's repair
# renamed the library's SONAME to libtritonserver-<hash>.so: a backend that
# NEEDs libtritonserver.so (ours, and any built against Triton's headers)
# would make the loader map a second copy of the core. The SONAME and the
# NEEDED entries that name it are set back to libtritonserver.so, and a
# link of that name sits beside the library. Triton's Python backend takes
# its stub from its own folder: the one for Debian's python 3.11 goes there.
fetch_oracle() {
  local req=$pyreq/oracle.txt
  part_current tritonserver "$req" && { echo "fetch_pypi: tritonserver (oracle) up to date"; return; }
  [ "$(uname -m)" = x86_64 ] || { echo "fetch_pypi: the oracle wheel is for x86_64 only; the differential tests are skipped" >&2; return; }
  mkdir -p "$work/oracle"
  download "$req" "$work/oracle"
  local dest=$deps/tritonserver.partial
  rm -rf "$dest"
  mkdir -p "$dest"
  "$python" - "$work"/oracle/nvidia_pytriton-*.whl "$dest" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for m in z.infolist():
        if m.filename.startswith(("pytriton/tritonserver/", "nvidia_pytriton.libs/")) and not m.is_dir():
            z.extract(m, sys.argv[2])
PY
  local top=$dest/pytriton/tritonserver libs=$dest/nvidia_pytriton.libs core
  core=$(cd "$libs" && ls libtritonserver-*.so)
  chmod 0755 "$top/bin/tritonserver" "$top"/python_backend_stubs/*/triton_python_backend_stub
  patchelf --set-soname libtritonserver.so "$libs/$core"
  patchelf --replace-needed "$core" libtritonserver.so "$top/bin/tritonserver"
  patchelf --replace-needed "$core" libtritonserver.so "$top/backends/python/libtriton_python.so"
  ln -s "$core" "$libs/libtritonserver.so"
  cp "$top/python_backend_stubs/3.11/triton_python_backend_stub" "$top/backends/python/"
  # --help exits 1 after printing its usage.
  local usage
  usage=$("$top/bin/tritonserver" --help 2>&1 || true)
  grep -q "^Usage: tritonserver" <<<"$usage" ||
    fail "tritonserver from ${req#"$src"/} does not start here (ldd $top/bin/tritonserver); nothing was installed"
  publish tritonserver "$req"
}

# Treelite's library for the fil backend, and the training libraries its
# tests use. libtreelite.so looks for its OpenMP runtime in the wheel's
# treelite.libs/: its RPATH is set to $ORIGIN, where the build copies both.
# The Python packages go to a --target folder the tests put on PYTHONPATH.
fetch_fil() {
  local req=$pyreq/fil.txt
  part_current fil "$req" && { echo "fetch_pypi: fil up to date"; return; }
  [ "$(uname -m)" = x86_64 ] || { echo "fetch_pypi: the pinned Treelite wheel is for x86_64 only; the fil backend will not load" >&2; return; }
  mkdir -p "$work/fil"
  download "$req" "$work/fil"
  local dest=$deps/fil.partial gomp
  rm -rf "$dest"
  gomp=$("$python" -c 'import sys, zipfile; print([n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("treelite.libs/libgomp")][0])' "$work"/fil/treelite-*.whl) ||
    fail "the Treelite wheel of ${req#"$src"/} carries no OpenMP runtime; nothing was installed"
  extract "$work"/fil/treelite-*.whl "$dest" treelite/lib/libtreelite.so=lib/libtreelite.so "$gomp=lib/${gomp#treelite.libs/}"
  patchelf --set-rpath '$ORIGIN' "$dest/lib/libtreelite.so"
  "$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-index --require-hashes \
    --target "$dest/py" --find-links "$work/fil" -r "$req" >&2 ||
    fail "installing ${req#"$src"/} into .deps/fil/py failed; nothing was installed"
  "$python" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1]).TreeliteGTILPredict' "$dest/lib/libtreelite.so" ||
    fail "libtreelite.so from ${req#"$src"/} does not load here (ldd it); nothing was installed"
  publish fil "$req"
}

# libtorch's CPU libraries and C++ headers from PyPI's torch wheel, with
# the two CUDA libraries libtorch_cpu.so NEEDs (it loads without a GPU).
# Everything lands in lib/ so libtorch_cpu.so's RPATH ($ORIGIN) finds them.
fetch_pytorch() {
  local req=$pyreq/torch.txt
  part_current pytorch "$req" && { echo "fetch_pypi: pytorch up to date"; return; }
  [ "$(uname -m)" = x86_64 ] || { echo "fetch_pypi: the pinned torch wheel is for x86_64 only; the pytorch backend is not built" >&2; return; }
  mkdir -p "$work/pt"
  download "$req" "$work/pt"
  local dest=$deps/pytorch.partial
  rm -rf "$dest"
  extract "$work"/pt/torch-*.whl "$dest" \
    torch/lib/libtorch_cpu.so=lib/libtorch_cpu.so \
    torch/lib/libc10.so=lib/libc10.so \
    torch/lib/libgomp.so.1=lib/libgomp.so.1
  extract "$work"/pt/nvidia_cuda_runtime_cu12-*.whl "$dest" \
    nvidia/cuda_runtime/lib/libcudart.so.12=lib/libcudart.so.12
  extract "$work"/pt/nvidia_cuda_cupti_cu12-*.whl "$dest" \
    nvidia/cuda_cupti/lib/libcupti.so.12=lib/libcupti.so.12
  "$python" - "$work"/pt/torch-*.whl "$dest" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for m in z.infolist():
        if m.filename.startswith("torch/include/") and not m.is_dir():
            m.filename = m.filename[len("torch/"):]
            z.extract(m, sys.argv[2])
PY
  # Each library must load with only what lies beside it and the system's.
  local lib
  for lib in libc10.so libtorch_cpu.so; do
    "$python" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$dest/lib/$lib" ||
      fail "$lib from ${req#"$src"/} does not load here (ldd $dest/lib/$lib); nothing was installed"
  done
  publish pytorch "$req"
}

# OpenVINO: the libraries the openvino backend opens, in lib/ (each keeps
# its $ORIGIN runpath: the core finds the CPU plugin and the frontends
# beside itself), and the Python package for the tests' IR conversion.
fetch_openvino() {
  local req=$pyreq/openvino.txt
  part_current openvino "$req" && { echo "fetch_pypi: openvino up to date"; return; }
  [ "$(uname -m)" = x86_64 ] || { echo "fetch_pypi: the pinned OpenVINO wheel is for x86_64 only; the openvino backend will not load" >&2; return; }
  mkdir -p "$work/ov"
  download "$req" "$work/ov"
  local dest=$deps/openvino.partial
  rm -rf "$dest"
  mkdir -p "$dest/lib" "$dest/python"
  "$python" - "$work"/ov/openvino-*.whl "$dest" <<'PY'
import os, shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
libs = ["libopenvino_c.so.2520", "libopenvino.so.2520", "libopenvino_intel_cpu_plugin.so",
        "libopenvino_ir_frontend.so.2520", "libopenvino_onnx_frontend.so.2520", "libtbb.so.12"]
skip = ("openvino/libs/libopenvino_intel_gpu_plugin.so", "openvino/libs/libopenvino_intel_npu_plugin.so")
with zipfile.ZipFile(wheel) as z:
    for m in z.infolist():
        if not m.filename.startswith("openvino/") or m.is_dir() or m.filename in skip:
            continue
        z.extract(m, os.path.join(dest, "python"))
    for lib in libs:
        with z.open("openvino/libs/" + lib) as f, open(os.path.join(dest, "lib", lib), "wb") as g:
            shutil.copyfileobj(f, g)
PY
  PYTHONPATH=$dest/python "$python" -c "import openvino" ||
    fail "the openvino package from ${req#"$src"/} does not import here; nothing was installed"
  publish openvino "$req"
}

# NVML's header from NVIDIA's nvml-dev wheel (any platform: a header).
fetch_nvml() {
  local req=$pyreq/nvml.txt
  part_current nvml "$req" && { echo "fetch_pypi: nvml up to date"; return; }
  mkdir -p "$work/nvml"
  download "$req" "$work/nvml"
  rm -rf "$deps/nvml.partial"
  extract "$work"/nvml/nvidia_nvml_dev-*.whl "$deps/nvml.partial" nvidia/cu13/include/nvml.h=include/nvml.h
  publish nvml "$req"
}

fetch_onnxruntime
fetch_onnxruntime_gpu
fetch_perf_analyzer
fetch_venv
fetch_oracle
fetch_fil
fetch_pytorch
fetch_openvino
fetch_nvml
