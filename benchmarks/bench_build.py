"""Benchmark for issue 2, measured in one run on the real engine (figures go in the closing note).

1. Image size overhead over the floor, per image:
   (image - base image - Python environment - system packages the cell needs) / image,
   next to a naive single-stage Dockerfile of the same cell (wheels copied in, pip cache, recommends).
   Target: under 3%.
2. Tool overhead: wall time of `builder build --no-validate` on the e2e matrix divided by a plain
   `docker buildx bake` of the same rendered tree, same run, warm cache. Target: at most 1.05.

Usage: python benchmarks/bench_build.py [--repeats N]   (after scripts/setup.sh; needs debian:12 and
.rif/wheelhouse, which the test suite or scripts/example.sh create).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker

from builder import imagetree
from builder.dockerapi import run_captured
from builder.matrix import load_matrix
from builder.render import WheelSource, render_all

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "tests" / "data" / "e2e.yaml"
WHEELHOUSE = ROOT / ".rif" / "wheelhouse"
BASE = "debian:12"

# Sizes measured inside the image: the venv, and the files of every package the base does not have
# (plus the bytecode their maintainer scripts compile, which belongs to the Python they install).
MEASURE = r"""
import os, subprocess, sys
base = set(sys.argv[1].split(","))
def size(path):
    total = 0
    for root, dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.lstat(p).st_size
    return total
venv = size("/opt/venv")
pkgs = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\n"], capture_output=True, text=True).stdout.split()
seen, owned = set(), 0
for pkg in pkgs:
    if pkg in base:
        continue
    for p in subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout.splitlines():
        if os.path.isfile(p) and not os.path.islink(p):
            st = os.lstat(p)
            if (st.st_dev, st.st_ino) not in seen:  # merged /usr lists some files twice
                seen.add((st.st_dev, st.st_ino)); owned += st.st_size
pyc = sum(size(os.path.join(r, d)) for top in ("/usr/lib",) for r, ds, _ in os.walk(top) for d in ds
          if d == "__pycache__" and not r.startswith("/opt/venv"))
print(venv, owned + pyc)
"""

NAIVE = """FROM {base}
RUN apt-get update && apt-get install -y python3 python3-venv python3-pip
COPY wheels/ /wheels/
COPY rif/ /opt/rif/
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-index --find-links /wheels {reqs}
ENV PATH=/opt/venv/bin:$PATH
"""


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def image_size(client: docker.DockerClient, ref: str) -> int:
    return int(client.images.get(ref).attrs["Size"])


def base_packages(client: docker.DockerClient) -> str:
    _, out, _ = run_captured(client, BASE, ["dpkg-query", "-W", "-f", "${Package},"])
    return out.strip(",")


def floor_parts(client: docker.DockerClient, ref: str, base_pkgs: str) -> tuple[int, int]:
    _, out, _ = run_captured(client, ref, ["/usr/bin/python3", "-c", MEASURE, base_pkgs], entrypoint=[], user="root")
    venv, pkgs = out.split()
    return int(venv), int(pkgs)


def tree(tmp: Path, name: str) -> tuple[Path, list[str]]:
    """The builder's tree for the e2e matrix's buildable cells (wheelhouse source) and its bake targets."""
    cells = [c for c in load_matrix(MATRIX) if c.expect_torch is None]
    rendered = render_all(cells, WheelSource(WHEELHOUSE))
    out = tmp / name / "images"
    imagetree.write(out, rendered, prune=False, source=WheelSource(WHEELHOUSE))
    return out, [r.target for r in rendered]


def bake(out: Path, targets: list[str]) -> None:
    subprocess.run(["docker", "buildx", "bake", "-f", str(out / imagetree.BAKE_FILE), "--progress", "plain",
                    *targets], check=True, capture_output=True, cwd=out.parent)


def naive_build(out: Path, tag: str, reqs: str) -> None:
    (out / "naive.Dockerfile").write_text(NAIVE.format(base=BASE, reqs=reqs))
    subprocess.run(["docker", "buildx", "build", "-q", "-f", str(out / "naive.Dockerfile"), "-t", tag, str(out)],
                   check=True, capture_output=True)


def sizes(client: docker.DockerClient, tmp: Path) -> None:
    out, targets = tree(tmp, "sizes")
    bake(out, targets)
    base_size = image_size(client, BASE)
    base_pkgs = base_packages(client)
    print(f"\n== 1. size overhead over the floor (base {BASE}: {mb(base_size)})")
    print(f"{'image':<48}{'size':>10}{'venv':>10}{'sys pkgs':>10}{'overhead':>12}{'ratio':>8}")
    for cell in [c for c in load_matrix(MATRIX) if c.expect_torch is None]:
        lean = f"rocm-image-factory/{cell.image}:{cell.tag}"
        naive = f"rif-bench/naive:{cell.tag}"
        naive_build(out, naive, " ".join(r for r in ("torch==" + cell.torch, "numpy")))
        for label, ref in ((f"{cell.flavor} (builder)", lean), (f"{cell.flavor} (naive single stage)", naive)):
            total = image_size(client, ref)
            venv, pkgs = floor_parts(client, ref, base_pkgs)
            over = total - base_size - venv - pkgs
            print(f"{label:<48}{mb(total):>10}{mb(venv):>10}{mb(pkgs):>10}{mb(over):>12}{over / total:>8.1%}")


def timing(repeats: int, tmp: Path) -> None:
    out, targets = tree(tmp, "timing")
    cmd = [sys.executable, "-m", "builder", "build", "--matrix", str(MATRIX), "--wheelhouse", str(WHEELHOUSE),
           "--no-validate", "--quiet"]

    def tool() -> float:
        start = time.perf_counter()
        subprocess.run(cmd, check=False, capture_output=True, cwd=ROOT)  # exit 1: the e2e matrix's broken cell
        return time.perf_counter() - start

    def plain() -> float:
        start = time.perf_counter()
        bake(out, targets)
        return time.perf_counter() - start

    tool(), plain()  # warm the cache
    tools, plains = [], []
    for _ in range(repeats):
        tools.append(tool())
        plains.append(plain())
    t, p = statistics.median(tools), statistics.median(plains)
    print(f"\n== 2. tool overhead, {len(targets)} images, warm cache, median of {repeats}")
    print(f"builder build --no-validate: {t:.2f} s   plain docker buildx bake: {p:.2f} s   ratio: {t / p:.3f}")
    print(f"   runs: builder {[round(x, 2) for x in tools]}  bake {[round(x, 2) for x in plains]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env(timeout=3600)
    with tempfile.TemporaryDirectory(prefix="rif-bench-") as tmp:
        sizes(client, Path(tmp))
        timing(args.repeats, Path(tmp))


if __name__ == "__main__":
    main()
