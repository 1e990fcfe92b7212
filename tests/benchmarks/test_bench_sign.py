"""bench_sign's arithmetic: the least-squares line through the one-call runs, the runs taken in turns on digests
never signed twice, the table and the figures recorded. cosign itself is not run here (bench_sign is the run)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks import bench_sign
from benchmarks.bench_sign import EACH, ONE, Run
from benchmarks.support import cosigndeb, results, signing


def test_points_on_a_line_give_its_intercept_and_slope() -> None:
    line = bench_sign.fit([(k, 0.3 + 0.12 * k) for k in (1, 5, 20, 50, 1, 50)])
    assert line.call_s == pytest.approx(0.3) and line.digest_s == pytest.approx(0.12)
    assert line.max_s == pytest.approx(0.0, abs=1e-9)


def test_scattered_points_give_the_least_squares_line_and_its_residuals() -> None:
    # By hand: mean k 2, mean s 5/3, Sxy 1, Sxx 2 -> slope 1/2, intercept 2/3; residuals -1/6, 1/3, -1/6.
    line = bench_sign.fit([(1, 1.0), (2, 2.0), (3, 2.0)])
    assert (line.call_s, line.digest_s) == pytest.approx((2 / 3, 0.5))
    assert line.residuals == pytest.approx((-1 / 6, 1 / 3, -1 / 6))
    assert line.rms_s == pytest.approx(math.sqrt(1 / 18)) and line.max_s == pytest.approx(1 / 3)


def test_a_line_needs_two_sizes() -> None:
    with pytest.raises(ValueError, match="two sizes"):
        bench_sign.fit([(20, 8.0), (20, 9.0)])


def test_the_line_prices_one_call_and_a_call_per_digest() -> None:
    line = bench_sign.Fit(0.5, 0.25, (0.0,))
    assert line.of(ONE, 20) == pytest.approx(0.5 + 20 * 0.25)
    assert line.of(EACH, 20) == pytest.approx(20 * (0.5 + 0.25))


def test_both_kinds_of_run_give_a_call_and_a_digest_by_least_squares() -> None:
    # By hand: sums cc 6, cd 8, dd 14, cy 9, dy 13 -> call (14*9 - 8*13)/20 = 1.1, digest (6*13 - 8*9)/20 = 0.3.
    runs = [Run(ONE, 1, 1, 1.0, 0.0), Run(ONE, 3, 1, 2.0, 0.0), Run(EACH, 2, 2, 3.0, 0.0)]
    both = bench_sign.fit_both(runs)
    assert (both.call_s, both.digest_s) == pytest.approx((1.1, 0.3))
    assert both.residuals == pytest.approx((-0.4, 0.0, 0.2))
    exact = [Run(ONE, k, 1, 0.2 + 0.4 * k, 0.0) for k in (1, 50)] + [Run(EACH, 5, 5, 5 * 0.6, 0.0)]
    assert (bench_sign.fit_both(exact).call_s, bench_sign.fit_both(exact).digest_s) == pytest.approx((0.2, 0.4))


def test_runs_where_calls_and_digests_rise_together_cannot_be_split() -> None:
    with pytest.raises(ValueError, match="told apart"):
        bench_sign.fit_both([Run(EACH, k, k, 0.6 * k, 0.0) for k in (1, 5, 20)])


class Recording(signing.Cosign):
    """signing.Cosign as bench_sign uses it, without the binary: sign() notes its refs and takes 0.2 + 0.1 s each."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent/cosign"), Path("/nonexistent"))
        self.signed: list[list[str]] = []

    def sign(self, refs: list[str]) -> signing.Call:
        self.signed.append(refs)
        return signing.Call(len(refs), 0.2 + 0.1 * len(refs), 0.1 * len(refs))


def test_every_size_runs_in_turn_on_digests_never_signed_before() -> None:
    refs = [f"127.0.0.1:1/bench/sign@sha256:{n:064x}" for n in range(bench_sign.images_needed(2, (1, 3), (2, 4)))]
    cosign = Recording()
    runs = bench_sign.measure(cosign, refs[:-1], 2, per_digest=(1, 3), one_call=(2, 4))
    assert [(r.mode, r.k, r.calls) for r in runs] == 2 * [(ONE, 2, 1), (ONE, 4, 1), (EACH, 1, 1), (EACH, 3, 3)]
    signed = [ref for call in cosign.signed for ref in call]
    assert signed == refs[:-1]  # each once, in order; the last one is left for verify to refuse
    assert [len(call) for call in cosign.signed[:6]] == [2, 4, 1, 1, 1, 1]
    assert runs[3].wall_s == pytest.approx(3 * 0.3) and runs[3].cpu_s == pytest.approx(0.3)


