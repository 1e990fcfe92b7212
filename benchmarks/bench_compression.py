"""Layer compression (issue 22, item 5): pull + unpack of a torch-sized layer, gzip against zstd, in one run.

A ROCm torch layer is several GB; every user pulls it, and the engine unpacks it (with the containerd image
store, `docker pull` decompresses and writes the snapshot before it returns). The layer here is synthetic:
`--gb` of files half random and half repetitive (about 2x compressible, as shared libraries are; the payload of
rocmwheels.py). The same image is built twice, gzip and zstd (BuildKit's `compression=`, `force-compression`),
pushed to a fresh registry on loopback, and pulled `--repeats` times each, alternating, into a second, empty
engine (the machine's own holds the layers it built), the image removed after every pull. Printed: compressed
size, push and median pull seconds per compression, and the ratios.

Usage: python benchmarks/bench_compression.py [--gb 3 --repeats 3]   (after scripts/setup.sh; needs debian:12
and about 6x --gb of free disk). Its images are removed at the end; BuildKit's cache of the layer is pruned.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from freshengine import empty_engine
from localregistry import LocalRegistry
from rocmwheels import FILE_LIMIT, payload_chunks

COMPRESSIONS = ("gzip", "zstd")


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


def compressed_size(registry: LocalRegistry, repo: str, tag: str) -> int:
    return registry.image(repo, tag).layers[-1].size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=3.0, help="uncompressed size of the layer")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rif-bench-compression-") as folder:
        tmp = Path(folder)
        registry = LocalRegistry(tmp / "registry")
        registry.start()
        refs = {c: f"{registry.address}/bench/torch-layer:{c}" for c in COMPRESSIONS}
        try:
            print(f"writing a {args.gb:g} GB synthetic layer ...", flush=True)
            write_payload(tmp / "context" / "payload", int(args.gb * (1 << 30)))
            (tmp / "context" / "Dockerfile").write_text("FROM debian:12\nCOPY payload/ /opt/venv/lib/torch/lib/\n")
            push: dict[str, float] = {}
            for c in COMPRESSIONS:
                print(f"building and pushing ({c}) ...", flush=True)
                push[c] = docker("buildx", "build", "--progress", "quiet", "--provenance=false", "--output",
                                 f"type=image,name={refs[c]},push=true,compression={c},force-compression=true,"
                                 "oci-mediatypes=true,registry.insecure=true", str(tmp / "context"))
            sizes = {c: compressed_size(registry, "bench/torch-layer", c) for c in COMPRESSIONS}
            pulls: dict[str, list[float]] = {c: [] for c in COMPRESSIONS}
            with empty_engine(tmp / "pull-engine") as host:
                for _ in range(args.repeats):
                    for c in COMPRESSIONS:
                        pulls[c].append(docker("pull", "-q", refs[c], host=host))
                        print(f"pull ({c}): {pulls[c][-1]:.2f} s", flush=True)
                        docker("image", "rm", refs[c], host=host)  # nothing else holds its content: it goes
        finally:
            for ref in refs.values():
                subprocess.run(["docker", "image", "rm", "-f", ref], capture_output=True, check=False)
            subprocess.run(["docker", "builder", "prune", "-af", "--filter", "type=regular"], capture_output=True,
                           check=False)
            registry.stop()
    print(f"\nlayer: {args.gb:g} GB uncompressed, pulled from a registry on loopback, {args.repeats} pulls each")
    print(f"{'compression':<13}{'compressed':>14}{'build+push s':>14}{'pull+unpack s (median)':>25}")
    for c in COMPRESSIONS:
        print(f"{c:<13}{sizes[c]:>14,}{push[c]:>14.1f}{statistics.median(pulls[c]):>25.2f}   "
              f"({', '.join(f'{p:.2f}' for p in pulls[c])})")
    print(f"ratio zstd/gzip: pull+unpack {statistics.median(pulls['zstd']) / statistics.median(pulls['gzip']):.3f}, "
          f"size {sizes['zstd'] / sizes['gzip']:.3f}, build+push {push['zstd'] / push['gzip']:.3f}")


if __name__ == "__main__":
    main()
