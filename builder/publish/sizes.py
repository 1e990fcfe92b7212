"""How big each image and each workflow row is before anything is built: compressed and installed bytes, and the
peak disk a row takes on its runner.

An image is made of parts: its combination's base stage, its torch stage (torch and its dependencies), its GPU
family's device packages (channels whose wheels split per gfx target) and, for a devel image, its devel layer.
Images of one row that share a part store it once. A part's compressed size comes from the combination's locks
where they record sizes (builder lock: each wheel's size, the base image's compressed size), else from the cited
figures of builder/data/sizes.yaml. Installed bytes are compressed bytes times the data's ratio; a row's peak disk
is its images' footprint on the engine's containerd store (each shared part once: its compressed blobs beside its
unpacked snapshots, compressed plus installed bytes) times PEAK_FACTOR.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from builder.core.errors import InputError, usage_error
from builder.render import lockfile
from builder.render.dockerfile import RenderedCell

# Peak disk during a row's publish over its final images' footprint on the containerd store (compressed blobs and
# unpacked snapshots): what BuildKit's cache adds at the worst moment of a `--release` run (the mode
# publish-cells.yml runs every row in). Measured by benchmarks/bench_row.py (docs/benchmarks.md "The largest row on
# a runner-sized disk"): 1.351 on the largest row (30 images, scale 1/16) before the factory's BuildKit records
# were pruned between families. Since, a row of one wave at real size peaks at 1.517 (gfx103X-all) and 1.530
# (gfx1150) of its images, which 1.351 under-estimates by 11-12%, and the largest row at 0.572 (scale 1/2), which
# it over-estimates 2.4x: the peak follows a row's largest wave, not its length; a per-wave model fitting both is
# the next step. Change it here, in one place.
PEAK_FACTOR = 1.351
GIB = 1 << 30
# The publish workflow's runner (.github/workflows/publish-cells.yml: ubuntu-24.04) after its own clean-up
# (.github/actions/build-runner removes .NET, Android, GHC and CodeQL, then prunes Docker): GitHub documents 14 GB
# of SSD for a public repository's runner (https://docs.github.com/en/actions/reference/runners/github-hosted-runners);
# removing Android, .NET and Haskell leaves 49 GB free on ubuntu-22.04 (easimon/maximize-build-space README, its
# table); 1 GiB of that is left to the job's checkout, virtual environment and logs.
DEFAULT_RUNNER_DISK = 48 * GIB
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": GIB, "T": 1 << 40}
_SIZE = re.compile(r"([0-9]{1,16})([KMGT]?)(?:i?B)?", re.ASCII)

Part = tuple[str, ...]  # what an image is made of: ("base", group), ("torch", group), ("device", group, family), ...


class SizeData(BaseModel):
    """builder/data/sizes.yaml: compressed bytes per part, by channel and platform kind (cpu or rocm)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: dict[str, int]
    torch: dict[str, dict[str, int]]
    device_per_target: dict[str, int]
    devel: dict[str, dict[str, int]]
    installed_per_compressed: float


@cache
def data() -> SizeData:
    text = resources.files("builder").joinpath("data", "sizes.yaml").read_text(encoding="utf-8")
    return SizeData.model_validate(yaml.safe_load(text))


def parse_size(text: str, option: str = "--runner-disk") -> int:
    """`60G`, `10T`, `512M`, `14GiB` or plain bytes (binary units) -> bytes; anything else is a usage error naming
    the option."""
    found = _SIZE.fullmatch(text.strip())
    if found is None or int(found[1]) == 0:
        raise usage_error(option, f"{text!r} is not a size: bytes, or a whole number with K, M, G or T (binary: "
                                  "60G is 60 GiB)")
    return int(found[1]) * _UNITS[found[2]]


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


@dataclass(frozen=True)
class ImageSize:
    """One image's estimate: its parts (each with its compressed bytes)."""

    tag: str
    parts: dict[Part, int]

    @property
    def compressed(self) -> int:
        return sum(self.parts.values())

    @property
    def installed(self) -> int:
        return installed(self.compressed)

    @property
    def peak(self) -> int:
        return peak_of([self])


def installed(compressed: int) -> int:
    return int(compressed * data().installed_per_compressed)


def peak_of(images: list[ImageSize]) -> int:
    """The peak disk of building these images on one runner: their footprint (compressed and installed bytes), each
    shared part once, times PEAK_FACTOR."""
    parts: dict[Part, int] = {}
    for image in images:
        parts.update(image.parts)
    compressed = sum(parts.values())
    return int((compressed + installed(compressed)) * PEAK_FACTOR)


def estimate(rendered: RenderedCell) -> ImageSize:
    """The image's parts and their compressed sizes: from its locks where they record sizes, else the data."""
    cell, group = rendered.cell, rendered.group
    kind = "cpu" if cell.rocm is None else "rocm"
    d = data()
    locked = _locked(rendered)
    family = cell.gfx or "all"
    parts: dict[Part, int] = {
        ("base", group): locked.get(lockfile.BASE_FILE) or d.base.get(cell.os, d.base["default"]),
        ("torch", group): _sum(locked, "torch.txt", "torch-deps.txt") or d.torch[cell.channel][kind],
    }
    if cell.rocm is not None and cell.wheels.splits_per_target(cell):
        per_target = d.device_per_target.get(cell.channel, 0)
        parts[("device", group, family)] = (_sum(locked, f"{_runtime_stage(rendered)}-device.txt")
                                            or per_target * len(cell.gfx_targets))
    if cell.flavor == "devel":
        parts[("devel", group, family)] = locked.get(f"{rendered.stage}.txt") or d.devel[cell.channel][kind]
    return ImageSize(cell.tag, parts)


def _runtime_stage(rendered: RenderedCell) -> str:
    return "runtime" + rendered.stage.removeprefix("devel") if rendered.stage.startswith("devel") else rendered.stage


def _sum(locked: dict[str, int], *files: str) -> int:
    """The recorded sizes of these lock files together; 0 unless every one of them records its size."""
    sizes = [locked.get(f, 0) for f in files]
    return sum(sizes) if all(sizes) else 0


def _locked(rendered: RenderedCell) -> dict[str, int]:
    """lock file -> the bytes it records (every wheel's size, or the base's compressed size), for the files of this
    image's combination that record them all; {} for an unlocked tree."""
    tree = rendered.source.locks
    if tree is None:
        return {}
    return _lock_sizes(tree / rendered.group / lockfile.LOCK_DIR)


@cache
def _lock_sizes(folder: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.txt")):
        try:
            size = lockfile.recorded_size(lockfile.read_lock(path))
        except (OSError, ValueError, InputError):  # an unreadable lock records nothing: the data stands in
            continue
        if size:
            out[path.name] = size
    return out
