"""The matrix file's schema: every value that can reach a Dockerfile is held to a strict pattern.

Patterns allow no whitespace, quotes, `$`, `;`, `&`, `|` or backticks, so nothing in a matrix file can
inject shell or Dockerfile syntax into a rendered image.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any

from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from builder.core import facts
from builder.core.channels import ChannelName
from builder.core.facts import ALL_TARGETS
from builder.core.spec import Flavor
from builder.matrix.companions import default_companions

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
    known = facts.os_releases()
    if value not in known:
        # A misspelt name (debain-12) gets the name; a release the factory lacks (debian-11) only the list.
        letters = [k for k in known if re.sub(r"[\d.]", "", k) != re.sub(r"[\d.]", "", value)]
        close = difflib.get_close_matches(value, letters, n=1, cutoff=0.6)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown os {value!r}; {guess}known: {', '.join(sorted(known))}")
    return value


def _known_gfx(value: str) -> str:
    known = facts.gfx_families()
    if value not in known and value != ALL_TARGETS:
        hint = gfx_hint(value) or f"known: {ALL_TARGETS}, {', '.join(sorted(known))}"
        raise ValueError(f"unknown gfx family {value!r}; {hint}")
    return value


def _squash(name: str) -> str:
    """'AMD Radeon RX 7900 XTX' and 'rx7900xtx' alike: lower case, letters and digits only, vendor words dropped."""
    text = "".join(ch for ch in name.lower() if ch.isalnum())
    for word in ("amd", "radeon", "instinct"):
        text = text.replace(word, "")
    return text


def gfx_hint(value: str) -> str | None:
    """What to write instead of a gfx name that is not a family: the family of a target or GPU, or its spelling."""
    families = facts.gfx_families()

    def use(names: list[str]) -> str:
        return f"use gfx: [{names[0]}]" + (f" (or {', '.join(names[1:])})" if len(names) > 1 else "")

    def of(names: list[str]) -> str:
        return f"famil{'ies' if len(names) > 1 else 'y'} {', '.join(names)}: {use(names)}"

    by_target = [name for name, fam in families.items() if value in fam.targets]
    if by_target:
        return f"{value} is a target of {of(by_target)}"
    by_gpu = [name for name, fam in families.items() if _squash(value) in {_squash(g) for g in fam.gpus}]
    if by_gpu and _squash(value):
        return f"{value} is a GPU of {of(by_gpu)}"
    spelled = [name for name in [ALL_TARGETS, *families] if name.lower() == value.lower()]
    if spelled:
        return f"family names are case-sensitive: {use(spelled)}"
    if any(value in minor.pytorch.gfx for minor in facts.compat().torch.values()):
        return f"{value} is in no family here, but pytorch.org's wheels carry it: use gfx: [{ALL_TARGETS}]"
    return None


VersionStr = Annotated[str, StringConstraints(pattern=VERSION_RE), AfterValidator(_version)]
PlatformStr = Annotated[str, StringConstraints(pattern=PLATFORM_RE)]
OsStr = Annotated[str, AfterValidator(_known_os)]
GfxStr = Annotated[str, AfterValidator(_known_gfx)]
UserStr = Annotated[str, StringConstraints(pattern=USER_RE)]
ImageStr = Annotated[str, StringConstraints(pattern=IMAGE_RE, max_length=200)]
TagStr = Annotated[str, StringConstraints(pattern=TAG_RE)]
UrlStr = Annotated[str, StringConstraints(pattern=URL_RE, max_length=500)]
IndexKey = Annotated[str, StringConstraints(pattern=r"^(therock|cpu|rocm[0-9]+\.[0-9]+(\.[0-9]+)?)$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TorchRelease(_Strict):
    """A torch version with its companions: omitted means the paired release, null means not installed."""

    version: VersionStr
    torchvision: VersionStr | None = None
    torchaudio: VersionStr | None = None

    def companions(self) -> tuple[str | None, str | None]:
        vision, audio = default_companions(self.version)
        return (self.torchvision if "torchvision" in self.model_fields_set else vision,
                self.torchaudio if "torchaudio" in self.model_fields_set else audio)


def _torch_shorthand(value: Any) -> Any:
    """`torch: 2.13.0` is shorthand for `torch: {version: 2.13.0}`."""
    return {"version": value} if isinstance(value, str) else value


TorchField = Annotated[TorchRelease, BeforeValidator(_torch_shorthand)]


def _runtime_only() -> list[Flavor]:
    return ["runtime"]


def _pytorch_only() -> list[ChannelName]:
    return ["pytorch"]


class Axes(_Strict):
    """The cartesian product; gfx applies to rocm platforms only (cpu cells have no gfx family)."""

    os: list[OsStr] = Field(min_length=1)
    platform: list[PlatformStr] = Field(min_length=1)
    torch: list[TorchField] = Field(min_length=1)
    gfx: list[GfxStr] = Field(default_factory=list)
    flavor: list[Flavor] = Field(default_factory=_runtime_only, min_length=1)
    channel: list[ChannelName] = Field(default_factory=_pytorch_only, min_length=1)


class Expect(_Strict):
    """Overrides of what validation expects; lets a matrix prove its own gate catches a wrong image."""

    torch: VersionStr | None = None


class Override(_Strict):
    """Builds an include that breaks a compatibility rule; the reason is kept for reviewers."""

    reason: Annotated[str, StringConstraints(min_length=10, max_length=500)]


class Include(_Strict):
    """One extra cell, complete on every axis (GitHub Actions' include, without the merging rules)."""

    os: OsStr
    platform: PlatformStr
    torch: TorchField
    gfx: GfxStr | None = None
    flavor: Flavor = "runtime"
    channel: ChannelName = "pytorch"
    user: UserStr | None = None
    tag: TagStr | None = None
    expect: Expect | None = None
    override: Override | None = None


def _one_or_many(value: Any) -> Any:
    return value if isinstance(value, list) or value is None else [value]


class Exclude(_Strict):
    """Removes every product cell that matches all the keys given; a list matches any of its values."""

    os: Annotated[list[OsStr] | None, BeforeValidator(_one_or_many)] = None
    platform: Annotated[list[PlatformStr] | None, BeforeValidator(_one_or_many)] = None
    torch: Annotated[list[VersionStr] | None, BeforeValidator(_one_or_many)] = None
    gfx: Annotated[list[GfxStr] | None, BeforeValidator(_one_or_many)] = None
    flavor: Annotated[list[Flavor] | None, BeforeValidator(_one_or_many)] = None
    channel: Annotated[list[ChannelName] | None, BeforeValidator(_one_or_many)] = None


class MatrixFile(_Strict):
    image: ImageStr = "pytorch"
    user: UserStr = "root"
    source_url: UrlStr = "https://github.com/rocm-image-factory/rocm-image-factory"
    # Wheel index overrides: per platform for the pytorch channel (default pytorch.org's whl/<platform>),
    # and `therock` for TheRock's multi-arch index.
    index_urls: dict[IndexKey, UrlStr] = Field(default_factory=dict)
    matrix: Axes
    include: list[Include] = Field(default_factory=list)
    exclude: list[Exclude] = Field(default_factory=list)
