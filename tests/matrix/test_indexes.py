"""builder/matrix/indexes.py: every drop reason names the line and the index the decision used."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.core import facts
from builder.core.facts import torch_minor
from builder.matrix.expand import Dropped, expand_matrix
from tests.fakes.checkout import ROOT

KINDS = {"per-family": "per-family index", "multi-arch": "multi-arch index (whl-multi-arch)",
         "whl-next": "whl-next index"}
SHORT = {"per-family": "whl/<family>/", "multi-arch": "whl-multi-arch", "whl-next": "whl-next"}
MATRIX_7_13 = ("matrix:\n  os: [ubuntu-24.04, ubuntu-22.04]\n  platform: [rocm7.13, rocm7.12, rocm7.14, rocm10.0]\n"
               "  torch: ['2.9.1', '2.11.0', '2.13.0']\n  gfx: [gfx90X-dcgpu, gfx908-dcgpu, gfx103X-dgpu, gfx1151, "
               "gfx101X-dgpu]\n  channel: [therock]\n")


def _expected(d: Dropped) -> str:
    """The line and index, from the data the decision reads: the cell's release as it meets the cell (7.13: its
    per-family release for a family and torch it serves), and the index that release publishes to."""
    cell = d.cell
    if cell.channel != "therock":
        return f"[decided on pytorch.org {cell.platform}, {cell.index_url}]"
    release = facts.compat().therock.get(cell.rocm or "")
    if release is None:
        return f"[decided on TheRock {cell.rocm}, {cell.index_url}]"
    view = release.view(cell.gfx, torch_minor(cell.torch))
    url = facts.compat().therock_index(view, cell.gfx)
    assert cell.index_url == url
    shown = "https://repo.amd.com/rocm/whl/<family>/" if view.index == "per-family" else url
    return f"[decided on TheRock {cell.rocm}, {KINDS[view.index]} {shown}]"


def _dropped(tmp_path: Path) -> list[Dropped]:
    user = tmp_path / "m.yaml"
    user.write_text(MATRIX_7_13, encoding="utf-8")
    found = [d for m in (ROOT / "matrix.yaml", user) for d in expand_matrix(m).dropped
             if not d.rule.startswith("exclude[")]
    assert {d.cell.therock_release.index for d in found if d.cell.therock_release} == set(KINDS)
    return found


def test_every_reason_ends_with_the_line_and_index_the_decision_used(tmp_path: Path) -> None:
    for d in _dropped(tmp_path):
        assert d.decided_on == _expected(d), d.cell.tag
        assert d.explained == f"{d.reason} {d.decided_on}"


def test_a_line_named_in_a_reason_is_named_with_its_own_index(tmp_path: Path) -> None:
    """`TheRock lines that do: 10.0 (whl-next)`: never the asking line's index for every line it lists."""
    releases = facts.compat().therock
    listed = 0
    for d in _dropped(tmp_path):
        for line, kind in re.findall(r"\b(\d+\.\d+) \((whl[^)]*)\)", d.reason):
            assert SHORT[releases[line].index] == kind, d.reason
            listed += 1
    assert listed


@pytest.mark.parametrize(("gfx", "torch", "index"), [("gfx1153", "2.9.1", "per-family index"),
                                                     ("gfx90X-dcgpu", "2.11.0", "multi-arch index")])
def test_7_13_names_the_index_of_the_release_that_serves_the_cell(tmp_path: Path, gfx: str, torch: str,
                                                                  index: str) -> None:
    """7.13 shipped per-family wheels beside the multi-arch ones: a family it built per family is decided on
    whl/<family>/ (gfx1153 without torch 2.9 there), one it did not on whl-multi-arch (gfx90X-dcgpu)."""
    user = tmp_path / "m.yaml"
    user.write_text(f"matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.13]\n  torch: ['{torch}']\n"
                    f"  gfx: [{gfx}, gfx1151]\n  channel: [therock]\n", encoding="utf-8")
    dropped = expand_matrix(user).dropped
    assert dropped and all(f"[decided on TheRock 7.13, {index}" in d.explained for d in dropped)
