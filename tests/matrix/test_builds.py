"""builder/matrix/builds.py: a TheRock line serves a family only where its own build defines it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.core import facts
from builder.core.facts import ALL_TARGETS
from builder.core.spec import CellSpec
from builder.matrix import builds
from builder.matrix.expand import expand_matrix
from tests.fakes.checkout import ROOT, builder_cli

RELEASED = [line for line, r in facts.compat().therock.items() if not r.prerelease]


def _defined(line: str, family: str) -> bool:
    """Straight from the copied CMake list, not through builds.py: the family (or the target it is named after)
    holds every target gfx.yaml gives it."""
    copy = facts.therock_builds()[line]
    members = copy.families.get(family, (family,) if family in copy.targets else ())
    return set(facts.gfx_families()[family].targets) <= set(members)


def _check(cells: list[CellSpec]) -> None:
    family_cells = [c for c in cells if c.channel == "therock" and c.gfx not in (None, ALL_TARGETS)]
    assert family_cells
    for cell in family_cells:
        assert cell.rocm in facts.therock_builds(), f"{cell.tag}: no copied target list of TheRock {cell.rocm}"
        assert _defined(cell.rocm, cell.gfx or ""), f"{cell.tag}: TheRock {cell.rocm}'s build does not define it"


def test_no_cell_of_the_production_matrix_names_a_family_its_lines_build_does_not_define() -> None:
    _check(expand_matrix(ROOT / "matrix.yaml").cells)


def test_no_generated_cell_names_a_family_its_lines_build_does_not_define(tmp_path: Path) -> None:
    """Every released line x every family of gfx.yaml x every torch the line builds: what the rules keep."""
    torch = sorted({f"{m}.0" for r in facts.compat().therock.values() for m in r.torch} - {"2.12.0"} | {"2.12.0"})
    file = tmp_path / "all.yaml"
    file.write_text(f"matrix:\n  os: [ubuntu-24.04]\n  platform: [{', '.join('rocm' + x for x in RELEASED)}]\n"
                    f"  torch: [{', '.join(repr(t) for t in torch)}]\n  gfx: [{', '.join(facts.gfx_families())}]\n"
                    "  channel: [therock]\n", encoding="utf-8")
    expansion = expand_matrix(file)
    _check(expansion.cells)
    assert {d.rule for d in expansion.dropped} >= {"therock-family-build"}


@pytest.mark.parametrize("line", RELEASED)
def test_every_per_family_family_is_a_family_of_the_lines_target_list(line: str) -> None:
    release = facts.compat().therock[line]
    per_family = release.families or (release.per_family.families if release.per_family else ())
    for family in per_family:
        assert _defined(line, family), f"TheRock {line} lists {family}, which its CMake target list does not define"


@pytest.mark.parametrize("line", ["7.9", "7.10", "7.11", "7.12", "7.13"])
def test_per_family_lists_are_the_workflows_choice_list_cut_to_what_the_build_defines(line: str) -> None:
    """compat.yaml's families and index_dirs are derived from the copies: the workflow's choice list, kept where the
    line's CMake defines the family with gfx.yaml's targets and its family matrix expects torch to build."""
    release = facts.compat().therock[line]
    source = release.per_family or release
    served = builds.per_family_served(line)
    assert set(source.families) == set(served)
    assert source.index_dirs == {f: asked for f, asked in served.items() if f != asked}


def test_7_13_serves_the_families_that_replaced_gfx90X_dcgpu_and_gfx103X_dgpu() -> None:
    assert not builds.defines("7.13", "gfx90X-dcgpu")
    assert builds.replacements("7.13", "gfx90X-dcgpu") == ["gfx908-dcgpu", "gfx90a-dcgpu", "gfx906-dgpu"]
    assert "gfx90X-dcgpu" in facts.therock_builds()["7.13"].release_workflow.families  # type: ignore[union-attr]
    assert builds.defines("7.13", "gfx103X-dgpu") and builds.defines("7.12", "gfx103X-dgpu")
    # before 7.12 the family held gfx1030 and gfx1032 only: not the family gfx.yaml names
    assert "only gfx1030, gfx1032, not gfx1031, gfx1034" in (builds.family_problem("7.10", "gfx103X-dgpu") or "")
    assert "expect_pytorch_failure" in (builds.family_problem("7.12", "gfx101X-dgpu") or "")


def test_every_copied_list_names_its_source_commit() -> None:
    for line, copy in facts.therock_builds().items():
        assert re.fullmatch(r"[0-9a-f]{40}", copy.commit), line
        assert copy.ref in (f"therock-{line}", "therock-7.9.0", f"release/therock-{line}",
                            "release/bkc/therock-10.1-20260811"), line
        if copy.release_workflow:
            assert re.fullmatch(r"[0-9a-f]{40}", copy.release_workflow.commit), line
    assert set(facts.therock_builds()) == set(facts.compat().therock)


def test_a_user_matrix_with_7_13_per_family_cells_keeps_no_gfx90X_dcgpu_and_says_what_replaced_it(
        tmp_path: Path) -> None:
    file = tmp_path / "m.yaml"
    file.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.13]\n  torch: ['2.11.0']\n"
                    "  gfx: [gfx90X-dcgpu, gfx908-dcgpu, gfx103X-all, gfx103X-dgpu]\n  channel: [therock]\n",
                    encoding="utf-8")
    cells = expand_matrix(file).cells
    assert sorted(c.gfx or "" for c in cells) == ["gfx103X-all", "gfx103X-dgpu", "gfx908-dcgpu"]
    assert {c.index_url for c in cells if c.gfx == "gfx103X-dgpu"} == {"https://repo.amd.com/rocm/whl/gfx103X-dgpu/"}
    run = builder_cli("matrix", "--matrix", str(file), "--explain")
    assert run.returncode == 0, run.stderr
    [line] = [t for t in run.stdout.splitlines() if t.startswith("  therock-family-build:")]
    assert "does not define gfx90X-dcgpu" in line and "therock-7.13 (6d2136cd)" in line
    assert all(f in line for f in ("gfx906-dgpu", "gfx908-dcgpu", "gfx90a-dcgpu"))

