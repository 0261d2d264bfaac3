#!/bin/bash
# The GPU tests against a real NVIDIA GPU and driver (docs/gpu.md): the
# declaration check, the GPU data paths of tests/integration/test_gpu.c,
# scripts/gpu_check_http.py (KIND_GPU models, CUDA shared memory, GPU
# metrics over HTTP, standard library only) and, where tritonclient is
# installed, tests/integration/test_gpu_shm.py (HTTP and gRPC). Ends with
# one line "N passed, M failed"; exit status 0 only when M is 0.
#
#   scripts/gpu_check.sh                build here (Debian 12 with the
#                                       project's build dependencies) and run
#   scripts/gpu_check.sh --bundle FILE  build here and pack the binaries with
#                                       the libraries they need (jansson,
#                                       nghttp2, protobuf-c, criterion, ...)
#                                       into FILE (.tar.gz), for a GPU machine
#                                       that lacks them (e.g. Ubuntu 24.04)
#   scripts/gpu_check.sh --from DIR     run such a bundle unpacked at DIR
#                                       (tar -C / -xzf FILE gives DIR =
#                                       /tmp/nereid-gpucheck: test binaries
#                                       keep their build paths)
# Options: --stand-in runs against the stand-in driver instead (checks this
# script on a machine without a GPU); --bench adds the benchmarks (pool
# allocations, 64 MB through CUDA shared memory). Takes well under 5
# minutes on a GPU machine; the build takes what a build takes.
# NRD_ORT_GPU_LIB_DIR=DIR (a folder holding onnxruntime-gpu's
# libonnxruntime.so.1, libonnxruntime_providers_cuda.so and
# libonnxruntime_providers_shared.so; default .deps/onnxruntime-gpu, where
# scripts/fetch_pypi.sh puts them, when it is there) runs the KIND_GPU ONNX
# check on that library's CUDA provider (with --stand-in: the CUDA
# runtime's refusal of the stand-in); without one the check expects the CPU
# library's refusal. That library set is too large for a bundle (see
# --bundle): on the GPU machine, give a folder of it with NRD_ORT_GPU_LIB_DIR.
set -u -o pipefail

ROOT=/tmp/nereid-gpucheck
SRC=$(cd "$(dirname "$0")/.." && pwd)
MODE=build
BUNDLE=""
STANDIN=0
BENCH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) MODE=bundle; BUNDLE=${2:?--bundle needs a file}; shift ;;
    --from) MODE=from; ROOT=${2:?--from needs a folder}; shift ;;
    --stand-in) STANDIN=1 ;;
    --bench) BENCH=1 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
BUILD=$ROOT/build
ORT_GPU=${NRD_ORT_GPU_LIB_DIR:-}
[ -z "$ORT_GPU" ] && [ -f "$SRC/.deps/onnxruntime-gpu/libonnxruntime_providers_cuda.so" ] &&
  ORT_GPU=$SRC/.deps/onnxruntime-gpu

build() {
  mkdir -p "$BUILD"
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNRD_BUILD_TESTS=ON >"$ROOT/cmake.log" 2>&1 ||
    { tail -20 "$ROOT/cmake.log"; echo "0 passed, 1 failed"; exit 1; }
  local targets="nereid tritonserver triton_identity triton_gpu_identity it_test_gpu nrd_fake_cuda nrd_bench_gpu_pool"
  [ -f "$SRC/.deps/onnxruntime/libonnxruntime.so.1" ] && targets="$targets triton_onnxruntime"
  grep -q '^NRD_CUDA_INCLUDE_DIR:PATH=/' "$BUILD/CMakeCache.txt" && targets="$targets gpu_check_decls"
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j"$(nproc)" --target $targets >"$ROOT/build.log" 2>&1 ||
    { tail -30 "$ROOT/build.log"; echo "0 passed, 1 failed"; exit 1; }
  # The ONNX model of the KIND_GPU ONNX check (python3-onnx, here only).
  mkdir -p "$ROOT/onnx"
  /usr/bin/python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import onnx_models; \
onnx_models.write(sys.argv[2], 'fixed_add_sub')" "$SRC/tools" "$ROOT/onnx" >"$ROOT/onnx.log" 2>&1 ||
    echo "gpu_check.sh: no ONNX model (python3-onnx missing?): the ONNX check will be skipped"
}

