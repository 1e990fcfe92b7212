"""The wheel channels (builder/core/channels/): every channel module has the interface, and each answers for its
own cells: TheRock's local versions and index, pytorch.org's `+rocmX.Y`, a wheelhouse's wheels as they are."""

from __future__ import annotations

import pytest

from builder.core import channels, facts
from builder.core.channels import local, pytorch, therock
from builder.core.channels.base import WheelChannel
from builder.core.spec import CellSpec


def cell(**overrides: object) -> CellSpec:
    fields: dict[str, object] = {"image": "pytorch", "os": "ubuntu-24.04", "platform": "rocm7.14", "torch": "2.13.0",
                                 "flavor": "runtime", "index_url": "https://x/", "tag": "t", "source_url": "https://x/",
                                 "gfx": "gfx110X-all", "channel": "therock"}
    return CellSpec.model_validate(fields | overrides)


@pytest.mark.parametrize("name", sorted(channels.CHANNELS))
def test_every_channel_module_has_every_name_of_the_interface(name: str) -> None:
    module = channels.of(name)
    wanted = {n for n in vars(WheelChannel) if not n.startswith("_")} | set(WheelChannel.__annotations__)
    assert not sorted(n for n in wanted if not hasattr(module, n))
    assert name == module.NAME


def test_therock_pins_the_release_local_version_and_splits_per_target() -> None:
    release = facts.compat().therock["7.14"]
    c = cell()
    assert therock.local_version(c) == f"+{release.local}"
    assert therock.torch_wheel(c) == f"2.13.0+{release.local}" == c.torch_wheel
    assert therock.splits_per_target(c) is release.device_extras
    assert therock.index_url("rocm7.14", "gfx110X-all", "2.13.0", {"therock": "https://mirror/"}) == "https://mirror/"
    assert therock.os_sdk_release(c) is None
    assert therock.has_rocm_sdk(cell(flavor="devel")) and not therock.has_rocm_sdk(c)


def test_pytorch_names_its_line_in_the_wheel_and_shares_the_all_targets_image() -> None:
    c = cell(channel="pytorch", platform="rocm7.2", gfx="gfx94X-dcgpu")
    assert pytorch.torch_wheel(c) == "2.13.0+rocm7.2" and pytorch.local_version(c) == ""
    assert pytorch.torch_wheel(cell(channel="pytorch", platform="cpu", gfx=None)) == "2.13.0"
    assert pytorch.SHARES_ALL_TARGETS_IMAGE and c.content_cell().gfx == "all"
    assert pytorch.index_url("rocm7.2", None, "2.13.0", {}) == \
        facts.compat().indexes["pytorch"].format(platform="rocm7.2")
    assert not pytorch.NAMED_IN_TAGS and therock.NAMED_IN_TAGS and local.NAMED_IN_TAGS


def test_local_wheels_are_taken_as_they_are() -> None:
    c = cell(channel="local", platform="rocm7.14")
    assert local.torch_wheel(c) == "2.13.0" and local.release(c) is None and not local.has_rocm_sdk(c)
    assert local.splits_per_target(c) and not local.splits_per_target(cell(channel="local", gfx="all"))
