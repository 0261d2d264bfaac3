#!/usr/bin/env bash
# Builds Nereid's OCI image from Debian packages only, starts it with podman
# and checks it with real requests. No base image is pulled: mmdebstrap
# extracts the .deb's Depends (and busybox, for the health check) from the
# Debian archive into a root file system, the .deb is unpacked over it, and
# buildah commits that tree as an image on top of nothing.
#
#   scripts/container.sh [--deb FILE] [--no-onnxruntime] [--tag NAME] [--no-check]
#
# --deb: use this nereid_*.deb (default: build Release in build-release/ and
#        run cpack there). --no-onnxruntime: leave ONNX Runtime (and the
#        onnxruntime backend) out. --no-check: build only.
# Needs root (or a user with subuids for podman/buildah) and the Debian
# packages mmdebstrap, buildah, podman, curl. docs/deploy.md has the figures.
# NEREID_PODMAN_ARGS: podman's global options for the check, e.g.
# "--runtime runc" where crun cannot run (cgroups in hybrid mode);
# NEREID_PODMAN_RUN_ARGS: more options for `podman run`, e.g.
# "--ulimit nofile=1024:1024 --ulimit nproc=1024:1024" where the host
# refuses podman's default limits.
#
# The image: user 1000 (nereid), ports 8000 (HTTP), 8001 (gRPC), 8002
# (metrics), models at /models, stop signal SIGTERM, health check on
# /v2/health/ready. The same image runs the Kubernetes and KServe manifests
# in deploy/.
set -euo pipefail
export BUILDAH_FORMAT=docker  # OCI image configs have no health check
cd "$(dirname "$0")/.."

deb="" ort=1 tag="" check=1 suite=bookworm
while [ $# -gt 0 ]; do
  case "$1" in
    --deb) deb=$2; shift 2 ;;
    --deb=*) deb=${1#*=}; shift ;;
    --no-onnxruntime) ort=0; shift ;;
    --tag) tag=$2; shift 2 ;;
    --tag=*) tag=${1#*=}; shift ;;
    --no-check) check=0; shift ;;
    *) echo "container: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in mmdebstrap buildah podman dpkg-deb curl; do
  command -v "$tool" >/dev/null || { echo "container: $tool is missing (apt-get install mmdebstrap buildah podman curl)" >&2; exit 1; }
done

if [ -z "$deb" ]; then
  cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DNRD_BUILD_TESTS=OFF >/dev/null
  cmake --build build-release -j"$(nproc)"
  (cd build-release && cpack -B "$PWD/package" >/dev/null)
  deb=$(ls build-release/package/nereid_*.deb | head -n1)
fi
version=$(dpkg-deb -f "$deb" Version)
[ -n "$tag" ] || tag="localhost/nereid:$version$([ $ort = 1 ] || echo -noort)"

work=$(mktemp -d)
ctr=""
cleanup() {
  [ -z "$ctr" ] || buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
root=$work/root

# The package's Depends, without version bounds, plus busybox (its wget is
# the health check; nothing else in the image has a shell or a client).
depends=$(dpkg-deb -f "$deb" Depends | sed -e 's/([^)]*)//g' -e 's/[[:space:]]//g')
if [ $ort = 0 ]; then
  # Only ONNX Runtime needs the C++ runtime.
  depends=$(echo "$depends" | tr ',' '\n' | grep -v -e '^libstdc++6$' | paste -sd,)
fi
t0=$(date +%s)
mmdebstrap --quiet --variant=extract --include="$depends,busybox" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  "$suite" "$root"
dpkg-deb -x "$deb" "$root"
# What the image does not need: the .deb's service files, the files for
# backend authors, the archive's leftovers.
rm -rf "$root/lib/systemd" "$root/etc/default/nereid" "$root/opt/nereid/include" \
  "$root/opt/nereid/lib/cmake" "$root/opt/nereid/lib/pkgconfig" "$root"/opt/nereid/lib/*.a \
  "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/locale "$root"/var/cache/apt/* \
  "$root"/var/lib/apt/lists/*
[ $ort = 1 ] || rm -rf "$root/opt/nereid/backends/onnxruntime"
# A non-root user without any package: passwd and group written here.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnereid:x:1000:1000:nereid:/models:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnereid:x:1000:\n' >"$root/etc/group"
mkdir -p "$root/models" "$root/tmp"
chmod 1777 "$root/tmp"

ctr=$(buildah from scratch)
buildah copy --quiet "$ctr" "$root" / >/dev/null
buildah config \
  --user 1000:1000 --workingdir /models \
  --port 8000 --port 8001 --port 8002 \
  --entrypoint '["/opt/nereid/bin/nereid"]' --cmd '["--model-repository=/models"]' \
  --stop-signal SIGTERM \
  --healthcheck 'CMD /bin/busybox wget -q -O /dev/null http://127.0.0.1:8000/v2/health/ready' \
  --healthcheck-interval 10s --healthcheck-timeout 3s --healthcheck-start-period 5s --healthcheck-retries 3 \
  --label org.opencontainers.image.title=nereid \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.description="Triton-compatible inference server" \
  "$ctr"
# Docker format: OCI's image config has no health check.
buildah commit --quiet --format docker --rm "$ctr" "$tag" >/dev/null
ctr=""
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "container: built $tag in $(( $(date +%s) - t0 )) s, $(( size / 1000000 )) MB ($size bytes)"
[ $check = 1 ] || exit 0

# The check: the example repository mounted at /models, a real inference,
# SIGTERM, exit status 0.
name=nereid-check-$$
port=${NEREID_CHECK_PORT:-18000}
args=()
[ $ort = 1 ] || args=(--model-repository=/models --model-control-mode=explicit --load-model=simple)
start=$(date +%s.%N)
podman=(podman ${NEREID_PODMAN_ARGS:-})
"${podman[@]}" run -d --name "$name" ${NEREID_PODMAN_RUN_ARGS:-} -p "127.0.0.1:$port:8000" \
  -v "$PWD/examples/models:/models:ro" "$tag" "${args[@]}" >/dev/null
trap '"${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true; cleanup' EXIT
for _ in $(seq 1 300); do
  if curl -fsS -o /dev/null "http://127.0.0.1:$port/v2/health/ready" 2>/dev/null; then break; fi
  if [ "$("${podman[@]}" inspect --format '{{.State.Running}}' "$name")" != true ]; then
    "${podman[@]}" logs "$name" >&2; echo "container: nereid exited before ready" >&2; exit 1
  fi
  sleep 0.1
done
ready=$(date +%s.%N)
curl -fsS -o /dev/null "http://127.0.0.1:$port/v2/health/ready"
echo "container: start to ready $(awk -v a="$start" -v b="$ready" 'BEGIN{printf "%.2f", b-a}') s (podman run to /v2/health/ready answering 200)"
body='{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}'
answer=$(curl -fsS -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$port/v2/models/simple/infer")
echo "$answer" | grep -q '"data":\[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\]' \
  || { echo "container: unexpected answer $answer" >&2; exit 1; }
echo "container: inference on simple answered right"
"${podman[@]}" healthcheck run "$name" >/dev/null && echo "container: health check passes"
"${podman[@]}" stop --time 40 "$name" >/dev/null
code=$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || { "${podman[@]}" logs "$name" >&2; echo "container: exit status $code after SIGTERM" >&2; exit 1; }
echo "container: SIGTERM stopped it with status 0"
