#!/usr/bin/env bash
# Builds everything twice and runs every test in each build: under
# AddressSanitizer + UBSan, then under ThreadSanitizer (tests/criterion_lite
# explains why the TSan build runs the C tests without Criterion).
# This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNRD_SANITIZE=ON >/dev/null
cmake --build build-asan -j2
ctest --test-dir build-asan --output-on-failure --timeout 300 -j2
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNRD_TSAN=ON >/dev/null
cmake --build build-tsan -j2
ctest --test-dir build-tsan --output-on-failure --timeout 600 -j2
