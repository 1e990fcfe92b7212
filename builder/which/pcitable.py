"""GPU identities: the PCI table (builder/data/pci_ids.yaml, cited) and gfx target names and families."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from builder.core import facts

AMD = 0x1002
KFD_NODES = Path("sys/class/kfd/kfd/topology/nodes")
PCI_DEVICES = Path("sys/bus/pci/devices")
DISPLAY, ACCELERATOR = 0x03, 0x12  # PCI base classes: display controller; processing accelerator (MI300 and later)
TARGET_RE = re.compile(r"gfx[0-9]{1,2}[0-9a-f]{2}")
ROCM_RE = re.compile(r"(?:rocm)?([0-9]+\.[0-9]+(?:\.[0-9]+)?)")
OTHER_VENDORS = {0x10DE: "NVIDIA", 0x8086: "Intel", 0x1A03: "ASPEED (a server's BMC)", 0x102B: "Matrox",
                 0x1AF4: "virtio", 0x1234: "QEMU", 0x15AD: "VMware"}
OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
RISK = ("unsupported by AMD (a debugging aid): kernels built for another target can fault (memory access fault, "
        "GPU page fault) or hang the GPU, and it applies to every GPU the container sees")
MAX_ALTERNATIVES = 4
FLAVORS = ("runtime", "devel")



# -- the PCI table (builder/data/pci_ids.yaml) -------------------------------------------------------------

class PciGpu(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str
    name: str
    kind: Literal["dgpu", "igpu"]
    revisions: dict[str, str] = {}

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        if not TARGET_RE.fullmatch(value):
            raise ValueError(f"not a gfx target: {value!r}")
        return value

    @field_validator("revisions")
    @classmethod
    def _revisions(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not re.fullmatch(r"[0-9a-f]{2}", k)]
        if bad:
            raise ValueError(f"revisions are two lower-case hex digits, quoted: {bad}")
        return value


class PciTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    vendor: str
    devices: dict[str, PciGpu]
    igpu_targets: tuple[str, ...]
    overrides: dict[str, str]

    @field_validator("devices")
    @classmethod
    def _devices(cls, value: dict[str, PciGpu]) -> dict[str, PciGpu]:
        bad = [k for k in value if not re.fullmatch(r"[0-9a-f]{4}", k)]
        if bad:
            raise ValueError(f"device IDs are four lower-case hex digits, quoted: {bad}")
        return value

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [f"{k}: {v}" for k, v in value.items() if not (TARGET_RE.fullmatch(k) and gfx_from_override(v))]
        if bad:
            raise ValueError(f"overrides map a target to X.Y.Z: {bad}")
        return value

    def lookup(self, device_id: int | None) -> PciGpu | None:
        return self.devices.get(f"{device_id:04x}") if device_id is not None else None


@cache
def pci_table() -> PciTable:
    return PciTable.model_validate(facts.package_data("pci_ids.yaml"))


# -- gfx names -------------------------------------------------------------------------------------------

def gfx_name(major: int, minor: int, stepping: int) -> str | None:
    """9.0.12 -> gfx90c, 9.4.2 -> gfx942, 11.5.1 -> gfx1151: minor and stepping are one hex digit each."""
    if major <= 0 or not (0 <= minor < 16 and 0 <= stepping < 16):
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def gfx_from_version(value: int) -> str | None:
    """KFD's gfx_target_version (110000, 90402, 90012) -> gfx1100, gfx942, gfx90c; 0 (a CPU node) -> None."""
    return gfx_name(value // 10000, value // 100 % 100, value % 100) if value > 0 else None


def gfx_from_override(value: str) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION's X.Y.Z (10.3.0) -> the target every GPU then poses as (gfx1030)."""
    parts = value.split(".")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() and len(p) <= 4 for p in parts):
        return None
    return gfx_name(*(int(p) for p in parts))


def families_of(target: str | None) -> list[str]:
    """The gfx families (builder/data/gfx.yaml) that hold a target."""
    return [name for name, fam in facts.gfx_families().items() if target in fam.targets]
