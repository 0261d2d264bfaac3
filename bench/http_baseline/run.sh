#!/usr/bin/env bash
# Do-nothing HTTP/1.1 servers, one event-loop thread each, measured with wrk:
#   evhttp   libevent 2.1 evhttp               (evhttp_min.c)
#   h2o      h2o 2.2 with its evloop            (h2o_min.c, Debian libh2o-evloop-dev)
#   epoll    hand-written epoll keep-alive loop (epoll_min.c): the floor
# Every request gets 200 with a 2-byte body. For each server and 1, 8 and 64
# keep-alive connections (wrk -t1, DURATION s), RUNS runs; prints per-run
# figures and then the medians: req/s, p50/p99 latency and the server's CPU
# time per request (utime+stime from /proc/<pid>/stat, delta / requests)
# and the user-space part of it (utime alone).
# wrk shares the machine's cores with the server.
#
#   bench/http_baseline/run.sh            (needs gcc, pkg-config, wrk,
#                                          libevent-dev, libh2o-evloop-dev)
# Env: DURATION (4), RUNS (3), SERVERS ("evhttp h2o epoll"), OUT (build dir).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
DURATION="${DURATION:-4}"
RUNS="${RUNS:-3}"
SERVERS="${SERVERS:-evhttp h2o epoll}"
OUT="${OUT:-$(mktemp -d)}"
PORT="${PORT:-18790}"
CFLAGS="-std=c17 -O2 -Wall -Wextra -Werror"
command -v wrk >/dev/null || { echo "wrk is missing" >&2; exit 1; }

gcc $CFLAGS -o "$OUT/evhttp" "$HERE/evhttp_min.c" $(pkg-config --cflags --libs libevent)
gcc $CFLAGS -o "$OUT/h2o" "$HERE/h2o_min.c" $(pkg-config --cflags --libs libh2o-evloop)
gcc $CFLAGS -o "$OUT/epoll" "$HERE/epoll_min.c"

PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true; }
trap cleanup EXIT

cat >"$OUT/report.lua" <<'LUA'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %.1f %.1f %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99),
    e.status + e.connect + e.read + e.write + e.timeout))
end
LUA

HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15, $14}' "/proc/$PID/stat"; }  # total, user
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "$(nproc) cores, wrk -t1, ${DURATION}s per run, $RUNS runs, median of runs"
printf '%-7s %-4s %10s %9s %9s %12s %9s\n' server conn 'req/s' 'p50 us' 'p99 us' 'CPU us/req' 'of it user'
for s in $SERVERS; do
  "$OUT/$s" "$PORT" >"$OUT/$s.log" 2>&1 &
  PID=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$PORT/" >/dev/null || { echo "$s did not start" >&2; cat "$OUT/$s.log" >&2; exit 1; }
  wrk -t1 -c8 -d1s "http://127.0.0.1:$PORT/" >/dev/null   # warm-up
  for c in 1 8 64; do
    : >"$OUT/runs"
    for _ in $(seq "$RUNS"); do
      read -r t0 u0 < <(ticks)
      line=$(wrk -t1 -c "$c" -d "${DURATION}s" --latency -s "$OUT/report.lua" \
             "http://127.0.0.1:$PORT/" | grep '^RESULT')
      read -r t1 u1 < <(ticks)
      set -- $line
      awk -v r="$2" -v d="$3" -v p50="$4" -v p99="$5" -v bad="$6" -v t="$((t1 - t0))" \
          -v u="$((u1 - u0))" -v hz="$HZ" \
        'BEGIN { if (bad > 0) print "errors: " bad > "/dev/stderr";
                 printf "%.0f %.1f %.1f %.2f %.2f\n", r / (d / 1e6), p50, p99,
                        t / hz * 1e6 / r, u / hz * 1e6 / r }' >>"$OUT/runs"
    done
    rps=$(awk '{print $1}' "$OUT/runs" | median)
    p50=$(awk '{print $2}' "$OUT/runs" | median)
    p99=$(awk '{print $3}' "$OUT/runs" | median)
    cpu=$(awk '{print $4}' "$OUT/runs" | median)
    usr=$(awk '{print $5}' "$OUT/runs" | median)
    printf '%-7s %-4s %10s %9s %9s %12s %9s   runs: %s\n' "$s" "$c" "$rps" "$p50" "$p99" "$cpu" "$usr" \
      "$(awk '{printf "%s/%s ", $1, $4}' "$OUT/runs")"
  done
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
done
