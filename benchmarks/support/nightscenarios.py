"""The nights bench_night.py models, derived from the production matrix as rendered (no registry, no network).

What each change makes the workflows do, by the rules the code follows:
- quiet: nothing new; no row, and the lock refresh's pip steps all answer 304 (only the entries that expire
  tonight are resolved again: lockcache's 7-13 days, a tenth a night on average: nightmodel.MEAN_REUSE_DAYS).
- one wheel unique to a combination (a GPU family's device wheel in the largest combination): that row alone,
  the family's runtime and devel images rebuilt; the lock refresh resolves the family's device step and the two
  steps over it (a changed pin changes the constraints, so the key, of every step after it).
- a numpy bump: every image is rebuilt over its cached torch layers, every row; the lock refresh resolves every
  step after the device packages (numpy's page changed on every index). The OS bases are in the cache: no stages.
- a new base digest (one OS's): the rows on that base, rebuilt whole; the one shared stage the cache lacks.
- a full cold publish: every row and image built whole, every shared stage, every pip step resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.nightmodel import MEAN_REUSE_DAYS, Scenario
from builder.matrix.expand import load_matrix
from builder.render import lockfile, sharedstages
from builder.render.dockerfile import RenderedCell, render_all
from builder.render.sources import WheelSource
from builder.render.stages import lock_steps


@dataclass(frozen=True)
class Production:
    images: dict[str, int]  # combination (images/ folder) -> its images
    steps: dict[str, list[str]]  # combination -> its pip steps' lock files
    base: dict[str, str]  # combination -> its base image reference
    shared: int  # stages two or more combinations share
    indexes: int  # distinct wheel indexes


def production(matrix: Path) -> Production:
    groups: dict[str, list[RenderedCell]] = {}
    for r in render_all(load_matrix(matrix), WheelSource()):
        groups.setdefault(r.group, []).append(r)
    steps = {g: lock_steps([r.cell for r in members]) for g, members in groups.items()}
    return Production({g: len(members) for g, members in groups.items()},
                      {g: [s.file for s in ss if s.file != lockfile.BASE_FILE] for g, ss in steps.items()},
                      {g: next(s.wants[0] for s in ss if s.file == lockfile.BASE_FILE) for g, ss in steps.items()},
                      len(sharedstages.shared([r for members in groups.values() for r in members])),
                      len({members[0].cell.index_url for members in groups.values()}))


def scenarios(p: Production, plan_s: float) -> list[Scenario]:
    pip = sum(len(files) for files in p.steps.values())
    one = max(p.images, key=lambda g: p.images[g])
    after_device = sum(1 for files in p.steps.values() for f in files
                       if f not in ("torch.txt", "torch-deps.txt") and not f.endswith("-device.txt"))
    base = next(iter(p.base.values()))
    on_base = [g for g, ref in p.base.items() if ref == base]
    return [
        Scenario("quiet (nothing new)", plan_s, 0, 0, 0, False, 0, pip),
        Scenario(f"one device wheel of {one}", plan_s, 1, 2, 0, False, 3, pip),
        Scenario("numpy bump (every image)", plan_s, len(p.images), sum(p.images.values()), 0, False, after_device,
                 pip),
        Scenario(f"new base digest ({base})", plan_s, len(on_base), sum(p.images[g] for g in on_base), 1, True, 0,
                 pip),
        Scenario("full cold publish", plan_s, len(p.images), sum(p.images.values()), p.shared, True, pip, pip),
    ]


def expiring(p: Production) -> float:
    """Pip steps a quiet refresh resolves again on average (entries past their 7-13 days)."""
    return sum(len(files) for files in p.steps.values()) / MEAN_REUSE_DAYS
