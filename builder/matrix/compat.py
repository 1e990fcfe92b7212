"""The rules that say which cells can work, each with the plain-words reason a maintainer reads.

Data comes from builder/data/{compat,os,gfx}.yaml (sources there); this module only applies it.
A rule returns None when the cell passes, or the reason it cannot work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from packaging.version import Version

from builder.core import channels, facts
from builder.core.facts import ALL_TARGETS, torch_minor
from builder.core.spec import CellSpec
from builder.matrix import builds, indexes, releases
from builder.matrix.serving import dev_only, therock_lines, who_serves

if TYPE_CHECKING:
    from builder.matrix.schema import TorchRelease

Rule = Callable[[CellSpec], "str | None"]


def _minor(cell: CellSpec) -> facts.TorchMinor | None:
    return facts.compat().torch.get(torch_minor(cell.torch))


def _v(version: str) -> Version:
    return Version(version)


def known_torch(cell: CellSpec) -> str | None:
    if _minor(cell) is None:
        known = ", ".join(sorted(facts.compat().torch, key=_v))
        return f"no compatibility data for torch {torch_minor(cell.torch)} (known: {known})"
    return None


def python_wheels(cell: CellSpec) -> str | None:
    minor = _minor(cell)
    if minor is None:
        return None
    release = cell.therock_release
    # TheRock builds no Python that torch itself does not support (therock-7.13's workflow: no 3.14 for torch 2.8)
    have = tuple(p for p in release.python if p in minor.python) if release else minor.python
    if cell.python not in have:
        where = f" on TheRock {cell.rocm}'s index" if cell.wheels.OWN_RELEASES else ""
        return (f"torch {torch_minor(cell.torch)} has no wheels{where} for Python {cell.python} ({cell.os}'s "
                f"Python); it has {', '.join(have)}")
    return None


def channel_has_wheels(cell: CellSpec) -> str | None:
    minor, rocm = _minor(cell), cell.rocm
    if minor is None or not cell.wheels.CHECKED:
        return None
    if cell.wheels.OWN_RELEASES:
        if rocm is None:
            return "TheRock's index has ROCm wheels only: build cpu cells from the pytorch channel"
        releases = facts.compat().therock
        if rocm not in releases:
            return (f"TheRock has no ROCm {rocm} release: its own line is {', '.join(releases)} "
                    "(pytorch.org's rocm7.1/rocm7.2 are another channel's)")
        serving = [line for line, r in releases.items() if r.serves_torch(torch_minor(cell.torch)) and
                   (line == rocm or not r.prerelease)]
        if rocm in serving:
            return None
        has = ", ".join(f"{line} ({indexes.short_name(releases[line].index)})" for line in serving)
        return (f"TheRock {rocm} builds no torch {torch_minor(cell.torch)}; "
                + (f"TheRock lines that do: {has}" if has else "no TheRock line does"))
    if rocm is None or rocm in minor.pytorch.rocm:
        return None
    have = minor.pytorch.rocm
    return (f"torch {torch_minor(cell.torch)} has no wheels for ROCm {rocm} on the pytorch.org index; "
            + (f"it has {', '.join(have)}" if have else "it has none"))


def _on_line_index(cell: CellSpec) -> facts.TheRockRelease | None:
    """The cell's TheRock release when the cell installs from the index that line publishes to (a matrix that
    points index_urls.therock elsewhere, a mirror or a dev index, has opted out of the stable index's limits)."""
    release = cell.therock_release
    if release is None or cell.index_url != facts.compat().therock_index(release, cell.gfx):
        return None
    return release


