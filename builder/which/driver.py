"""The host's amdgpu kernel driver against the recommended image's driver range (builder/data/drivers.yaml).

AMD's packaged driver says its version in /sys/module/amdgpu/version; the distribution's in-kernel driver has no
such file, and its version is the kernel release, for which AMD states no ROCm range. When the recommended image
does not fit, the answer names the newest image of the same choice that does, else the driver to install.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.core import drivers
from builder.core.spec import CellSpec
from builder.smoke.torch_smoke import hostdriver
from builder.which.images import image_json


def install_advice(cell: CellSpec) -> str | None:
    """'AMD GPU Driver 31.50 (amdgpu-dkms; 6.4.x-31.50.x)': the newest release AMD supports the image's line with."""
    line = drivers.rocm_line(cell.rocm)
    found = drivers.drivers().supported(line) if line else []
    return f"AMD GPU Driver {found[-1].release} (amdgpu-dkms; {drivers.range_text(line)})" if found else None


def release_of(version: str) -> str | None:
    """The AMD GPU Driver release a module version is, where AMD's table and the packages read say so."""
    rows = [{"release": r.release, "module": r.module} for r in drivers.drivers().releases]
    at = hostdriver.place(version, rows)
    return str(rows[int(at[0])]["release"]) if at and at[0] == at[1] else None


def check(root: Path, best: CellSpec | None, options: list[CellSpec], registry: str | None,
          loaded: bool = False) -> dict[str, Any]:
    """What `builder which --json` says under host_driver; `options` are the recommendation's images, best first;
    `loaded`: the KFD topology shows amdgpu loaded (so a missing /sys/module/amdgpu means unreadable, not absent)."""
    host = hostdriver.read_host_driver(root)
    entry: dict[str, Any] = {"kind": host.kind, "version": host.version or None,
                             "release": release_of(host.version) if host.kind == "packaged" else None,
                             "image_range": None, "verdict": None, "fits": None, "message": None, "fix": None,
                             "fitting_image": None, "install": None}
    if best is None or best.rocm is None:
        return entry
    if host.kind == "none" and loaded:
        entry.update(verdict="unknown", message=f"amdgpu is loaded (KFD topology) but {root / hostdriver.MODULE_DIR} "
                                                "is not readable: its version is not known")
        return entry
    verdict = hostdriver.verdict(host, drivers.driver_range(best.rocm))
    entry.update(image_range=drivers.range_text(drivers.rocm_line(best.rocm)), verdict=verdict.status,
                 fits=verdict.fits, message=f"{best.tag}: {verdict.detail}", fix=verdict.fix or None)
    if verdict.status == "fits":
        return entry
    fitting = next((c for c in options if c.rocm and hostdriver.verdict(host, drivers.driver_range(c.rocm)).fits), None)
    if fitting is not None:
        entry["fitting_image"] = image_json(fitting, registry)
    entry["install"] = install_advice(best)
    return entry


def note(entry: dict[str, Any]) -> str | None:
    """The driver verdict as one line of `builder which`'s notes."""
    if entry["verdict"] in (None, "unknown"):
        return None
    text = f"host driver: {entry['message']}"
    if entry["verdict"] == "fits":
        return text
    if entry["fitting_image"]:
        text += f"; the newest image that fits this driver: {entry['fitting_image']['tag']}"
    if entry["install"]:
        text += f"; or install {entry['install']}"
    return text
