#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian 12 machine: system packages, the Python package in .venv, the Docker
# engine production runs (28+, containerd image store, current BuildKit) and a local OCI registry on 127.0.0.1.
# Source it: it exports RIF_STARTED (what it started, for scripts/stop.sh), RIF_TEST_REGISTRY, DOCKER_HOST
# (the engine's own socket) and RIF_BUILD_NETWORK=host (its builds' RUN steps on the host's network: the engine
# has no bridge), and puts .venv/bin on PATH. Nothing else of the sourcing shell changes: the work
# runs in a subshell with its own options (set -euo pipefail), which hands back only those exports, so an
# interactive shell keeps its options, traps, directory, variables and functions, and a failure returns
# (status 1) instead of closing the terminal.
_rif_setup() {  # _rif_setup ENV_FILE: the set-up; writes the exports for the caller to ENV_FILE
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE="$ROOT/.rif"
mkdir -p "$STATE"
# RIF_INSTANCE=N: another engine and registry beside the first (the engine tier's second pytest worker,
# scripts/test.sh): its own socket, data, pid files and registry storage, named with -N.
SUFFIX=${RIF_INSTANCE:+-$RIF_INSTANCE}
export RIF_TEST_REGISTRY=${RIF_TEST_REGISTRY:-127.0.0.1:5000}
export RIF_STARTED=${RIF_STARTED:-}
export RIF_BUILD_NETWORK=${RIF_BUILD_NETWORK:-host}  # `builder build|publish|reproduce --build-network`: no bridge here

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need=()
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v chromium >/dev/null || need+=(chromium)  # the catalog's browser test (tests/site/test_site.py)
command -v runc >/dev/null || need+=(runc)  # the engine's OCI runtime: Debian 12's (sid's needs glibc 2.38)
command -v tini-static >/dev/null || need+=(tini)  # docker-init
# containerd (2.x) unpacks gzip layers with igzip, else unpigz, when either is on its PATH, and with Go's own
# inflate otherwise (containerd v2, pkg/archive/compression/compression.go): every image the engine builds is unpacked
# again into its snapshot, a real torch layer of 750 MB and more, so the C inflate is the engine's largest saving
command -v igzip >/dev/null || need+=(isal)
command -v unpigz >/dev/null || need+=(pigz)
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

# The engine production runs (GitHub's runners: Docker Engine 28+, current BuildKit): Debian sid's docker.io,
# containerd and docker-buildx, which need only glibc >= 2.34, unpacked into a private prefix (.rif/engine) from
# the host's own Debian mirror; nothing of the system is upgraded. Debian 12's runc and tini run under it.
ENGINE="$STATE/engine"
sid_download() {  # sid_download DEST PACKAGE...: .debs from sid through a private apt state (no system change)
  local dest=$1 apt_tmp mirror; shift
  mirror=$("$ROOT/.venv/bin/python" -c "from builder.buildkit.baseimage import host_mirror; print(host_mirror('debian') or '')")
  mirror=${mirror:-http://deb.debian.org/debian}
  apt_tmp=$(mktemp -d)
  echo "deb ${mirror%/} sid main" >"$apt_tmp/sources.list"
  mkdir -p "$apt_tmp/lists/partial" "$apt_tmp/archives/partial" "$dest"
  local apt_opts=(-o "Dir::Etc::SourceList=$apt_tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
                  -o "Dir::State::Lists=$apt_tmp/lists" -o "Dir::Cache::Archives=$apt_tmp/archives"
                  -o APT::Sandbox::User=root)
  as_root apt-get "${apt_opts[@]}" update -qq
  (cd "$dest" && as_root apt-get "${apt_opts[@]}" download -qq "$@")
  as_root rm -rf "$apt_tmp"
}
engine_version() { "$ENGINE/usr/sbin/dockerd" --version 2>/dev/null | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p'; }
# An engine that already answers (DOCKER_HOST, or the default socket) is used as it is when it is 28+ with the
# containerd image store (a GitHub runner once its workflow switched that on); otherwise this machine gets ours.
modern_engine() { docker info -f '{{.ServerVersion}} {{.DriverStatus}}' 2>/dev/null | grep -qE '^(2[89]|[3-9][0-9])\..*snapshotter'; }
existing=no
if [ -z "${RIF_DOCKER_HOST:-}" ] && modern_engine; then existing=yes; fi
if [ "$existing" = no ] && { [ -z "$(engine_version)" ] || [ "$(engine_version)" -lt 28 ]; }; then
  echo "setup: unpacking Debian sid's docker.io, containerd and docker-buildx into $ENGINE"
  debs=$(mktemp -d)
  sid_download "$debs" docker.io containerd docker-buildx
  rm -rf "$ENGINE" && mkdir -p "$ENGINE"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$ENGINE"; done
  rm -rf "$debs"
  rm -f "$ENGINE/usr/bin/runc" "$ENGINE/usr/sbin/runc"  # sid's runc needs a newer glibc: the system's runs
  ln -sf "$(command -v tini-static)" "$ENGINE/usr/bin/docker-init"
  "$ENGINE/usr/sbin/dockerd" --version
fi
# buildx 0.18+ (bake's fs entitlements, OCI layout export, zstd); else sid's 0.29 as the user's CLI plugin.
buildx_minor=$(docker buildx version 2>/dev/null | sed -n 's/.* v\{0,1\}0\.\([0-9]*\).*/\1/p' || true)
if [ "${buildx_minor:-0}" -lt 18 ]; then
  [ -x "$ENGINE/usr/libexec/docker/cli-plugins/docker-buildx" ] || sid_download "$ENGINE.buildx" docker-buildx
  for deb in "$ENGINE".buildx/*.deb; do [ -f "$deb" ] && dpkg-deb -x "$deb" "$ENGINE"; done
  rm -rf "$ENGINE.buildx"
  echo "setup: installing docker-buildx into ~/.docker/cli-plugins"
  mkdir -p "$HOME/.docker/cli-plugins"
  install -m 0755 "$ENGINE/usr/libexec/docker/cli-plugins/docker-buildx" "$HOME/.docker/cli-plugins/docker-buildx"
  docker buildx version
fi

# Only an engine or registry this checkout can stand behind is used. What answers on the project's socket (or, for
# a registry setup.sh started, on RIF_TEST_REGISTRY's loopback port) must run binaries and a config that still exist
# and are this checkout's. One whose files are gone (its checkout deleted, or its engine unpacked again:
# /proc/PID/exe reads "... (deleted)") fails every container start with a bare "400 Bad Request": it is stopped, and
# this checkout's is started below. One of another checkout that still exists may be in use there: setup stops with
# one line naming it and what to run.
proc_exe() { as_root readlink "/proc/$1/exe" 2>/dev/null || true; }
proc_arg() {  # proc_arg PID WORD: the argument after WORD (or WORD=VALUE) on the process's command line
  as_root cat "/proc/$1/cmdline" 2>/dev/null | tr '\0' '\n' \
    | awk -v w="$2" 'take { print; exit } $0 == w { take = 1 } index($0, w "=") == 1 { print substr($0, length(w) + 2); exit }'
}
files_gone() {  # files_gone PID CONFIG: the first of the process's (or its children's) binaries or config that is gone
  local p exe
  for p in "$1" $(pgrep -P "$1" 2>/dev/null || true); do
    exe=$(proc_exe "$p")
    case "$exe" in *" (deleted)") echo "${exe% (deleted)}"; return 0 ;; esac
  done
  if [ -n "$2" ] && ! as_root test -e "$2"; then echo "$2"; fi
}
checkout_of() {  # checkout_of EXE CONFIG: the checkout whose .rif/ a process was started from, else its binary
  case "$2" in */.rif/*) echo "${2%%/.rif/*}"; return 0 ;; esac
  case "$1" in */.rif/*) echo "${1%%/.rif/*}"; return 0 ;; esac
  echo "$1"
}
stop_stale() {  # stop_stale WHAT PID: SIGTERM, then wait for the process to end (at most 60 s)
  as_root kill "$2" 2>/dev/null || true
  timeout 60 tail --pid="$2" -f /dev/null && return 0
  echo "setup: $1 (pid $2) did not stop within 60 s: run 'sudo kill -9 $2', then source scripts/setup.sh again" >&2
  return 1
}
tell_engine() {  # tell_engine: 0 when the engine on DOCKER_HOST is this checkout's (or was stale and is stopped)
  local pid exe config gone
  pid=$(as_root cat "$ENGINE_RUN/dockerd.pid" 2>/dev/null || true)
  if [ -z "$pid" ] || [ ! -e "/proc/$pid" ]; then
    echo "setup: an engine answers on $DOCKER_HOST but $ENGINE_RUN/dockerd.pid names no running dockerd: stop it" \
         "(sudo ss -xlp | grep $ENGINE_RUN/docker.sock names it), then source scripts/setup.sh again" >&2
    return 1
  fi
  exe=$(proc_exe "$pid") config=$(proc_arg "$pid" --config-file)
  gone=$(files_gone "$pid" "$config")
  if [ -n "$gone" ]; then
    echo "setup: the engine on $DOCKER_HOST (dockerd $pid) runs files that are gone ($gone): stopping it to start this checkout's"
    stop_stale "the engine on $DOCKER_HOST" "$pid"
    return
  fi
  if [ "${exe#"$(readlink -f "$ENGINE")"/}" = "$exe" ] \
     || [ "$(readlink -f "$config")" != "$(readlink -f "$STATE/daemon.json")" ]; then  # not run from our .rif/
    echo "setup: the engine on $DOCKER_HOST (dockerd $pid) was started from $(checkout_of "$exe" "$config"), not this" \
         "checkout ($ROOT): stop it (sudo kill $pid; whoever uses it there loses it) or work in that checkout, then" \
         "source scripts/setup.sh again" >&2
    return 1
  fi
}
tell_registry() {  # tell_registry: 0 unless a registry setup.sh started elsewhere answers on our loopback port
  local pid exe config gone
  case "${RIF_TEST_REGISTRY%:*}" in 127.*|localhost|"[::1]") ;; *) return 0 ;; esac  # a registry elsewhere
  pid=$(as_root ss -Hltnp "sport = :${RIF_TEST_REGISTRY##*:}" 2>/dev/null | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n 1)
  exe=$(if [ -n "$pid" ]; then proc_exe "$pid"; fi)
  case "$exe" in */docker-registry|*"/docker-registry (deleted)") ;; *) return 0 ;; esac  # the user's own: as it is
  config=$(proc_arg "$pid" serve)
  gone=$(files_gone "$pid" "$config")
  if [ -n "$gone" ]; then
    echo "setup: the registry on $RIF_TEST_REGISTRY (docker-registry $pid) runs files that are gone ($gone): stopping it to start this checkout's"
    stop_stale "the registry on $RIF_TEST_REGISTRY" "$pid"
    return
  fi
  case "$config" in */.rif/registry.yml|*/.rif/registry-*.yml) ;; *) return 0 ;; esac  # not setup.sh's: the user's own, used as it is
  if [ "$(readlink -f "$config")" != "$(readlink -f "$STATE/registry$SUFFIX.yml")" ]; then
    echo "setup: the registry on $RIF_TEST_REGISTRY (docker-registry $pid) was started from" \
         "$(checkout_of "$exe" "$config"), not this checkout ($ROOT): stop it (sudo kill $pid; whoever uses it there" \
         "loses it), or set RIF_TEST_REGISTRY to another 127.0.0.1:PORT, then source scripts/setup.sh again" >&2
    return 1
  fi
}

