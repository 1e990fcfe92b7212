"""The matrix file's schema: every value that can reach a Dockerfile is held to a strict pattern.

Patterns allow no whitespace, quotes, `$`, `;`, `&`, `|` or backticks, so nothing in a matrix file can
inject shell or Dockerfile syntax into a rendered image.
"""

from __future__ import annotations

from typing import Annotated, Any

from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from builder import catalog
from builder.spec import Flavor

VERSION_RE = r"^[0-9]+\.[0-9]+(\.[0-9]+)?$"
PLATFORM_RE = r"^(cpu|rocm[0-9]+\.[0-9]+(\.[0-9]+)?)$"
USER_RE = r"^[a-z_][a-z0-9_-]{0,31}$"
IMAGE_RE = r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$"
TAG_RE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
URL_RE = r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+/-]*)?$"


def _version(value: str) -> str:
    try:
        Version(value)
    except InvalidVersion as exc:  # pragma: no cover - the pattern already excludes these
        raise ValueError(f"not a version: {value!r}") from exc
    return value


def _known_os(value: str) -> str:
    known = catalog.os_releases()
    if value not in known:
        raise ValueError(f"unknown os {value!r}; known: {', '.join(sorted(known))}")
    return value


def _known_gfx(value: str) -> str:
    known = catalog.gfx_families()
    if value not in known:
        raise ValueError(f"unknown gfx family {value!r}; known: {', '.join(sorted(known))}")
    return value


VersionStr = Annotated[str, StringConstraints(pattern=VERSION_RE), AfterValidator(_version)]
PlatformStr = Annotated[str, StringConstraints(pattern=PLATFORM_RE)]
OsStr = Annotated[str, AfterValidator(_known_os)]
GfxStr = Annotated[str, AfterValidator(_known_gfx)]
UserStr = Annotated[str, StringConstraints(pattern=USER_RE)]
ImageStr = Annotated[str, StringConstraints(pattern=IMAGE_RE, max_length=200)]
TagStr = Annotated[str, StringConstraints(pattern=TAG_RE)]
UrlStr = Annotated[str, StringConstraints(pattern=URL_RE, max_length=500)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TorchRelease(_Strict):
    """A torch version with the companion packages that go with it in this matrix."""

    version: VersionStr
    torchvision: VersionStr | None = None
    torchaudio: VersionStr | None = None


def _torch_shorthand(value: Any) -> Any:
    """`torch: 2.13.0` is shorthand for `torch: {version: 2.13.0}`."""
    return {"version": value} if isinstance(value, str) else value


TorchField = Annotated[TorchRelease, BeforeValidator(_torch_shorthand)]


def _runtime_only() -> list[Flavor]:
    return ["runtime"]


class Axes(_Strict):
    """The cartesian product; gfx applies to rocm platforms only (cpu cells have no gfx family)."""

    os: list[OsStr] = Field(min_length=1)
    platform: list[PlatformStr] = Field(min_length=1)
    torch: list[TorchField] = Field(min_length=1)
    gfx: list[GfxStr] = Field(default_factory=list)
    flavor: list[Flavor] = Field(default_factory=_runtime_only, min_length=1)


class Expect(_Strict):
    """Overrides of what validation expects; lets a matrix prove its own gate catches a wrong image."""

    torch: VersionStr | None = None


class Include(_Strict):
    """One extra cell, complete on every axis (GitHub Actions' include, without the merging rules)."""

    os: OsStr
    platform: PlatformStr
    torch: TorchField
    gfx: GfxStr | None = None
    flavor: Flavor = "runtime"
    user: UserStr | None = None
    tag: TagStr | None = None
    expect: Expect | None = None


class Exclude(_Strict):
    """Removes every product cell that matches all the keys given."""

    os: OsStr | None = None
    platform: PlatformStr | None = None
    torch: VersionStr | None = None
    gfx: GfxStr | None = None
    flavor: Flavor | None = None


class MatrixFile(_Strict):
    image: ImageStr = "pytorch"
    user: UserStr = "root"
    source_url: UrlStr = "https://github.com/rocm-image-factory/rocm-image-factory"
    # Per-platform wheel index overrides; defaults are pytorch.org's whl/<platform> indexes.
    index_urls: dict[PlatformStr, UrlStr] = Field(default_factory=dict)
    matrix: Axes
    include: list[Include] = Field(default_factory=list)
    exclude: list[Exclude] = Field(default_factory=list)
