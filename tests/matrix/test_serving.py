"""builder.matrix.serving: which lines serve a gfx family, as the second half of a drop reason."""

from __future__ import annotations

import re

import pytest

from builder.core import facts
from builder.matrix import serving

FAMILIES = sorted(facts.gfx_families())


@pytest.mark.parametrize("family", FAMILIES)
def test_dev_only_lists_the_familys_own_targets_that_are_on_dev_indexes_only(family: str) -> None:
    dev = serving.dev_only(family)
    assert set(dev) <= set(facts.compat().therock_dev_only_targets)
    assert set(dev) <= set(facts.gfx_families()[family].targets)
    assert set(dev) == set(facts.gfx_families()[family].targets) & set(facts.compat().therock_dev_only_targets)


@pytest.mark.parametrize("family", FAMILIES)
def test_therock_lines_are_released_lines_only(family: str) -> None:
    therock = facts.compat().therock
    assert all(not therock[line].prerelease for line in serving.therock_lines(family))


@pytest.mark.parametrize("family", FAMILIES)
def test_pytorch_indexes_carry_every_target_of_the_family(family: str) -> None:
    targets = set(facts.gfx_families()[family].targets)
    for rocm, minors in serving.pytorch_indexes(family).items():
        for minor in minors:
            assert targets <= set(facts.compat().torch[minor].pytorch.targets(rocm))


@pytest.mark.parametrize("family", FAMILIES)
def test_who_serves_names_at_most_two_pytorch_indexes_or_says_nothing(family: str) -> None:
    said = serving.who_serves(family)
    assert len(re.findall(r"rocm[\d.]+ \(torch", said)) <= 2
    served = serving.therock_lines(family) or serving.pytorch_indexes(family)
    assert said.startswith("nothing: ") != bool(served)


def test_a_family_no_stable_index_serves_says_nothing() -> None:
    """gfx90c: its device packages are on TheRock's dev index only and no pytorch.org wheel carries it."""
    assert serving.who_serves("gfx90c-igpu").startswith("nothing: no TheRock line")


def test_span_orders_torch_minors_as_versions() -> None:
    assert serving._span(["2.11", "2.9", "2.14"]) == "2.9-2.14"
    assert serving._span(["2.11"]) == "2.11"
