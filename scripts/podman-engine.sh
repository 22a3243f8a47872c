#!/bin/bash
# Copied from the team's shared scripts (../shared/scripts/podman-engine.sh) so that CI and the docker
# backend tests need nothing outside this checkout.
# A Docker-compatible engine on these machines: podman + runc behind `podman system service`.
# Verified on the project's Debian 12 VMs (root, cgroup v1 hybrid, no CAP_SYS_RESOURCE), where
# crun and a plain `podman run` fail. Use it from .ci/run and tests for the docker backend.
#
#   podman-engine.sh start            install podman+runc if missing, start the API service
#   podman-engine.sh image [NAME]     import a Debian bookworm image (python3 included) as NAME
#                                     (default localhost/ares-debian:bookworm), built once by debootstrap
#   podman-engine.sh stop             remove all containers, stop the service, clean cgroup dirs
#   podman-engine.sh env              print the exports a client needs
#
# Clients: export DOCKER_HOST=unix:///run/podman/podman.sock (the `docker` SDK negotiates API 1.41).
# Notes: containers live outside the caller's cgroup, so always call `stop` at the end;
# give the SDK client a timeout (a streaming logs() call hung once in ~260 runs).
set -euo pipefail
STATE=${ARES_ENGINE_STATE:-/tmp/ares-engine}
SOCK=/run/podman/podman.sock
CACHE=${ARES_ENGINE_CACHE:-/var/cache/ares-engine}
export CONTAINERS_CONF="$STATE/containers.conf"

need() { command -v "$1" >/dev/null 2>&1; }

write_conf() {
  mkdir -p "$STATE" /run/podman
  cat > "$CONTAINERS_CONF" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
exit_command_delay = 10
EOF
}

ping() { curl -sf --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; }

start() {
  if ! need podman || ! need runc || ! need curl; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends podman runc curl ca-certificates >/dev/null
  fi
  write_conf
  if ! ping; then
    rm -f "$SOCK"
    # From the state dir: conmon writes an `oom` file into the service's working directory.
    cd "$STATE"
    setsid nohup podman system service --time=0 "unix://$SOCK" \
      > "$STATE/service.log" 2>&1 < /dev/null &
    echo $! > "$STATE/service.pid"
    for _ in $(seq 1 100); do ping && break; sleep 0.1; done
  fi
  ping || { echo "podman service did not come up; see $STATE/service.log" >&2; exit 1; }
  echo "engine ready: DOCKER_HOST=unix://$SOCK"
}

image() {
  local name=${1:-localhost/ares-debian:bookworm}
  write_conf
  if podman image exists "$name"; then echo "image $name present"; return; fi
  local rootfs="$CACHE/bookworm"
  if [ ! -x "$rootfs/usr/bin/python3" ]; then
    need debootstrap || { apt-get update -qq >/dev/null; DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq debootstrap >/dev/null; }
    rm -rf "$rootfs"; mkdir -p "$CACHE"
    debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$rootfs" \
      http://deb.debian.org/debian > "$STATE/debootstrap.log" 2>&1
  fi
  tar -C "$rootfs" -c . | podman import -q - "$name" >/dev/null
  echo "image $name imported"
}

stop() {
  [ -f "$CONTAINERS_CONF" ] || write_conf
  podman rm -a -f -t 0 >/dev/null 2>&1 || true
  if [ -f "$STATE/service.pid" ]; then
    local p; p=$(cat "$STATE/service.pid")
    kill "$p" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
    rm -f "$STATE/service.pid"
  fi
  rm -f "$SOCK"
  for d in /sys/fs/cgroup/*/libpod_parent; do
    [ -d "$d" ] || continue; rmdir "$d"/* 2>/dev/null || true; rmdir "$d" 2>/dev/null || true
  done
  echo "engine stopped"
}

case "${1:-}" in
  start) start ;;
  image) shift; image "$@" ;;
  stop) stop ;;
  env) echo "export DOCKER_HOST=unix://$SOCK CONTAINERS_CONF=$CONTAINERS_CONF" ;;
  *) sed -n 2,14p "$0"; exit 2 ;;
esac
