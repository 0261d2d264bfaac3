#!/usr/bin/env bash
# Builds everything under AddressSanitizer + UBSan and runs every test.
# This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNRD_SANITIZE=ON >/dev/null
cmake --build build-asan -j2
ctest --test-dir build-asan --output-on-failure --timeout 300 -j2
