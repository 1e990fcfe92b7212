"""Rows at the runner's disk, on both sides of it (issue 53, "Plans and rows"): a combination whose peak is exactly
the disk is one row, a byte less splits it by GPU family; an image that alone needs exactly the disk is planned, a
byte more is an error (exit 2) naming it; and a batch of rows (more rows than GitHub's jobs) peaks at the sum of
its rows' peaks (one job bakes them all), never the largest of them.

The budgets are the peaks the estimate gives (builder.publish.sizes), so the boundary is the planner's own: how
the estimate is made is tests/publish/test_sizes.py's. The split's boundaries are held where a split can help: with
fewer new bytes counted beyond the waves' footprints (NEW_FACTOR 0.4 of the installed bytes, below: about the model's
1.1 of the compressed ones before the compressible runs), a GPU family alone peaks below its whole combination.
With the measured factor a family alone can (its first wave brings the shared layers new: TheRock's
gfx110X-all devel image alone, 34.0 GiB, over its combination's 32.7), and then no split holds what the whole does
not: tests/publish/test_sizes_guards.py holds that error."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.errors import InputError
from builder.publish import rows, sizes
from builder.publish.runners import Runner
from builder.render.bakefile import group_of
from builder.render.dockerfile import RenderedCell, render_all
from testkit.matrices import FAMILIES, cpu_matrix, load_cells


@pytest.fixture
def splittable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wave's new bytes counted at 0.4 of what they install: a family's part peaks below its whole combination."""
    monkeypatch.setattr(sizes, "NEW_FACTOR", 0.4)


def combination(tmp_path: Path) -> tuple[str, list[RenderedCell]]:
    members = render_all(load_cells(tmp_path, FAMILIES))
    assert len({group_of(m) for m in members}) == 1 and len(members) == 6
    return group_of(members[0]), members


def peak(members: list[RenderedCell]) -> int:
    return sizes.peak_of([sizes.estimate(m) for m in members])


def test_a_combination_that_just_fits_is_one_row_and_a_byte_less_splits_it(
        tmp_path: Path, splittable: None) -> None:
    group, members = combination(tmp_path)
    whole = peak(members)
    [row] = rows.split(group, members, Runner("exact", whole))
    assert (row["group"], row["images"], row["peak_disk"], row["runner"]) == (group, 6, whole, "exact")
    parts = rows.split(group, members, Runner("short", whole - 1))
    assert len(parts) > 1 and all(r["group"].startswith(f"{group}-part") for r in parts)
    assert all(r["peak_disk"] <= whole - 1 for r in parts)
    assert sorted(t for r in parts for t in r["cells"].split()) == sorted(m.cell.tag for m in members)


def test_an_image_that_alone_needs_exactly_the_disk_is_planned_and_a_byte_more_is_an_error(
        tmp_path: Path, splittable: None) -> None:
    group, members = combination(tmp_path)
    need, tag = max((sizes.estimate(m).peak, m.cell.tag) for m in members)
    assert rows.split(group, members, Runner("exact", need))
    with pytest.raises(InputError) as info:
        rows.split(group, members, Runner("short", need - 1))
    [problem] = info.value.problems
    assert problem.key == "--runner-disk"
    assert problem.message.startswith(f"{tag} alone needs {sizes.gib(need)} of disk at its peak (estimated)")


def test_a_batch_peaks_at_the_sum_of_its_rows(tmp_path: Path) -> None:
    groups: dict[str, list[RenderedCell]] = {}
    for rendered in render_all(load_cells(tmp_path, cpu_matrix("'2.12.0'", "'2.13.0'"))):
        groups.setdefault(group_of(rendered), []).append(rendered)
    assert len(groups) == 2
    huge = Runner("huge", 1 << 50)
    single = rows.build_rows(groups, where=huge)
    [packed] = rows.build_rows(groups, limit=1, where=huge)
    assert len(single) == 2 and all(r["peak_disk"] > 0 for r in single)
    assert packed["peak_disk"] == single[0]["peak_disk"] + single[1]["peak_disk"]
    assert packed["images"] == 2 and packed["group"] == "batch-1-of-1"


def test_a_family_pair_that_just_fits_stays_together_and_packs_into_a_part_that_just_fits(
        tmp_path: Path, splittable: None) -> None:
    """Families packed in the order given: gfx94X-dcgpu, gfx110X-all, gfx1151. The budget is exactly the gfx110X
    pair's peak, which is also the peak of the gfx110X and gfx1151 pairs together (gfx1151's wave is smaller):
    the pair is kept whole (not split into images) and gfx1151 joins its part, while gfx94X before it cannot."""
    group, members = combination(tmp_path)
    family = {gfx: [m for m in members if m.cell.gfx == gfx] for gfx in ("gfx94X-dcgpu", "gfx110X-all", "gfx1151")}
    ordered = [m for pair in family.values() for m in pair]
    budget = peak(family["gfx110X-all"])
    assert peak(family["gfx110X-all"] + family["gfx1151"]) == budget < peak(ordered), "the boundary this test needs"
    parts = rows.split(group, ordered, Runner("exact", budget))
    assert [r["cells"].split() for r in parts] == [
        [m.cell.tag for m in family["gfx94X-dcgpu"]],
        [m.cell.tag for m in family["gfx110X-all"] + family["gfx1151"]]]
    assert [r["group"] for r in parts] == [f"{group}-part1-of-2", f"{group}-part2-of-2"]
    assert [r["peak_disk"] for r in parts] == [peak(family["gfx94X-dcgpu"]), budget]
    with pytest.raises(InputError, match="gfx110X-all_therock_devel alone needs"):  # a byte less: no runner holds it
        rows.split(group, ordered, Runner("short", budget - 1))