def therock_released(cell: CellSpec) -> str | None:
    """A TheRock line that is branched but not tagged has release candidates only, not on the stable index;
    a matrix that points the therock channel at an index that serves them (index_urls) opts in."""
    release = _on_line_index(cell)
    if release is None or not release.prerelease:
        return None
    released = [line for line, r in facts.compat().therock.items() if not r.prerelease]
    admit = release.admit or (f"its release tag, and its wheels (+rocm{release.version}) on {cell.index_url}; "
                              "until then index_urls.therock can name an index that serves its candidates")
    return (f"TheRock {cell.rocm} is not released yet (no stable wheels on {cell.index_url}): use {released[-1]}; "
            f"what would admit it: {admit}")


def therock_family_build(cell: CellSpec) -> str | None:
    """A TheRock line serves a family only where its own build defines it with gfx.yaml's targets (a release workflow's
    choice list may name a family no build of the line defined: 7.13's gfx90X-dcgpu)."""
    if cell.therock_release is None or cell.gfx in (None, ALL_TARGETS):
        return None
    problem = builds.family_problem(cell.rocm or "", cell.gfx)
    return f"{problem}: no {cell.gfx} image of that line" if problem else None


def therock_family_index(cell: CellSpec) -> str | None:
    """TheRock 7.9-7.12 published one index per family, for the families defined at their tag only."""
    release = _on_line_index(cell)
    if release is None or release.index != "per-family" or cell.gfx in (None, ALL_TARGETS):
        return None
    if cell.gfx in release.families:
        return None
    return (f"TheRock {cell.rocm} published per-family wheels (one index per family, no [device-*] extras) and "
            f"none for {cell.gfx}: its families are {', '.join(release.families)}; {cell.gfx} is served by "
            f"{who_serves(cell.gfx)}")


def therock_torch_targets(cell: CellSpec) -> str | None:
    """A TheRock line may build a torch release without some targets (7.14: torch 2.12 without gfx1250). Targets its
    stable index never serves are therock-stable-targets' to explain: no other torch release would help."""
    release = cell.therock_release
    if release is None or cell.gfx in (None, ALL_TARGETS):
        return None
    minor = torch_minor(cell.torch)
    never = dev_only(cell.gfx) if _on_line_index(cell) and release.index != "per-family" else ()
    missing = [t for t in cell.gfx_targets if t in release.exclude_targets.get(minor, ()) and t not in never]
    if not missing:
        return None
    others = [m for m in release.torch if m != minor and not set(missing) & set(release.exclude_targets.get(m, ()))]
    fix = (f"use torch {', '.join(others)} of that line" if others else
           f"no torch release of TheRock {cell.rocm} serves it; {cell.gfx} is served by {who_serves(cell.gfx)}")
    return (f"TheRock {cell.rocm} builds torch {minor} without {', '.join(missing)} "
            f"(its release build matrix excludes it): no device package for {cell.gfx}; {fix}")


def therock_stable_targets(cell: CellSpec) -> str | None:
    dev_only = facts.compat().therock_dev_only_targets
    if not cell.wheels.OWN_RELEASES or cell.gfx == ALL_TARGETS:  # gfx-channel says why not device-all
        return None
    release = _on_line_index(cell)
    missing = [t for t in cell.gfx_targets if t in dev_only]
    if not missing or release is None or release.index == "per-family":
        return None
    gfx = cell.gfx or ""
    if gfx == "gfx90X-dcgpu":  # the split family: its other halves do install from the stable index
        fix = "choose gfx908-dcgpu or gfx90a-dcgpu (TheRock#2869 split gfx90X-dcgpu; both install from it)"
    else:
        fix = f"no release of TheRock {cell.rocm} serves {gfx}; it is served by {who_serves(gfx)}"
    return (f"TheRock publishes the device packages of {', '.join(missing)} to its dev and nightly indexes only, "
            f"not {cell.index_url}: {fix}")


def os_supports_rocm(cell: CellSpec) -> str | None:
    rocm = cell.rocm
    since = cell.os_release.rocm_since
    if rocm is not None and _v(rocm) < _v(since):
        return f"ROCm {rocm} does not support {cell.os} (ROCm supports it from {since})"
    return None


