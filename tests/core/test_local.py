"""A local wheelhouse's channel (builder/core/channels/local.py): its wheels taken as they are."""

from __future__ import annotations

from builder.core.channels import local
from tests.fakes.cells import cell


def test_local_wheels_are_taken_as_they_are() -> None:
    c = cell(channel="local", platform="rocm7.14")
    assert local.torch_wheel(c) == "2.13.0" and local.release(c) is None and not local.has_rocm_sdk(c)
    assert local.splits_per_target(c) and not local.splits_per_target(cell(channel="local", gfx="all"))
