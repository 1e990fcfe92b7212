"""What the factory knows about OS releases and AMD GPU families, read from package data files.

The facts live in builder/data/*.yaml (each with its source) so they can be reviewed and updated
without touching code.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict


class OsRelease(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    distro: str
    codename: str
    python: str
    family: Literal["apt", "dnf"]
    base: str
    rocm_since: str


class GfxFamily(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    targets: tuple[str, ...]
    gpus: tuple[str, ...]
    official_since: str | None


def _load(name: str) -> dict[str, object]:
    text = resources.files("builder").joinpath("data", name).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict), name
    return data


@cache
def os_releases() -> dict[str, OsRelease]:
    return {name: OsRelease.model_validate(v) for name, v in _load("os.yaml").items()}


@cache
def gfx_families() -> dict[str, GfxFamily]:
    return {name: GfxFamily.model_validate(v) for name, v in _load("gfx.yaml").items()}


class PytorchWheels(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rocm: tuple[str, ...]
    gfx: tuple[str, ...]
    gfx_min_rocm: dict[str, str] = {}  # targets only compiled into the wheels of newer ROCm indexes

    def targets(self, rocm: str | None) -> tuple[str, ...]:
        """The targets compiled into this torch's wheels for one ROCm index."""
        from packaging.version import Version

        return tuple(t for t in self.gfx if rocm is None or t not in self.gfx_min_rocm
                     or Version(rocm) >= Version(self.gfx_min_rocm[t]))


class TheRockRelease(BaseModel):
    """One release of TheRock's own ROCm line (7.13, 7.14, 10.0: never pytorch.org's 7.1/7.2)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str  # version.json's rocm-version: the wheels' local version is +rocm<version>
    hip: str  # HIP major.minor it ships, what torch.version.hip reports (10.0 ships HIP 7.15)
    torch: tuple[str, ...]  # torch minors it builds wheels for
    python: tuple[str, ...]
    prerelease: bool = False  # branched, not tagged: its wheels are release candidates, not on the stable index

    @property
    def local(self) -> str:
        return f"rocm{self.version}"


class TorchMinor(BaseModel):
    """One torch minor release line: its companions, Pythons and wheels per channel."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    torchvision: str
    torchaudio: str
    python: tuple[str, ...]
    pytorch: PytorchWheels
    companion_patch_offset: int = 0  # torch 2.0.x paired with torchvision 0.15.(x+1)


class AmdApt(BaseModel):
    """AMD's apt repository of ROCm releases: where a pytorch.org devel image gets its SDK."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_url: str
    key_fingerprint: str
    repo: str  # with {rocm}
    packages: tuple[str, ...]
    suites: dict[str, str]  # OS -> the repository's suite for it


class Compat(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    torch: dict[str, TorchMinor]
    therock: dict[str, TheRockRelease]  # by its ROCm line, the label its images carry (rocm7.14)
    therock_dev_only_targets: tuple[str, ...] = ()
    amd_apt: AmdApt
    indexes: dict[str, str]


@cache
def compat() -> Compat:
    return Compat.model_validate(_load("compat.yaml"))
