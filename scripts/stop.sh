#!/usr/bin/env bash
# Stops what scripts/setup.sh started in this shell (RIF_STARTED), and nothing else.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for what in ${RIF_STARTED:-}; do
  pidfile="$ROOT/.rif/$what.pid"
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  rm -f "$pidfile"
  echo "stop: stopped $what"
done
