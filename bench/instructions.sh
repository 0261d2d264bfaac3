#!/usr/bin/env bash
# Instructions per small inference, counted by callgrind: a figure that
# does not move with the machine's load, unlike CPU time on a shared VM.
#
#   bench/instructions.sh [BUILD_DIR] [N] [http|grpc|both]   (default: build, 2000, both)
#
# Runs nereid under valgrind's callgrind (one loop thread), sends 300 and
# then 300 + N identical requests (identity_fp32, 16 x FP32, one keep-alive
# connection, one request at a time) in two runs, and prints
# (Ir(300 + N) - Ir(300)) / N: the user-space instructions per request of
# the whole server (front end, core, backend), start-up and shutdown
# cancelled out. HTTP requests use the binary extension as tritonclient
# shapes them; gRPC requests are ModelInfer with raw_input_contents, sent
# by h2load (STREAMS=16 keeps 16 calls open on the connection, as the
# benchmark's 16/1 row does; default 1). VARY_ID=1 gives every HTTP
# request its own "id", so no two inference headers are the same bytes
# (the server then parses every one). Each figure comes twice: with the
# request run inline on the front end's thread and with it handed to the
# instance thread (see report below). KEEP=PREFIX keeps the callgrind
# files as PREFIX.<protocol>.<requests>.<limit>. Prints figures only.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
BUILD="${1:-$ROOT/build}"
N="${2:-2000}"
WHICH="${3:-both}"
PORT="${PORT:-18796}"
command -v valgrind >/dev/null || { echo "valgrind is missing" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/http_drive.py" <<'P'
import json, os, socket, struct, sys, time
n = 16
def request(i):
    hdr = {"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32",
                       "parameters": {"binary_data_size": 4 * n}}],
           "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    if os.environ.get("VARY_ID"):
        hdr = {"id": f"r{i:08d}", **hdr}
    h = json.dumps(hdr).encode()
    body = h + struct.pack(f"<{n}f", *range(n))
    return (f"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: localhost\r\n"
            f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(h)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body
vary = bool(os.environ.get("VARY_ID"))
req = request(0)
for _ in range(600):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        break
    except OSError:
        time.sleep(0.1)
for i in range(int(sys.argv[2])):
    s.sendall(request(i) if vary else req)
    d = b""
    while b"\r\n\r\n" not in d:
        d += s.recv(65536)
    head, rest = d.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    cl = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(rest) < cl:
        rest += s.recv(65536)
P

# The framed ModelInfer message, written with stubs made from our proto.
grpc_body() {
  /usr/bin/python3 - "$ROOT/proto" "$WORK" <<'P'
import sys
from grpc_tools import protoc
proto, work = sys.argv[1], sys.argv[2]
assert protoc.main(["protoc", f"-I{proto}", f"--python_out={work}", "grpc_service.proto",
                    "model_config.proto"]) == 0
sys.path.insert(0, work)
import struct
import grpc_service_pb2 as pb
r = pb.ModelInferRequest(model_name="identity_fp32")
t = r.inputs.add()
t.name, t.datatype = "INPUT0", "FP32"
t.shape.extend([1, 16])
r.raw_input_contents.append(struct.pack("<16f", *range(16)))
b = r.SerializeToString()
open(f"{work}/infer.bin", "wb").write(b"\0" + len(b).to_bytes(4, "big") + b)
P
}

grpc_drive() { # port requests
  for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && break
    sleep 0.1
  done
  local out
  out=$(h2load "http://127.0.0.1:$1/inference.GRPCInferenceService/ModelInfer" -n "$2" -c 1 -m "${STREAMS:-1}" \
    -t 1 -d "$WORK/infer.bin" -H "content-type: application/grpc" -H "te: trailers")
  grep -q "$2 succeeded, 0 failed" <<<"$out" || { echo "h2load: $out" >&2; exit 1; }
}

# nereid re-executes itself with its malloc tunables (malloc_tuning.h)
# unless GLIBC_TUNABLES is set; under valgrind that exec would leave the
# tool, so the same setting is given here and nereid runs as it would.
if [ -z "${GLIBC_TUNABLES+x}" ]; then
  GLIBC_TUNABLES="$(sed -n 's/^#define NRD_SRV_MALLOC_TUNABLES "\(.*\)"$/\1/p' "$ROOT/src/server/malloc_tuning.h")"
  export GLIBC_TUNABLES
fi

count() { # protocol requests -> total Ir
  local flags=(--allow-grpc=false "--http-address=127.0.0.1" "--http-port=$PORT" --http-thread-count=1)
  [ "$1" = grpc ] && flags=(--allow-http=false "--grpc-address=127.0.0.1" "--grpc-port=$PORT"
                            --grpc-thread-count=1)
  valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$1.$2" "$BUILD/src/server/nereid" \
    --model-repository="$ROOT/examples/models" --backend-directory="$BUILD/backends" \
    --model-control-mode=explicit --load-model=identity_fp32 --allow-metrics=false --log-info=false "${flags[@]}" >"$WORK/out.$1.$2" 2>&1 &
  local pid=$!
  if [ "$1" = grpc ]; then grpc_drive "$PORT" "$2"; else /usr/bin/python3 "$WORK/http_drive.py" "$PORT" "$2"; fi
  kill -INT "$pid"
  wait "$pid" || true
  [ -n "${KEEP:-}" ] && cp "$WORK/cg.$1.$2" "$KEEP.$1.$2.$NEREID_INLINE_EXECUTION_MAX_US"
  callgrind_annotate "$WORK/cg.$1.$2" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

# Both ways a request reaches identity's Execute (docs/core.md, "Inline
# execution"): run inline on the front end's thread (the limit raised to
# a second, since under valgrind no execution takes under the default
# 20 us) and handed to the instance thread (limit 0), as under load.
report() { # protocol label
  local a b mode limit
  for mode in inline threads; do
    limit=1000000
    [ "$mode" = threads ] && limit=0
    a=$(NEREID_INLINE_EXECUTION_MAX_US=$limit count "$1" 300)
    b=$(NEREID_INLINE_EXECUTION_MAX_US=$limit count "$1" $((300 + N)))
    echo "nereid $(basename "$BUILD"): $(( (b - a) / N )) instructions per small $2, $mode (callgrind, $N requests)"
  done
}

case "$WHICH" in
  http|both) report http "binary HTTP infer" ;;&
  grpc|both) grpc_body; report grpc "gRPC ModelInfer" ;;
  http) ;;
  *) echo "unknown protocol '$WHICH' (http, grpc or both)" >&2; exit 2 ;;
esac
