#!/usr/bin/env bash
# A blank model.py under Triton's own load generator: nereid's Python
# backend beside Triton 2.51's and beside nereid's C identity backend.
#
#   bench/python_vs_triton.sh [BUILD_DIR]   (default: build-rel, a release build)
#
# Writes a repository at run time: identity_c (our C identity backend),
# identity_py (a model.py returning its 16-float INPUT0 as OUTPUT0, one
# instance) and, with ROWS naming it, busy_py / busy_py2 (a CPU-bound
# model.py, one and two instances). Starts nereid and the Triton 2.51
# oracle (scripts/fetch_pypi.sh) on it, then perf_analyzer 2.51 runs each
# row against each server in turn: over HTTP at concurrency 1 and 8
# (CONC), and in the C API mode at concurrency 1 (p50/p99 only: the server
# runs in perf_analyzer's process there). Prints requests/s, p50/p99 and
# the server's CPU per request: utime+stime of the server's whole process
# tree (its stub processes too) from /proc over the run, divided by the
# requests its statistics counted. perf_analyzer shares the cores with the
# servers: CPU per request is the figure to compare. Figures, not asserts.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="$(cd "${1:-$ROOT/build-rel}" && pwd)"
PA="${NRD_PERF_ANALYZER:-$ROOT/.deps/perf_analyzer/bin/perf_analyzer}"
TTOP="${NRD_TRITON_DIR:-$ROOT/.deps/tritonserver/pytriton/tritonserver}"
CONC="${CONC:-1 8}"
WINDOW_MS="${WINDOW_MS:-2000}"
STABILITY="${STABILITY:-1000}" # see bench/perf_analyzer.sh
ROWS="${ROWS:-identity_c:http identity_py:http identity_py:capi}"
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

# The repository, built here (no model files are kept in the tree).
REPO="$WORK/models"
model() { # NAME BACKEND COUNT [MODEL.PY TEXT]
  mkdir -p "$REPO/$1/1"
  cat >"$REPO/$1/config.pbtxt" <<EOF
backend: "$2"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { count: $3 kind: KIND_CPU } ]
EOF
  [ $# -lt 4 ] || printf '%s\n' "$4" >"$REPO/$1/1/model.py"
}
BLANK='import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]'
BUSY='import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = 0
            for i in range(20000):
                x += i
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]))
        return out'
model identity_c identity 1
model identity_py python 1 "$BLANK"
model busy_py python 1 "$BUSY"
model busy_py2 python 2 "$BUSY"

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Triton's backends: our identity, and its own Python backend.
mkdir -p "$WORK/tb"
ln -s "$BUILD/backends/identity" "$WORK/tb/identity"
ln -s "$TTOP/backends/python" "$WORK/tb/python"

# start NAME BINARY BACKENDS: sets <NAME>_PID, <NAME>_HTTP.
start() {
  local name=$1 bin=$2 backends=$3 http grpc metrics
  http=$(free_port); grpc=$(free_port); metrics=$(free_port)
  "$bin" --model-repository="$REPO" --backend-directory="$backends" \
    --http-port="$http" --grpc-port="$grpc" --metrics-port="$metrics" --log-info=false \
    >"$WORK/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 600); do
    curl -sf "127.0.0.1:$http/v2/health/ready" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -sf "127.0.0.1:$http/v2/health/ready" >/dev/null || { cat "$WORK/$name.log"; exit 1; }
  printf -v "${name}_PID" '%s' "$pid"
  printf -v "${name}_HTTP" '%s' "$http"
}
start nereid "$NEREID" "$BUILD/backends"
start triton "$TTOP/bin/tritonserver" "$WORK/tb"

# The C API mode's /opt/tritonserver of each (as bench/vs_triton.sh).
mkdir -p "$WORK/capi-nereid/lib" "$WORK/capi-triton"
ln -s "$BUILD/src/core/libtritonserver.so" "$WORK/capi-nereid/lib/libtritonserver.so"
ln -s "$BUILD/backends" "$WORK/capi-nereid/backends"
ln -s "$(cd "$TTOP/../../nvidia_pytriton.libs" && pwd)" "$WORK/capi-triton/lib"
ln -s "$WORK/tb" "$WORK/capi-triton/backends"

