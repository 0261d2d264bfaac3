#!/usr/bin/env bash
# Builds the libFuzzer programs with clang (in build-fuzz/) and runs one.
#
#   tests/fuzz/run.sh http|grpc|pbtxt [SECONDS] [libFuzzer flags...]
#
# The run starts from the committed corpus (tests/fuzz/corpus/<name>, for
# pbtxt tests/unit/core/data/configs) and keeps what it finds in
# build-fuzz/corpus/<name>. With MERGE=1 the new inputs that add coverage
# are merged back into tests/fuzz/corpus/<name> afterwards. A crash leaves a
# crash-* file in build-fuzz/; replay it with the same program and the
# file's path.
set -euo pipefail
cd "$(dirname "$0")/../.."
NAME="${1:?usage: tests/fuzz/run.sh http|grpc|pbtxt [SECONDS] [libFuzzer flags...]}"
SECS="${2:-60}"
shift $(( $# < 2 ? $# : 2 ))
command -v clang >/dev/null || { echo "clang is missing (apt-get install clang)" >&2; exit 1; }
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -shared-libasan"
# The shared sanitizer runtime lives in clang's own folder.
RT="$(dirname "$(clang --print-file-name=libclang_rt.asan-x86_64.so)")"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DNRD_FUZZ=ON \
  -DCMAKE_C_FLAGS="-O1 -g -fno-omit-frame-pointer $SAN" -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="$SAN -Wl,-rpath,$RT" -DCMAKE_SHARED_LINKER_FLAGS="$SAN" \
  -DCMAKE_MODULE_LINKER_FLAGS="$SAN" >/dev/null
case "$NAME" in
  http|grpc) PROG=fuzz_${NAME}_wire; SEEDS=tests/fuzz/corpus/$NAME ;;
  pbtxt) PROG=fuzz_pbtxt; SEEDS=tests/unit/core/data/configs ;;
  *) echo "unknown fuzzer '$NAME' (http, grpc or pbtxt)" >&2; exit 2 ;;
esac
cmake --build build-fuzz -j2 --target "$PROG" >/dev/null
WORK=build-fuzz/corpus/$NAME
mkdir -p "$WORK"
BIN="$(find build-fuzz -name "$PROG" -type f -executable | head -1)"
# libFuzzer is C++, so libstdc++ is loaded before the shared ASan runtime;
# that is harmless (it defines no allocator), but ASan checks the order.
export ASAN_OPTIONS="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# The server keeps memory across inputs (connections, model state), so
# LeakSanitizer runs only at exit, as the ctest replay does.
(cd build-fuzz && "../$BIN" -max_total_time="$SECS" -detect_leaks=0 -timeout=30 \
  -rss_limit_mb=4096 "$@" "corpus/$NAME" "../$SEEDS")
if [ "${MERGE:-0}" = 1 ] && [ "$NAME" != pbtxt ]; then
  (cd build-fuzz && "../$BIN" -merge=1 -detect_leaks=0 "../$SEEDS" "corpus/$NAME")
fi
