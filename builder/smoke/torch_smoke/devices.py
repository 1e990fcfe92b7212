"""GPU access through torch.cuda (the same API on ROCm and CUDA builds), and a CPU stand-in for tests."""

from __future__ import annotations

import math
from typing import Any

from .core import base_arch, sm_arch


class Devices:
    """The torch.cuda calls the GPU checks need."""

    simulated = False

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.device = "cuda"

    def available(self) -> bool:
        return bool(self.torch.cuda.is_available())

    def count(self) -> int:
        return int(self.torch.cuda.device_count())

    def name(self, index: int) -> str:
        return str(self.torch.cuda.get_device_name(index))

    def arch(self, index: int) -> str:
        """gcnArchName on ROCm; CUDA builds have none (''), their arch is the compute capability."""
        return base_arch(str(getattr(self.torch.cuda.get_device_properties(index), "gcnArchName", "") or ""))

    def capability(self, index: int) -> str:
        major, minor = self.torch.cuda.get_device_capability(index)
        return f"sm_{major}{minor}"

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()


class CpuStandIn(Devices):
    """--simulate-gpu: the GPU checks on the CPU device, so their code is tested where no GPU exists."""

    simulated = True

    def __init__(self, torch: Any, arch: str) -> None:
        super().__init__(torch)
        self.device, self.fake_arch = "cpu", arch

    def available(self) -> bool:
        return True

    def count(self) -> int:
        return 1

    def name(self, index: int) -> str:
        return "CPU stand-in (--simulate-gpu, test mode)"

    def arch(self, index: int) -> str:
        return self.fake_arch

    def capability(self, index: int) -> str:
        return sm_arch(self.fake_arch)

    def synchronize(self) -> None:
        return None


def rel_error(got: Any, ref: Any) -> float:
    """max |got - ref| / max |ref|; NaN or inf in the result is an infinite error."""
    err = float((got.detach().double().cpu() - ref.double()).abs().max().item())
    scale = float(ref.double().abs().max().item()) or 1.0
    return err / scale if math.isfinite(err) else math.inf
