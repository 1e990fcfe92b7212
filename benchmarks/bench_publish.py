"""Benchmark for issue 5: a no-op republish of the e2e matrix's good cells against a first publish.

Targets: the no-op republish takes under 5% of the first publish's wall time, and pushes 0 bytes.
Bytes pushed are measured on the registry's own storage (the registry scripts/setup.sh starts keeps it in
.rif/registry), plus the run record's `pushed` flags. The first publish runs with a warm build cache (the
hardest case for the ratio: a cold first build only makes the republish look cheaper).
Usage: python benchmarks/bench_publish.py   (after scripts/setup.sh and one test run, for debian:12 and
.rif/wheelhouse)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORAGE = ROOT / ".rif" / "registry"
MATRIX = ROOT / "tests" / "data" / "e2e.yaml"
GOOD = "_(runtime|devel)$"


def storage_bytes() -> int:
    return sum(p.stat().st_size for p in STORAGE.rglob("*") if p.is_file())


def publish(namespace: str, record: Path) -> tuple[float, list[dict[str, object]]]:
    registry = os.environ.get("RIF_TEST_REGISTRY", "127.0.0.1:5000")
    cmd = [sys.executable, "-m", "builder", "publish", "--matrix", str(MATRIX), "--match", GOOD,
           "--registry", f"{registry}/{namespace}", "--wheelhouse", str(ROOT / ".rif" / "wheelhouse"),
           "--record", str(record), "--quiet"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start, json.loads(record.read_text())["cells"]


def main() -> None:
    namespace = f"bench{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        before = storage_bytes()
        first_s, first = publish(namespace, Path(tmp) / "first.json")
        middle = storage_bytes()
        again_s, again = publish(namespace, Path(tmp) / "again.json")
        after = storage_bytes()
    print(f"first publish:   {first_s:7.2f} s  states {[c['state'] for c in first]}  "
          f"registry grew {(middle - before) / 1e6:,.1f} MB")
    print(f"no-op republish: {again_s:7.2f} s  states {[c['state'] for c in again]}  "
          f"registry grew {after - middle} bytes  pushes {sum(bool(c['pushed']) for c in again)}")
    ratio = again_s / first_s
    print(f"ratio {ratio:.3f} (target < 0.05: {'met' if ratio < 0.05 else 'NOT met'});  bytes pushed "
          f"{after - middle} (target 0: {'met' if after == middle else 'NOT met'})")


if __name__ == "__main__":
    main()
