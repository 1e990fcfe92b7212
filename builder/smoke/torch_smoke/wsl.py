"""WSL 2: the GPU is reached through /dev/dxg (the Windows driver's DirectX kernel interface), never /dev/kfd.

What is known, and from where:
- WSL 2 gives a Linux guest its GPU as /dev/dxg, backed by the Windows driver; there is no amdgpu module and no
  /dev/kfd, so a ROCm runtime that opens /dev/kfd (the ROCm in these images' torch wheels) finds no GPU
  (microsoft/WSL#40988; unsloth PR#11066).
- AMD's way onto it is user space: ROCm with the librocdxg bridge, "a user-mode library that enables ROCm
  functionality on Windows Subsystem for Linux (WSL)" (https://github.com/ROCm/librocdxg, README), under a recent
  Adrenalin driver on Windows (AMD's guide: https://rocm.docs.amd.com/projects/radeon-ryzen/en/latest/docs/install/
  installrad/wsl/howto_wsl.html). TheRock: "ROCm supports WSL via the DXG kernel interface. DXG detection is
  enabled by default as of ROCm 7.13", with the `amdrocm-wsl` package (ROCm/TheRock RELEASES.md @
  89553ce3746eda74ade42557470d25e37c91b6f0, a section still commented out "once we are satisfied with quality").
- The kernel names itself: /proc/version carries "microsoft" (e.g. 6.6.87.2-microsoft-standard-WSL2).
"""

from __future__ import annotations

from pathlib import Path

DETAIL = ("this is WSL (Windows Subsystem for Linux): the GPU is reached through /dev/dxg, the Windows driver's "
          "interface, not /dev/kfd, so this image's ROCm, which opens /dev/kfd, sees no GPU")
WORKS = ("what works here: torch on the CPU, and ROCm through AMD's WSL stack (Adrenalin on Windows, ROCm with the "
         "librocdxg bridge in Linux: https://github.com/ROCm/librocdxg), which this image does not carry; what does "
         "not: --device=/dev/kfd, amdgpu drivers and HSA_OVERRIDE_GFX_VERSION")
FIX = ("run the image on a Linux host with the amdgpu driver (/dev/kfd), or use AMD's ROCm-on-WSL guide "
       "(rocm.docs.amd.com/projects/radeon-ryzen, install/installrad/wsl); docs/hosts.md")


def kernel_says_wsl(proc_version: str | None) -> bool:
    text = (proc_version or "").lower()
    return "microsoft" in text or "wsl" in text


def detect(dev: Path, proc_version: str | None) -> bool:
    """/dev/dxg without /dev/kfd, or a WSL kernel."""
    return ((dev / "dxg").exists() and not (dev / "kfd").exists()) or kernel_says_wsl(proc_version)
