"""pytorch.org's devel SDK (issue 53, "Channel data"): a devel image installs the AMD ROCm patch release its
wheels were built on (rocm7.2 -> 7.2.1, rocm7.1 -> 7.1.1: builder/data/compat.yaml, cited there), never the bare
line, and no SDK where the data says none (rocm7.14 on torch 2.14: `"7.14": null`)."""

from __future__ import annotations

import pytest

from builder.core.channels import pytorch
from tests.fakes.cells import cell


@pytest.mark.parametrize(("torch", "platform", "sdk"), [
    ("2.13.0", "rocm7.2", "7.2.1"), ("2.13.0", "rocm7.1", "7.1.1"), ("2.11.0", "rocm7.2", "7.2.1"),
    ("2.12.1", "rocm7.1", "7.1.1"), ("2.14.0", "rocm7.2", "7.2.1"), ("2.14.0", "rocm7.14", None),
    ("2.13.0", "cpu", None),
])
def test_the_sdk_is_the_patch_release_the_wheels_were_built_on(torch: str, platform: str, sdk: str | None) -> None:
    c = cell(channel="pytorch", platform=platform, torch=torch, gfx=None if platform == "cpu" else "gfx94X-dcgpu")
    assert pytorch.sdk_rocm(c) == sdk


def test_only_a_devel_image_on_a_suite_amd_serves_gets_the_sdk() -> None:
    devel = cell(channel="pytorch", platform="rocm7.2", gfx="gfx94X-dcgpu", flavor="devel", os="ubuntu-24.04")
    assert pytorch.has_rocm_sdk(devel) and pytorch.os_sdk_release(devel) == "7.2.1"
    runtime = cell(channel="pytorch", platform="rocm7.2", gfx="gfx94X-dcgpu", os="ubuntu-24.04")
    assert not pytorch.has_rocm_sdk(runtime) and pytorch.os_sdk_release(runtime) is None
    none = cell(channel="pytorch", platform="rocm7.14", torch="2.14.0", gfx="gfx94X-dcgpu", flavor="devel")
    assert not pytorch.has_rocm_sdk(none) and pytorch.os_sdk_release(none) is None
    debian = cell(channel="pytorch", platform="rocm7.2", gfx="gfx94X-dcgpu", flavor="devel", os="debian-12")
    assert not pytorch.has_rocm_sdk(debian)  # AMD documents no Debian suite of its repository
