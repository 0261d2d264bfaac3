#!/usr/bin/env bash
# Builds Nereid (release) and starts it on the bundled example repository.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNRD_BUILD_TESTS=OFF >/dev/null
cmake --build build -j2
exec build/src/server/nereid --model-repository=examples/models \
  --backend-directory=build/backends "$@"
