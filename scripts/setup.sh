#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian 12 machine: system packages, the Python package in .venv,
# a Docker engine and a local OCI registry on 127.0.0.1. Source it: it exports RIF_STARTED (what it
# started, for scripts/stop.sh), RIF_TEST_REGISTRY and puts .venv/bin on PATH.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE="$ROOT/.rif"
mkdir -p "$STATE"
export RIF_TEST_REGISTRY=${RIF_TEST_REGISTRY:-127.0.0.1:5000}
export RIF_STARTED=${RIF_STARTED:-}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v chromium >/dev/null || need+=(chromium)  # the catalog's browser test (tests/test_site.py)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x "$ROOT/.venv/bin/builder" ] || [ "$ROOT/pyproject.toml" -nt "$ROOT/.venv/.installed" ]; then
  echo "setup: installing rocm-image-factory into .venv"
  python3 -m venv "$ROOT/.venv"
  # (grep drops pip's notes about this machine's optional local index folders)
  "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check -e "$ROOT[test]" 2> >(grep -v "is ignored" >&2)
  touch "$ROOT/.venv/.installed"
fi
export PATH="$ROOT/.venv/bin:$PATH"

# BuildKit's front end: docker buildx. Debian 12 has no docker-buildx package; trixie's (0.13) drives
# dockerd 20.10's built-in BuildKit. Fetched from the host's own Debian mirror, into the user's plugin folder.
if ! docker buildx version >/dev/null 2>&1; then
  echo "setup: installing docker-buildx into ~/.docker/cli-plugins"
  mirror=$("$ROOT/.venv/bin/python" -c "from builder.baseimage import host_mirror; print(host_mirror('debian') or '')")
  mirror=${mirror:-http://deb.debian.org/debian}
  apt_tmp=$(mktemp -d)
  echo "deb ${mirror%/} trixie main" >"$apt_tmp/sources.list"
  mkdir -p "$apt_tmp/lists/partial" "$apt_tmp/archives/partial"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$apt_tmp/lists" -o "Dir::Cache::Archives=$apt_tmp/archives" -o APT::Sandbox::User=root)
  as_root apt-get "${apt_opts[@]}" update -qq
  (cd "$apt_tmp" && as_root apt-get "${apt_opts[@]}" download -qq docker-buildx)
  dpkg-deb -x "$apt_tmp"/docker-buildx_*.deb "$apt_tmp/x"
  mkdir -p "$HOME/.docker/cli-plugins"
  install -m 0755 "$apt_tmp/x/usr/libexec/docker/cli-plugins/docker-buildx" "$HOME/.docker/cli-plugins/docker-buildx"
  as_root rm -rf "$apt_tmp"
  docker buildx version
fi

wait_for() {  # wait_for WHAT SECONDS COMMAND...
  local what=$1 secs=$2; shift 2
  for _ in $(seq "$secs"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "setup: $what did not come up in ${secs}s" >&2; return 1
}

if ! docker info >/dev/null 2>&1; then
  echo "setup: starting dockerd"
  as_root sh -c "nohup dockerd >'$STATE/dockerd.log' 2>&1 & echo \$! >'$STATE/dockerd.pid'"
  RIF_STARTED="$RIF_STARTED dockerd"
  wait_for dockerd 60 docker info
fi

registry_up() { python3 -c "import urllib.request,sys; urllib.request.urlopen('http://$RIF_TEST_REGISTRY/v2/', timeout=2)"; }
if ! registry_up 2>/dev/null; then
  echo "setup: starting a registry on $RIF_TEST_REGISTRY"
  mkdir -p "$STATE/registry"
  cat >"$STATE/registry.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $STATE/registry}
  delete: {enabled: true}
http:
  addr: $RIF_TEST_REGISTRY
YAML
  nohup docker-registry serve "$STATE/registry.yml" >"$STATE/registry.log" 2>&1 &
  echo $! >"$STATE/registry.pid"
  RIF_STARTED="$RIF_STARTED registry"
  wait_for registry 30 registry_up
fi
