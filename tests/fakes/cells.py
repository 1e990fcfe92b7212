"""Cells made field by field, for the tests of one variant module (a channel, an OS family)."""

from __future__ import annotations

from builder.core.spec import CellSpec


def cell(**overrides: object) -> CellSpec:
    fields: dict[str, object] = {"image": "pytorch", "os": "ubuntu-24.04", "platform": "rocm7.14", "torch": "2.13.0",
                                 "flavor": "runtime", "index_url": "https://x/", "tag": "t", "source_url": "https://x/",
                                 "gfx": "gfx110X-all", "channel": "therock"}
    return CellSpec.model_validate(fields | overrides)
