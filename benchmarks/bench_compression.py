"""Layer compression (issue 22, item 5; issue 28, item 6): pull + unpack of a torch-sized layer, gzip against zstd.

A ROCm torch layer is several GB; every user pulls it, and the engine unpacks it (with the containerd image
store, `docker pull` decompresses and writes the snapshot before it returns). The layer here is synthetic:
`--gb` of files half random and half repetitive (about 2x compressible, as shared libraries are; the payload of
rocmwheels.py). The same image is built twice, gzip and zstd (BuildKit's `compression=`, `force-compression`),
and pushed to a fresh registry on loopback.

Equal work per compression: every build and every pull runs on a fresh, empty engine of its own
(freshengine.py: its own data root and containerd, proven empty), so no run finds a layer, a content blob or a
cache record another left; the pulls alternate in ABBA order (gzip, zstd, zstd, gzip, ...) so a drift of the
machine's load falls on both alike. Printed: every pull, then per compression the compressed size, build+push
seconds, and the pulls' mean, stdev and min/median/max; the zstd/gzip ratio of the means, and whether the
difference exceeds the run-to-run noise (a two-sided permutation test of the means, p < 0.05).

Usage: python benchmarks/bench_compression.py [--gb 3 --repeats 8]   (after scripts/setup.sh: debian:12 in the
machine's engine, which is only read; about 5x --gb of free disk). Everything it made goes with its engines.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.support.freshengine import Engine, empty_engine
from benchmarks.support.localregistry import LocalRegistry
from benchmarks.support.rocmwheels import FILE_LIMIT, payload_chunks

COMPRESSIONS = ("gzip", "zstd")
BASE = "debian:12"
EXACT_LIMIT = 200_000  # label splits a permutation test enumerates; above, it samples this many


def write_payload(folder: Path, size: int) -> None:
    folder.mkdir(parents=True)
    left, index = size, 0
    while left > 0:
        part = min(FILE_LIMIT, left)
        with (folder / f"libsynth_{index}.so").open("wb") as out:
            for chunk in payload_chunks(part):
                out.write(chunk)
        left, index = left - part, index + 1


def docker(*args: str, host: str | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(["docker", *(["-H", host] if host else []), *args], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit(f"docker {' '.join(args[:2])} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return time.perf_counter() - start


def seed(engine: Engine) -> None:
    """The base image, copied from the machine's engine into a fresh build engine (as a runner has it)."""
    source = subprocess.Popen(["docker", "save", BASE], stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "-H", engine.host, "load", "-q"], stdin=source.stdout, capture_output=True,
                          check=False)
    if source.stdout is not None:
        source.stdout.close()
    if source.wait() != 0 or load.returncode != 0:
        raise SystemExit(f"could not copy {BASE} into the fresh engine: {load.stderr.decode()[-500:]}")


def order(repeats: int) -> list[str]:
    """ABBA: gzip, zstd, zstd, gzip, gzip, zstd, ... `repeats` pulls of each."""
    pairs = [COMPRESSIONS if i % 2 == 0 else COMPRESSIONS[::-1] for i in range(repeats)]
    return [c for pair in pairs for c in pair]


def permutation_p(a: list[float], b: list[float], seed_: int = 28) -> float:
    """Two-sided p of the difference of means under relabelling: exact where the splits are few, sampled else."""
    pooled, n = a + b, len(a)
    observed = abs(statistics.fmean(a) - statistics.fmean(b))
    total = sum(pooled)
    splits: itertools.combinations[tuple[int, ...]] | list[tuple[int, ...]]
    if math.comb(len(pooled), n) <= EXACT_LIMIT:
        splits = itertools.combinations(range(len(pooled)), n)
    else:
        rng = random.Random(seed_)
        splits = [tuple(rng.sample(range(len(pooled)), n)) for _ in range(EXACT_LIMIT)]
    hits = count = 0
    for split in splits:
        first = sum(pooled[i] for i in split)
        diff = abs(first / n - (total - first) / (len(pooled) - n))
        hits += diff >= observed - 1e-12
        count += 1
    return hits / count


