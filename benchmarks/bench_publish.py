"""Benchmark for issue 5: a no-op republish of the e2e matrix's good cells against a first publish.

Targets: the no-op republish takes under 5% of the first publish's wall time, and pushes 0 bytes.
The benchmark starts its own empty registry (docker-registry, a free loopback port, temporary storage), so
the first publish really uploads every layer, and bytes pushed are measured on that registry's storage, plus
the run record's `pushed` flags. The build cache is warm (a cold first build would only make the republish
look cheaper).
Usage: python benchmarks/bench_publish.py   (after scripts/setup.sh and one test run, for debian:12 and
.rif/wheelhouse)
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "tests" / "data" / "e2e.yaml"
GOOD = "_(runtime|devel)$"


def storage_bytes(storage: Path) -> int:
    return sum(p.stat().st_size for p in storage.rglob("*") if p.is_file())


def start_registry(tmp: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    storage = tmp / "storage"
    config = tmp / "registry.yml"
    config.write_text(f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {storage}}}\n"
                      f"http:\n  addr: {address}\n")
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(50):
        try:
            socket.create_connection(("127.0.0.1", int(address.rsplit(":", 1)[1])), 1).close()
            break
        except OSError:
            time.sleep(0.2)
    storage.mkdir(exist_ok=True)
    return proc, address, storage


def publish(registry: str, namespace: str, record: Path) -> tuple[float, list[dict[str, object]]]:
    cmd = [sys.executable, "-m", "builder", "publish", "--matrix", str(MATRIX), "--match", GOOD,
           "--registry", f"{registry}/{namespace}", "--wheelhouse", str(ROOT / ".rif" / "wheelhouse"),
           "--record", str(record), "--quiet"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start, json.loads(record.read_text())["images"]


def main() -> None:
    namespace = f"bench{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        proc, registry, storage = start_registry(Path(tmp))
        try:
            before = storage_bytes(storage)
            first_s, first = publish(registry, namespace, Path(tmp) / "first.json")
            middle = storage_bytes(storage)
            again_s, again = publish(registry, namespace, Path(tmp) / "again.json")
            after = storage_bytes(storage)
        finally:
            proc.kill()
            proc.wait()
    print(f"first publish:   {first_s:7.2f} s  states {[c['state'] for c in first]}  "
          f"registry grew {(middle - before) / 1e6:,.1f} MB")
    print(f"no-op republish: {again_s:7.2f} s  states {[c['state'] for c in again]}  "
          f"registry grew {after - middle} bytes  pushes {sum(bool(c['pushed']) for c in again)}")
    ratio = again_s / first_s
    print(f"ratio {ratio:.3f} (target < 0.05: {'met' if ratio < 0.05 else 'NOT met'});  bytes pushed "
          f"{after - middle} (target 0: {'met' if after == middle else 'NOT met'})")


if __name__ == "__main__":
    main()