wait_for() {  # wait_for WHAT SECONDS COMMAND...
  local what=$1 secs=$2; shift 2
  for _ in $(seq "$secs"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "setup: $what did not come up in ${secs}s" >&2; return 1
}

# The engine's own socket and data: it never touches a Docker the machine already runs. No bridge and no
# iptables rules: containers get loopback only and builds run on the host network (RIF_BUILD_NETWORK above), so
# nothing a test serves is ever on docker0 or any other address. The containerd image store keeps manifests as
# built, so the digest validated is the digest pushed. BuildKit's cache is trimmed only when the disk needs it:
# its default GC keeps 20% of the disk free and trims the cache to 10% of the disk to get there, so on a machine
# with less free disk than that (CI's) it evicted the torch steps between tests and each next build installed and
# compressed torch again. Here GC frees disk only below 8 GB free, least recently used first, and never below 2 GB.
ENGINE_RUN=${RIF_ENGINE_RUN:-/run/rif-engine}$SUFFIX
ENGINE_DATA=${RIF_ENGINE_DATA:-/var/lib/rif-engine}$SUFFIX
if [ "$existing" = no ]; then export DOCKER_HOST=${RIF_DOCKER_HOST:-unix://$ENGINE_RUN/docker.sock}; fi
# The engine on the project's own socket is used only when it is this checkout's (tell_engine above).
if [ "$existing" = no ] && docker info >/dev/null 2>&1; then tell_engine || return 1; fi
if ! docker info >/dev/null 2>&1; then
  echo "setup: starting dockerd $(engine_version).x on $DOCKER_HOST"
  as_root mkdir -p "$ENGINE_RUN" "$ENGINE_DATA"
  cat >"$STATE/daemon.json" <<JSON
{"features": {"containerd-snapshotter": true}, "bridge": "none", "iptables": false, "ip6tables": false,
 "ip-forward": false, "ip-masq": false, "userland-proxy": false,
 "builder": {"gc": {"enabled": true, "defaultMinFreeSpace": "8GB", "defaultReservedSpace": "2GB"}}}
JSON
  as_root env PATH="$ENGINE/usr/bin:$ENGINE/usr/sbin:$PATH" sh -c "nohup dockerd --config-file '$STATE/daemon.json' \
    --data-root '$ENGINE_DATA' --exec-root '$ENGINE_RUN/exec' --pidfile '$ENGINE_RUN/dockerd.pid' \
    -H '$DOCKER_HOST' >'$STATE/dockerd$SUFFIX.log' 2>&1 & echo \$! >'$STATE/dockerd$SUFFIX.pid'"
  RIF_STARTED="$RIF_STARTED dockerd$SUFFIX"
  wait_for dockerd 60 docker info
fi
if [ "$(docker info -f '{{.DriverStatus}}' 2>/dev/null | grep -c snapshotter)" = 0 ]; then
  echo "setup: the engine at $DOCKER_HOST does not use the containerd image store (features.containerd-snapshotter)" >&2
  return 1
fi

registry_up() { python3 -c "import urllib.request,sys; urllib.request.urlopen('http://$RIF_TEST_REGISTRY/v2/', timeout=2)"; }
if registry_up 2>/dev/null; then tell_registry || return 1; fi
if ! registry_up 2>/dev/null; then
  echo "setup: starting a registry on $RIF_TEST_REGISTRY"
  mkdir -p "$STATE/registry$SUFFIX"
  cat >"$STATE/registry$SUFFIX.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $STATE/registry$SUFFIX}
  delete: {enabled: true}
http:
  addr: $RIF_TEST_REGISTRY
YAML
  nohup docker-registry serve "$STATE/registry$SUFFIX.yml" >"$STATE/registry$SUFFIX.log" 2>&1 &
  echo $! >"$STATE/registry$SUFFIX.pid"
  RIF_STARTED="$RIF_STARTED registry$SUFFIX"
  wait_for registry 30 registry_up
fi
  local var
  for var in RIF_TEST_REGISTRY RIF_STARTED RIF_BUILD_NETWORK DOCKER_HOST PATH; do
    if [ -n "${!var+x}" ]; then printf 'export %s=%q\n' "$var" "${!var}"; fi
  done >"$1"
}
_rif_env=$(mktemp)
# Not `if ( ... )` nor `( ... ) || ...`: bash ignores set -e inside a command whose status is tested. The
# caller's own options that would change what the commands do (noclobber, noglob, allexport) are off in there.
( set -euo pipefail +o noclobber +o noglob +o allexport; _rif_setup "$_rif_env" )
_rif_rc=$?
[ "$_rif_rc" != 0 ] || source "$_rif_env"
rm -f "$_rif_env"
unset -f _rif_setup
unset _rif_env
# The status goes back without leaving _rif_rc behind (`exit` where the script is run rather than sourced).
eval "unset _rif_rc; return $_rif_rc 2>/dev/null || exit $_rif_rc"
