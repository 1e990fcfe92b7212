"""The row benchmark: its scale factor (real sizes unless the disk forces one, and then the smallest it holds), its
options, and the figures a run records for bench_night."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import bench_row
from benchmarks.support import rowfigures, rowrun
from benchmarks.support.localregistry import LocalRegistry

GB = 10**9
BUDGET = 48 << 30  # builder.publish.sizes.DEFAULT_RUNNER_DISK
ROW_WHEELS = 19 * GB  # the largest row: 3 GB common, 1 GB torch, 25 targets x 0.6 GB


@pytest.mark.parametrize(("free_gb", "scale"), [(200, 1.0), (110, 1.0), (100, 2.0), (54, 2.0), (53, 4.0),
                                                (29, 4.0), (16, 8.0), (10, 16.0), (8, 32.0), (5, None)])
def test_the_scale_is_the_smallest_factor_this_disk_holds(free_gb: int, scale: float | None) -> None:
    assert bench_row.choose_scale(free_gb * GB, BUDGET, ROW_WHEELS) == scale


def test_a_run_needs_its_loop_filesystem_its_wheels_twice_and_what_no_scale_shrinks() -> None:
    assert bench_row.disk_needed(4, BUDGET, ROW_WHEELS) == BUDGET // 4 + 2 * ROW_WHEELS // 4 + bench_row.UNSCALED
    needs = [bench_row.disk_needed(s, BUDGET, ROW_WHEELS) for s in bench_row.SCALES]
    assert needs == sorted(needs, reverse=True) and needs[-1] > bench_row.UNSCALED


@pytest.mark.parametrize("text", ["0", "-2", "nan", "inf", "x"])
def test_a_scale_is_a_finite_number_above_zero(text: str) -> None:
    with pytest.raises((argparse.ArgumentTypeError, ValueError)):
        bench_row.positive(text)
    assert bench_row.positive("2.5") == 2.5


def test_the_options_default_to_one_publish_of_incompressible_wheels() -> None:
    args = bench_row.parse_args([])
    assert (args.installed_ratio, args.stages, args.rebuild, args.scale) == (1.0, False, False, None)
    args = bench_row.parse_args(["--scale", "4", "--stages", "--rebuild", "--installed-ratio", "2.7", "--families",
                                 "gfx1150"])
    assert (args.installed_ratio, args.stages, args.rebuild, args.scale, args.families) == (2.7, True, True, 4.0,
                                                                                           ["gfx1150"])


@pytest.mark.parametrize("text", ["0.5", "0", "-2", "nan", "inf", "x", "1e6"])
def test_an_installed_ratio_below_one_or_not_finite_is_a_usage_error(text: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_row.parse_args(["--installed-ratio", text])
    assert exit_.value.code == 2 and "--installed-ratio" in capsys.readouterr().err


def test_compressible_wheels_take_less_disk_and_a_locked_run_a_third_copy() -> None:
    plain = bench_row.disk_needed(4, BUDGET, ROW_WHEELS)
    assert bench_row.disk_needed(4, BUDGET, ROW_WHEELS, 2.7) == BUDGET // 4 + int(2 * ROW_WHEELS / 4 / 2.7) + \
        bench_row.UNSCALED < plain
    assert bench_row.disk_needed(4, BUDGET, ROW_WHEELS, 1.0, 3) == plain + ROW_WHEELS // 4


def outcome(tmp_path: Path, stages: rowrun.Stages | None, rebuild: rowrun.Publish | None) -> rowrun.Outcome:
    measured = rowfigures.Measured(returncode=0, record=tmp_path / "r.json", registry=LocalRegistry(tmp_path),
                                   uploaded=6_000, wall=1000.0, budget=12_000, empty=100, before=300, peak=7_100,
                                   final=5_100, held=frozenset())
    figures = rowfigures.Figures(measured, 30, 30, 0, 5_900, 6_050, 2_000, 7_300, 19_000)
    return rowrun.Outcome(figures, stages, rebuild, 30 if rebuild else 0, 30 if rebuild else 0)


def test_a_run_records_the_publish_the_stages_per_stage_and_the_rebuild_against_the_cold_wall(tmp_path: Path) -> None:
    row = rowfigures.Row((("gfx1150", 1), ("gfx103X-all", 7)), 1000, 150, 2.64)
    rebuilt = rowrun.Publish(0, 250.0, tmp_path / "b.json", 900, tmp_path / "b.log")
    found = bench_row.recorded(outcome(tmp_path, rowrun.Stages(0, 120.0, 2, 0, 800), rebuilt), row, 4.0, 2.7)
    assert {k: found[k] for k in ("scale", "images", "families", "device_packages", "wall_s", "peak_bytes",
                                  "budget_bytes", "uploaded_bytes", "stored_bytes", "new_bytes",
                                  "model_peak_bytes", "installed_ratio", "achieved_ratio")} == {
        "scale": 4.0, "images": 30.0, "families": 2.0, "device_packages": 8.0, "wall_s": 1000.0,
        "peak_bytes": 7_000.0, "budget_bytes": 12_000.0, "uploaded_bytes": 6_000.0, "stored_bytes": 6_050.0,
        "new_bytes": 5_900.0, "model_peak_bytes": 7_300.0, "installed_ratio": 2.7, "achieved_ratio": 2.64}
    assert (found["stages_s"], found["stages_count"], found["stage_s"]) == (120.0, 2.0, 60.0)
    assert (found["rebuild_wall_s"], found["rebuild_images"], found["rebuild_uploaded_bytes"],
            found["rebuild_per_cold"]) == (250.0, 30.0, 900.0, 0.25)


def test_without_stages_or_rebuild_or_when_they_failed_their_figures_are_absent(
        tmp_path: Path) -> None:
    row = rowfigures.Row((("gfx1150", 1),), 1000, 150, 1.0)
    found = bench_row.recorded(outcome(tmp_path, None, None), row, 1.0, 1.0)
    assert not {k for k in found if k.startswith(("stage", "rebuild"))}
    none_built = bench_row.recorded(outcome(tmp_path, rowrun.Stages(0, 3.0, 0, 0, 0), None), row, 1.0, 1.0)
    assert none_built["stages_count"] == 0 and "stage_s" not in none_built
    assert outcome(tmp_path, None, None).ok() and not outcome(tmp_path, None, None).failed()
    failed = outcome(tmp_path, rowrun.Stages(2, 3.0, 0, 0, 0),
                     rowrun.Publish(1, 5.0, tmp_path / "b.json", 0, tmp_path / "b.log"))
    assert failed.ok() and failed.failed() == ["builder stages exited 2: its figures left out",
                                               "the rebuild's publish exited 1: its figures left out"]
    assert not {k for k in bench_row.recorded(failed, row, 1.0, 1.0) if k.startswith(("stage", "rebuild"))}
