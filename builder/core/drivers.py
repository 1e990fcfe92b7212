"""The kernel driver range each ROCm line is supported with (builder/data/drivers.yaml, sources there).

One answer per image, in the shape torch-smoke reads from cell.json (builder.smoke.torch_smoke.hostdriver): the
releases of AMD's driver inside the line's span, oldest first, each marked supported or not, and the range as text.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from packaging.version import Version
from pydantic import BaseModel, ConfigDict, field_validator

from builder.core.facts import _load


class DriverRelease(BaseModel):
    """One row of AMD's table: an AMD GPU Driver release, its module version, the ROCm lines it supports."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    release: str  # 30.30
    module: str | None  # what /sys/module/amdgpu/version reads: 6.16.13; None where no package was read
    rocm: tuple[str, ...] | None  # ROCm lines (X.Y); None: AMD's table has no row for the release

    @field_validator("release")
    @classmethod
    def _release(cls, value: str) -> str:
        Version(value)
        return value


class Drivers(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    rule: str
    releases: tuple[DriverRelease, ...]  # oldest first
    not_stated: dict[str, str] = {}  # ROCm line -> what its own documents say instead

    def supported(self, line: str) -> list[DriverRelease]:
        return [r for r in self.releases if r.rocm and line in r.rocm]


@cache
def drivers() -> Drivers:
    data = Drivers.model_validate(_load("drivers.yaml"))
    keys = [Version(r.release) for r in data.releases]
    assert keys == sorted(keys), "drivers.yaml: releases out of order"
    return data


def rocm_line(rocm: str | None) -> str | None:
    """'6.2.4' -> '6.2', '10.0' -> '10.0': AMD's table names ROCm lines by major.minor."""
    return ".".join(rocm.split(".")[:2]) if rocm else None


def range_text(line: str | None) -> str:
    """'6.4.x-31.50.x', or 'not stated' where no row lists the line."""
    found = drivers().supported(line) if line else []
    return f"{found[0].release}.x-{found[-1].release}.x" if found else "not stated"


def driver_range(rocm: str | None) -> dict[str, Any] | None:
    """cell.json's amdgpu_driver for an image of this ROCm release; None for a CPU image."""
    line = rocm_line(rocm)
    if line is None:
        return None
    table = drivers()
    found = table.supported(line)
    rows: list[dict[str, Any]] = []
    if found:
        first, last = table.releases.index(found[0]), table.releases.index(found[-1])
        rows = [{"release": r.release, "module": r.module, "supported": r in found}
                for r in table.releases[first:last + 1]]
    return {"rocm": line, "range": range_text(line) if found else None, "releases": rows,
            "not_stated": None if found else table.not_stated.get(line, "AMD's driver table lists no driver for it"),
            "source": table.source}