def spread(values: list[float]) -> str:
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return (f"mean {statistics.fmean(values):.2f} s, stdev {stdev:.2f} s ({stdev / statistics.fmean(values):.1%}), "
            f"min/median/max {min(values):.2f}/{statistics.median(values):.2f}/{max(values):.2f} s")


def build_push(tmp: Path, c: str, ref: str) -> float:
    """Build and push one compression on a fresh engine: no layer or cache of the other's build is there."""
    with empty_engine(tmp / f"build-{c}") as engine:
        seed(engine)
        seconds = docker("buildx", "build", "--progress", "quiet", "--provenance=false", "--output",
                         f"type=image,name={ref},push=true,compression={c},force-compression=true,"
                         "oci-mediatypes=true,registry.insecure=true", str(tmp / "context"), host=engine.host)
    shutil.rmtree(tmp / f"build-{c}", ignore_errors=True)  # its store: disk, and nothing later may read it
    return seconds


def pull(tmp: Path, n: int, ref: str) -> float:
    """One pull into a fresh engine that has never seen the layer (its content store and snapshots are empty)."""
    with empty_engine(tmp / f"pull-{n}") as engine:
        seconds = docker("pull", "-q", ref, host=engine.host)
    shutil.rmtree(tmp / f"pull-{n}", ignore_errors=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--gb", type=float, default=3.0, help="uncompressed size of the layer")
    parser.add_argument("--repeats", type=int, default=8, help="pulls of each compression (ABBA order)")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rif-bench-compression-") as folder:
        tmp = Path(folder)
        registry = LocalRegistry(tmp / "registry")
        registry.start()
        refs = {c: f"{registry.address}/bench/torch-layer:{c}" for c in COMPRESSIONS}
        try:
            print(f"writing a {args.gb:g} GB synthetic layer ...", flush=True)
            write_payload(tmp / "context" / "payload", int(args.gb * (1 << 30)))
            (tmp / "context" / "Dockerfile").write_text(f"FROM {BASE}\nCOPY payload/ /opt/venv/lib/torch/lib/\n")
            push: dict[str, float] = {}
            for c in COMPRESSIONS:
                print(f"building and pushing ({c}) on a fresh engine ...", flush=True)
                push[c] = build_push(tmp, c, refs[c])
            sizes = {c: registry.image("bench/torch-layer", c).layers[-1].size for c in COMPRESSIONS}
            pulls: dict[str, list[float]] = {c: [] for c in COMPRESSIONS}
            for n, c in enumerate(order(args.repeats)):
                pulls[c].append(pull(tmp, n, refs[c]))
                print(f"pull {n + 1:>2} ({c}): {pulls[c][-1]:.2f} s", flush=True)
        finally:
            registry.stop()
    report(args, sizes, push, pulls)
    print(f"total {time.perf_counter() - started:.0f} s")


def report(args: argparse.Namespace, sizes: dict[str, int], push: dict[str, float],
           pulls: dict[str, list[float]]) -> None:
    print(f"\nlayer: {args.gb:g} GB uncompressed, pulled from a registry on loopback, {args.repeats} pulls each "
          "(ABBA order), each build and pull on a fresh empty engine")
    for c in COMPRESSIONS:
        print(f"{c}: compressed {sizes[c]:,} bytes, build+push {push[c]:.1f} s; pull+unpack {spread(pulls[c])}")
    gzip, zstd = pulls["gzip"], pulls["zstd"]
    p = permutation_p(gzip, zstd)
    verdict = "exceeds" if p < 0.05 else "does NOT exceed"
    print(f"ratio zstd/gzip: pull+unpack {statistics.fmean(zstd) / statistics.fmean(gzip):.3f} (means; medians "
          f"{statistics.median(zstd) / statistics.median(gzip):.3f}), size {sizes['zstd'] / sizes['gzip']:.3f}, "
          f"build+push {push['zstd'] / push['gzip']:.3f}")
    print(f"the pull difference {verdict} the run-to-run noise (permutation test of the means, p = {p:.4f})")


if __name__ == "__main__":
    main()
