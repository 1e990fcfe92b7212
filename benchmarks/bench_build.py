"""Benchmark for issue 2, measured in one run on the real engine (figures go in the closing note).

1. Image size overhead over the floor, per image:
   (image - base image - Python environment - system packages the cell needs) / image,
   next to a naive single-stage Dockerfile of the same cell (wheels copied in, pip cache, recommends).
   Target: under 3%.
2. Tool overhead: wall time of `builder build --no-validate` on the e2e matrix divided by a plain
   `docker buildx bake` of the same bake file (`builder render --out`), same run, warm cache. Target: at most
   1.10 (issue 16 asks 1.05 at ROCm scale: bench_scale.py).

The e2e matrix is built under another image name (rif-bench-e2e), so the benchmark never moves the tags the
test suite builds; every image it makes is removed at the end.

Usage: python benchmarks/bench_build.py [--repeats N]   (after scripts/setup.sh; needs debian:12, docker buildx
and .rif/wheelhouse, which the test suite or scripts/example.sh create).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import docker
import yaml

from benchmarks.support.floor import BASE, base_packages, floor_parts, image_size
from builder.buildkit.bake import HOST, bake, host_network
from builder.matrix.expand import load_matrix
from builder.render import imagetree
from builder.render.dockerfile import RenderedCell, render_all
from builder.render.sources import WheelSource

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "tests" / "data" / "e2e.yaml"
WHEELHOUSE = ROOT / ".rif" / "wheelhouse"
IMAGE = "rif-bench-e2e"
BUILDER = ROOT / ".venv" / "bin" / "builder"

NAIVE = """FROM {base}
RUN apt-get update && apt-get install -y python3 python3-venv python3-pip
COPY wheels/ /wheels/
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-index --find-links /wheels {reqs}
ENV PATH=/opt/venv/bin:$PATH
"""


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def bench_matrix(tmp: Path) -> Path:
    """The e2e matrix under the benchmark's own image name (same cells, same layers, other tags)."""
    data = yaml.safe_load(MATRIX.read_text())
    data["image"] = IMAGE
    path = tmp / "e2e.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def lean_tree(rendered: list[RenderedCell], tree: Path) -> dict[str, str]:
    """builder's tree for the cells, its bake targets tagged rif-bench/lean:<tag>; bake target -> that tag."""
    imagetree.write(tree, rendered, prune=False, source=WheelSource(WHEELHOUSE))
    bake_file = tree / imagetree.BAKE_FILE
    definition = json.loads(bake_file.read_text())
    tags = {r.target: f"rif-bench/lean:{r.cell.tag}" for r in rendered}
    for target, tag in tags.items():
        definition["target"][target]["tags"] = [tag]
    bake_file.write_text(json.dumps(definition, indent=2))
    return tags


def build_naive(rendered: RenderedCell, context: Path) -> str:
    """The cell as a naive single-stage Dockerfile would build it (BuildKit, like everything now)."""
    (context / "wheels").mkdir(parents=True)
    for wheel in WHEELHOUSE.glob("*.whl"):
        (context / "wheels" / wheel.name).hardlink_to(wheel)
    reqs = " ".join(("torch==" + rendered.cell.torch, "numpy"))
    (context / "Dockerfile").write_text(NAIVE.format(base=BASE, reqs=reqs))
    tag = f"rif-bench/naive:{rendered.cell.tag}"
    subprocess.run(["docker", "buildx", "build", "--network", "host", "-q", "-t", tag, str(context)], check=True,
                   capture_output=True)
    return tag


def sizes(client: docker.DockerClient, matrix: Path, tmp: Path) -> None:
    cells = [c for c in load_matrix(matrix) if c.expect_torch is None]
    rendered = render_all(cells, WheelSource(WHEELHOUSE))
    tags = lean_tree(rendered, tmp / "lean")
    results = bake(tmp / "lean" / imagetree.BAKE_FILE, list(tags), kit=HOST)  # setup.sh's engine: no bridge
    failed = [t for t, r in results.items() if not r.ok]
    if failed:
        raise SystemExit(f"bake failed for {failed}: {results[failed[0]].error}")
    base_size = image_size(client, BASE)
    base_pkgs = base_packages(client)
    print(f"\n== 1. size overhead over the floor (base {BASE}: {mb(base_size)})")
    print(f"{'image':<48}{'size':>10}{'venv':>10}{'sys pkgs':>10}{'overhead':>12}{'ratio':>8}")
    for r in rendered:
        naive = build_naive(r, tmp / f"naive-{r.cell.tag}")
        for label, ref in ((f"{r.cell.flavor} (builder)", tags[r.target]), (f"{r.cell.flavor} (naive single stage)",
                                                                             naive)):
            total = image_size(client, ref)
            venv, pkgs = floor_parts(client, ref, base_pkgs)
            over = total - base_size - venv - pkgs
            print(f"{label:<48}{mb(total):>10}{mb(venv):>10}{mb(pkgs):>10}{mb(over):>12}{over / total:>8.1%}")


def timing(matrix: Path, repeats: int, tmp: Path) -> None:
    tree = tmp / "images"
    wheelhouse = ["--wheelhouse", str(WHEELHOUSE)]
    subprocess.run([str(BUILDER), "render", "--matrix", str(matrix), "--out", str(tree), *wheelhouse], check=True,
                   capture_output=True, cwd=tmp)
    tool_cmd = [str(BUILDER), "build", "--matrix", str(matrix), *wheelhouse, "--no-validate", "--quiet"]
    plain_cmd = ["docker", "buildx", "bake", "--file", str(tree / imagetree.BAKE_FILE),
                 *host_network(tree / imagetree.BAKE_FILE, tmp), "--progress", "plain"]

    def timed(cmd: list[str]) -> float:
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, check=False)
        if proc.returncode != 0:  # builder build exits 1 when an image fails; neither may here
            raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
        return time.perf_counter() - start

    timed(tool_cmd), timed(plain_cmd)  # warm the cache
    tools, plains = [], []
    for _ in range(repeats):
        tools.append(timed(tool_cmd))
        plains.append(timed(plain_cmd))
    t, p = statistics.median(tools), statistics.median(plains)
    print(f"\n== 2. tool overhead, {len(load_matrix(matrix))} cells, warm cache, median of {repeats}")
    print(f"builder build --no-validate: {t:.2f} s   plain docker buildx bake: {p:.2f} s   ratio: {t / p:.3f}")
    print(f"   runs: builder {[round(x, 2) for x in tools]}  bake {[round(x, 2) for x in plains]}")


def cleanup(client: docker.DockerClient) -> None:
    """Every tag this benchmark made: rif-bench/lean, rif-bench/naive and builder's rif-bench-e2e."""
    for name in ("rif-bench/lean", "rif-bench/naive", f"rocm-image-factory/{IMAGE}"):
        for image in client.images.list(name=name):
            for tag in image.tags:
                if tag.startswith(name + ":"):
                    client.images.remove(tag)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env(timeout=3600)
    with tempfile.TemporaryDirectory(prefix="rif-bench-") as tmp:
        try:
            matrix = bench_matrix(Path(tmp))
            sizes(client, matrix, Path(tmp))
            timing(matrix, args.repeats, Path(tmp))
        finally:
            cleanup(client)


if __name__ == "__main__":
    main()
