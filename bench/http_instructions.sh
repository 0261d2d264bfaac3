#!/usr/bin/env bash
# Instructions per small HTTP inference, counted by callgrind: a figure that
# does not move with the machine's load, unlike CPU time on a shared VM.
#
#   bench/http_instructions.sh [BUILD_DIR] [N]     (default: build, 2000)
#
# Runs nereid under valgrind's callgrind (one loop thread), sends 300 and
# then 300 + N identical binary-extension requests (identity_fp32, 16 x
# FP32, one keep-alive connection, as tritonclient shapes them) in two
# runs, and prints (Ir(300 + N) - Ir(300)) / N: the user-space
# instructions per request of the whole server (front end, core, backend),
# start-up and shutdown cancelled out. Prints figures only.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="${1:-$ROOT/build}"
N="${2:-2000}"
PORT="${PORT:-18796}"
command -v valgrind >/dev/null || { echo "valgrind is missing" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/drive.py" <<'P'
import json, socket, struct, sys, time
n = 16
h = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32",
                            "parameters": {"binary_data_size": 4 * n}}],
                "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
body = h + struct.pack(f"<{n}f", *range(n))
req = (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: localhost\r\n"
       f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(h)}\r\n"
       f"Content-Length: {len(body)}\r\n\r\n").encode() + body
for _ in range(600):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        break
    except OSError:
        time.sleep(0.1)
for _ in range(int(sys.argv[2])):
    s.sendall(req)
    d = b""
    while b"\r\n\r\n" not in d:
        d += s.recv(65536)
    head, rest = d.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    cl = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(rest) < cl:
        rest += s.recv(65536)
P

count() { # requests -> total Ir
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$1" "$BUILD/src/server/nereid" \
    --model-repository="$ROOT/examples/models" --backend-directory="$BUILD/backends" \
    --http-address=127.0.0.1 --http-port="$PORT" --http-thread-count=1 --allow-metrics=false \
    --allow-grpc=false --log-info=false >"$WORK/out.$1" 2>&1 &
  local pid=$!
  /usr/bin/python3 "$WORK/drive.py" "$PORT" "$1"
  kill -INT "$pid"
  wait "$pid" || true
  callgrind_annotate "$WORK/cg.$1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
a=$(count 300)
b=$(count $((300 + N)))
echo "nereid $(basename "$BUILD"): $(( (b - a) / N )) instructions per small binary HTTP infer (callgrind, $N requests)"
