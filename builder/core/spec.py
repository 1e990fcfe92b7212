"""CellSpec: the one record that flows through every stage, from matrix file to published image."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from builder.core import channels, drivers, facts, osfamilies
from builder.core.channels import ChannelName
from builder.core.channels.base import WheelChannel
from builder.core.osfamilies.base import OsFamily
from builder.core.tags import readable_tag

Flavor = Literal["runtime", "devel"]


class CellSpec(BaseModel):
    """One image to build: fully resolved, so later stages never go back to the matrix file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str
    os: str
    platform: str
    torch: str
    torchvision: str | None = None
    torchaudio: str | None = None
    gfx: str | None = None
    flavor: Flavor
    channel: ChannelName = channels.DEFAULT
    user: str = "root"
    index_url: str
    tag: str
    explicit_tag: bool = False
    expect_torch: str | None = None
    source_url: str
    line: int | None = None

    @property
    def rocm(self) -> str | None:
        """ROCm version of a rocm platform ('rocm7.2' -> '7.2'); None for cpu."""
        return self.platform.removeprefix("rocm") if self.platform.startswith("rocm") else None

    @property
    def os_release(self) -> facts.OsRelease:
        return facts.os_releases()[self.os]

    @property
    def python(self) -> str:
        return self.os_release.python

    @property
    def gfx_targets(self) -> tuple[str, ...]:
        """The targets the image must carry kernels for; 'all' means every target of its wheels."""
        if self.gfx is None:
            return ()
        if self.gfx == facts.ALL_TARGETS:
            minor = facts.compat().torch.get(facts.torch_minor(self.torch))
            return minor.pytorch.targets(self.rocm) if minor else ()
        return facts.gfx_families()[self.gfx].targets

    @property
    def os_family(self) -> OsFamily:
        """The OS family of the cell's OS: every answer that differs between package managers comes from it."""
        return osfamilies.of(self.os_release.family)

    @property
    def wheels(self) -> WheelChannel:
        """The cell's wheel channel: every answer that differs between channels comes from it."""
        return channels.of(self.channel)

    @property
    def therock_release(self) -> facts.TheRockRelease | None:
        """The TheRock release a therock cell installs from (None off that channel, or for a line it lacks)."""
        return self.wheels.release(self)

    @property
    def local_version(self) -> str:
        """`+rocm7.14.0` for a TheRock cell: its torch, torchvision and torchaudio wheels all carry the release's
        local version, and one index serves several releases' builds of the same public version."""
        return self.wheels.local_version(self)

    @property
    def torch_wheel(self) -> str:
        """The exact torch version the image installs: one tag is always one wheel."""
        return self.wheels.torch_wheel(self)

    @property
    def has_rocm_sdk(self) -> bool:
        """A devel image that carries the ROCm SDK of its wheels (hipcc, HIP and math-library headers)."""
        return self.wheels.has_rocm_sdk(self)

    @property
    def hip_accept(self) -> tuple[str, ...]:
        """Every HIP major.minor torch.version.hip may report on this image's line: the ROCm version for pytorch.org's
        wheels, the release's list for TheRock's (10.0: its HIP 7.15, or 10.0 where pytorch#166336 applies)."""
        rocm = self.rocm
        if rocm is None:
            return ()
        release = self.therock_release
        return release.hip if release else (".".join(rocm.split(".")[:2]),)

    @property
    def hip(self) -> str | None:
        """The HIP major.minor the line ships (the first accepted value): what its SDK's hipcc says."""
        accept = self.hip_accept
        return accept[0] if accept else None

    def content_cell(self) -> CellSpec:
        """The cell whose image this cell's tag points at.

        Where a channel's wheels carry every gfx target (pytorch.org's), a cell for one family is the same
        image as the all-targets cell: it is built once and this cell's tag becomes one more tag of it.
        """
        if not self.wheels.SHARES_ALL_TARGETS_IMAGE or self.gfx in (None, facts.ALL_TARGETS):
            return self
        tag = self.tag if self.explicit_tag else readable_tag(
            self.platform, self.os, self.python, self.torch, facts.ALL_TARGETS, self.flavor, self.channel)
        return self.model_copy(update={"gfx": facts.ALL_TARGETS, "tag": tag, "line": None})

    def expectations(self) -> dict[str, Any]:
        """What validation and the in-image smoke test hold the image to (baked in as cell.json)."""
        return {
            "tag": self.tag,
            "platform": self.platform,
            "channel": self.channel,
            "os": self.os,
            "flavor": self.flavor,
            "python": self.python,
            "user": self.user,
            "torch": self.expect_torch or self.torch,
            "torchvision": self.torchvision,
            "torchaudio": self.torchaudio,
            # torch.version.hip is "7.2.12345-abc" on ROCm wheels: the smoke test compares major.minor.
            "hip": self.hip,
            # Every value torch.version.hip may report on this line (compat.yaml `hip`, pytorch#166336/#168097).
            "hip_accept": list(self.hip_accept),
            "torch_wheel": self.torch_wheel,
            "gfx_family": self.gfx,
            "gfx_targets": list(self.gfx_targets),
            # The image promises a ROCm SDK (hipcc, HIP and math-library headers), so torch-smoke's hip_compile
            # holds it to compiling.
            "rocm_sdk": self.has_rocm_sdk,
            # The host driver the line is supported with (builder/data/drivers.yaml): torch-smoke checks the host's.
            "amdgpu_driver": drivers.driver_range(self.rocm),
        }
