"""builder which: the host's amdgpu driver against the recommended image's range, on recorded hosts (tests/data/sysfs)
given a driver: AMD's packaged one (/sys/module/amdgpu/version, as amdgpu-dkms writes it: "6.16.13", or
"6.19.14.31400000" with the release appended, builder/data/drivers.yaml [PI]) or the distribution's in-kernel one
(/sys/module/amdgpu without a version file; the kernel release in /proc/sys/kernel/osrelease)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import which
from testkit.matrices import write_matrix
from tests.fakes.hosts import HOSTS, MATRIX

ROCM64_ONLY = """\
matrix:
  os: [ubuntu-24.04]
  platform: [rocm6.4]
  torch: ["2.8.0"]
  gfx: [all]
"""


def host_with(tmp_path: Path, module: str | None, kernel: str = "6.8.0-60-generic", base: str = "rx7900xtx") -> Path:
    """A recorded host plus its driver: module None is the in-kernel driver (a module folder without a version)."""
    root = tmp_path / "host"
    shutil.copytree(HOSTS / base, root)
    (root / "sys/module/amdgpu").mkdir(parents=True)
    if module is not None:
        (root / "sys/module/amdgpu/version").write_text(module + "\n")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(kernel + "\n")
    return root


def ask(tmp_path: Path, text: str, root: Path) -> dict[str, Any]:
    return which.recommend(write_matrix(tmp_path, text), root)


def test_a_driver_inside_the_range_fits(tmp_path: Path) -> None:
    answer = ask(tmp_path, MATRIX, host_with(tmp_path, "6.16.13"))  # AMD GPU Driver 30.30
    tag = answer["recommended"]["image"]["tag"]
    assert "rocm7.14" in tag  # TheRock 7.14 per-family: 30.10.x-31.50.x
    driver = answer["host_driver"]
    assert (driver["kind"], driver["release"], driver["verdict"], driver["fits"]) == ("packaged", "30.30", "fits", True)
    assert driver["image_range"] == "30.10.x-31.50.x"
    assert "AMD GPU Driver 30.30" in driver["message"] and driver["fitting_image"] is None
    assert any(n.startswith(f"host driver: {tag}: amdgpu 6.16.13 is AMD GPU Driver 30.30") for n in answer["notes"])
    assert answer["exit_code"] == 0


def test_a_driver_below_the_range_names_the_newest_image_that_fits(tmp_path: Path) -> None:
    answer = ask(tmp_path, MATRIX, host_with(tmp_path, "6.12.12"))  # ROCm 6.4's driver: below 7.14's range
    driver = answer["host_driver"]
    assert (driver["verdict"], driver["fits"]) == ("below", False)
    assert "older than the drivers ROCm 7.14 is supported with (amdgpu 30.10.x-31.50.x)" in driver["message"]
    fitting = driver["fitting_image"]
    assert fitting["rocm"] == "7.2" and fitting["gfx"] == "all"  # 6.4.x-31.50.x: the newest line 6.4 supports
    assert driver["install"] == "AMD GPU Driver 31.50 (amdgpu-dkms; 30.10.x-31.50.x)"
    assert any(f"the newest image that fits this driver: {fitting['tag']}" in n for n in answer["notes"])


def test_a_driver_far_below_every_range_names_the_driver_to_install(tmp_path: Path) -> None:
    driver = ask(tmp_path, MATRIX, host_with(tmp_path, "6.8.5"))["host_driver"]  # ROCm 6.2's: no image fits
    assert (driver["verdict"], driver["fitting_image"]) == ("below", None)
    assert driver["install"].startswith("AMD GPU Driver 31.50")


@pytest.mark.parametrize("module", ["6.19.14.31400000", "6.19.14"])
def test_a_driver_above_the_range_does_not_fit(tmp_path: Path, module: str) -> None:
    answer = ask(tmp_path, ROCM64_ONLY, host_with(tmp_path, module))  # 31.40: no ROCm 6.4 in its row
    driver = answer["host_driver"]
    assert (driver["verdict"], driver["fits"], driver["image_range"]) == ("above", False, "6.1.x-30.30.x")
    assert "newer than the drivers AMD states ROCm 6.4 for" in driver["message"]
    assert driver["fitting_image"] is None and driver["install"] == "AMD GPU Driver 30.30 (amdgpu-dkms; 6.1.x-30.30.x)"


def test_the_in_kernel_driver_is_named_with_the_kernel_and_the_driver_to_install(tmp_path: Path) -> None:
    answer = ask(tmp_path, MATRIX, host_with(tmp_path, None, kernel="6.14.0-37-generic"))
    driver = answer["host_driver"]
    assert (driver["kind"], driver["version"], driver["verdict"], driver["fits"]) == (
        "in-kernel", "6.14.0-37-generic", "in-kernel", None)
    assert "in-kernel amdgpu (kernel 6.14.0-37-generic): AMD states no ROCm range for it" in driver["message"]
    assert driver["install"].startswith("AMD GPU Driver 31.50 (amdgpu-dkms")
    assert answer["exit_code"] == 0  # the image may well run: AMD just does not say


def test_a_loaded_driver_whose_module_folder_cannot_be_read_gets_no_verdict(tmp_path: Path) -> None:
    answer = which.recommend(write_matrix(tmp_path, MATRIX), HOSTS / "rx7900xtx")  # recorded without sys/module
    assert (answer["host_driver"]["kind"], answer["host_driver"]["verdict"]) == ("none", "unknown")
    assert not any(n.startswith("host driver:") for n in answer["notes"])  # nothing said that is not known


def test_pci_gpus_without_amdgpu_name_the_driver_to_install(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(HOSTS / "rx7900xtx", root)
    shutil.rmtree(root / "sys/class/kfd")  # amdgpu not loaded: the GPU is named from its PCI ID
    driver = which.recommend(write_matrix(tmp_path, MATRIX), root)["host_driver"]
    assert (driver["kind"], driver["verdict"]) == ("none", "no-driver")
    assert "install AMD's GPU driver (amdgpu-dkms 30.10.x-31.50.x for ROCm 7.14)" in driver["fix"]


def test_a_planted_fifo_is_not_read_as_the_version(tmp_path: Path) -> None:
    import os

    root = host_with(tmp_path, None)
    os.mkfifo(root / "sys/module/amdgpu/version")
    driver = ask(tmp_path, MATRIX, root)["host_driver"]  # returns: a FIFO is refused, not waited on
    assert driver["kind"] == "in-kernel"