hz=$(getconf CLK_TCK)
tree_ticks() { # utime+stime of a process and all its descendants
  local p t
  t=$(awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0)
  for p in $(pgrep -P "$1" || true); do t=$((t + $(tree_ticks "$p"))); done
  echo "$t"
}
served() { # requests the server's statistics counted for a model
  curl -s "127.0.0.1:$1/v2/models/$2/stats" |
    /usr/bin/python3 -c 'import json,sys; print(sum(m["inference_stats"]["success"]["count"] for m in json.load(sys.stdin)["model_stats"]))'
}

# measure SERVER MODEL MODE CONC: sets RPS P50 P99 CPU.
measure() {
  local server=$1 model=$2 mode=$3 conc=$4 pid http args out t0 t1 n0 n1
  pid=$(eval echo "\$${server}_PID"); http=$(eval echo "\$${server}_HTTP")
  args=(-m "$model" --concurrency-range "$conc" --measurement-interval "$WINDOW_MS"
        --stability-percentage "$STABILITY" --max-trials 10 --shape INPUT0:16)
  case "$mode" in
    http) args+=(-u "127.0.0.1:$http" -i http) ;;
    capi)
      rm -rf "$WORK/repo-$server"; mkdir -p "$WORK/repo-$server"
      cp -r "$REPO/$model" "$WORK/repo-$server/"
      args+=(--service-kind=triton_c_api "--triton-server-directory=$WORK/capi-$server"
             "--model-repository=$WORK/repo-$server") ;;
  esac
  RPS=failed P50=- P99=- CPU=-
  if [ "$mode" != capi ]; then t0=$(tree_ticks "$pid"); n0=$(served "$http" "$model"); fi
  local env=()
  [ "$server$mode" = tritoncapi ] && env=(LD_LIBRARY_PATH="$WORK/capi-triton/lib")
  out=$(env "${env[@]}" "$PA" "${args[@]}" 2>&1) || { echo "$out" | grep -iE "error|failed" | head -2 >&2; return 0; }
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

echo "perf_analyzer 2.51 against nereid ($NEREID) and Triton 2.51, $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
printf '%-12s %-5s %4s | %9s %6s %6s %8s | %9s %6s %6s %8s | %6s %6s\n' model mode conc \
  "N req/s" "N p50" "N p99" "N cpu/rq" "T req/s" "T p50" "T p99" "T cpu/rq" "rps N/T" "cpu T/N"
declare -A NCPU NRPS
for row in $ROWS; do
  model=${row%%:*}; mode=${row##*:}
  for c in $CONC; do
    # perf_analyzer 2.51's C API mode past concurrency 1 stops answering
    # (bench/vs_triton.sh): that mode runs at 1 only.
    [ "$mode" = capi ] && [ "$c" != 1 ] && continue
    measure nereid "$model" "$mode" "$c"
    nr=$RPS; n50=$P50; n99=$P99; nc=$CPU
    NCPU[$model:$mode:$c]=$nc; NRPS[$model:$mode:$c]=$nr
    measure triton "$model" "$mode" "$c"
    printf '%-12s %-5s %4s | %9s %6s %6s %8s | %9s %6s %6s %8s | %6s %6s\n' "$model" "$mode" "$c" \
      "$nr" "$n50" "$n99" "$nc" "$RPS" "$P50" "$P99" "$CPU" "$(ratio "$nr" "$RPS")" "$(ratio "$CPU" "$nc")"
  done
done
echo "latencies in us; cpu/rq: us of CPU of the server's process tree (stubs included) per request"
for c in $CONC; do
  py=${NCPU[identity_py:http:$c]:-}; cc=${NCPU[identity_c:http:$c]:-}
  if [ -n "$py" ] && [ -n "$cc" ] && [ "$py" != - ] && [ "$cc" != - ]; then
    awk -v p="$py" -v c="$cc" -v k="$c" \
      'BEGIN { printf "nereid, concurrency %s: blank model.py costs %.1f us of CPU per request above the C identity (%.2fx)\n", k, p - c, p / c }'
  fi
done
b1=${NRPS[busy_py:http:8]:-}; b2=${NRPS[busy_py2:http:8]:-}
if [ -n "$b1" ] && [ -n "$b2" ]; then
  echo "nereid, CPU-bound model.py at concurrency 8: 2 instances make $(ratio "$b2" "$b1")x the requests/s of 1"
fi
