"""`builder build` against plain `docker buildx bake` of the same file, both warm (bench_scale.py)."""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.support.scaleplumbing import FLAVORS, Resources, run_logged
from benchmarks.support.scalesupply import Supply, write_matrix
from builder.buildkit.bake import host_network
from builder.render import imagetree

# ---------------------------------------------------------------- builder build vs plain bake


@dataclass
class Timing:
    builder: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)
    startup: list[float] = field(default_factory=list)  # `builder --version`: interpreter and imports
    cold: float = 0.0  # the first builder build (cold from the wheelhouse; warm against the index)
    source: str = ""

    @property
    def ratio(self) -> float:
        return statistics.median(self.builder) / statistics.median(self.plain)


def timing(res: Resources, supply: Supply, matrix: Path, family: str, repeats: int) -> Timing:
    """`builder build --no-validate` and plain bake of `builder render`'s file of the same matrix, both warm
    (a warm-up run of each first), alternated.

    Against the index when builder's own render reaches it: the images built above are the cache. Else (an
    edited render, or no index) from the wheelhouse, one family's pair, built cold once first."""
    folder = res.work / "timing"
    folder.mkdir()
    source: list[str] = []
    if supply.index is None or supply.patched:
        matrix = folder / "matrix.yaml"
        write_matrix(matrix, [family], list(FLAVORS), "http://unused.invalid/simple")
        source = ["--wheelhouse", str(supply.wheelhouse)]
    builder = [sys.executable, "-m", "builder", "build", "--matrix", str(matrix), *source,
               "--no-validate", "--quiet"]
    run_logged([*builder[:3], "render", "--matrix", str(matrix), "--out", str(folder / "images"), *source],
               folder / "render.log", cwd=folder)
    plain = ["docker", "buildx", "bake", "--file", str(folder / "images" / imagetree.BAKE_FILE), "--progress",
             "plain", *host_network(folder / "images" / imagetree.BAKE_FILE, folder)]
    result = Timing(source="wheelhouse, one pair" if source else "index, the images above")
    print(f"[new] timing ({result.source}) ...", flush=True)
    result.cold = run_logged(builder, folder / "builder-first.log", cwd=folder)
    run_logged(plain, folder / "plain-warmup.log", cwd=folder)
    for i in range(repeats):
        result.builder.append(run_logged(builder, folder / f"builder-{i}.log", cwd=folder))
        result.plain.append(run_logged(plain, folder / f"plain-{i}.log", cwd=folder))
        result.startup.append(run_logged([*builder[:3], "--version"], folder / "version.log", cwd=folder))
    res.drop_images()
    return result
