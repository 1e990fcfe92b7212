"""The table of which checks each kind of image runs: every name in it exists, and each kind gets its row."""

from __future__ import annotations

from builder.smoke.torch_smoke.diagnostics import FINDINGS
from builder.smoke.torch_smoke.platforms import CPU, GPU, INSTALL, PLATFORMS, ROCM, SDK, select
from builder.smoke.torch_smoke.runner import CHECKS
from tests.fakes.smoke import CPU_CELL, CUDA_CELL, ROCM_CELL


def test_every_name_in_the_table_is_a_check_or_a_diagnostic() -> None:
    for platform in PLATFORMS.values():
        assert {n for _, names in platform.base for n in names} | set(platform.gpu) | {"gpu"} <= set(CHECKS)
        assert set(platform.diagnostics) <= set(FINDINGS)
        assert set(platform.not_applicable) <= set(CHECKS)
    assert set(CHECKS) == {*INSTALL, *CPU, *SDK, *GPU, "gpu", "gpu_hip_kernel"}  # no check outside the table


def test_each_kind_gets_its_row() -> None:
    rocm, cuda, cpu = select(ROCM_CELL), select(CUDA_CELL), select(CPU_CELL)
    assert rocm.gpu == (*GPU, "gpu_hip_kernel") and cuda.gpu == GPU and cpu.gpu == ()
    assert rocm.diagnostics == ("dev_kfd", "dev_dri", "gpu_env", "gpu_target", "host_driver")
    assert cuda.diagnostics == ("dev_nvidia", "gpu_env")
    assert cpu.not_applicable == {"arch_list": "CPU image: torch has no GPU code",
                                  "hip_compile": "CPU image: no HIP to compile"} and cpu.no_gpu_section
    assert cuda.not_applicable == {"hip_compile": "CUDA image: HIP compiling is checked on ROCm images"}
    assert all(dict(p.base)["sdk"] == ("hip_compile",) for p in (rocm, cuda, cpu))
    assert "nvidia-smi" in cuda.gpu_fix and "amdgpu" in rocm.gpu_fix


def test_a_simulated_gpu_gives_a_cpu_image_the_rocm_gpu_section() -> None:
    simulated = select(CPU_CELL, simulate="gfx1100")
    assert (simulated.gpu, simulated.diagnostics, simulated.gpu_fix) == (ROCM.gpu, ROCM.diagnostics, ROCM.gpu_fix)
    assert simulated.not_applicable == select(CPU_CELL).not_applicable  # its torch still has no GPU code
    assert select(ROCM_CELL, simulate="gfx1100") == ROCM
