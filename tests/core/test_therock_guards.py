"""TheRock's per-target split (issue 53, "Channel data"): the multi-arch lines (7.13 on) and any line the data does
not know split torch into per-target device packages; only the per-family lines 7.9-7.12 (each family its own
wheel, builder/data/compat.yaml) do not. An unknown line is split: its one wheel for every target is the 18.6 GB
device-all layer the channel refuses to ship (ROCm-docker#166)."""

from __future__ import annotations

import pytest

from builder.core.channels import therock
from tests.fakes.cells import cell


@pytest.mark.parametrize(("platform", "split"), [
    ("rocm7.9", False), ("rocm7.12", False), ("rocm7.13", True), ("rocm7.14", True), ("rocm10.0", True),
    ("rocm7.99", True), ("rocm11.0", True),
])
def test_multi_arch_and_unknown_lines_split_per_target_and_per_family_lines_do_not(platform: str,
                                                                                   split: bool) -> None:
    c = cell(platform=platform)
    assert therock.splits_per_target(c) is split
    assert (therock.release(c) is None) == (platform in ("rocm7.99", "rocm11.0"))


def test_an_unknown_line_has_no_local_version_and_no_sdk() -> None:
    c = cell(platform="rocm7.99", flavor="devel")
    assert therock.local_version(c) == "" and therock.torch_wheel(c) == "2.13.0"
    assert not therock.has_rocm_sdk(c)