def gfx_channel(cell: CellSpec) -> str | None:
    why = cell.wheels.NO_ALL_TARGETS_IMAGE
    return why if cell.gfx == ALL_TARGETS and why else None


def gfx_in_wheels(cell: CellSpec) -> str | None:
    """pytorch.org wheels carry a fixed target list; a family with a target outside it gets no kernels."""
    minor = _minor(cell)
    if minor is None or not cell.wheels.FIXED_TARGETS or cell.gfx in (None, ALL_TARGETS):
        return None
    wheel_targets = minor.pytorch.targets(cell.rocm)
    missing = [t for t in cell.gfx_targets if t not in wheel_targets]
    if missing:
        fix = ("use the therock channel for this family" if therock_lines(cell.gfx) else
               f"{cell.gfx} is served by {who_serves(cell.gfx)}")
        return (f"{', '.join(missing)} of {cell.gfx} {'is' if len(missing) == 1 else 'are'} not compiled into "
                f"torch {torch_minor(cell.torch)}'s pytorch.org wheels (hipErrorNoBinaryForGpu): {fix}")
    return None


def gfx_supported_by_rocm(cell: CellSpec) -> str | None:
    rocm = cell.rocm
    if rocm is None or cell.gfx in (None, ALL_TARGETS):
        return None
    family = facts.gfx_families()[cell.gfx]
    since = family.official_since
    # a line compares at its own precision: rocm6.4 is the 6.4 line, which has 6.4.1 (RDNA4); 6.4.0 is not 6.4.1
    if since and _v(rocm) < _v(".".join(since.split(".")[:len(rocm.split("."))])):
        return f"{cell.gfx} ({', '.join(family.gpus)}) needs ROCm {since} or newer"
    return None


def companions_pair(cell: CellSpec) -> str | None:
    minor = _minor(cell)
    if minor is None:
        return None
    for name, version, want in (("torchvision", cell.torchvision, minor.torchvision),
                                ("torchaudio", cell.torchaudio, minor.torchaudio)):
        if version is not None and torch_minor(version) != want:
            return f"{name} {version} does not pair with torch {torch_minor(cell.torch)} (it pairs with {want}.x)"
    return None


RULES: list[tuple[str, Rule]] = [
    ("known-torch", known_torch),
    ("torch-release", releases.cited_release),
    ("python-wheels", python_wheels),
    ("channel-wheels", channel_has_wheels),
    ("therock-released", therock_released),
    ("therock-family-build", therock_family_build),
    ("therock-family-index", therock_family_index),
    ("therock-torch-targets", therock_torch_targets),
    ("therock-torch-version", releases.therock_torch_version),
    ("therock-stable-targets", therock_stable_targets),
    ("os-support", os_supports_rocm),
    ("gfx-channel", gfx_channel),
    ("gfx-in-wheels", gfx_in_wheels),
    ("gfx-rocm", gfx_supported_by_rocm),
    ("companions", companions_pair),
]


def violations(cell: CellSpec) -> list[tuple[str, str]]:
    """Every (rule, reason) the cell breaks; [] when it can work."""
    found = []
    for name, rule in RULES:
        reason = rule(cell)
        if reason:
            found.append((name, reason))
    return found


def line_companions(channel: str, platform: str, torch: TorchRelease, vision: str | None,
                    audio: str | None) -> tuple[str | None, str | None]:
    """A TheRock line builds its own companions (7.10: torchvision 0.24.0 beside torch 2.9.1; 10.0: torchaudio
    2.11.0.2): its exact versions replace the paired defaults unless the matrix set that companion itself."""
    own = channels.of(channel).OWN_RELEASES
    exact = releases.exact_companions(platform, torch_minor(torch.version)) if own else (None, None)
    explicit = torch.model_fields_set
    return (vision if "torchvision" in explicit else exact[0] or vision,
            audio if "torchaudio" in explicit else exact[1] or audio)