# The files a GPU machine needs, and every library they load that is not
# part of glibc or the compiler's runtime, into $ROOT/lib.
bundle() {
  rm -rf "$ROOT/lib"
  mkdir -p "$ROOT/lib" "$ROOT/scripts" "$ROOT/tests/integration"
  cp "$SRC/scripts/gpu_check.sh" "$SRC/scripts/gpu_check_http.py" "$ROOT/scripts/"
  cp "$SRC/tests/integration/test_gpu_shm.py" "$ROOT/tests/integration/"
  # it_test_gpu makes the build build every backend; the checks load none
  # of these, and with them (libtorch, 431 MB, through ldd) the bundle was
  # 173 MB instead of 16.
  local skip=(backends/pytorch backends/openvino backends/fil backends/python backends/stateful
              test_backends/stateful_inject) findskip=() tarskip=() d elf
  for d in "${skip[@]}"; do
    findskip+=(-not -path "$BUILD/$d/*")
    tarskip+=("--exclude=${BUILD#/}/$d")
  done
  find "$BUILD" -type f \( -name '*.so' -o -name nereid -o -name it_test_gpu -o -name gpu_check_decls \
    -o -name nrd_bench_gpu_pool \) -not -path '*/CMakeFiles/*' "${findskip[@]}" | while read -r elf; do
    ldd "$elf" 2>/dev/null | awk '/=> \//{print $3}'
  done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
    xargs -r -I{} cp -L {} "$ROOT/lib/"
  tar -C / -czf "$BUNDLE" --exclude='*/CMakeFiles' --exclude='*.o' --exclude='*.a' "${tarskip[@]}" "${ROOT#/}"
  echo "gpu_check.sh: wrote $BUNDLE ($(du -h "$BUNDLE" | cut -f1)); on the GPU machine: tar -C / -xzf $(basename "$BUNDLE") && $ROOT/scripts/gpu_check.sh --from $ROOT"
  # ONNX Runtime's GPU build is never packed: 299 MiB (its CUDA provider
  # alone is 284 MB), about 242 MB gzipped, against the 64 MiB a bundle may
  # be where bundles travel to a lent GPU machine.
  local size="not fetched here"
  [ -n "$ORT_GPU" ] && size="$(du -shL "$ORT_GPU" | cut -f1) in $ORT_GPU, about 242 MB compressed"
  echo "gpu_check.sh: ONNX Runtime's GPU build is NOT in the bundle ($size): too large for a 64 MiB bundle."
  echo "  The bundle's KIND_GPU ONNX check then expects the CPU library's refusal. To run ONNX Runtime's CUDA"
  echo "  provider on the GPU machine, put onnxruntime-gpu's libonnxruntime.so.1 (libonnxruntime.so.1.31.1 in the"
  echo "  wheel pinned by scripts/pypi/onnxruntime-gpu.txt), libonnxruntime_providers_cuda.so and"
  echo "  libonnxruntime_providers_shared.so in a folder there and run"
  echo "  NRD_ORT_GPU_LIB_DIR=<folder> $ROOT/scripts/gpu_check.sh --from $ROOT"
}

FILES=$SRC # where the scripts and the Python test are
case "$MODE" in
  build) build ;;
  bundle) build; bundle; exit 0 ;;
  from) [ -x "$BUILD/src/server/nereid" ] || { echo "gpu_check.sh: no bundle at $ROOT"; echo "0 passed, 1 failed"; exit 1; }
        FILES=$ROOT
        export LD_LIBRARY_PATH="$ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
esac

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1"; }

FAKE=$BUILD/tests/gpu_stub/libnrd_fake_cuda.so
DRIVER=libcuda.so.1
if [ "$STANDIN" = 1 ]; then
  export NEREID_CUDA_LIBRARY=$FAKE NEREID_NVML_LIBRARY=$FAKE
  DRIVER=$FAKE
  unset NRD_REAL_GPU
else
  export NRD_REAL_GPU=1
  unset NEREID_CUDA_LIBRARY NEREID_NVML_LIBRARY
  if command -v nvidia-smi >/dev/null; then nvidia-smi -L; else echo "gpu_check.sh: no nvidia-smi (driver not installed?)"; fi
fi

# 1. Our declarations of the driver API against cuda.h (built only where
# the toolkit is).
if [ -x "$BUILD/tests/gpu_stub/gpu_check_decls" ]; then
  if "$BUILD/tests/gpu_stub/gpu_check_decls"; then pass "driver declarations match cuda.h"; else fail "driver declarations"; fi
else
  echo "SKIP driver declarations (built without cuda.h)"
fi

# 2. The in-process GPU data paths (test_gpu.c), one test at a time.
for t in identity_reads_gpu_inputs_and_writes_gpu_outputs gpu_identity_keeps_tensors_on_the_gpu; do
  if timeout 120 "$BUILD/tests/integration/it_test_gpu" --jobs 1 --filter "gpu/$t" >"$ROOT/it_$t.log" 2>&1; then
    pass "in-process: $t"
  else
    tail -20 "$ROOT/it_$t.log"
    fail "in-process: $t"
  fi
done

