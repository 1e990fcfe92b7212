"""Cold runners (issue 22, item 4): what a numpy bump costs a runner that starts with an empty engine.

Every publish job runs on a fresh runner: no BuildKit cache, no images. Byte-reproducible layers (every step sets
the times of what it wrote) mean a rebuild of unchanged steps gives the bytes the registry already has, so only
numpy's layer and what sits above it go up again; BuildKit's cache in the registry (`--cache-registry`) means
the unchanged steps (torch) are not even run again.

One run; each publish on a fresh engine (a second dockerd with an empty data root: no BuildKit cache, no
images; the locked base comes from the registry, as a runner pulls it), against a fresh registry on loopback:
1. publish the example (runtime + devel, locked, real CPU torch from the wheelhouse) with --cache-registry;
2. numpy bumped (the same wheel under a new version, `builder lock --update`), cold, publish with the cache;
3. numpy bumped again, cold, publish without it.
Printed per publish: wall time, bytes the registry gained (the cache's own blobs included), and that over the
pair's compressed bytes (target: < 5%).

Usage: python benchmarks/bench_cold.py   (after scripts/setup.sh and scripts/example.sh: debian:12, .rif/wheelhouse)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker

from benchmarks.support.freshengine import empty_engine
from benchmarks.support.localregistry import LocalRegistry
from testkit.synthwheels import rebrand

ROOT = Path(__file__).resolve().parent.parent

MATRIX = ROOT / "examples" / "local.yaml"
WHEELHOUSE = ROOT / ".rif" / "wheelhouse"
BUILDER = [sys.executable, "-m", "builder"]


def run(*args: str, cwd: Path, host: str | None = None) -> str:
    env = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
    proc = subprocess.run([*BUILDER, *args], capture_output=True, text=True, cwd=cwd, check=False, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"builder {args[0]} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


def main() -> None:
    client = docker.from_env()
    with tempfile.TemporaryDirectory(prefix="rif-bench-cold-") as folder:
        tmp = Path(folder)
        registry = LocalRegistry(tmp / "registry")
        registry.start()
        try:
            bench(client, tmp, registry)
        finally:
            registry.stop()


def bench(client: docker.DockerClient, tmp: Path, registry: LocalRegistry) -> None:
    wheels, tree = tmp / "wheels", tmp / "tree"
    wheels.mkdir()
    for wheel in WHEELHOUSE.glob("*.whl"):
        os.link(wheel, wheels / wheel.name)
    [numpy] = wheels.glob("numpy-*.whl")
    mirror = f"{registry.address}/mirror"
    client.images.get("debian:12").tag(f"{mirror}/debian", "12")
    client.images.push(f"{mirror}/debian", "12")
    lock = ["lock", "--matrix", str(MATRIX), "--out", str(tree), "--wheelhouse", str(wheels), "--base-registry", mirror]
    run(*lock, cwd=tmp)
    target = f"{registry.address}/cold"
    rows = []
    for n, (label, cache) in enumerate([("first publish, cache exported", True), ("numpy bump, cache imported", True),
                                        ("numpy bump, no cache", False)]):
        if n:
            old, numpy = numpy, rebrand(numpy, f"2.4.{90 + n}", wheels)
            old.unlink()  # the wheelhouse serves the new numpy only
            run(*lock, "--update", cwd=tmp)
        work = tmp / f"run{n}"
        work.mkdir()
        before = registry.stored_bytes()
        with empty_engine(tmp / f"engine{n}") as engine:
            start = time.perf_counter()
            run("publish", "--matrix", str(MATRIX), "--locks", str(tree), "--wheelhouse", str(wheels), "--registry",
                target, *(["--cache-registry", f"{registry.address}/cache"] if cache else []), "--record",
                str(work / "r.json"), "--progress", "plain", cwd=work, host=engine.host)
            seconds = time.perf_counter() - start
        images = json.loads((work / "r.json").read_text())["images"]
        pair = pair_bytes(registry, images)
        rows.append((label, seconds, registry.stored_bytes() - before, pair))
    print(f"{'publish (cold engine)':<34}{'seconds':>9}{'bytes gained':>14}{'pair bytes':>12}{'ratio':>9}")
    for label, seconds, gained, pair in rows:
        print(f"{label:<34}{seconds:>9.1f}{gained:>14,}{pair:>12,}{gained / pair:>9.2%}")
    print(f"re-pushed after a numpy bump, cold: {rows[2][2] / rows[2][3]:.2%} of the pair without the registry cache, "
          f"{rows[1][2] / rows[1][3]:.2%} with it (its own blobs included) (target < 5%)")


def pair_bytes(registry: LocalRegistry, images: list[dict[str, object]]) -> int:
    """The runtime + devel pair's distinct compressed layer bytes, from the registry's manifests."""
    layers = {layer.digest: layer.size for image in images
              for layer in registry.image(f"cold/{image['repository']}", str(image["digest"])).layers}
    return sum(layers.values())


if __name__ == "__main__":
    main()
