"""The rules on exact versions: a cell asks for a published torch release, and on a TheRock line for the one patch
(and the companions) that line built.

TheRock builds one patch of each torch minor per line (7.9 built 2.9.0, 7.10-7.13 built 2.9.1), so a cell pinning
another patch finds no wheel on that line's index; the reason names the version the line built and where that was
read. Pure functions of builder/data/compat.yaml (torch_releases, therock.*.torch_versions).
"""

from __future__ import annotations

from functools import cache

from packaging.version import Version

from builder.core import facts
from builder.core.facts import torch_minor
from builder.core.spec import CellSpec


def public(version: str) -> str:
    """`2.9.1` of `2.9.1+rocm7.10.0`: a pin without its local part."""
    return version.split("+")[0]


def cited_release(cell: CellSpec) -> str | None:
    """A torch version nobody published (2.13.1) is no build at all, whatever the channel."""
    releases = facts.compat().torch_releases
    version = public(cell.torch)
    if torch_minor(version) not in facts.compat().torch:  # known-torch speaks for the minor
        return None
    if Version(version) in _versions(tuple(releases)):  # `2.5` is 2.5.0, as pip reads `torch==2.5` (equal hashes)
        return None
    same = sorted((v for v in releases if torch_minor(v) == torch_minor(version)), key=Version)
    have = f"torch {torch_minor(version)} releases are {', '.join(same)}" if same else "no release of that minor is"
    return (f"torch {version} is not a cited release (compat.yaml torch_releases: {have} listed, each with its "
            "source)")


@cache
def _versions(releases: tuple[str, ...]) -> frozenset[Version]:
    """The cited releases parsed once: the production matrix asks for one per candidate cell (thousands)."""
    return frozenset(Version(v) for v in releases)


def line_build(cell: CellSpec) -> facts.LineTorch | None:
    """What the cell's TheRock line built of the cell's torch minor (None off TheRock, or a minor it builds not)."""
    release = cell.therock_release
    return release.torch_versions.get(torch_minor(cell.torch)) if release else None


def therock_torch_version(cell: CellSpec) -> str | None:
    """The one patch the line built, and the companions beside it: any other pin finds no wheel on its index."""
    release, built = cell.therock_release, line_build(cell)
    if release is None or built is None:
        return None  # no such minor on the line: channel-wheels says so
    minor = torch_minor(cell.torch)
    if built.torch is None:
        return (f"which torch {minor} patch TheRock {cell.rocm} built is not verified ({built.source}): no cell of "
                f"torch {minor} is built on that line")
    asked = {"torch": public(cell.torch), "torchvision": cell.torchvision, "torchaudio": cell.torchaudio}
    wrong = [f"{name} {public(version)}" for name, version in asked.items()
             if version is not None and not _same(getattr(built, name), public(version))]
    if not wrong:
        return None
    made = ", ".join(f"{name} {getattr(built, name)}" for name in asked if getattr(built, name) is not None)
    return (f"TheRock {cell.rocm} built torch {minor} as {made} (+{release.local}; {built.source}), not "
            f"{', '.join(wrong)}: use those versions for the therock channel")


def _same(built: str | None, asked: str) -> bool:
    """No record of the companion (None) contradicts no pin; `2.9` is 2.9.0, `2.7.1a0` is not 2.7.1."""
    return built is None or Version(built) == Version(asked)


def exact_companions(platform: str, minor: str) -> tuple[str | None, str | None]:
    """The torchvision and torchaudio a TheRock line built beside torch `minor` (None: the paired default)."""
    release = facts.compat().therock.get(platform.removeprefix("rocm"))
    built = release.torch_versions.get(minor) if release else None
    return (built.torchvision, built.torchaudio) if built else (None, None)


def uncited(versions: list[str]) -> list[str]:
    """The versions of a matrix file's torch axis and includes that no cited release backs (the production matrix's
    test holds this empty)."""
    releases = [Version(v) for v in facts.compat().torch_releases]
    return [v for v in versions if Version(public(v)) not in releases]
