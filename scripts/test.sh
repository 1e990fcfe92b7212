#!/usr/bin/env bash
# The test command: set-up, static checks, then the whole pytest suite (real dockerd, registry, torch).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/setup.sh
trap 'bash scripts/stop.sh' EXIT
ruff check builder tests benchmarks
mypy
python -m pytest "$@"
