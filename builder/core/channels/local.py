"""A local wheelhouse (`--wheelhouse DIR`, or a mirror of an index): the wheels as they are, split per target when
the cell names one family; no SDK of its own."""

from __future__ import annotations

from collections.abc import Mapping

from builder.core import facts
from builder.core.channels import pytorch
from builder.core.channels.base import Cell

NAME = "local"
NAMED_IN_TAGS = True
SHARES_ALL_TARGETS_IMAGE = False
OWN_RELEASES = False
CHECKED = False
FIXED_TARGETS = False
NO_ALL_TARGETS_IMAGE: str | None = None
LINE = "local wheelhouse {platform}"  # how a drop reason names the cell's line ({platform}, {rocm})
SIZES = pytorch.SIZES  # a wheelhouse's wheels are taken as pytorch.org's (a lock with sizes replaces them)


def release(cell: Cell) -> facts.TheRockRelease | None:
    return None


def torch_wheel(cell: Cell) -> str:
    return cell.torch


def local_version(cell: Cell) -> str:
    return ""


def splits_per_target(cell: Cell) -> bool:
    return cell.gfx != facts.ALL_TARGETS


def has_rocm_sdk(cell: Cell) -> bool:
    return False


def os_sdk_release(cell: Cell) -> str | None:
    return None


def index_url(platform: str, gfx: str | None, torch: str, overrides: Mapping[str, str]) -> str:
    """The wheels come from the wheelhouse; the URL recorded is the one pytorch.org's channel would read."""
    return pytorch.index_url(platform, gfx, torch, overrides)
