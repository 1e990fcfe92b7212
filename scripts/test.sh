#!/usr/bin/env bash
# The test command: set-up, static checks, then the whole pytest suite (real dockerd, registry, torch).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/setup.sh
# Free disk before and after: the suite builds and pushes real torch images (CI machines' free disk varies).
disk() { echo "disk ($1): $(df -h --output=avail "$ROOT" "$(docker info -f '{{.DockerRootDir}}' 2>/dev/null || echo /)" | tail -n +2 | tr -s ' \n' ' ')free (checkout, engine)"; }
disk before
trap 'if [ -n "${fast:-}" ]; then kill "$fast" 2>/dev/null || true; fi; disk after; bash scripts/stop.sh' EXIT
ruff check builder tests benchmarks
mypy
if [ "$#" -gt 0 ]; then exec python -m pytest "$@"; fi
# The whole suite in two tiers at once: the engine and registry tests one at a time (each tracks what it leaves
# behind; they wait on the engine, pushes and retries a third of the time), and meanwhile the tests that need no
# engine in one more process, which takes that idle CPU. The fast tier's output follows the engine tier's.
fast_log=$(mktemp)
python -m pytest -m "not docker and not registry" -q -p no:cacheprovider >"$fast_log" 2>&1 &
fast=$!
engine_rc=0
python -m pytest -m "docker or registry" --durations=30 || engine_rc=$?
fast_rc=0
wait "$fast" || fast_rc=$?
echo "== the tests that need no engine (exit $fast_rc)"
cat "$fast_log"
rm -f "$fast_log"
if [ "$engine_rc" -ne 0 ]; then exit "$engine_rc"; fi
exit "$fast_rc"
