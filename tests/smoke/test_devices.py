"""torch_smoke.devices: the torch.cuda calls the GPU checks make, the CPU stand-in of --simulate-gpu, errors."""

from __future__ import annotations

import math

from builder.smoke.torch_smoke.devices import CpuStandIn, Devices, rel_error
from tests.fakes.smoke import fake_torch


def test_devices_ask_torch_cuda_and_drop_the_feature_flags() -> None:
    gpu = Devices(fake_torch(devices=(("AMD Instinct MI210", "gfx90a:sramecc+:xnack-"),), capability=(8, 6)))
    assert (gpu.available(), gpu.count(), gpu.name(0), gpu.arch(0)) == (True, 1, "AMD Instinct MI210", "gfx90a")
    assert gpu.capability(0) == "sm_86" and gpu.device == "cuda" and not gpu.simulated
    assert not Devices(fake_torch()).available()


def test_a_cuda_build_has_no_gcn_arch() -> None:
    assert Devices(fake_torch(devices=(("NVIDIA H100", ""),))).arch(0) == ""


def test_the_stand_in_is_one_gpu_of_the_given_arch_on_the_cpu() -> None:
    gpu = CpuStandIn(fake_torch(), "gfx1100")
    assert (gpu.available(), gpu.count(), gpu.arch(0), gpu.device, gpu.simulated) == (True, 1, "gfx1100", "cpu", True)
    assert "--simulate-gpu" in gpu.name(0) and gpu.synchronize() is None
    assert CpuStandIn(fake_torch(), "9.0").capability(0) == "sm_90"


class Tensor:
    """Just the tensor calls rel_error makes, over a list of floats."""

    def __init__(self, values: list[float]) -> None:
        self.values = values

    def detach(self) -> Tensor:
        return self

    double = cpu = detach

    def __sub__(self, other: Tensor) -> Tensor:
        return Tensor([a - b for a, b in zip(self.values, other.values, strict=True)])

    def abs(self) -> Tensor:
        return Tensor([abs(v) for v in self.values])

    def max(self) -> Tensor:
        return Tensor([max(self.values)])

    def item(self) -> float:
        return self.values[0]


def test_rel_error_is_relative_to_the_largest_reference_and_nan_is_infinite() -> None:
    assert math.isclose(rel_error(Tensor([1.0, 2.1]), Tensor([1.0, 2.0])), 0.05)
    assert rel_error(Tensor([0.5]), Tensor([0.0])) == 0.5  # an all-zero reference: the absolute error
    assert rel_error(Tensor([math.nan]), Tensor([1.0])) == math.inf
