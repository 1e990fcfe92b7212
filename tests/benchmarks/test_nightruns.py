"""benchmarks/support/nightruns.py: the night model's build and signing figures come from recorded runs, each named,
and a figure never recorded is an error naming the command that records it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.support import nightruns, results
from benchmarks.support.nightruns import row_wall_real


def run(**figures: float) -> results.Run:
    return results.Run(date="2026-11-29T09:00:00+00:00", commit="abc", command="python benchmarks/bench_row.py",
                       load=(1.0, 1.5), cores=2, figures=figures)


def cold(scale: float, wall: float, images: int = 30, **more: float) -> results.Run:
    return run(scale=scale, images=images, published=images, wall_s=wall, **more)


def test_a_row_s_wall_at_real_size_is_on_the_line_through_its_scaled_runs() -> None:
    assert row_wall_real({4.0: 100.0, 2.0: 150.0}) == 250.0  # 50 s a quarter of the bytes, 50 s fixed
    assert row_wall_real({2.0: 150.0, 4.0: 100.0}) == 250.0  # in any order
    assert row_wall_real({16.0: 90.0, 8.0: 90.0}) == 90.0  # time that does not grow with bytes stays


def test_a_cold_build_takes_the_largest_complete_row_at_its_two_smallest_scales() -> None:
    runs = [cold(2.0, 150.0), cold(4.0, 120.0), cold(4.0, 100.0),  # the newest run at a scale counts
            cold(1.0, 10.0, images=2),  # a one-family row is not the largest
            run(scale=8.0, images=30, published=12, wall_s=5.0),  # a row that stopped half-way
            cold(8.0, 1.0, installed_ratio=2.7),  # compressible wheels: another measure
            cold(4.0, 999.0, rebuild_wall_s=500.0, rebuild_images=30)]  # locked for its rebuild: another measure
    figure = nightruns.build_image(runs)
    assert figure.value == pytest.approx(250.0 / 30)
    assert "30 images" in figure.source and "1/2 (150 s" in figure.source and "1/4 (100 s" in figure.source
    assert "python benchmarks/bench_row.py" in figure.source


def test_a_rebuild_is_the_cold_build_times_the_share_one_run_measured() -> None:
    build = nightruns.Figure(50.0, "")
    runs = [cold(4.0, 300.0, rebuild_wall_s=60.0, rebuild_images=30)]
    assert nightruns.rebuild_image(runs, build).value == pytest.approx(10.0)
    with pytest.raises(nightruns.NotMeasured, match="--rebuild"):
        nightruns.rebuild_image([cold(4.0, 300.0)], build)


def test_a_stage_is_the_stages_job_over_its_stages() -> None:
    assert nightruns.stage([cold(4.0, 1.0, stages_s=90.0, stages_count=3)]).value == 30.0
    with pytest.raises(nightruns.NotMeasured, match="--stages"):
        nightruns.stage([cold(4.0, 1.0, stages_s=0.0, stages_count=0)])


def test_too_few_scales_is_not_measured() -> None:
    with pytest.raises(nightruns.NotMeasured, match="two scales"):
        nightruns.build_image([cold(4.0, 100.0)])


def test_signing_adds_keyless_round_trips_per_digest_to_what_cosign_measured(tmp_path: Path) -> None:
    with pytest.raises(nightruns.NotMeasured, match="bench_sign"):
        nightruns.signing(tmp_path)
    results.record("bench_sign", {"call_s_both": 0.07, "digest_s_both": 0.6, "key_load_s": 0.5}, 0.0, folder=tmp_path,
                   argv=["bench_sign.py"])
    call, digest = nightruns.signing(tmp_path)
    assert call.value == pytest.approx(0.07)  # cosign 3 has no per-call signer: nothing keyless per call
    network = nightruns.KEYLESS_REQUESTS * nightruns.SIGSTORE_RTT_S + nightruns.PUSH_REQUESTS * nightruns.REGISTRY_RTT_S
    assert digest.value == pytest.approx(0.1 + network)  # the key's decryption left out, the round trips added
    assert "assumed" in digest.source and "bench_sign.py" in call.source


def test_the_quick_night_reads_the_install_from_the_last_full_run(tmp_path: Path) -> None:
    with pytest.raises(nightruns.NotMeasured, match="without --quick"):
        nightruns.install(tmp_path)
    results.record("bench_night", {"install_uncached_s": 16.5, "install_cached_s": 3.7}, 0.0, folder=tmp_path,
                   argv=["bench_night.py"])
    assert [f.value for f in nightruns.install(tmp_path)] == [16.5, 3.7]
