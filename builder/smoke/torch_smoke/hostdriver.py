"""The host's amdgpu kernel driver against the driver range an image's ROCm line is supported with.

The range comes from cell.json `amdgpu_driver` (builder/data/drivers.yaml, AMD's "AMD GPU Driver (amdgpu) |
Supported ROCm versions" table): the driver releases AMD lists for the line, oldest first, each with the version
its packaged module reports, and the releases inside that span AMD lists without the line.

What the host runs is read from files a container sees as the host's (sysfs and procfs are the host kernel's):
- /sys/module/amdgpu/version: AMD's packaged (DKMS) driver. It reads as the upstream kernel version the driver is
  based on ("6.16.13"), and in newer packages with the release after it ("6.19.14.31400000": release 31.40).
- /sys/module/amdgpu without a version file: the distribution's in-kernel driver (upstream amdgpu sets no
  MODULE_VERSION); its version is the kernel release, /proc/sys/kernel/osrelease, for which AMD states no range.
Pure functions of a root directory and a dict, so `builder which` uses them on the host and tests on fake trees.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODULE_DIR = "sys/module/amdgpu"
OSRELEASE = "proc/sys/kernel/osrelease"
MODULE_RE = re.compile(r"(\d{1,4})\.(\d{1,4})\.(\d{1,6})(?:\.(\d{8}))?(?:-\S{1,64})?")
RELEASE_RE = re.compile(r"\d{1,3}\.\d{1,3}")
MAX_READ = 4096


@dataclass(frozen=True)
class HostDriver:
    kind: str  # packaged | in-kernel | none
    version: str  # the module's version (packaged), the kernel release (in-kernel), "" (none)


@dataclass(frozen=True)
class Verdict:
    status: str  # fits | below | above | not-stated | in-kernel | no-driver | unknown
    detail: str
    fix: str = ""

    @property
    def fits(self) -> bool | None:
        """True or False where AMD's table decides it; None where it does not say."""
        return {"fits": True, "below": False, "above": False}.get(self.status)


def read_small(path: Path) -> str | None:
    """A regular file's first line, at most 4 KiB read: a FIFO planted under a fake root is never waited on."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            lines = fh.read(MAX_READ).decode("ascii", errors="replace").splitlines()
    except OSError:
        return None
    return lines[0].strip()[:128] if lines else ""


def read_host_driver(root: Path) -> HostDriver:
    module = root / MODULE_DIR
    version = read_small(module / "version")
    if version is not None:
        return HostDriver("packaged", version)
    if module.is_dir():
        return HostDriver("in-kernel", read_small(root / OSRELEASE) or "")
    return HostDriver("none", "")


def _release_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split("."))


def _module_key(text: str | None) -> tuple[int, int, int] | None:
    match = MODULE_RE.fullmatch(text or "")
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def release_code(version: str) -> str | None:
    """'6.19.14.31400000' -> '31.40': the release newer packages append (MMmmppbb)."""
    match = MODULE_RE.fullmatch(version)
    code = match[4] if match else None
    return f"{int(code[:2])}.{code[2:4]}" if code else None


def place(version: str, rows: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """The host's position among the rows: (i, i) for row i, (i, i + 1) for between rows i and i + 1 (-1 and
    len(rows) for before the first and after the last); None when the version is not a module version."""
    host = _module_key(version)
    if host is None:
        return None
    code = release_code(version)
    if code is not None:
        keys = [_release_key(str(r["release"])) for r in rows]
        target = _release_key(code)
        if target in keys:
            return float(keys.index(target)), float(keys.index(target))
        below = [i for i, k in enumerate(keys) if k < target]
        last = float(below[-1]) if below else -1.0
        return last, last + 1
    known = [(i, key) for i, r in enumerate(rows) if (key := _module_key(r.get("module"))) is not None]
    same = [(i, key) for i, key in known if key[:2] == host[:2]]
    if same:
        at_or_below = [i for i, key in same if key <= host]
        index = float(at_or_below[-1] if at_or_below else same[0][0])
        return index, index
    lower = [i for i, key in known if key < host]
    upper = [i for i, key in known if key > host]
    return (float(lower[-1]) if lower else -1.0), (float(upper[0]) if upper else float(len(rows)))


def _range_text(expect: Mapping[str, Any]) -> str:
    return str(expect.get("range") or "not stated")


def verdict(host: HostDriver, driver: Mapping[str, Any] | None) -> Verdict:
    """Whether the host's driver is one AMD supports the image's ROCm line with, and what to do if not."""
    if not driver:
        return Verdict("unknown", "this image names no driver range (cell.json amdgpu_driver)")
    line = driver.get("rocm")
    rows = [r for r in driver.get("releases") or [] if isinstance(r, Mapping) and RELEASE_RE.fullmatch(
        str(r.get("release")))]
    supported = [i for i, r in enumerate(rows) if r.get("supported")]
    wanted = _range_text(driver)
    if host.kind == "none":
        return Verdict("no-driver", "no amdgpu module on this host (/sys/module/amdgpu)",
                       f"install AMD's GPU driver (amdgpu-dkms {wanted} for ROCm {line}) and load it")
    if host.kind == "in-kernel":
        return Verdict("in-kernel", f"the distribution's in-kernel amdgpu (kernel {host.version or '?'}): AMD states "
                                    f"no ROCm range for it (its table covers its packaged driver only)",
                       f"if the GPU fails, install AMD's packaged driver (amdgpu-dkms {wanted}), supported with ROCm "
                       f"{line}")
    if not supported:
        why = driver.get("not_stated") or "AMD's driver table lists no driver for it"
        return Verdict("not-stated", f"amdgpu {host.version}; the driver range of ROCm {line} is not stated: {why}")
    at = place(host.version, rows)
    name = f"amdgpu {host.version}" + (f" (AMD GPU Driver {release_code(host.version)})"
                                       if release_code(host.version) else "")
    if at is None:
        return Verdict("unknown", f"{name}: not a version this check can read; ROCm {line} is supported with "
                                  f"amdgpu {wanted}")
    newest = rows[supported[-1]]["release"]
    lo, hi = at
    if lo == hi and int(lo) in supported:
        return Verdict("fits", f"{name} is AMD GPU Driver {rows[int(lo)]['release']}, supported with ROCm {line} "
                               f"(amdgpu {wanted})")
    if hi <= supported[0]:
        return Verdict("below", f"{name} is older than the drivers ROCm {line} is supported with (amdgpu {wanted})",
                       f"update the host's driver to AMD GPU Driver {newest} (amdgpu-dkms; {wanted}), or use an image "
                       "of an older ROCm line")
    if (lo >= supported[-1] and lo != hi) or lo > supported[-1]:
        return Verdict("above", f"{name} is newer than the drivers AMD states ROCm {line} for (amdgpu {wanted})",
                       f"use an image of a newer ROCm line, or a driver AMD supports ROCm {line} with "
                       f"(AMD GPU Driver {newest})")
    if hi >= len(rows):
        return Verdict("not-stated", f"{name} is newer than every driver of amdgpu {wanted} whose module version is "
                                     f"known here: whether AMD supports ROCm {line} with it is not stated",
                       f"AMD GPU Driver {newest} is one AMD supports ROCm {line} with")
    return Verdict("not-stated", f"{name} lies inside amdgpu {wanted}, but AMD's table has no row saying it supports "
                                 f"ROCm {line}", f"AMD GPU Driver {newest} is one AMD supports ROCm {line} with")
