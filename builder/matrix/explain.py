"""Why each ROCm line of a matrix is kept or dropped: the per-line verdict `builder matrix --explain` starts with.

A maintainer re-deriving the production matrix asks of each line (pytorch.org's rocm7.1, TheRock's 7.12, ...)
whether it still builds anything and, when it does not, which rule ended it; the per-cell drops answer that only
after adding them up. Pure function of an Expansion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import Version

from builder.core import facts
from builder.matrix import builds, indexes
from builder.matrix.expand import Expansion
from builder.matrix.serving import dev_only


@dataclass
class LineVerdict:
    """One (channel, platform) of the product: the torch releases it builds, and why its other cells went."""

    channel: str
    platform: str
    kept: list[str] = field(default_factory=list)  # torch versions with at least one cell built
    cells: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # "rule: reason" -> cells it dropped
    torch_dropped: dict[str, str] = field(default_factory=dict)  # torch -> the first rule's reason it dropped

    @property
    def why(self) -> list[str]:
        """The rules' reasons, most cells first; the matrix's own excludes only where no rule spoke."""
        ranked = sorted(self.reasons.items(), key=lambda item: (-item[1], item[0]))
        rules = [r for r, _ in ranked if not r.startswith("exclude[")]
        return rules or [r for r, _ in ranked]

    @property
    def verdict(self) -> str:
        if self.cells:
            gone = [f"{t}: {why}" for t, why in self.torch_dropped.items() if t not in self.kept]
            return (f"kept: {self.cells} cells, torch {', '.join(self.kept)}"
                    + (f"; not torch {'; '.join(gone)}" if gone else ""))
        return "dropped: " + ("; ".join(self.why) if self.why else "no cells")


def line_verdicts(expansion: Expansion) -> list[LineVerdict]:
    """A verdict per line, in first-seen order: kept lines first, then the dropped ones."""
    lines: dict[tuple[str, str], LineVerdict] = {}

    def line(channel: str, platform: str) -> LineVerdict:
        return lines.setdefault((channel, platform), LineVerdict(channel, platform))

    for cell in expansion.cells:
        v = line(cell.channel, cell.platform)
        v.cells += 1
        if cell.torch not in v.kept:
            v.kept.append(cell.torch)
    for d in expansion.dropped:
        v = line(d.cell.channel, d.cell.platform)
        key = f"{d.rule}: {d.explained}"
        v.reasons[key] = v.reasons.get(key, 0) + 1
        if not d.rule.startswith("exclude["):
            v.torch_dropped.setdefault(d.cell.torch, key)
    return sorted(lines.values(), key=lambda v: v.cells == 0)


def family_gaps(expansion: Expansion) -> tuple[str, dict[str, str]]:
    """The newest released TheRock line, and each family its build defines and its stable index serves that the matrix
    builds no per-family image of. One rule for every family (compat.yaml, "Slim images and test hardware"): whether
    TheRock's CI tests it on a GPU does not withhold an image. A matrix that builds nothing of that line is not asked
    to: no gaps."""
    lines = [line for line, r in facts.compat().therock.items() if not r.prerelease]
    line = max(lines, key=Version)
    built = {c.gfx for c in expansion.cells if c.wheels.OWN_RELEASES and c.rocm == line}
    if not built:
        return line, {}
    gaps = {name: "not in this matrix: add it to matrix.gfx for the therock channel"
            for name in facts.gfx_families() if name not in built and not dev_only(name) and builds.defines(line, name)}
    return line, gaps


def family_gap_lines(expansion: Expansion) -> list[str]:
    """family_gaps as the lines --explain prints after the ROCm lines' verdicts (none for a matrix without the line)."""
    line, gaps = family_gaps(expansion)
    if not any(c.wheels.OWN_RELEASES and c.rocm == line for c in expansion.cells):
        return []
    kind = indexes.kind_name(facts.compat().therock[line].index)
    head = f"Families TheRock {line}'s {kind} serves without a per-family image here: {'' if gaps else 'none'}"
    return [head, *(f"  {family}: {why}" for family, why in gaps.items())]
