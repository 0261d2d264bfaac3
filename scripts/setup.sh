#!/usr/bin/env bash
# Installs every Debian package Nereid needs to build, test and benchmark,
# then what comes from PyPI (scripts/fetch_pypi.sh).
# Idempotent; run as root (or through sudo) on Debian 12.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libasan8 libubsan1 libtsan2   # sanitizer runtimes for scripts/test.sh (normally pulled in by gcc)
  libjansson-dev          # JSON messages, model-config rendering
  libjsmn-dev             # tokenizing inference request headers (src/server/http/json_arena.c)
  libcriterion-dev        # C unit tests
  python3-pytest python3-numpy   # integration tests (run with /usr/bin/python3); numpy also for the python backend
  python3-dev             # the python backend embeds libpython3.11 (backends/python)
  python3-onnx            # the onnxruntime backend's tests build their models with it
  python3-yaml            # tests/integration/test_deploy_manifests.py reads deploy/*.yaml
  dpkg-dev                # dpkg-shlibdeps: the .deb's Depends (cpack, test_deb.py)
  libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler   # gRPC front end
  python3-grpcio python3-protobuf python3-grpc-tools     # gRPC tests (stubs from proto/)
  nghttp2-client          # h2load for the gRPC benchmark
  zlib1g-dev              # gzip/deflate (HTTP and gRPC compression)
  libssl-dev openssl      # gRPC over TLS; the openssl tool makes the TLS tests' certificates
  libevent-dev            # bench/http_baseline only: the evhttp do-nothing server
  wrk                     # HTTP benchmark (bench/http_bench.sh)
  python3-pip python3-venv  # scripts/fetch_pypi.sh: wheels from PyPI, the tests' venv
  patchelf                # fetch_pypi.sh: perf_analyzer finds the CUDA runtime beside it
  libb64-0d               # perf_analyzer (tritonclient 2.51.0's binary) links libb64
  curl procps             # bench/perf_analyzer.sh and vs_triton.sh (the tests run the first)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup: installed ${missing[*]}"
fi
# ONNX Runtime, perf_analyzer and tritonclient: pinned, hash-checked wheels.
"$(dirname "$0")/fetch_pypi.sh"
