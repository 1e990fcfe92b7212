"""How big each image and each workflow row is before anything is built: compressed and installed bytes, and the
peak disk a row takes on its runner.

An image is made of parts: its combination's base stage, its torch stage (torch and its dependencies), its GPU
family's device packages (channels whose wheels split per gfx target) and, for a devel image, its devel layer.
Images of one row that share a part store it once. A part's compressed size comes from the combination's locks
where they record sizes (builder lock: each wheel's size, the base image's compressed size), else from the cited
figures of builder/data/sizes.yaml (the base) and of the image's wheel channel (its module's SIZES: torch, device
packages, devel); its installed bytes are the compressed bytes times the data's ratio.

A row's peak is its largest wave's (`builder publish --by-family`, the mode publish-cells.yml runs every row in,
bakes one GPU family at a time: builder.pipeline.byfamily). A wave's peak is its footprint on the engine's store,
each part once as compressed blobs beside unpacked snapshots (the shared parts, the family's parts, and the
previous wave's runtime image per combination, which anchors the shared layers until this wave's are in), plus
NEW_FACTOR times the installed bytes the wave brings new (each new layer is unpacked twice while it is made:
BuildKit's snapshot, and the image's own that the engine's exporter unpacks from the blob; and pip's downloads beside
them). Measured against benchmarks/bench_row.py in tests/publish/test_sizes.py and docs/benchmarks.md ("The per-wave
peak"), with incompressible wheels and with wheels compressible at the installed ratio of real ROCm images.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from builder.core import facts
from builder.core.errors import InputError, usage_error
from builder.render import lockfile
from builder.render.dockerfile import RenderedCell

# Bytes on the disk at a wave's worst moment beyond its footprint, per installed byte the wave brings new: bench_row
# runs (docs/benchmarks.md "The per-wave peak") put the peak of one-wave rows at real size, with incompressible wheels
# and with wheels compressible 2.64x (real ROCm images: 2.7, builder/data/sizes.yaml), and of the 30-image row at 1/2
# and 1/4 of the bytes, within 7% of the footprint plus 1.1x the wave's new installed bytes. Counted in compressed
# bytes it fitted the incompressible runs alone (installed = compressed there) and under-estimated the compressible
# ones by 25%. Change it here, in one place.
NEW_FACTOR = 1.1
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
    """builder/data/sizes.yaml: the base stage's compressed bytes and the installed/compressed ratio (a channel's
    parts: its module's SIZES)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: dict[str, int]
    installed_per_compressed: float


@cache
def data() -> SizeData:
    return SizeData.model_validate(facts.package_data("sizes.yaml"))


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
class Layer:
    """One part's bytes: as the registry stores it (compressed) and unpacked in a snapshot (installed)."""

    compressed: int
    installed: int

    @property
    def on_disk(self) -> int:
        """Its blob beside its unpacked snapshot, as the containerd store holds a pulled or built layer."""
        return self.compressed + self.installed


def layer(compressed: int) -> Layer:
    """A part of `compressed` bytes, installed at the data's ratio."""
    return Layer(compressed, int(compressed * data().installed_per_compressed))


@dataclass(frozen=True)
class ImageSize:
    """One image's estimate: its parts, and what --by-family's waves go by (its combination, family, flavor)."""

    tag: str
    parts: dict[Part, Layer]
    group: str = ""
    family: str = "all"
    runtime: bool = True

    @property
    def compressed(self) -> int:
        return sum(p.compressed for p in self.parts.values())

    @property
    def installed(self) -> int:
        return sum(p.installed for p in self.parts.values())

    @property
    def peak(self) -> int:
        return peak_of([self])


def waves(images: list[ImageSize]) -> list[list[ImageSize]]:
    """The images by GPU family, in the order the families first come (builder.pipeline.byfamily.waves)."""
    by_family: dict[str, list[ImageSize]] = {}
    for image in images:
        by_family.setdefault(image.family, []).append(image)
    return list(by_family.values())


def anchors(wave: list[ImageSize]) -> list[ImageSize]:
    """One image per combination that stays while the next wave bakes: its runtime image where it has one
    (builder.pipeline.byfamily.anchors)."""
    kept: dict[str, ImageSize] = {}
    for image in wave:
        if image.group not in kept or (image.runtime and not kept[image.group].runtime):
            kept[image.group] = image
    return list(kept.values())


def wave_peaks(images: list[ImageSize]) -> list[int]:
    """Each wave's peak: the parts on the disk (the wave's images and the previous wave's anchors, each part once,
    blob and snapshot) plus NEW_FACTOR x the installed bytes of the parts no earlier wave brought."""
    seen: set[Part] = set()
    previous: list[ImageSize] = []
    out = []
    for wave in waves(images):
        held: dict[Part, Layer] = {}
        for image in [*anchors(previous), *wave]:
            held.update(image.parts)
        new = {part: size for image in wave for part, size in image.parts.items() if part not in seen}
        out.append(int(sum(p.on_disk for p in held.values()) + NEW_FACTOR * sum(p.installed for p in new.values())))
        seen.update(new)
        previous = wave
    return out


def peak_of(images: list[ImageSize]) -> int:
    """The peak disk of publishing these images in one row (--by-family): its largest wave's; 0 for none."""
    return max(wave_peaks(images), default=0)


def estimate(rendered: RenderedCell) -> ImageSize:
    """The image's parts and their compressed sizes: from its locks where they record sizes, else the data."""
    cell, group = rendered.cell, rendered.group
    kind = "cpu" if cell.rocm is None else "rocm"
    d = data()
    locked = _locked(rendered)
    family = cell.gfx or "all"
    parts: dict[Part, int] = {
        ("base", group): locked.get(lockfile.BASE_FILE) or d.base.get(cell.os, d.base["default"]),
        ("torch", group): _sum(locked, "torch.txt", "torch-deps.txt") or cell.wheels.SIZES.torch[kind],
    }
    if cell.rocm is not None and cell.wheels.splits_per_target(cell):
        per_target = cell.wheels.SIZES.device_per_target
        parts[("device", group, family)] = (_sum(locked, f"{_runtime_stage(rendered)}-device.txt")
                                            or per_target * len(cell.gfx_targets))
    if cell.flavor == "devel":
        parts[("devel", group, family)] = locked.get(f"{rendered.stage}.txt") or cell.wheels.SIZES.devel[kind]
    return ImageSize(cell.tag, {part: layer(size) for part, size in parts.items()}, group, family,
                     cell.flavor == "runtime")


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
