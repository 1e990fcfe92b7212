#!/usr/bin/env bash
# The test command: set-up, static checks, then the whole pytest suite (real dockerd, registry, torch).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# Compiled modules are kept (__pycache__, git-ignored): on a machine that sets PYTHONDONTWRITEBYTECODE (the
# development machine does, and CI's is one like it), every pytest worker rewrote and compiled every test module,
# and every `builder` process compiled the package, each time (the fast tier: 162 -> 144 CPU-s with it unset).
unset PYTHONDONTWRITEBYTECODE
source scripts/setup.sh
# Free disk before and after: the suite builds and pushes real torch images (CI machines' free disk varies).
disk() { echo "disk ($1): $(df -h --output=avail "$ROOT" "$(docker info -f '{{.DockerRootDir}}' 2>/dev/null || echo /)" | tail -n +2 | tr -s ' \n' ' ')free (checkout, engine)"; }
disk before
trap 'disk after; bash scripts/stop.sh' EXIT
ruff check builder tests benchmarks testkit
mypy
if [ "$#" -gt 0 ]; then exec python -m pytest "$@"; fi
# The engine tier runs on two engines, each with its own registry (scripts/setup.sh's RIF_INSTANCE=2): one pytest
# worker per engine, a test module at a time (tests/fakes/workers.py). Each test tracks what it leaves behind on its
# engine, so two never share one. Where the registry is not on loopback, one engine and one worker.
second_engine() {
  local host=${DOCKER_HOST:-unix:///var/run/docker.sock} registry=$RIF_TEST_REGISTRY
  case "${registry%:*}" in 127.*) ;; *) return 0 ;; esac
  export RIF_INSTANCE=2 RIF_TEST_REGISTRY="${registry%:*}:$((${registry##*:} + 1))"
  export RIF_DOCKER_HOST="unix://${RIF_ENGINE_RUN:-/run/rif-engine}-2/docker.sock"
  unset DOCKER_HOST
  source scripts/setup.sh
  export RIF_TEST_ENGINES="$host=$registry $DOCKER_HOST=$RIF_TEST_REGISTRY"
  export DOCKER_HOST=$host RIF_TEST_REGISTRY=$registry
  unset RIF_INSTANCE RIF_DOCKER_HOST
}
second_engine
# The whole suite in two tiers at once: the tests that need no engine on every core (pytest-xdist), and the engine
# and registry tests, a worker per engine, with the slowest listed for whoever trims them. The engine tier waits on
# the network, the engines and the registries for much of its time (debootstrap, the wheelhouse, cold builds): the
# fast tier takes the cores meanwhile. Its output is printed when both are done; either failing fails the run.
fast_log=$(mktemp)
# A command started with & gets SIGINT ignored: restored, so the fast tier's Ctrl-C (and its tests of it) are real.
python -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
  python -m pytest -m "not docker and not registry" -n "$(nproc)" -q >"$fast_log" 2>&1 &
fast=$!
trap 'kill "$fast" 2>/dev/null || true; disk after; bash scripts/stop.sh' EXIT
workers=$(wc -w <<<"${RIF_TEST_ENGINES:-}")
engine_rc=0
if [ "$workers" -gt 1 ]; then
  python -m pytest -m "docker or registry" -n "$workers" --dist loadfile --durations=60 || engine_rc=$?
else
  python -m pytest -m "docker or registry" --durations=60 || engine_rc=$?
fi
fast_rc=0
wait "$fast" || fast_rc=$?
echo "--- the fast tier (-m \"not docker and not registry\"), run alongside the engine tier:"
cat "$fast_log"
rm -f "$fast_log"
echo "test.sh: engine tier exit $engine_rc, fast tier exit $fast_rc"
[ "$engine_rc" = 0 ] && [ "$fast_rc" = 0 ]
