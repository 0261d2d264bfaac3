#!/usr/bin/env bash
# Nereid beside Triton, measured by Triton's own load generator.
#
#   bench/vs_triton.sh [BUILD_DIR]   (default: build-rel, a release build)
#
# Starts Triton 2.51 (the oracle scripts/fetch_pypi.sh installs) and nereid
# on the example repository, both serving our C backends (identity,
# add_sub, square, onnxruntime) and each its own Python backend, then runs
# perf_analyzer 2.51 against each in turn, alternating servers row by row:
# the C identity model, a Python model, an ONNX model and a decoupled
# stream, over HTTP, gRPC and the C API mode, at concurrency 1 and 8
# (CONC). Prints throughput, p50/p99 latency and the server's CPU per
# request (utime+stime of the whole process tree, stub processes
# included, from /proc, over the requests its statistics counted), and
# the ratio Triton/nereid of each. perf_analyzer shares the cores with the
# servers: CPU per request is the figure to compare. Prints figures only.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="$(cd "${1:-$ROOT/build-rel}" && pwd)"
PA="${NRD_PERF_ANALYZER:-$ROOT/.deps/perf_analyzer/bin/perf_analyzer}"
TTOP="${NRD_TRITON_DIR:-$ROOT/.deps/tritonserver/pytriton/tritonserver}"
CONC="${CONC:-1 8}"
WINDOW_MS="${WINDOW_MS:-2000}"
STABILITY="${STABILITY:-1000}"   # see bench/perf_analyzer.sh
ROWS="${ROWS:-identity_fp32:http identity_fp32:grpc identity_fp32:capi add_sub_python:http add_sub_python:grpc
add_sub_python:capi accumulate_onnx:http accumulate_onnx:grpc accumulate_onnx:capi square_int32:stream}"
NEREID="$BUILD/src/server/nereid"
for f in "$PA" "$NEREID" "$TTOP/bin/tritonserver"; do
  [ -x "$f" ] || { echo "missing $f (scripts/setup.sh; a release build in $BUILD)" >&2; exit 1; }
done
if readelf -d "$BUILD/backends/identity/libtriton_identity.so" | grep -q "lib[at]san"; then
  echo "$BUILD is a sanitizer build: Triton cannot load its backends; use a release build" >&2
  exit 1
fi

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Triton's backends: ours, and its own Python backend.
mkdir -p "$WORK/tb"
for b in identity add_sub square repeat onnxruntime stateful; do ln -s "$BUILD/backends/$b" "$WORK/tb/$b"; done
ln -s "$TTOP/backends/python" "$WORK/tb/python"

# start NAME BINARY BACKENDS: the server on the example repository; sets
# <NAME>_PID, <NAME>_HTTP, <NAME>_GRPC.
start() {
  local name=$1 bin=$2 backends=$3 http grpc metrics
  http=$(free_port); grpc=$(free_port); metrics=$(free_port)
  "$bin" --model-repository="$ROOT/examples/models" --backend-directory="$backends" \
    --http-port="$http" --grpc-port="$grpc" --metrics-port="$metrics" --log-info=false \
    >"$WORK/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 300); do
    curl -sf "127.0.0.1:$http/v2/health/ready" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -sf "127.0.0.1:$http/v2/health/ready" >/dev/null || { cat "$WORK/$name.log"; exit 1; }
  printf -v "${name}_PID" '%s' "$pid"
  printf -v "${name}_HTTP" '%s' "$http"
  printf -v "${name}_GRPC" '%s' "$grpc"
}
start nereid "$NEREID" "$BUILD/backends"
start triton "$TTOP/bin/tritonserver" "$WORK/tb"

# The C API mode's /opt/tritonserver of each. Triton's library finds its
# own libraries through $ORIGIN: its lib/ is the wheel's library folder.
mkdir -p "$WORK/capi-nereid/lib" "$WORK/capi-triton"
ln -s "$BUILD/src/core/libtritonserver.so" "$WORK/capi-nereid/lib/libtritonserver.so"
ln -s "$BUILD/backends" "$WORK/capi-nereid/backends"
ln -s "$(cd "$TTOP/../../nvidia_pytriton.libs" && pwd)" "$WORK/capi-triton/lib"
ln -s "$WORK/tb" "$WORK/capi-triton/backends"