def test_the_images_needed_cover_every_run_and_one_unsigned() -> None:
    assert bench_sign.images_needed(3) == 3 * (1 + 5 + 20 + 1 + 5 + 20 + 50) + 1


def runs_of(call_s: float, digest_s: float) -> list[Run]:
    one = [Run(ONE, k, 1, call_s + digest_s * k + noise, 0.1 * k) for k in (1, 5, 20, 50) for noise in (-0.1, 0.1)]
    each = [Run(EACH, k, k, k * (call_s + digest_s) * 1.1, 0.1 * k) for k in (1, 5, 20) for _ in range(2)]
    return one + each


def test_the_table_shows_each_size_against_the_line() -> None:
    runs = runs_of(0.2, 0.4)
    line = bench_sign.fit([(r.k, r.wall_s) for r in runs if r.mode == ONE])
    lines = bench_sign.table(runs, line)
    assert len(lines) == 2 + 4 + 3
    assert lines[2].startswith("| one call | 1 | 1 | 2 | 0.600 | 0.500-0.700 | 0.600 | 0.100 | 0.600 | 1.00 |")
    assert lines[-1].startswith("| a call per digest | 20 | 20 | 2 | 13.200 |") and lines[-1].endswith("| 1.10 |")


def test_the_figures_recorded() -> None:
    runs = runs_of(0.2, 0.4)
    wall = bench_sign.fit([(r.k, r.wall_s) for r in runs if r.mode == ONE])
    cpu = bench_sign.fit([(r.k, r.cpu_s) for r in runs if r.mode == ONE])
    found = bench_sign.figures(runs, wall, cpu, (0.05, 0.3))
    assert found["call_s"] == pytest.approx(0.2) and found["digest_s"] == pytest.approx(0.4)
    assert found["max_residual_s"] == pytest.approx(0.1) and found["rms_residual_s"] == pytest.approx(0.1)
    assert found["digest_cpu_s"] == pytest.approx(0.1) and found["call_cpu_s"] == pytest.approx(0.0, abs=1e-9)
    assert found["one_digest_call_s"] == pytest.approx(0.66) and found["one_digest_call_over_line"] == 1.1
    assert found["digest_less_key_s"] == pytest.approx(0.1) and found["key_load_s"] == 0.3
    both = bench_sign.fit_both(runs)
    assert (found["call_s_both"], found["digest_s_both"]) == (round(both.call_s, 4), round(both.digest_s, 4))
    assert found["call_s_both"] > found["call_s"]  # the calls made one per digest run 10% over the line
    assert (found["digests_signed"], found["calls"], found["repeats"]) == (2 * 76 + 2 * 26, 8 + 2 * 26, 2)


def test_the_key_load_is_public_key_less_a_bare_start() -> None:
    def call(wall_s: float) -> signing.Call:
        return signing.Call(0, wall_s, 0.0)
    pairs = [(call(0.1), call(0.5)), (call(0.2), call(0.4)), (call(0.05), call(0.9))]
    assert bench_sign.key_load(pairs) == pytest.approx((0.1, 0.4))


def test_the_notes_say_what_the_run_leaves_out_and_fit_a_recorded_run(tmp_path: Path) -> None:
    origin = cosigndeb.Origin(package="cosign", version="3.1.1-2", suite="sid", sha256="0" * 64,
                              url="http://deb.debian.org/debian/pool/main/c/cosign/cosign_3.1.1-2_amd64.deb",
                              fetched="2026-11-29T08:19:55+00:00")
    text = bench_sign.notes(origin)
    for words in ("3.1.1-2", "Not included", "OIDC token", "Fulcio certificate", "Rekor entry", "cannot reach"):
        assert words in text
    run = results.record("bench_sign", {"call_s": 0.2}, 0.5, text, folder=tmp_path, argv=["benchmarks/bench_sign.py"])
    assert results.load("bench_sign", folder=tmp_path) == [run]


@pytest.mark.parametrize("repeats", ["0", "21", "x"])
def test_a_repeat_count_out_of_range_is_a_usage_error(repeats: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_sign.main(["--repeats", repeats])
    assert exit_.value.code == 2
