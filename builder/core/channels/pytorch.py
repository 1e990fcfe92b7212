"""pytorch.org's wheel indexes (download.pytorch.org/whl/rocmX.Y, /cpu): every gfx target in one wheel, the ROCm
SDK of a devel image from AMD's OS repository at the patch release the wheels were built on."""

from __future__ import annotations

from collections.abc import Mapping

from builder.core import facts
from builder.core.channels.base import Cell, StandInSizes, rocm

NAME = "pytorch"
NAMED_IN_TAGS = False
SHARES_ALL_TARGETS_IMAGE = True
OWN_RELEASES = False
CHECKED = True
FIXED_TARGETS = True
NO_ALL_TARGETS_IMAGE: str | None = None
LINE = "pytorch.org {platform}"  # how a drop reason names the cell's line ({platform}, {rocm})
SIZES = StandInSizes(
    # rocm: pip's download line for pytorch.org's ROCm torch wheel, the index's Content-Length, "(4496.3 MB)"
    # (https://download.pytorch.org/whl/nightly/rocm6.4/torch-2.10.0.dev20250926%2Brocm6.4-cp312-cp312-manylinux_2_28_x86_64.whl):
    # the wheel carries every target's kernels; its dependencies (triton ~0.15 GB) are small. cpu: the cp312
    # manylinux_2_28_x86_64 CPU wheels of torch 2.x are about 175-200 MB (https://download.pytorch.org/whl/cpu/torch/).
    torch={"rocm": 4_496_300_000, "cpu": 200_000_000},
    # rocm: AMD's `apt-get install rocm ...` layer of rocm/pytorch, ROCm 7.2.4 / PyTorch 2.10: 7.912 GB
    # (https://github.com/ROCm/ROCm-docker/issues/166), standing in for rocm-hip-sdk (a part of it). cpu: stand-in,
    # no published figure: build-essential, python3-dev, git and ninja from the OS.
    devel={"rocm": 7_912_000_000, "cpu": 250_000_000})


def release(cell: Cell) -> facts.TheRockRelease | None:
    return None


def torch_wheel(cell: Cell) -> str:
    """`2.13.0+rocm7.2`: `==2.13.0` would match every local version the index serves, so ROCm cells pin the local
    part that names their line (the index's own name: rocm7.2, rocm6.2.4)."""
    line = rocm(cell)
    if line is None or "+" in cell.torch:
        return cell.torch
    return f"{cell.torch}+rocm{line}"


def local_version(cell: Cell) -> str:
    return ""


def splits_per_target(cell: Cell) -> bool:
    return False


def sdk_rocm(cell: Cell) -> str | None:
    """The patch release the wheels were built on (rocm7.2 -> 7.2.1)."""
    line = rocm(cell)
    if line is None:
        return None
    minor = facts.compat().torch.get(facts.torch_minor(cell.torch))
    return minor.pytorch.sdk.get(line, line) if minor else line


def has_rocm_sdk(cell: Cell) -> bool:
    """On the OSes AMD's repository has a suite for."""
    return (cell.flavor == "devel" and rocm(cell) is not None and cell.os in facts.compat().amd_apt.suites
            and sdk_rocm(cell) is not None)


def os_sdk_release(cell: Cell) -> str | None:
    return sdk_rocm(cell) if has_rocm_sdk(cell) else None


def index_url(platform: str, gfx: str | None, torch: str, overrides: Mapping[str, str]) -> str:
    """One index per platform (rocm7.2, cpu), unless the matrix names its own for the platform."""
    return overrides.get(platform, facts.compat().indexes["pytorch"].format(platform=platform))
