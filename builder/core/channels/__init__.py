"""Wheel channels, one module each behind one interface (base.WheelChannel), listed here once: adding a channel is
one module, one name in ChannelName with its row of CHANNELS, its index in builder/data/compat.yaml, and its test
module (docs/architecture.md, "Adding an OS family or a wheel channel").

ChannelName is the one list of channel names: the matrix schema and CellSpec validate a channel with it (pydantic),
mypy holds CHANNELS' keys to it, and the check below holds it to the modules (cibuildwheel's `PlatformName`
Literal and `get_args`)."""

from __future__ import annotations

from typing import Literal, get_args

from builder.core.channels import local, pytorch, therock
from builder.core.channels.base import WheelChannel

ChannelName = Literal["pytorch", "therock", "local"]
CHANNELS: dict[ChannelName, WheelChannel] = {"pytorch": pytorch, "therock": therock, "local": local}
DEFAULT: ChannelName = "pytorch"

if tuple(CHANNELS) != get_args(ChannelName) or any(name != module.NAME for name, module in CHANNELS.items()):
    raise ImportError(f"builder.core.channels: CHANNELS {list(CHANNELS)} must list ChannelName "
                      f"{list(get_args(ChannelName))}, each under its module's NAME")


def of(name: str) -> WheelChannel:
    """The channel's module; a KeyError naming the known channels for any other name."""
    if name not in CHANNELS:
        raise KeyError(f"unknown wheel channel {name!r} (known: {', '.join(CHANNELS)})")
    return CHANNELS[name]
