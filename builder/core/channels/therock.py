"""TheRock's own wheel indexes (per family, whl-multi-arch, whl-next): torch split into `device-<target>` extras on
multi-arch lines, every wheel carrying the release's local version, the SDK from the release's `rocm[devel]` wheels."""

from __future__ import annotations

from collections.abc import Mapping

from builder.core import facts
from builder.core.channels.base import Cell, StandInSizes, rocm

NAME = "therock"
NAMED_IN_TAGS = True
SHARES_ALL_TARGETS_IMAGE = False
OWN_RELEASES = True
CHECKED = True
FIXED_TARGETS = False
NO_ALL_TARGETS_IMAGE: str | None = (
    "TheRock's all-targets wheels (device-all) make an 18.6 GB layer (ROCm-docker#166): "
    "use the pytorch channel for an all-targets image")
LINE = "TheRock {rocm}"  # how a drop reason names the cell's line ({platform}, {rocm})
# TORCH: stand-in, no published figure found (searched 2026-11-28): a per-family TheRock torch wheel taken at 1.1 GB
# (the upper end of what users report; unverified at a public source, replaced by the lock's sizes once locked).
_TORCH = 1_100_000_000
SIZES = StandInSizes(
    torch={"rocm": _TORCH},  # torch over rocm[libraries] (core and libraries; device code is per target)
    devel={"rocm": _TORCH},  # stand-in: rocm[devel] (headers, CMake files), taken at the size of the torch stage
    # (device-all 19.688 GB - torch 1.1 GB) / 25 targets: ROCm 10.0 / PyTorch 2.12's device-all wheel install is
    # 19.688 GB (https://github.com/ROCm/ROCm-docker/issues/166); builder/data/therock_builds.yaml, line 10.0
    # (ROCm/TheRock @ 16adc4d875fd4f65ea23c7c84e1c66706fde3047), has 25 targets on the stable index.
    device_per_target=743_520_000)


def release(cell: Cell) -> facts.TheRockRelease | None:
    """The release as this cell meets it (None for a line the data lacks)."""
    found = facts.compat().therock.get(rocm(cell) or "")
    return found.view(cell.gfx, facts.torch_minor(cell.torch)) if found else None


def local_version(cell: Cell) -> str:
    """`+rocm7.14.0`: one index serves several releases' builds of the same public version."""
    found = release(cell)
    return f"+{found.local}" if found and "+" not in cell.torch else ""


def torch_wheel(cell: Cell) -> str:
    if rocm(cell) is None or "+" in cell.torch:
        return cell.torch
    return cell.torch + local_version(cell)


def splits_per_target(cell: Cell) -> bool:
    """Multi-arch lines split per target; a per-family line (7.9-7.12) serves the family its own wheel."""
    found = release(cell)
    return found is None or found.device_extras


def has_rocm_sdk(cell: Cell) -> bool:
    return cell.flavor == "devel" and rocm(cell) is not None and release(cell) is not None


def os_sdk_release(cell: Cell) -> str | None:
    return None


def index_url(platform: str, gfx: str | None, torch: str, overrides: Mapping[str, str]) -> str:
    """Per release line: whl-next from 10.0, whl-multi-arch for 7.13/7.14, the family's own index for 7.9-7.12 and
    7.13's per-family release; the matrix's `index_urls.therock` replaces them all."""
    if NAME in overrides:
        return overrides[NAME]
    data = facts.compat()
    found = data.therock.get(platform.removeprefix("rocm"))
    view = found.view(gfx, facts.torch_minor(torch)) if found else None
    return data.therock_index(view, gfx) if view else data.indexes["therock-multi-arch"]
