"""The synthetic ROCm wheels' payload: it compresses about the ratio asked for (1/ratio random, the rest a
repeated block), and each ratio has its own wheel cache."""

from __future__ import annotations

import gzip

import pytest

from benchmarks.support import rocmwheels

MIB = 1 << 20


@pytest.mark.parametrize("ratio", [1.0, 2.0, 2.7, 4.0])
def test_the_payload_compresses_about_the_ratio_asked_for(ratio: float) -> None:
    achieved = rocmwheels.achieved_ratio(ratio, sample=4 * MIB)
    assert 0.95 * ratio <= achieved <= 1.01 * ratio


@pytest.mark.parametrize("ratio", [1.0, 2.7])
def test_the_payload_has_exactly_the_installed_bytes_asked_for(ratio: float) -> None:
    size = 3 * MIB + MIB // 2 + 17
    chunks = list(rocmwheels.payload_chunks(size, ratio))
    assert sum(map(len, chunks)) == size and all(len(c) <= rocmwheels.CHUNK for c in chunks)


def test_an_incompressible_payload_has_no_repeated_part() -> None:
    data = b"".join(rocmwheels.payload_chunks(2 * MIB, 1.0))
    assert len(gzip.compress(data, compresslevel=6)) >= len(data)


def test_each_ratio_has_its_own_cache_folder_and_its_specs_carry_it() -> None:
    keys = [rocmwheels.ratio_key(r) for r in (1.0, 2.0, 2.7, 2.75, 4.0)]
    assert keys[:2] == ["-random", ""] and len(set(keys)) == len(keys)
    sizes = rocmwheels.Sizes(common=MIB, device=MIB, torch=MIB, numpy=MIB)
    assert {s.ratio for s in rocmwheels.specs(sizes, ["gfx1150"], 2.7)} == {2.7}


@pytest.mark.parametrize("ratio", [0.5, 0.0, -1.0, float("nan"), float("inf"), 1e6])
def test_a_ratio_below_one_or_not_finite_is_refused(ratio: float) -> None:
    with pytest.raises(ValueError, match="installed/compressed"):
        rocmwheels.check_ratio(ratio)
