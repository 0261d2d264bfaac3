#!/usr/bin/env bash
# Checks that libtritonserver.so exports every function our public headers
# declare as implemented by the server (DECLSPEC), and nothing else public.
# Usage: check_exports.sh <include-dir> <libtritonserver.so>
set -euo pipefail
inc=$1 lib=$2
declared=$(cat "$inc/triton/core/tritonserver.h" "$inc/triton/core/tritonbackend.h" "$inc/triton/core/tritoncache.h" "$inc/triton/core/tritonrepoagent.h" |
  tr '\n' ' ' | grep -oE '(TRITONSERVER|TRITONBACKEND|TRITONCACHE|TRITONREPOAGENT)_DECLSPEC[^;{]*\(' |
  grep -oE '(TRITONSERVER|TRITONBACKEND|TRITONCACHE|TRITONREPOAGENT)_[A-Za-z0-9]+ *\($' | tr -d ' (' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -E '^(TRITONSERVER|TRITONBACKEND|TRITONCACHE|TRITONREPOAGENT)_' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
nd=$(echo "$declared" | wc -l)
if [ -n "$missing" ]; then echo "declared but not exported:"; echo "$missing"; fi
if [ -n "$extra" ]; then echo "exported but not declared:"; echo "$extra"; fi
stray=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TD]/ {print $3}' | grep -vE '^(TRITONSERVER|TRITONBACKEND|TRITONCACHE|TRITONREPOAGENT)_|^_' || true)
if [ -n "$stray" ]; then echo "internal symbols leaking from the library:"; echo "$stray"; fi
if [ -n "$missing$extra$stray" ]; then exit 1; fi
echo "all $nd declared functions exported"
