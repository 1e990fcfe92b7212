"""bench_compression's equal-work order and its noise test (benchmarks/bench_compression.py)."""

from __future__ import annotations

from benchmarks.bench_compression import order, permutation_p


def test_pulls_alternate_abba_with_equal_counts() -> None:
    assert order(3) == ["gzip", "zstd", "zstd", "gzip", "gzip", "zstd"]
    assert order(8).count("gzip") == order(8).count("zstd") == 8


def test_a_12_percent_gap_beyond_the_spread_is_told_from_noise() -> None:
    gzip = [16.0, 16.3, 15.8, 16.1, 16.2, 15.9, 16.0, 16.1]
    zstd = [v * 0.88 for v in gzip]
    assert permutation_p(gzip, zstd) < 0.05


def test_a_gap_inside_the_spread_is_not() -> None:
    gzip = [14.2, 16.3, 16.5, 13.9, 15.0, 16.8, 14.4, 15.5]
    zstd = [16.4, 14.3, 13.9, 16.2, 15.1, 14.0, 16.6, 15.2]
    assert permutation_p(gzip, zstd) > 0.5
