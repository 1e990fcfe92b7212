"""Which lines serve a gfx family: the second half of a drop reason ("none for gfx1153 ...; TheRock 7.12 serves it").

A reason that only says no is half an answer; one that names a line that does not serve the family either is worse
than none (TheRock's multi-arch lines do not publish gfx906's device packages to a stable index). Pure functions of
builder/data/{compat,gfx}.yaml.
"""

from __future__ import annotations

from packaging.version import Version

from builder.core import facts
from builder.matrix import builds


def dev_only(family: str) -> tuple[str, ...]:
    """The family's targets whose TheRock device packages are on the dev and nightly indexes only."""
    dev = facts.compat().therock_dev_only_targets
    return tuple(t for t in facts.gfx_families()[family].targets if t in dev)


def therock_lines(gfx: str) -> list[str]:
    """The released TheRock lines whose build defines the gfx family and whose stable index has torch wheels for every
    target of it."""
    lines = []
    for line, release in facts.compat().therock.items():
        if release.prerelease or not builds.defines(line, gfx):
            continue
        extra = release.per_family
        if release.index == "per-family":
            served = gfx in release.families
        else:
            served = not dev_only(gfx) or (extra is not None and gfx in extra.families)
        if served:
            lines.append(line)
    return lines


def pytorch_indexes(family: str) -> dict[str, list[str]]:
    """pytorch.org ROCm index -> the torch minors whose wheels there carry every target of the family."""
    targets = set(facts.gfx_families()[family].targets)
    found: dict[str, list[str]] = {}
    for minor, entry in facts.compat().torch.items():
        for rocm in entry.pytorch.rocm:
            if targets <= set(entry.pytorch.targets(rocm)):
                found.setdefault(rocm, []).append(minor)
    return found


def _span(minors: list[str]) -> str:
    ordered = sorted(minors, key=Version)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}-{ordered[-1]}"


def who_serves(family: str) -> str:
    """`TheRock 7.12, 7.13; pytorch.org rocm7.2 (torch 2.11-2.14)`, the newest two pytorch.org indexes only, or
    `nothing: ...` (gfx90c)."""
    therock = therock_lines(family)
    indexes = sorted(pytorch_indexes(family).items(), key=lambda kv: max(Version(m) for m in kv[1]), reverse=True)
    parts = [f"TheRock {', '.join(therock)}"] if therock else []
    parts += [f"pytorch.org {', '.join(f'rocm{r} (torch {_span(m)})' for r, m in indexes[:2])}"] if indexes else []
    if not parts:
        return ("nothing: no TheRock line publishes it to a stable index (dev and nightly only) and no pytorch.org "
                "ROCm wheel carries it")
    return "; ".join(parts)