# 3. The nereid binary over HTTP (standard library Python).
BK=$(mktemp -d)
ln -s "$BUILD/backends/identity" "$BK/identity"
ln -s "$BUILD/test_backends/gpu_identity" "$BK/gpu_identity"
BENCH_ARG=""
[ "$BENCH" = 1 ] && BENCH_ARG=--bench
OUT=$(timeout 240 python3 "$FILES/scripts/gpu_check_http.py" --nereid "$BUILD/src/server/nereid" --backends "$BK" \
  --driver "$DRIVER" $BENCH_ARG 2>&1)
echo "$OUT" | grep -v '^RESULT'
R=$(echo "$OUT" | sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\)$/\1 \2/p')
if [ -n "$R" ]; then
  PASSED=$((PASSED + ${R% *}))
  FAILED=$((FAILED + ${R#* }))
else
  fail "gpu_check_http.py did not finish"
fi
rm -rf "$BK"

# 3b. A KIND_GPU ONNX model on the onnxruntime backend: ONNX Runtime's CUDA
# provider from NRD_ORT_GPU_LIB_DIR (or .deps/onnxruntime-gpu), else the CPU
# library's refusal. The backend is copied, not linked: the core takes a
# backend's folder from its real path, and ONNX Runtime must be found there.
ORT_BACKEND=$BUILD/backends/onnxruntime
if [ -f "$ROOT/onnx/fixed_add_sub.onnx" ] && [ -f "$ORT_BACKEND/libtriton_onnxruntime.so" ]; then
  BK=$(mktemp -d)
  mkdir "$BK/onnxruntime"
  cp "$ORT_BACKEND/libtriton_onnxruntime.so" "$BK/onnxruntime/"
  ORT_ARG=""
  ORT_ENV=()
  if [ -n "$ORT_GPU" ]; then
    echo "gpu_check.sh: the ONNX check runs on ONNX Runtime's GPU build from $ORT_GPU"
    ln -s "$ORT_GPU"/libonnxruntime.so.1 "$ORT_GPU"/libonnxruntime_providers_*.so "$BK/onnxruntime/"
    ORT_ARG=--ort-cuda
    if [ "$STANDIN" = 1 ]; then
      # The provider links libcuda.so.1: the stand-in answers to that name
      # here, and the CUDA runtime refuses its driver version.
      mkdir "$BK/driver"
      ln -s "$FAKE" "$BK/driver/libcuda.so.1"
      ORT_ENV=(env "LD_LIBRARY_PATH=$BK/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
      ORT_ARG=--ort-cuda-refused
    fi
  else
    ln -s "$ORT_BACKEND/libonnxruntime.so.1" "$BK/onnxruntime/"
  fi
  OUT=$(timeout 120 "${ORT_ENV[@]}" python3 "$FILES/scripts/gpu_check_http.py" --nereid "$BUILD/src/server/nereid" \
    --backends "$BK" --onnx "$ROOT/onnx/fixed_add_sub.onnx" $ORT_ARG 2>&1)
  echo "$OUT" | grep -v '^RESULT'
  R=$(echo "$OUT" | sed -n 's/^RESULT passed=\([0-9]*\) failed=\([0-9]*\)$/\1 \2/p')
  if [ -n "$R" ]; then
    PASSED=$((PASSED + ${R% *}))
    FAILED=$((FAILED + ${R#* }))
  else
    fail "gpu_check_http.py --onnx did not finish"
  fi
  rm -rf "$BK"
else
  echo "SKIP KIND_GPU ONNX model (no ONNX model or onnxruntime backend built)"
fi

# 4. HTTP and gRPC with tritonclient, where it is installed.
PY=python3
[ -x "$SRC/.deps/venv/bin/python" ] && PY=$SRC/.deps/venv/bin/python
if "$PY" -c 'import tritonclient.http, tritonclient.grpc, numpy, pytest' 2>/dev/null; then
  OUT=$(NEREID_BIN="$BUILD/src/server/nereid" NEREID_BACKEND_DIR="$BUILD/backends" NRD_FAKE_CUDA="$FAKE" \
    timeout 240 "$PY" -m pytest -q -p no:cacheprovider "$FILES/tests/integration/test_gpu_shm.py" 2>&1)
  echo "$OUT" | tail -15
  P=$(echo "$OUT" | grep -Eo '[0-9]+ passed' | tail -1 | cut -d' ' -f1)
  F=$(echo "$OUT" | grep -Eo '[0-9]+ (failed|error)' | awk '{s += $1} END {print s + 0}')
  PASSED=$((PASSED + ${P:-0}))
  FAILED=$((FAILED + ${F:-0}))
  [ -z "$P" ] && [ "${F:-0}" = 0 ] && fail "test_gpu_shm.py did not run"
else
  echo "SKIP test_gpu_shm.py (no tritonclient, numpy and pytest for $PY)"
fi

if [ "$BENCH" = 1 ]; then
  "$BUILD/bench/nrd_bench_gpu_pool" || fail "nrd_bench_gpu_pool"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
