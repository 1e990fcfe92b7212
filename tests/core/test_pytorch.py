"""pytorch.org's wheel channel (builder/core/channels/pytorch.py): its line in the wheel's version, and the
all-targets image its cells share."""

from __future__ import annotations

from builder.core import facts
from builder.core.channels import local, pytorch, therock
from tests.fakes.cells import cell


def test_pytorch_names_its_line_in_the_wheel_and_shares_the_all_targets_image() -> None:
    c = cell(channel="pytorch", platform="rocm7.2", gfx="gfx94X-dcgpu")
    assert pytorch.torch_wheel(c) == "2.13.0+rocm7.2" and pytorch.local_version(c) == ""
    assert pytorch.torch_wheel(cell(channel="pytorch", platform="cpu", gfx=None)) == "2.13.0"
    assert pytorch.SHARES_ALL_TARGETS_IMAGE and c.content_cell().gfx == "all"
    assert pytorch.index_url("rocm7.2", None, "2.13.0", {}) == \
        facts.compat().indexes["pytorch"].format(platform="rocm7.2")
    assert not pytorch.NAMED_IN_TAGS and therock.NAMED_IN_TAGS and local.NAMED_IN_TAGS
