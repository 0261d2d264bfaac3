#!/usr/bin/env bash
# HTTP front-end benchmark: wrk against nereid on loopback.
#
#   bench/http_bench.sh [BUILD_DIR]     (default: build-http-rel, a Release build)
#
# Measures, at 1, 8 and 64 connections (DURATION seconds a run, ROUNDS
# alternated runs of each; rows are medians):
#   health    GET /v2/health/live: our HTTP server answering 200 with no
#             inference (the do-nothing baseline of this server on this machine)
#   json      POST identity_fp32 infer, 16 x FP32 as JSON in and out
#   binary    the same with the binary tensor data extension in and out
#   bare      the same binary request to nrd_bench_http_bare: our HTTP layer
#             answering the very bytes nereid answers, with no core (the
#             client does the same work as for `binary`, so the two compare
#             the servers alone); when BUILD_DIR/bench has it
#   floor     the same binary request to nrd_bench_http_floor: a bare epoll
#             loop answering the same bytes with no HTTP layer at all (what
#             the kernel's TCP, epoll and wake-ups alone cost here); when
#             BUILD_DIR/bench has it
#   big       one 16 MB FP32 tensor round trip (binary), 1 connection
# and prints req/s, p50/p99 latency and the server's CPU time per request
# (utime+stime from /proc/<pid>/stat, delta over the run / requests).
# Prints figures only; asserts nothing.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="${1:-$ROOT/build-http-rel}"
DURATION="${DURATION:-3}"
ROUNDS="${ROUNDS:-3}"
THREADS="${HTTP_THREADS:-2}"
PORT="${PORT:-18700}"
NEREID="$BUILD/src/server/nereid"
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/setup.sh" >&2; exit 1; }
[ -x "$NEREID" ] || { echo "no nereid at $NEREID (cmake -S . -B build-http-rel -DCMAKE_BUILD_TYPE=Release && cmake --build build-http-rel --target nereid)" >&2; exit 1; }

BARE="$BUILD/bench/nrd_bench_http_bare"
BARE_PORT=$((PORT + 1))
FLOOR="$BUILD/bench/nrd_bench_http_floor"
FLOOR_PORT=$((PORT + 2))
WORK="$(mktemp -d)"
cleanup() {
  [ -n "${PID:-}" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  [ -n "${BPID:-}" ] && kill "$BPID" 2>/dev/null && wait "$BPID" 2>/dev/null || true
  [ -n "${FPID:-}" ] && kill "$FPID" 2>/dev/null && wait "$FPID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Only the measured model: idle RSS is the server's own, not ONNX Runtime's
# (the example repository's accumulate_onnx maps it).
"$NEREID" --model-repository="$ROOT/examples/models" --backend-directory="$BUILD/backends" \
  --model-control-mode=explicit --load-model=identity_fp32 \
  --http-address=127.0.0.1 --http-port="$PORT" --http-thread-count="$THREADS" \
  --allow-metrics=false --allow-grpc=false --log-info=false >"$WORK/out" 2>"$WORK/err" &
PID=$!
for _ in $(seq 100); do grep -q "^nereid: server " "$WORK/out" 2>/dev/null && break; sleep 0.1; done
grep -q "^nereid: server " "$WORK/out" || { cat "$WORK/out" "$WORK/err"; exit 1; }
if [ -x "$BARE" ]; then
  "$BARE" "$BARE_PORT" "$THREADS" >"$WORK/bare.out" 2>&1 &
  BPID=$!
  for _ in $(seq 50); do grep -q "ready" "$WORK/bare.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "ready" "$WORK/bare.out" || { cat "$WORK/bare.out"; exit 1; }
fi
if [ -x "$FLOOR" ]; then
  "$FLOOR" "$FLOOR_PORT" "$THREADS" >"$WORK/floor.out" 2>&1 &
  FPID=$!
  for _ in $(seq 50); do grep -q "ready" "$WORK/floor.out" 2>/dev/null && break; sleep 0.1; done
  grep -q "ready" "$WORK/floor.out" || { cat "$WORK/floor.out"; exit 1; }
fi

# Request bodies: JSON, and binary (header + 64 raw bytes), as tritonclient builds them.
/usr/bin/python3 - "$WORK" <<'EOF'
import json, struct, sys
w = sys.argv[1]
vals = [float(i) + 0.5 for i in range(16)]
j = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": vals}],
     "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": False}}]}
open(f"{w}/json.body", "wb").write(json.dumps(j).encode())
def binary(n, name):
    h = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32",
                                "parameters": {"binary_data_size": 4 * n}}],
                    "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    open(f"{w}/{name}.body", "wb").write(h + struct.pack(f"<{n}f", *range(n)))
    open(f"{w}/{name}.hlen", "w").write(str(len(h)))
