"""TheRock's wheel channel (builder/core/channels/therock.py): its release's local version, its index, its SDK."""

from __future__ import annotations

from builder.core import facts
from builder.core.channels import therock
from tests.fakes.cells import cell


def test_therock_pins_the_release_local_version_and_splits_per_target() -> None:
    release = facts.compat().therock["7.14"]
    c = cell()
    assert therock.local_version(c) == f"+{release.local}"
    assert therock.torch_wheel(c) == f"2.13.0+{release.local}" == c.torch_wheel
    assert therock.splits_per_target(c) is release.device_extras
    assert therock.index_url("rocm7.14", "gfx110X-all", "2.13.0", {"therock": "https://mirror/"}) == "https://mirror/"
    assert therock.os_sdk_release(c) is None
    assert therock.has_rocm_sdk(cell(flavor="devel")) and not therock.has_rocm_sdk(c)
