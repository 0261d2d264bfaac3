#!/usr/bin/env bash
# The pytorch backend over HTTP and gRPC, beside the C identity backend:
# perf_analyzer (scripts/fetch_pypi.sh) against nereid serving an identity
# TorchScript model (x.clone(), compiled at start by pt_make_model) and the
# identity backend's model with the same tensors (16 x FP32).
#
#   bench/pytorch_http.sh [BUILD_DIR]   (default: build-rel, a release build)
#
# Prints perf_analyzer's throughput and p50/p99 latency, and the server's
# CPU time per request (utime+stime of nereid over the run divided by the
# requests its statistics counted); the identity backend is the floor, each
# pytorch row gives its CPU per request as a ratio to it. perf_analyzer
# shares the machine's cores with the server: compare CPU per request.
# Prints figures only.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="${1:-$ROOT/build-rel}"
PA="${NRD_PERF_ANALYZER:-$ROOT/.deps/perf_analyzer/bin/perf_analyzer}"
CONC="${CONC:-1 8}"
WINDOW_MS="${WINDOW_MS:-2000}"
NEREID="$BUILD/src/server/nereid"
MAKER="$BUILD/backends/pytorch/pt_make_model"
[ -x "$PA" ] || { echo "no perf_analyzer at $PA: run scripts/setup.sh" >&2; exit 1; }
[ -x "$NEREID" ] && [ -x "$MAKER" ] || { echo "build nereid, triton_pytorch and pt_make_model in $BUILD first" >&2; exit 1; }

WORK="$(mktemp -d)"
cleanup() {
  [ -n "${PID:-}" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Two models, the same tensors: FP32 [-1], batches of up to 8, one instance.
for model in identity_c identity_pt; do
  mkdir -p "$WORK/repo/$model/1"
  backend=identity out=OUTPUT0
  [ "$model" = identity_pt ] && backend=pytorch out=OUTPUT__0
  cat >"$WORK/repo/$model/config.pbtxt" <<CFG
backend: "$backend"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "$out" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "1" } }
CFG
done
printf 'def forward(self, INPUT0):\n    return INPUT0.clone()\n' >"$WORK/identity.ts"
"$MAKER" "$WORK/repo/identity_pt/1/model.pt" "$WORK/identity.ts"

"$NEREID" --model-repository="$WORK/repo" --backend-directory="$BUILD/backends" \
  --http-address=127.0.0.1 --http-port=0 --grpc-address=127.0.0.1 --grpc-port=0 \
  --allow-metrics=false --log-info=false >"$WORK/out" 2>"$WORK/err" &
PID=$!
for _ in $(seq 300); do grep -q "^nereid: server " "$WORK/out" 2>/dev/null && break; sleep 0.1; done
grep -q "^nereid: server " "$WORK/out" || { cat "$WORK/out" "$WORK/err"; exit 1; }
HTTP_PORT=$(sed -n 's/^nereid: HTTP\/REST listening on .*:\([0-9]*\).*/\1/p' "$WORK/out")
GRPC_PORT=$(sed -n 's/^nereid: gRPC endpoint listening on .*:\([0-9]*\).*/\1/p' "$WORK/out")

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
served() {
  curl -s "127.0.0.1:$HTTP_PORT/v2/models/$1/stats" |
    /usr/bin/python3 -c 'import json,sys; print(sum(m["inference_stats"]["success"]["count"] for m in json.load(sys.stdin)["model_stats"]))'
}
hz=$(getconf CLK_TCK)

declare -A FLOOR
run() { # model mode conc
  local model=$1 mode=$2 conc=$3 t0 t1 n0 n1 out url
  url=127.0.0.1:$HTTP_PORT
  [ "$mode" = grpc ] && url=127.0.0.1:$GRPC_PORT
  t0=$(cpu_ticks); n0=$(served "$model")
  out=$("$PA" -m "$model" -u "$url" -i "$mode" --concurrency-range "$conc" --shape INPUT0:16 \
        --measurement-interval "$WINDOW_MS" --stability-percentage 1000 --max-trials 10 2>&1) ||
    { printf '%-12s %-5s %4s  failed\n' "$model" "$mode" "$conc"; return; }
  t1=$(cpu_ticks); n1=$(served "$model")
  local rps p50 p99 cpu ratio=""
  rps=$(echo "$out" | sed -n 's/^ *Throughput: \([0-9.]*\) infer\/sec.*/\1/p' | tail -1)
  p50=$(echo "$out" | sed -n 's/^ *p50 latency: \([0-9]*\) usec/\1/p' | tail -1)
  p99=$(echo "$out" | sed -n 's/^ *p99 latency: \([0-9]*\) usec/\1/p' | tail -1)
  cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v n="$((n1 - n0))" \
        'BEGIN { if (n > 0) printf "%.1f", (b - a) * 1e6 / hz / n; else print "-" }')
  [ "$model" = identity_c ] && FLOOR[$mode/$conc]=$cpu
  [ "$model" = identity_pt ] && [ -n "${FLOOR[$mode/$conc]:-}" ] &&
    ratio=$(awk -v a="$cpu" -v f="${FLOOR[$mode/$conc]}" 'BEGIN { if (f > 0) printf "%.2fx", a / f }')
  printf '%-12s %-5s %4s %10s %8s %8s %10s %7s\n' "$model" "$mode" "$conc" "$rps" "$p50" "$p99" "$cpu" "$ratio"
}

echo "perf_analyzer against $NEREID ($(nproc) cores), 16 x FP32"
printf '%-12s %-5s %4s %10s %8s %8s %10s %7s\n' model mode conc "infer/s" "p50 us" "p99 us" "cpu us/req" "/floor"
for mode in http grpc; do
  for c in $CONC; do
    run identity_c "$mode" "$c"
    run identity_pt "$mode" "$c"
  done
done
