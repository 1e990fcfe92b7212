"""pytorch.org's nightly ROCm wheels, a view kept apart from production: which ROCm lines and gfx targets they build.

Only the nightly data check reads builder/data/nightly.yaml (sources there); the compatibility rules and the production
matrix read compat.yaml's releases, so a nightly line or target never admits a production cell.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict

from builder.core import facts


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Cited(_Frozen):
    version: str
    source: str


class CitedPythons(_Frozen):
    versions: tuple[str, ...]
    source: str


class NightlyLine(_Frozen):
    gfx: tuple[str, ...] | None  # None: the targets of that line's nightlies were not verified
    source: str


class Unverified(_Frozen):
    gfx: str
    what: str
    source: str


class NightlyView(_Frozen):
    torch: Cited
    python: CitedPythons
    rocm: dict[str, NightlyLine]
    dropped: dict[str, str] = {}
    unverified: tuple[Unverified, ...] = ()


@cache
def view() -> NightlyView:
    return NightlyView.model_validate(facts.package_data("nightly.yaml"))


def problems(data: NightlyView | None = None) -> list[str]:
    """What makes the view unusable: a target gfx.yaml does not know, or a fact without its source."""
    data = data or view()
    known = {t for fam in facts.gfx_families().values() for t in fam.targets}
    found = [f"nightly rocm{line}: unknown gfx target {t}" for line, entry in data.rocm.items()
             for t in entry.gfx or () if t not in known]
    found += [f"nightly rocm{line}: no source" for line, entry in data.rocm.items() if not entry.source.strip()]
    found += [f"nightly {u.gfx}: unknown gfx target" for u in data.unverified if u.gfx not in known]
    return found


def report(data: NightlyView | None = None) -> list[str]:
    """The view as the nightly data check prints it, not-verified facts named as such."""
    data = data or view()
    lines = [f"pytorch.org nightlies (torch {data.torch.version}; {data.torch.source}): "
             f"Python {', '.join(data.python.versions)}"]
    for rocm, entry in data.rocm.items():
        gfx = ", ".join(entry.gfx) if entry.gfx is not None else "targets not verified"
        lines.append(f"  rocm{rocm}: {gfx} ({entry.source})")
    lines += [f"  rocm{rocm}: no longer built ({why})" for rocm, why in data.dropped.items()]
    lines += [f"  not verified: {u.gfx} {u.what} ({u.source})" for u in data.unverified]
    return lines