binary(16, "binary")
binary(4 * 1024 * 1024, "big")
EOF

# A Lua script per body: wrk posts the file's bytes; responses not 200 count as errors.
lua() { # name content_type [header_len]
  local extra=""
  [ -n "${3:-}" ] && extra="wrk.headers[\"Inference-Header-Content-Length\"] = \"$3\""
  cat >"$WORK/$1.lua" <<EOF
local f = assert(io.open("$WORK/$1.body", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "$2"
$extra
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), summary.errors.status))
end
EOF
}
lua json application/json
lua binary application/octet-stream "$(cat "$WORK/binary.hlen")"
lua big application/octet-stream "$(cat "$WORK/big.hlen")"
cat >"$WORK/health.lua" <<'EOF'
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.1f %.1f %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), summary.errors.status))
end
EOF

ticks() { awk '{print $14 + $15}' "/proc/${1:-$PID}/stat"; }
HZ=$(getconf CLK_TCK)
RSS0=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")

run() { # label path script conns [bytes_per_request] -> one "ROW ..." line of raw figures
  local label=$1 path=$2 script=$3 conns=$4 bytes=${5:-0}
  local t0 t1 line pid=$PID port=$PORT
  if [ "$label" = bare ]; then pid=$BPID; port=$BARE_PORT; fi
  if [ "$label" = floor ]; then pid=$FPID; port=$FLOOR_PORT; fi
  t0=$(ticks "$pid")
  line=$(wrk -t "$(( conns < 2 ? 1 : 2 ))" -c "$conns" -d "${DURATION}s" --latency \
         -s "$WORK/$script.lua" "http://127.0.0.1:$port$path" | grep '^RESULT')
  t1=$(ticks "$pid")
  set -- $line
  echo "ROW $label $conns $2 $3 $4 $5 $6 $((t1 - t0)) $bytes"
}

echo "nereid $(basename "$BUILD"), --http-thread-count=$THREADS, ${DURATION}s per run, $ROUNDS rounds, $(nproc) cores, idle RSS ${RSS0} kB"
# The kinds take turns at each concurrency, ROUNDS times over, so a
# slow spell of the machine hits all of them; a row is the median of its
# rounds, and the share is the median of the rounds' binary/health ratios.
for c in 1 8 64; do
  for _ in $(seq "$ROUNDS"); do
    run health /v2/health/live health "$c"
    run json /v2/models/identity_fp32/infer json "$c"
    run binary /v2/models/identity_fp32/infer binary "$c"
    [ -n "${BPID:-}" ] && run bare /v2/models/identity_fp32/infer binary "$c"
    [ -n "${FPID:-}" ] && run floor /v2/models/identity_fp32/infer binary "$c"
  done
done >"$WORK/rows"
run big16MB /v2/models/identity_fp32/infer big 1 $((16 * 1024 * 1024)) >>"$WORK/rows"
/usr/bin/python3 - "$WORK/rows" "$HZ" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, label, conns, reqs, dur_us, p50, p99, bad, ticks, nbytes = line.split()
    reqs, secs = int(reqs), int(dur_us) / 1e6
    runs[label, int(conns)].append({
        "rps": reqs / secs, "p50": float(p50), "p99": float(p99), "bad": int(bad),
        "cpu": int(ticks) / int(sys.argv[2]) * 1e6 / reqs if reqs else 0.0,
        "gbs": int(nbytes) * 2 * reqs / secs / 1e9})
med = lambda rows, k: statistics.median(r[k] for r in rows)
for (label, conns), rows in runs.items():
    line = (f"{label:<8} c={conns:<3} {med(rows, 'rps'):9.0f} req/s  p50 {med(rows, 'p50'):8.1f} us  "
            f"p99 {med(rows, 'p99'):8.1f} us  server CPU {med(rows, 'cpu'):6.1f} us/req")
    if rows[0]["gbs"]:
        line += f"  {med(rows, 'gbs'):5.2f} GB/s (in+out)"
    if len(rows) > 1:
        line += "  (CPU per round: " + " ".join(f"{r['cpu']:.1f}" for r in rows) + ")"
    bad = sum(r["bad"] for r in rows)
    print(line + (f"  NON-200: {bad}" if bad else ""))
for base in ("health", "bare"):
    for conns in sorted({c for _, c in runs}):
        pairs = list(zip(runs.get(("binary", conns), []), runs.get((base, conns), [])))
        if pairs:
            shares = [100 * b["rps"] / h["rps"] for b, h in pairs]
            print(f"binary/{base:<6} throughput c={conns:<3} {statistics.median(shares):4.0f}%  "
                  f"(per round: {' '.join(f'{s:.0f}%' for s in shares)})")
EOF
