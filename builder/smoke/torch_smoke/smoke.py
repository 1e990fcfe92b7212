"""The state every check shares: the cell's promises, the host view, the platform row, torch and the GPU."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .core import OVERRIDE, RISKY, Fail, Outcome, Skip, base_arch, platform_kind, public, sm_arch, unique
from .devices import CpuStandIn, Devices
from .diagnostics import HostView, kfd_gpus
from .platforms import Platform, select


class Smoke:
    """Checks are functions of a Smoke: torch is imported by the first check, not by this program."""

    def __init__(self, expect: Mapping[str, Any], view: HostView, torch: Any = None, simulate: str | None = None,
                 ) -> None:
        self.expect, self.view, self.simulate = expect, view, simulate
        self.kind = platform_kind(expect)
        self.platform: Platform = select(expect, simulate)
        self.torch = torch
        self.gpu: Devices | None = None

    def need_torch(self) -> Any:
        """torch, or a Skip: every check after a failed import reports it once, as skipped."""
        if self.torch is None:
            raise Skip("torch did not import")
        return self.torch

    def devices(self) -> Devices:
        if self.gpu is None:
            torch = self.need_torch()
            self.gpu = CpuStandIn(torch, self.simulate) if self.simulate else Devices(torch)
        return self.gpu

    def version(self, package: str, actual: str) -> str:
        want = self.expect.get(package)
        if public(actual) != want:
            raise Fail(f"{package} {actual} is installed, the image promises {want}",
                       "the image was built from the wrong wheels: rebuild it, or fix the matrix entry")
        return f"{package} {actual}"

    def wanted_archs(self, required: bool = True) -> list[str]:
        """The archs the cell promises: its gfx targets (ROCm), or cuda_archs if a CUDA cell lists them."""
        if self.kind == "rocm":
            return list(self.expect.get("gfx_targets") or [])
        if self.kind == "cuda" and self.expect.get("cuda_archs"):
            return [sm_arch(str(a)) for a in self.expect["cuda_archs"]]
        if required and self.kind == "cuda":
            raise Skip("this CUDA image lists no expected archs (cuda_archs)")
        return []

    def arch_list(self) -> list[str]:
        """torch.cuda.get_arch_list(), which is empty without a GPU: then the compiled-in flags."""
        torch = self.need_torch()
        archs = list(torch.cuda.get_arch_list())
        flags = getattr(torch._C, "_cuda_getArchFlags", None)
        if not archs and flags is not None:
            archs = (flags() or "").replace(";", " ").replace(",", " ").split()
        return unique(base_arch(a) for a in archs)

    def arch_of(self, gpu: Devices, index: int) -> str:
        return gpu.capability(index) if self.kind == "cuda" else gpu.arch(index)

    def family_text(self) -> str:
        want = self.wanted_archs(required=False)
        family = self.expect.get("gfx_family") if self.kind == "rocm" else "cuda_archs"
        return f"{family} ({', '.join(want)})"

    def override_verdict(self, detail: str) -> str | Outcome:
        """Passes only under HSA_OVERRIDE_GFX_VERSION are flagged: the hardware may be another target."""
        value = self.view.env.get(OVERRIDE)
        if self.kind != "rocm" or value is None:
            return detail
        real = unique(g.target for g in kfd_gpus(self.view.kfd_nodes))
        detail += f", as reported under {OVERRIDE}={value}" + (f"; the hardware is {', '.join(real)}" if real else "")
        return Outcome("warn", detail, f"use an image whose family contains the real target; {RISKY}")

    def gpu_fix(self) -> str:
        return self.platform.gpu_fix


# A check: a function of the shared state; a str is a pass with that detail, an Outcome a warn or info line.
Check = Callable[[Smoke], str | Outcome]
