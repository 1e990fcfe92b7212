#!/usr/bin/env bash
# The test command: set-up, static checks, then the whole pytest suite (real dockerd, registry, torch).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/setup.sh
# Free disk before and after: the suite builds and pushes real torch images (CI machines' free disk varies).
disk() { echo "disk ($1): $(df -h --output=avail "$ROOT" "$(docker info -f '{{.DockerRootDir}}' 2>/dev/null || echo /)" | tail -n +2 | tr -s ' \n' ' ')free (checkout, engine)"; }
disk before
trap 'disk after; bash scripts/stop.sh' EXIT
ruff check builder tests benchmarks testkit
mypy
if [ "$#" -gt 0 ]; then exec python -m pytest "$@"; fi
# The whole suite in two tiers: the tests that need no engine on every core (pytest-xdist), then the engine and
# registry tests one at a time (each tracks what it leaves behind), with the slowest listed for whoever trims them.
python -m pytest -m "not docker and not registry" -n "$(nproc)" -q
python -m pytest -m "docker or registry" --durations=60