hz=$(getconf CLK_TCK)
tree_ticks() { # utime+stime of a process and its children
  local p t=0
  for p in "$1" $(pgrep -P "$1" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
served() { # requests the server's statistics counted for a model
  curl -s "127.0.0.1:$1/v2/models/$2/stats" |
    /usr/bin/python3 -c 'import json,sys; print(sum(m["inference_stats"]["success"]["count"] for m in json.load(sys.stdin)["model_stats"]))'
}
model_args() {
  case "$1" in
    identity_fp32) echo "--shape INPUT0:16" ;;
    accumulate_onnx) echo "--sequence-length 8" ;;
    square_int32) echo "--input-data $WORK/square.json" ;;
    *) echo "" ;;
  esac
}
echo '{"data": [{"IN": [4]}]}' >"$WORK/square.json"

# measure SERVER MODEL MODE CONC: sets RPS P50 P99 CPU.
measure() {
  local server=$1 model=$2 mode=$3 conc=$4 pid http grpc args out t0 t1 n0 n1
  pid=$(eval echo "\$${server}_PID"); http=$(eval echo "\$${server}_HTTP"); grpc=$(eval echo "\$${server}_GRPC")
  args=(-m "$model" --concurrency-range "$conc" --measurement-interval "$WINDOW_MS"
        --stability-percentage "$STABILITY" --max-trials 10 $(model_args "$model"))
  case "$mode" in
    http) args+=(-u "127.0.0.1:$http" -i http) ;;
    grpc) args+=(-u "127.0.0.1:$grpc" -i grpc) ;;
    stream) args+=(-u "127.0.0.1:$grpc" -i grpc --streaming) ;;
    capi)
      rm -rf "$WORK/repo-$server"; mkdir -p "$WORK/repo-$server"
      cp -r "$ROOT/examples/models/$model" "$WORK/repo-$server/"
      args+=(--service-kind=triton_c_api "--triton-server-directory=$WORK/capi-$server"
             "--model-repository=$WORK/repo-$server") ;;
  esac
  RPS=failed P50=- P99=- CPU=-
  if [ "$mode" != capi ]; then t0=$(tree_ticks "$pid"); n0=$(served "$http" "$model"); fi
  # Triton's wheel libraries name each other without a search path of
  # their own (its binary's RPATH finds them): in perf_analyzer's process
  # the loader needs their folder.
  local env=()
  [ "$server$mode" = tritoncapi ] && env=(LD_LIBRARY_PATH="$WORK/capi-triton/lib")
  out=$(env "${env[@]}" "$PA" "${args[@]}" 2>&1) || { ERR=$(echo "$out" | grep -iE "error|failed" | head -1); return; }
  RPS=$(echo "$out" | sed -n 's/^ *Throughput: \([0-9.]*\) infer\/sec.*/\1/p' | tail -1)
  P50=$(echo "$out" | sed -n 's/^ *p50 latency: \([0-9]*\) usec/\1/p' | tail -1)
  P99=$(echo "$out" | sed -n 's/^ *p99 latency: \([0-9]*\) usec/\1/p' | tail -1)
  if [ "$mode" != capi ]; then
    t1=$(tree_ticks "$pid"); n1=$(served "$http" "$model")
    CPU=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v n="$((n1 - n0))" \
          'BEGIN { if (n > 0) printf "%.1f", (b - a) * 1e6 / hz / n; else print "-" }')
  fi
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

echo "perf_analyzer 2.51 against nereid ($NEREID) and Triton 2.51 ($TTOP), $(nproc) cores, $(date -u +%FT%TZ)"
printf '%-15s %-6s %4s | %10s %7s %7s %9s | %10s %7s %7s %9s | %6s %6s\n' model mode conc \
  "N infer/s" "N p50" "N p99" "N cpu/req" "T infer/s" "T p50" "T p99" "T cpu/req" "rps N/T" "cpu T/N"
for row in $ROWS; do
  model=${row%%:*}; mode=${row##*:}
  for c in $CONC; do
    # perf_analyzer 2.51's C API mode past concurrency 1 stops answering
    # and grows without bound (to the OOM killer, with Triton's library as
    # with ours): that mode runs at 1 only.
    [ "$mode" = capi ] && [ "$c" != 1 ] && continue
    measure nereid "$model" "$mode" "$c"
    nr=$RPS; n50=$P50; n99=$P99; nc=$CPU
    measure triton "$model" "$mode" "$c"
    printf '%-15s %-6s %4s | %10s %7s %7s %9s | %10s %7s %7s %9s | %6s %6s\n' "$model" "$mode" "$c" \
      "$nr" "$n50" "$n99" "$nc" "$RPS" "$P50" "$P99" "$CPU" "$(ratio "$nr" "$RPS")" "$(ratio "$CPU" "$nc")"
  done
done
echo "latencies in us; cpu/req: us of CPU of the server's process tree per request its statistics counted"
echo "(C API mode runs in perf_analyzer's own process: no server CPU is separable there)"
