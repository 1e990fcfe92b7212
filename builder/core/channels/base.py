"""The one interface every wheel channel module implements, and what a channel reads of a cell.

A channel is where an image's torch comes from (pytorch.org's index, TheRock's, a local wheelhouse). Its module
answers every question whose answer differs between channels, so nothing else branches on a channel's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from builder.core import facts


class Cell(Protocol):
    """The fields of a cell (builder.core.spec.CellSpec) a channel reads."""

    @property
    def platform(self) -> str: ...
    @property
    def os(self) -> str: ...
    @property
    def torch(self) -> str: ...
    @property
    def gfx(self) -> str | None: ...
    @property
    def flavor(self) -> str: ...


@dataclass(frozen=True)
class StandInSizes:
    """Compressed bytes (as a registry stores the layers) that stand in for a channel's parts where no lock records
    their size (builder/publish/sizes.py adds them up per image and row); each channel cites its figures' sources."""

    torch: Mapping[str, int]  # platform kind (cpu, rocm) -> torch and its dependencies (the shared torch stage)
    devel: Mapping[str, int]  # platform kind -> the devel layer over a runtime image
    device_per_target: int = 0  # one gfx target's `device-<target>` packages, where the wheels split per target


class WheelChannel(Protocol):
    """One wheel channel: a module (pytorch.py, therock.py, local.py) with these names."""

    NAME: str
    # Named in tags and combination names (pytorch.org's, the default, is not).
    NAMED_IN_TAGS: bool
    # Its wheels carry every gfx target, so a per-family cell is one more tag of the all-targets image.
    SHARES_ALL_TARGETS_IMAGE: bool
    # It ships its own ROCm release line (TheRock's 7.9 ... 10.x), whose data (compat.yaml `therock`) decides.
    OWN_RELEASES: bool
    # The matrix's compatibility data applies to its wheels (a wheelhouse is taken as it is).
    CHECKED: bool
    # Its wheels carry one fixed gfx target list per torch release (pytorch.org's build.sh).
    FIXED_TARGETS: bool
    # Why it builds no all-targets image, or None where it does.
    NO_ALL_TARGETS_IMAGE: str | None
    # The line a cell installs from, in a drop reason: "TheRock {rocm}", "pytorch.org {platform}".
    LINE: str
    # What its parts weigh where no lock says (the publish plan's disk and bytes).
    SIZES: StandInSizes

    def release(self, cell: Cell) -> facts.TheRockRelease | None:
        """The TheRock release the cell installs from (None: the channel has no releases of its own)."""
        ...

    def torch_wheel(self, cell: Cell) -> str:
        """The exact torch version the image installs."""
        ...

    def local_version(self, cell: Cell) -> str:
        """The local version (`+rocm7.14.0`) the companions' versions carry, or ''."""
        ...

    def splits_per_target(self, cell: Cell) -> bool:
        """Its wheels split per gfx target into `device-<target>` extras."""
        ...

    def has_rocm_sdk(self, cell: Cell) -> bool:
        """A devel image of this cell carries the ROCm SDK of its wheels."""
        ...

    def os_sdk_release(self, cell: Cell) -> str | None:
        """The AMD ROCm release whose SDK comes from the OS's package manager (None: not from the OS)."""
        ...

    def index_url(self, platform: str, gfx: str | None, torch: str, overrides: Mapping[str, str]) -> str:
        """The index that serves a cell's line (overrides: the matrix's index_urls)."""
        ...


def rocm(cell: Cell) -> str | None:
    return cell.platform.removeprefix("rocm") if cell.platform.startswith("rocm") else None
