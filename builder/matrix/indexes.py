"""The line and index a compatibility decision read, in the words every drop reason ends with.

A reason that names an index must name the one the decision used: 10.0 is on whl-next, not whl-multi-arch, and a
7.13 family may be on its per-family index or on the multi-arch one. Both come from the same data the rules read
(the cell's TheRock release as it meets that cell, and the index the cell installs from), never from separate text.
"""

from __future__ import annotations

from builder.core import channels, facts
from builder.core.spec import CellSpec

KIND_NAMES = {"per-family": "per-family index", "multi-arch": "multi-arch index (whl-multi-arch)",
              "whl-next": "whl-next index"}


SHORT_NAMES = {"per-family": "whl/<family>/", "multi-arch": "whl-multi-arch", "whl-next": "whl-next"}


def kind_name(kind: str) -> str:
    return KIND_NAMES[kind]


def short_name(kind: str) -> str:
    return SHORT_NAMES[kind]


def decision_source(cell: CellSpec) -> tuple[str, str]:
    """(line, index): `TheRock 7.13` and `per-family index https://repo.amd.com/rocm/whl/gfx1151/`, or
    `pytorch.org rocm7.2` and its URL. An index a matrix set itself (index_urls) is named as such."""
    line = channels.of(cell.channel).LINE.format(platform=cell.platform, rocm=cell.rocm or cell.platform)
    release = cell.therock_release
    if release is None:
        return line, cell.index_url
    if cell.index_url != facts.compat().therock_index(release, cell.gfx):
        return line, f"the matrix's index_urls.therock {cell.index_url}"
    # one index per family: named by its pattern, so that one reason reads once for all of a line's families
    per_family = facts.compat().indexes["therock-per-family"].replace("{family}", "<family>")
    url = per_family if release.index == "per-family" else cell.index_url
    return line, f"{kind_name(release.index)} {url}"


def decided_on(cell: CellSpec) -> str:
    line, index = decision_source(cell)
    return f"[decided on {line}, {index}]"
