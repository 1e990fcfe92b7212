"""The row benchmark's scale factor: real sizes unless the disk forces one, and then the smallest it holds."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import bench_row

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
