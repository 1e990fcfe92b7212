"""The wheel channels' registry and interface (builder/core/channels/__init__.py, base.py): the helpers every
channel shares. Every listed module against the interface: tests/core/test_registries.py."""

from __future__ import annotations

import pytest

from builder.core import channels, facts
from builder.core.channels import base
from tests.fakes.cells import cell


def test_rocm_is_the_platforms_line_and_torch_minor_its_first_two_parts() -> None:
    assert base.rocm(cell(platform="rocm7.14")) == "7.14" and base.rocm(cell(platform="cpu", gfx=None)) is None
    assert facts.torch_minor("2.13.0") == "2.13" and facts.torch_minor("2.10") == "2.10"


def test_an_unknown_channel_is_no_channel() -> None:
    with pytest.raises(KeyError):
        channels.of("conda")
    assert channels.of(channels.DEFAULT).NAME == channels.DEFAULT
