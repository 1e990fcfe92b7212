"""Benchmark for issue 3: expand, prune and render a synthetic matrix of about 5,000 cells (every axis widened).

Target: under 1 second on the project's 2-core machine for the whole of expand -> prune -> plan -> render
(in-process, interpreter start-up excluded). Prints the time and cells per second.
Usage: python benchmarks/bench_matrix.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from builder.core import facts
from builder.matrix.expand import expand_matrix
from builder.matrix.selection import plan_images
from builder.render.dockerfile import render_cell

SYNTHETIC = """\
matrix:
  os: [ubuntu-24.04, ubuntu-22.04, debian-12, debian-13]
  platform: [rocm7.2, rocm7.1, rocm6.4, rocm6.2.4, cpu]
  torch: ["2.13.0", "2.12.0", "2.11.0", "2.10.0", "2.9.1", "2.8.0", "2.7.1"]
  gfx: [{gfx}]
  channel: [pytorch, therock]
  flavor: [runtime, devel]
"""


def synthetic(tmp: Path) -> Path:
    families = ["all", *list(facts.gfx_families())[:10]]  # 11 values: 4*4*7*11*2*2 rocm + 112 cpu = 5,040
    path = tmp / "synthetic.yaml"
    path.write_text(SYNTHETIC.format(gfx=", ".join(families)))
    return path


def once(path: Path) -> tuple[float, int, int, int, int]:
    start = time.perf_counter()
    expansion = expand_matrix(path)
    plans = plan_images(expansion.cells)
    rendered = [render_cell(plan.content) for plan in plans]
    seconds = time.perf_counter() - start
    product = len(expansion.cells) + len({id(d.cell) for d in expansion.dropped})
    return seconds, product, len(expansion.cells), len(plans), len(rendered)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = synthetic(Path(tmp))
        once(path)  # warm: data files, template compilation
        runs = [once(path) for _ in range(args.repeats)]
    seconds = statistics.median(r[0] for r in runs)
    _, product, kept, images, rendered = runs[0]
    print(f"product cells: {product}   kept after rules: {kept}   images: {images}   Dockerfiles rendered: {rendered}")
    print(f"expand + prune + plan + render: {seconds:.3f} s (median of {args.repeats})   "
          f"{product / seconds:,.0f} product cells/s   target < 1 s: {'met' if seconds < 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
