"""The wheel channels' registry and interface (builder/core/channels/__init__.py, base.py): every channel module
has every name of the interface; the helpers every channel shares."""

from __future__ import annotations

import pytest

from builder.core import channels
from builder.core.channels import base
from builder.core.channels.base import WheelChannel
from tests.fakes.cells import cell


@pytest.mark.parametrize("name", sorted(channels.CHANNELS))
def test_every_channel_module_has_every_name_of_the_interface(name: str) -> None:
    module = channels.of(name)
    wanted = {n for n in vars(WheelChannel) if not n.startswith("_")} | set(WheelChannel.__annotations__)
    assert not sorted(n for n in wanted if not hasattr(module, n))
    assert name == module.NAME


def test_rocm_is_the_platforms_line_and_torch_minor_its_first_two_parts() -> None:
    assert base.rocm(cell(platform="rocm7.14")) == "7.14" and base.rocm(cell(platform="cpu", gfx=None)) is None
    assert base.torch_minor("2.13.0") == "2.13" and base.torch_minor("2.10") == "2.10"


def test_an_unknown_channel_is_no_channel() -> None:
    with pytest.raises(KeyError):
        channels.of("conda")
    assert channels.of(channels.DEFAULT).NAME == channels.DEFAULT
