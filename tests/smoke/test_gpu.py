"""torch-smoke's GPU checks against fake torch modules: devices, archs, the override, compile, workload sizes."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from builder.smoke.torch_smoke import gpu
from tests.fakes.smoke import CUDA_CELL, ROCM_CELL, Tree, fake_torch, outcome, smoke


def test_gpu_devices_are_named() -> None:
    devices = (("AMD Radeon RX 7900 XTX", "gfx1100"), ("AMD Radeon RX 7900 XTX", "gfx1100"))
    result = outcome(gpu.gpu, smoke(ROCM_CELL, fake_torch(devices=devices)), "gpu")
    assert result.status == "pass" and result.detail.startswith("2 device(s): 0: AMD Radeon RX 7900 XTX (gfx1100)")
    assert outcome(gpu.gpu, smoke(ROCM_CELL, fake_torch()), "gpu").status == "skip"


def test_gpu_outside_the_family_fails_and_calls_the_override_risky() -> None:
    devices = (("AMD Radeon RX 6700 XT", "gfx1031:xnack-"),)
    result = outcome(gpu.gpu_arch, smoke(ROCM_CELL, fake_torch(devices=devices)), "gpu")
    assert result.status == "fail"
    assert "device 0 (AMD Radeon RX 6700 XT) is gfx1031, not in this image's gfx110X-all" in result.detail
    assert "HSA_OVERRIDE_GFX_VERSION" in result.fix and "risky" in result.fix
    inside = outcome(gpu.gpu_arch, smoke(ROCM_CELL, fake_torch(devices=(("RX 7900", "gfx1100"),))), "gpu")
    assert inside.status == "pass"


def test_a_pass_under_the_override_is_flagged_with_the_real_target(tmp_path: Path) -> None:
    tree = Tree(tmp_path).kfd_node(1, 110003)  # a 780M iGPU (gfx1103) posing as gfx1100
    torch = fake_torch(devices=(("AMD Radeon 780M", "gfx1100"),))
    s = smoke(ROCM_CELL, torch, tree, env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"})
    result = outcome(gpu.gpu_arch, s, "gpu")
    assert result.status == "warn"
    assert "HSA_OVERRIDE_GFX_VERSION=11.0.0" in result.detail and "the hardware is gfx1103" in result.detail


def test_cuda_devices_check_compute_capability_only_when_listed() -> None:
    torch = fake_torch(hip=None, cuda="12.8", devices=(("NVIDIA H100", ""),), capability=(9, 0))
    unlisted = outcome(gpu.gpu_arch, smoke(CUDA_CELL, torch), "gpu")
    assert unlisted.status == "info" and "sm_90" in unlisted.detail
    assert outcome(gpu.gpu_arch, smoke({**CUDA_CELL, "cuda_archs": ["sm_90"]}, torch), "gpu").status == "pass"
    other = outcome(gpu.gpu_arch, smoke({**CUDA_CELL, "cuda_archs": ["8.0"]}, torch), "gpu")
    assert other.status == "fail" and "sm_90" in other.detail and "HSA" not in other.fix


def test_compile_without_a_c_compiler_is_a_warning_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton builds a C launcher at run time: a runtime image (no gcc) cannot, and says so without failing."""
    def broken_compile(fn: Any) -> Any:
        def run(x: Any) -> Any:
            raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")
        return run

    torch = fake_torch(devices=(("AMD Instinct MI300X", "gfx942"),))
    torch.compile, torch.randn = broken_compile, lambda *a, **k: 0.0
    check = smoke(ROCM_CELL, torch)
    check.gpu = SimpleNamespace(simulated=False, device="cuda", synchronize=lambda: None)  # type: ignore[assignment]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(shutil, "which", lambda name: None)
    result = outcome(gpu.gpu_compile, check, "gpu")
    assert result.status == "warn" and "needs a C compiler" in result.detail and "devel image" in result.fix
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/" + name)
    assert outcome(gpu.gpu_compile, check, "gpu").status == "fail"  # with a compiler, a failure is a failure


class Matrix:
    """A tensor that multiplies in no time: the test counts sizes, not FLOPs."""

    def __matmul__(self, other: Matrix) -> Matrix:
        return self


def sizing_torch(shapes: list[tuple[int, ...]]) -> SimpleNamespace:
    torch = fake_torch(devices=(("AMD Radeon RX 7900 XTX", "gfx1100"),))
    torch.bfloat16 = "bfloat16"
    torch.randn = lambda *shape, **kw: shapes.append(shape) or Matrix()
    torch.cuda.synchronize = lambda: None
    return torch


def test_the_simulated_speed_figure_is_tiny_so_no_cpu_waits_minutes() -> None:
    """A 2048^3 bf16 matmul on a CPU without AVX-512 outlasted the check's limit: the stand-in uses 64^3."""
    shapes: list[tuple[int, ...]] = []
    result = outcome(gpu.gpu_tflops, smoke(ROCM_CELL, sizing_torch(shapes), simulate="gfx1100"), "gpu")
    assert result.status == "info" and "bf16 matmul 64x64x64 on device 0" in result.detail
    assert shapes == [(64, 64)] * 2
    shapes.clear()
    real = outcome(gpu.gpu_tflops, smoke(ROCM_CELL, sizing_torch(shapes)), "gpu")
    assert "8192x8192x8192" in real.detail and shapes == [(8192, 8192)] * 2
