#!/usr/bin/env bash
# Puts ONNX Runtime's CPU library where the build finds it:
# .deps/onnxruntime/libonnxruntime.so.1 (ignored by git).
#
# Debian 12 has no ONNX Runtime package. The npm registry's onnxruntime-node
# package ships the prebuilt Linux x86_64 library; `npm pack` fetches that
# package and checks it against the registry's integrity hash, and we keep only
# the shared library. Nothing of the package runs (no install scripts).
# Idempotent: does nothing when the pinned version is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

# 1.24.3, not the newest: 1.30.0 leaks 152 bytes every ~10 s from a
# background thread (docs/onnxruntime.md).
version=1.24.3
dest=.deps/onnxruntime
lib=libonnxruntime.so.1
stamp="$dest/VERSION"

if [ -f "$dest/$lib" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "onnxruntime: $version present in $dest"
  exit 0
fi
case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "onnxruntime: no prebuilt library for $(uname -m); the onnxruntime backend will not load" >&2
     exit 0 ;;
esac
if ! command -v npm >/dev/null 2>&1; then
  echo "onnxruntime: npm is missing (scripts/setup.sh installs it)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "onnxruntime-node@$version" >/dev/null)
member="package/bin/napi-v6/linux/$arch/$lib"
tar -xzf "$work/onnxruntime-node-$version.tgz" -C "$work" "$member"
mkdir -p "$dest"
install -m 0644 "$work/$member" "$dest/$lib"
echo "$version" >"$stamp"
echo "onnxruntime: $version installed in $dest"
