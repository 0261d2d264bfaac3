#!/usr/bin/env bash
# Triton's own load generator against nereid: what a user re-running our
# comparison sees.
#
#   bench/perf_analyzer.sh [BUILD_DIR]   (default: build-rel, a release build)
#
# For each example model (MODELS), perf_analyzer 2.51 (scripts/fetch_pypi.sh)
# runs at concurrency CONC over HTTP, over gRPC, and in its C API mode
# (--service-kind=triton_c_api on our libtritonserver.so: no network at
# all). Prints perf_analyzer's throughput and p50/p99 latency, and for the
# network rows the server's CPU time per request (utime+stime of nereid
# from /proc/<pid>/stat over the run, divided by the requests it counted).
# The floor of each protocol is identity_fp32 on the C identity backend:
# each row also gives its CPU per request as a ratio to that floor.
# perf_analyzer shares the machine's cores with the server: compare CPU
# per request, not only requests per second. Prints figures only.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="${1:-$ROOT/build-rel}"
PA="${NRD_PERF_ANALYZER:-$ROOT/.deps/perf_analyzer/bin/perf_analyzer}"
MODELS="${MODELS:-identity_fp32 simple identity_bytes add_sub_python accumulate_onnx}"
CONC="${CONC:-1 8}"
WINDOW_MS="${WINDOW_MS:-2000}"
# perf_analyzer stops when 3 windows agree within STABILITY percent; on a
# shared 2-core VM they rarely agree within 10, so the default takes any 3.
STABILITY="${STABILITY:-1000}"
NEREID="$BUILD/src/server/nereid"
CORE="$BUILD/src/core/libtritonserver.so"
[ -x "$PA" ] || { echo "no perf_analyzer at $PA: run scripts/setup.sh" >&2; exit 1; }
[ -x "$NEREID" ] || { echo "no nereid at $NEREID (cmake -S . -B build-rel && cmake --build build-rel -j2)" >&2; exit 1; }

WORK="$(mktemp -d)"
cleanup() {
  [ -n "${PID:-}" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$NEREID" --model-repository="$ROOT/examples/models" --backend-directory="$BUILD/backends" \
  --http-address=127.0.0.1 --http-port=0 --grpc-address=127.0.0.1 --grpc-port=0 \
  --allow-metrics=false --log-info=false >"$WORK/out" 2>"$WORK/err" &
PID=$!
for _ in $(seq 200); do grep -q "^nereid: server " "$WORK/out" 2>/dev/null && break; sleep 0.1; done
grep -q "^nereid: server " "$WORK/out" || { cat "$WORK/out" "$WORK/err"; exit 1; }
HTTP_PORT=$(sed -n 's/^nereid: HTTP\/REST listening on .*:\([0-9]*\).*/\1/p' "$WORK/out")
GRPC_PORT=$(sed -n 's/^nereid: gRPC endpoint listening on .*:\([0-9]*\).*/\1/p' "$WORK/out")

# The C API mode's /opt/tritonserver: our library and backends.
mkdir -p "$WORK/top/lib" "$WORK/repo"
ln -s "$CORE" "$WORK/top/lib/libtritonserver.so"
ln -s "$BUILD/backends" "$WORK/top/backends"

# CPU ticks of nereid and its children (the python backend's stubs).
cpu_ticks() {
  local p t=0
  for p in $PID $(pgrep -P "$PID" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
# Requests the server completed for a model (its statistics), all trials.
served() {
  curl -s "127.0.0.1:$HTTP_PORT/v2/models/$1/stats" |
    /usr/bin/python3 -c 'import json,sys; print(sum(m["inference_stats"]["success"]["count"] for m in json.load(sys.stdin)["model_stats"]))'
}
hz=$(getconf CLK_TCK)

shape_args() { # perf_analyzer needs a shape for dynamic dimensions
  case "$1" in
    identity_fp32) echo "--shape INPUT0:16" ;;
    identity_bytes) echo "--shape INPUT0:4 --string-length 16" ;;
    accumulate_onnx) echo "--sequence-length 8" ;;
    *) echo "" ;;
  esac
}

# run MODEL MODE CONC: prints one row. MODE is http, grpc or capi.
declare -A FLOOR
run() {
  local model=$1 mode=$2 conc=$3 args t0 t1 n0 n1 out
  args=(-m "$model" --concurrency-range "$conc" --measurement-interval "$WINDOW_MS"
        --stability-percentage "$STABILITY" --max-trials 10 $(shape_args "$model"))
  case "$mode" in
    http) args+=(-u "127.0.0.1:$HTTP_PORT" -i http) ;;
    grpc) args+=(-u "127.0.0.1:$GRPC_PORT" -i grpc) ;;
    capi)
      rm -rf "$WORK/repo/$model"
      cp -r "$ROOT/examples/models/$model" "$WORK/repo/"
      args+=(--service-kind=triton_c_api "--triton-server-directory=$WORK/top" "--model-repository=$WORK/repo") ;;
  esac
  t0=$(cpu_ticks); n0=$(served "$model")
  out=$("$PA" "${args[@]}" 2>&1) || { printf '%-16s %-5s %4s  failed: %s\n' "$model" "$mode" "$conc" \
                                      "$(echo "$out" | grep -iE "error|failed" | head -1)"; return; }
  t1=$(cpu_ticks); n1=$(served "$model")
  local rps p50 p99 reqs cpu ratio=""
  rps=$(echo "$out" | sed -n 's/^ *Throughput: \([0-9.]*\) infer\/sec.*/\1/p' | tail -1)
  p50=$(echo "$out" | sed -n 's/^ *p50 latency: \([0-9]*\) usec/\1/p' | tail -1)
  p99=$(echo "$out" | sed -n 's/^ *p99 latency: \([0-9]*\) usec/\1/p' | tail -1)
  if [ "$mode" = capi ]; then
    cpu="-"
  else
    reqs=$((n1 - n0))
    cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v n="$reqs" \
          'BEGIN { if (n > 0) printf "%.1f", (b - a) * 1e6 / hz / n; else print "-" }')
    local key="$mode/$conc"
    [ "$model" = identity_fp32 ] && FLOOR[$key]=$cpu
    [ -n "${FLOOR[$key]:-}" ] && [ "$cpu" != "-" ] &&
      ratio=$(awk -v a="$cpu" -v f="${FLOOR[$key]}" 'BEGIN { if (f > 0) printf "%.2fx", a / f }')
  fi
  printf '%-16s %-5s %4s %10s %8s %8s %10s %7s\n' "$model" "$mode" "$conc" "$rps" "$p50" "$p99" "$cpu" "$ratio"
}

echo "perf_analyzer $("$PA" --version 2>&1 | head -1 | sed 's/.*Version //') against $NEREID ($(nproc) cores)"
printf '%-16s %-5s %4s %10s %8s %8s %10s %7s\n' model mode conc "infer/s" "p50 us" "p99 us" "cpu us/req" "/floor"
for model in $MODELS; do
  for mode in http grpc capi; do
    for c in $CONC; do
      # C API mode past concurrency 1 hangs and grows in perf_analyzer 2.51
      # (bench/vs_triton.sh): run at 1 only.
      [ "$mode" = capi ] && [ "$c" != 1 ] && continue
      run "$model" "$mode" "$c"
    done
  done
done
echo "cpu us/req: CPU of nereid and its stub processes over the whole perf_analyzer"
echo "call, divided by the requests the server's statistics counted in that call."
