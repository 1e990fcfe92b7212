"""torch-smoke's install checks against fake torch modules: import, versions, HIP/CUDA builds, arch list."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import install
from builder.smoke.torch_smoke.runner import run_named
from tests.fakes.smoke import CPU_CELL, CUDA_CELL, ROCM_CELL, fake_torch, outcome, smoke


def test_hip_version() -> None:
    assert outcome(install.hip_version, smoke(ROCM_CELL, fake_torch())).status == "pass"
    wrong = outcome(install.hip_version, smoke(ROCM_CELL, fake_torch(hip="6.4.43482")))
    assert wrong.status == "fail" and "promises HIP 7.2 (rocm7.2)" in wrong.detail and "(rocm7.2)" in wrong.fix
    cpu_build = outcome(install.hip_version, smoke(ROCM_CELL, fake_torch(hip=None)))
    assert cpu_build.status == "fail" and "not a ROCm build" in cpu_build.detail
    assert outcome(install.hip_version, smoke(CPU_CELL, fake_torch(hip=None))).status == "pass"
    assert outcome(install.hip_version, smoke(CPU_CELL, fake_torch())).status == "fail"


def test_cuda_version() -> None:
    assert outcome(install.cuda_version, smoke(CUDA_CELL, fake_torch(hip=None, cuda="12.8"))).status == "pass"
    wrong = outcome(install.cuda_version, smoke(CUDA_CELL, fake_torch(hip=None, cuda="12.6")))
    assert wrong.status == "fail" and "promises CUDA 12.8" in wrong.detail
    assert outcome(install.cuda_version, smoke(ROCM_CELL, fake_torch(cuda="12.8"))).status == "fail"
    assert outcome(install.cuda_version, smoke(CUDA_CELL, fake_torch(hip=None))).status == "fail"


def test_arch_list_covers_the_family() -> None:
    wheel = ("gfx900", "gfx942", "gfx1100", "gfx1101", "gfx1102", "gfx1103")
    assert outcome(install.arch_list, smoke(ROCM_CELL, fake_torch(archs=wheel))).status == "pass"
    short = outcome(install.arch_list, smoke(ROCM_CELL, fake_torch(archs=wheel[:-1])))
    assert short.status == "fail" and "no kernels for gfx1103" in short.detail and short.fix
    # Without a GPU, get_arch_list() is empty: the compiled-in flags still tell.
    flags = outcome(install.arch_list, smoke(ROCM_CELL, fake_torch(flags="gfx1100;gfx1101;gfx1102;gfx1103")))
    assert flags.status == "pass"
    assert outcome(install.arch_list, smoke(CUDA_CELL, fake_torch(hip=None))).status == "skip"
    listed = smoke({**CUDA_CELL, "cuda_archs": ["9.0"]}, fake_torch(hip=None, archs=("sm_80", "sm_90")))
    assert outcome(install.arch_list, listed).status == "pass"


def test_cpu_images_skip_the_arch_list_by_their_platform_row() -> None:
    result = run_named(smoke(CPU_CELL, fake_torch(hip=None)), "arch_list", "install")
    assert (result.status, result.detail, result.section) == ("skip", "CPU image: torch has no GPU code", "install")


def test_a_numpy_warning_at_import_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import warnings\n__version__ = '2.13.0'\n"
        "warnings.warn('Failed to initialize NumPy: _ARRAY_API not found', UserWarning)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    result = outcome(install.import_torch, smoke(CPU_CELL, None))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert result.status == "fail"
    assert "Failed to initialize NumPy" in result.detail and "numpy" in result.fix.lower()


def test_a_clean_import_hands_torch_to_the_other_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    s = smoke(CPU_CELL, None)
    result = outcome(install.import_torch, s)
    assert result.status == "pass" and result.detail == "torch 2.13.0+rocm7.2 from /opt/venv/torch, no warnings"
    assert s.torch is torch


def test_without_torch_the_other_checks_skip() -> None:
    result = outcome(install.torch_version, smoke(CPU_CELL, None))
    assert (result.status, result.detail) == ("skip", "torch did not import")


def test_companions_promised_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    missing = outcome(install.CHECKS["torchvision_version"], smoke({**CPU_CELL, "torchvision": "0.28.0"}, fake_torch()))
    assert missing.status == "fail" and "torchvision is not installed, the image promises 0.28.0" in missing.detail
    assert outcome(install.CHECKS["torchaudio_version"], smoke(CPU_CELL, fake_torch())).status == "skip"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    extra = outcome(install.CHECKS["torchaudio_version"], smoke(CPU_CELL, fake_torch()))
    assert extra.status == "fail" and "torchaudio is installed but the image promises none" in extra.detail


def test_a_pinned_local_version_must_be_exactly_the_installed_wheel() -> None:
    """TheRock's index serves 2.12.0+rocm7.14.0 and 2.12.0+rocm10.0.0 side by side: only the local part tells
    which ROCm line an image really has, so an image that pins one holds its torch to it."""
    therock = {**ROCM_CELL, "torch": "2.12.0", "torch_wheel": "2.12.0+rocm7.14.0", "hip": "7.14"}
    right = fake_torch(hip="7.14.25301")
    right.__version__ = "2.12.0+rocm7.14.0"
    assert outcome(install.torch_version, smoke(therock, right)).status == "pass"
    other_line = fake_torch(hip="7.15.1")
    other_line.__version__ = "2.12.0+rocm10.0.0"
    wrong = outcome(install.torch_version, smoke(therock, other_line))
    assert wrong.status == "fail" and "promises the wheel 2.12.0+rocm7.14.0" in wrong.detail
    unpinned = {**CPU_CELL, "torch_wheel": "2.13.0"}  # no local part: the public version is all it promises
    cpu = fake_torch(hip=None)
    cpu.__version__ = "2.13.0+cpu"
    assert outcome(install.torch_version, smoke(unpinned, cpu)).status == "pass"


def test_hip_and_rocm_versions_follow_the_line_not_the_label_arithmetic() -> None:
    """ROCm 10.0 ships HIP 7.15: torch.version.hip says 7.15, torch.version.rocm (newer torch) says 10.0."""
    ten = {**ROCM_CELL, "platform": "rocm10.0", "hip": "7.15"}
    right = fake_torch(hip="7.15.60000-abc")
    right.version.rocm = "10.0.0"
    assert outcome(install.hip_version, smoke(ten, right)).status == "pass"
    wrong_line = fake_torch(hip="7.15.60000-abc")
    wrong_line.version.rocm = "7.14.0"
    failed = outcome(install.hip_version, smoke(ten, wrong_line))
    assert failed.status == "fail" and "torch.version.rocm is 7.14.0, the image promises ROCm 10.0" in failed.detail
    label_arithmetic = outcome(install.hip_version, smoke(ten, fake_torch(hip="10.0.1")))
    assert label_arithmetic.status == "fail" and "promises HIP 7.15" in label_arithmetic.detail
