"""What every module shares: the result types, the exit codes, and pure helpers for names and versions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_NO_GPU = 0, 1, 3
EXIT_MEANING = {EXIT_OK: "all required checks passed", EXIT_FAILED: "a check failed",
                EXIT_NO_GPU: "--require-gpu was given and no GPU is visible"}
MARKS = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "SKIP", "info": "INFO"}
RANK = {"pass": 0, "info": 1, "warn": 2}
OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
VISIBILITY = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
RISKY = (f"{OVERRIDE} can make the GPU pose as a listed target, but that is a risky workaround "
         "(page faults, hangs)")
SECTION_FIX = {
    "install": "the image's /opt/venv is broken or was built from the wrong wheels: rebuild the image",
    "cpu": "torch computes wrong answers on the CPU: rebuild the image; report it if it persists",
    "sdk": "the image's ROCm SDK is broken: rebuild the image",
}
HUNG_FIX = "the GPU or driver may be hung: check `dmesg` on the host"


@dataclass
class Result:
    """One line of the report; its fields, in this order, are the JSON report's result objects."""

    name: str
    status: str  # pass | fail | warn | skip | info
    detail: str = ""
    fix: str = ""
    seconds: float = 0.0
    section: str = ""
    timed_out: bool = False


@dataclass(frozen=True)
class Outcome:
    """A verdict other than a plain pass: warn (flagged, exit code unchanged) or info (reported only)."""

    status: str
    detail: str
    fix: str = ""


class Skip(Exception):
    """Raised by a check that does not apply to this image or host."""


class Fail(Exception):
    """Raised by a check that failed; fix is one line on what to do about it."""

    def __init__(self, detail: str, fix: str = "") -> None:
        super().__init__(detail)
        self.fix = fix


# -- names and versions ---------------------------------------------------------------------------
def public(version: str) -> str:
    """'2.13.0+cpu' -> '2.13.0': the local part names the build variant, not the release."""
    return version.split("+", 1)[0]


def major_minor(version: object) -> str:
    """'7.2.53211-e7e6d5b' -> '7.2': images promise a ROCm/CUDA release, not a build."""
    return ".".join(str(version).split(".")[:2])


def platform_kind(expect: Mapping[str, Any]) -> str:
    """rocm | cuda | cpu, from the cell's platform ('rocm7.2', 'cuda12.8', 'cpu')."""
    platform = str(expect.get("platform") or "cpu")
    return "rocm" if platform.startswith("rocm") else "cuda" if platform.startswith("cuda") else "cpu"


def gfx_name(major: int, minor: int, stepping: int) -> str:
    """9.0.10 -> gfx90a, 9.4.2 -> gfx942, 11.0.0 -> gfx1100: minor and stepping are one hex digit each."""
    return f"gfx{major}{minor:x}{stepping:x}"


def gfx_from_version(value: int) -> str | None:
    """kfd topology's gfx_target_version (110000, 90402, 90010) -> gfx name; 0 is a CPU node."""
    if value <= 0:
        return None
    return gfx_name(value // 10000, value // 100 % 100, value % 100)


def gfx_from_override(value: str) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION '11.0.0' -> gfx1100: the target the runtime pretends every GPU is."""
    parts = value.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return gfx_name(*(int(p) for p in parts))


def base_arch(name: str) -> str:
    """'gfx90a:sramecc+:xnack-' -> 'gfx90a': feature flags do not change which kernels apply."""
    return name.split(":", 1)[0].strip()


def sm_arch(value: str) -> str:
    """'9.0', '90' or 'sm_90' -> 'sm_90', the form torch.cuda.get_arch_list() uses."""
    value = value.strip().removeprefix("sm_")
    return "sm_" + value.replace(".", "")


def first_line(exc: BaseException, limit: int = 400) -> str:
    """An exception as one report line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:limit]


def unique(items: Iterable[str]) -> list[str]:
    """Non-empty items once each, in first-seen order."""
    return list(dict.fromkeys(i for i in items if i))
