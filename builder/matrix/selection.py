"""Cells -> images: which cells a run takes (selection, shards), which image each becomes, and its tags.

pytorch.org wheels carry every gfx target, so the pytorch-channel cells of several families (and the
`all` cell) are one image; building it once per family would push identical bytes under new digests.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from builder.core import tags
from builder.core.errors import InputError, Problem, usage_error
from builder.core.facts import ALL_TARGETS
from builder.core.spec import CellSpec
from builder.matrix.schema import gfx_hint

T = TypeVar("T")
MAX_SHARDS = 10_000  # far more jobs than any workflow starts
_SHARD = re.compile(r"([0-9]{1,5})/([0-9]{1,5})", re.ASCII)



@dataclass
class ImagePlan:
    content: CellSpec  # what the image is built from, labelled with and validated against
    cells: list[CellSpec] = field(default_factory=list)
    latest: bool = False  # this image also gets `latest`

    @property
    def tags(self) -> list[str]:
        """Every moving tag of the image, `latest` included where it goes to this image."""
        return tags.moving_tags([c.tag for c in self.cells], self.latest)


def plan_images(cells: list[CellSpec], latest: CellSpec | None = None) -> list[ImagePlan]:
    """Group cells by content cell, in matrix order; the image holding `latest`'s cell gets `latest`."""
    plans: dict[str, ImagePlan] = {}
    for cell in cells:
        content = cell.content_cell()
        key = content.model_dump_json(exclude={"line"})
        plan = plans.setdefault(key, ImagePlan(content))
        plan.cells.append(cell)
        plan.latest = plan.latest or cell == latest
    return list(plans.values())


def latest_cell(cells: list[CellSpec], default_os: str) -> CellSpec | None:
    """`latest`: the newest all-targets runtime ROCm image on the default OS (cpu when there is no ROCm)."""
    candidates = [c for c in cells if c.os == default_os and c.flavor == "runtime"
                  and c.content_cell().gfx in (ALL_TARGETS, None) and not c.explicit_tag]
    if not candidates:
        return None
    return max(candidates, key=lambda c: tags.latest_rank(c.rocm, c.torch))


def select(cells: list[CellSpec], names: list[str] | None, matrix: Path, match: str | None = None) -> list[CellSpec]:
    """Cells named by tag (a cell's own tag or the tag of the image it belongs to) and/or matching a glob."""
    if match is not None:
        chosen = [c for c in cells if fnmatch.fnmatchcase(c.tag, match)]
        if not chosen:
            close = difflib.get_close_matches(match, [c.tag for c in cells], n=3, cutoff=0.4)
            hint = f"; closest tags: {', '.join(close)}" if close else ""
            family = _gfx_in(match)
            if family:
                hint += f"; {family} (tags name families, e.g. '*_gfx94X-dcgpu_*')"
            raise usage_error("--match", f"{match!r} matches no cell (a glob: * any text, ? one character, [abc] "
                                         f"one of){hint}")
        cells = chosen
    if not names:
        return cells
    known = {c.tag for c in cells} | {c.content_cell().tag for c in cells}
    unknown = sorted(set(names) - known)
    if unknown:
        raise InputError([Problem(matrix, None, "--cell", f"no cell has tag {t!r}{_closest(t, known)}")
                          for t in unknown])
    return [c for c in cells if c.tag in names or c.content_cell().tag in names]


def _gfx_in(pattern: str) -> str | None:
    """A gfx target or GPU name inside a --match pattern: which family's tags to match instead."""
    for word in re.findall(r"[A-Za-z0-9]+", pattern):
        hint = gfx_hint(word) if re.fullmatch(r"gfx[0-9a-f]+|MI[0-9]+[A-Z]*", word, re.IGNORECASE) else None
        if hint:
            return hint
    return None


def _closest(name: str, known: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    return f"; closest: {', '.join(close)}" if close else ""


def shard(items: list[T], spec: str | None) -> list[T]:
    """K/N: the K-th of N interleaved slices (of images, or of workflow rows), so every shard gets a mix of small
    and large ones."""
    if spec is None:
        return items
    found = _SHARD.fullmatch(spec)  # ASCII digits only, a few of them: never int() of '²' or of 5,000 digits
    if not (found and 1 <= int(found[1]) <= int(found[2]) <= MAX_SHARDS):
        raise usage_error("--shard", f"{spec[:40]!r} is not K/N with 1 <= K <= N <= {MAX_SHARDS}")
    return items[int(found[1]) - 1::int(found[2])]


