"""Wheel channels, one module each behind one interface (base.WheelChannel), listed here: adding a channel is one
module and one row of CHANNELS (and its index in builder/data/compat.yaml)."""

from __future__ import annotations

from builder.core.channels import local, pytorch, therock
from builder.core.channels.base import WheelChannel

CHANNELS: dict[str, WheelChannel] = {"pytorch": pytorch, "therock": therock, "local": local}
DEFAULT = "pytorch"


def of(name: str) -> WheelChannel:
    return CHANNELS[name]
