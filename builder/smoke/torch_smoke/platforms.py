"""Which checks each kind of image runs, as a table (like docker-library's test/config.sh), not ifs in checks.

A row names, per platform kind, the GPU checks, the diagnostics run when torch sees no GPU, the checks that
do not apply (reported SKIP with the reason) and the kind's fix texts. Flavors (runtime, devel) run the
same checks: what differs between them (a C compiler for torch.compile) is found at run time, because a
user may add it to a runtime image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .core import OVERRIDE, platform_kind

INSTALL = ("import", "torch_version", "torchvision_version", "torchaudio_version", "hip_version", "cuda_version",
           "arch_list", "libs", "pip_constraint")
CPU = ("cpu_matmul", "cpu_svd", "numpy", "torchvision_nms")
SDK = ("hip_compile",)  # no GPU needed: a ROCm image's compiler, where it has one (a devel image must)
BASE = (("install", INSTALL), ("cpu", CPU), ("sdk", SDK))
GPU = ("gpu_arch", "gpu_matmul_fp32", "gpu_matmul_fp16", "gpu_matmul_bf16", "gpu_conv", "gpu_sdpa", "gpu_training",
       "gpu_synchronize", "gpu_compile", "gpu_tflops")


@dataclass(frozen=True)
class Platform:
    """One kind of image: what it runs, in report order, and how its fixes read."""

    kind: str
    gpu: tuple[str, ...]  # run once the `gpu` check sees a GPU; () = no GPU section at all
    diagnostics: tuple[str, ...]  # why torch sees no GPU (names in diagnostics.FINDINGS)
    gpu_fix: str = ""  # the fix line of a failed GPU check
    host_tools: str = ""  # what to run on the host when the devices look fine yet no GPU is seen
    no_gpu_section: str = ""  # the `gpu` line's SKIP detail where gpu is ()
    not_applicable: Mapping[str, str] = field(default_factory=dict)  # check -> SKIP detail
    base: tuple[tuple[str, tuple[str, ...]], ...] = BASE  # (section, checks) run on every image


ROCM = Platform(
    "rocm", (*GPU, "gpu_hip_kernel"), ("dev_kfd", "dev_dri", "gpu_env", "gpu_target", "host_driver"),
    gpu_fix=("check that the host's amdgpu driver supports this image's ROCm (`dmesg` on the host) and that "
             f"{OVERRIDE} is not set"),
    host_tools="`dmesg`, `rocminfo`")
CUDA = Platform(
    "cuda", GPU, ("dev_nvidia", "gpu_env"),
    gpu_fix="check that the host's NVIDIA driver supports this image's CUDA (`nvidia-smi` on the host)",
    host_tools="`nvidia-smi`",
    not_applicable={"hip_compile": "CUDA image: HIP compiling is checked on ROCm images"})
CPU_ONLY = Platform(
    "cpu", (), (), no_gpu_section="CPU image: no GPU checks (its torch is a CPU build)",
    not_applicable={"arch_list": "CPU image: torch has no GPU code", "hip_compile": "CPU image: no HIP to compile"})
PLATFORMS = {p.kind: p for p in (ROCM, CUDA, CPU_ONLY)}


def select(expect: Mapping[str, Any], simulate: str | None = None) -> Platform:
    """The row for the cell's platform; --simulate-gpu gives a CPU image the GPU section of a ROCm one."""
    platform = PLATFORMS[platform_kind(expect)]
    if simulate and not platform.gpu:
        return replace(platform, gpu=ROCM.gpu, diagnostics=ROCM.diagnostics, gpu_fix=ROCM.gpu_fix,
                       host_tools=ROCM.host_tools)
    return platform
