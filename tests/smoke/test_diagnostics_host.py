"""torch-smoke's host diagnostics on fake /dev, /proc and /sys trees: WSL named as WSL, the host's amdgpu against the
image's driver range (cell.json amdgpu_driver, as builder.core.drivers writes it), and HSA_OVERRIDE_GFX_VERSION set
on a GPU whose own target the image supports."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.drivers import driver_range
from builder.smoke.torch_smoke import hostdriver
from builder.smoke.torch_smoke.diagnostics import diagnose, docker_flags
from tests.fakes.smoke import ROCM_CELL, Tree, by_name

CELL72 = {**ROCM_CELL, "amdgpu_driver": driver_range("7.2")}


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def with_file(tree: Tree, path: str, text: str) -> Tree:
    target = tree.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return tree


def test_dxg_without_kfd_is_named_as_wsl(tree: Tree) -> None:
    tree.device("dxg")
    findings = diagnose(tree.view(uid=0, gids=frozenset({0}), root=True), CELL72)
    kfd = by_name(findings)["dev_kfd"].result
    assert kfd.status == "warn" and "this is WSL" in kfd.detail and "/dev/dxg" in kfd.detail
    assert "what works here" in kfd.detail and "librocdxg" in kfd.detail and "what does not" in kfd.detail
    assert "--device=/dev/kfd" not in docker_flags(findings)  # no docker flag gives WSL a /dev/kfd
    assert "docs/hosts.md" in kfd.fix
    assert by_name(findings)["host_driver"].result.detail.startswith("WSL")


def test_a_wsl_kernel_is_named_as_wsl_without_dxg(tree: Tree) -> None:
    with_file(tree, "proc/version", "Linux version 6.6.87.2-microsoft-standard-WSL2 (root@host) #1 SMP\n")
    assert "this is WSL" in by_name(diagnose(tree.view(root=True), CELL72))["dev_kfd"].result.detail


def test_a_linux_host_without_kfd_still_gets_the_device_flags(tree: Tree) -> None:
    with_file(tree, "proc/version", "Linux version 6.8.0-60-generic (buildd@lcy02) #63-Ubuntu SMP\n")
    kfd = by_name(diagnose(tree.view(uid=0, gids=frozenset({0}), root=True), CELL72))["dev_kfd"].result
    assert "not in the container" in kfd.detail and "WSL" not in kfd.detail


@pytest.mark.parametrize(("module", "status", "words"), [
    ("6.16.13", "pass", "is AMD GPU Driver 30.30, supported with ROCm 7.2"),
    ("6.19.14.31400000", "pass", "(AMD GPU Driver 31.40) is AMD GPU Driver 31.40"),
    ("6.10.5", "warn", "older than the drivers ROCm 7.2 is supported with (amdgpu 6.4.x-31.50.x)"),
    ("6.19.4", "info", "no row saying it supports ROCm 7.2"),  # 31.30, a preview release AMD's table leaves out
])
def test_the_hosts_packaged_driver_against_the_range(tree: Tree, module: str, status: str, words: str) -> None:
    tree.rocm_devices()
    with_file(tree, "sys/module/amdgpu/version", module + "\n")
    found = by_name(diagnose(tree.view(root=True), CELL72))["host_driver"].result
    assert found.status == status and words in found.detail
    if status == "warn":
        assert "update the host's driver to AMD GPU Driver 31.50" in found.fix


def test_a_driver_above_an_old_lines_range_warns_with_the_fix(tree: Tree) -> None:
    with_file(tree, "sys/module/amdgpu/version", "6.19.14\n")
    cell = {**ROCM_CELL, "platform": "rocm6.2.4", "amdgpu_driver": driver_range("6.2.4")}
    found = by_name(diagnose(tree.view(root=True), cell))["host_driver"].result
    assert found.status == "warn" and "newer than the drivers AMD states ROCm 6.2 for (amdgpu 6.0.x-30.10.x)" in \
        found.detail
    assert "use an image of a newer ROCm line" in found.fix and "AMD GPU Driver 30.10" in found.fix


def test_the_in_kernel_driver_is_named_by_its_kernel(tree: Tree) -> None:
    (tree.root / "sys/module/amdgpu").mkdir(parents=True)
    with_file(tree, "proc/sys/kernel/osrelease", "6.14.0-37-generic\n")
    found = by_name(diagnose(tree.view(root=True), CELL72))["host_driver"].result
    assert found.status == "info" and "in-kernel amdgpu (kernel 6.14.0-37-generic)" in found.detail
    assert "amdgpu-dkms 6.4.x-31.50.x" in found.fix


def test_a_line_without_a_stated_range_says_so(tree: Tree) -> None:
    with_file(tree, "sys/module/amdgpu/version", "6.16.13\n")
    cell = {**ROCM_CELL, "platform": "rocm7.12", "amdgpu_driver": driver_range("7.12")}
    found = by_name(diagnose(tree.view(root=True), cell))["host_driver"].result
    assert found.status == "info" and "not stated" in found.detail and "therock-7.12" in found.detail


def test_override_on_a_gpu_the_image_supports_names_its_target(tree: Tree) -> None:
    tree.rocm_devices().kfd_node(0, 0).kfd_node(1, 110000)  # an RX 7900 XTX: gfx1100, in gfx110X-all
    found = by_name(diagnose(tree.view(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}), CELL72))["gpu_env"].result
    assert found.status == "warn"
    assert "the GPU's own target gfx1100 is one this image's torch supports" in found.detail
    assert "unset HSA_OVERRIDE_GFX_VERSION" in found.fix and "runs gfx1100 natively" in found.fix


def test_override_on_a_gpu_outside_the_family_keeps_the_general_warning(tree: Tree) -> None:
    tree.rocm_devices().kfd_node(1, 100300)  # gfx1030: not in gfx110X-all
    found = by_name(diagnose(tree.view(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}), CELL72))["gpu_env"].result
    assert found.status == "warn" and "own target" not in found.detail and "risky workaround" in found.fix


def test_module_versions_are_placed_among_the_releases() -> None:
    rows = driver_range("7.2")["releases"]  # 6.4, 30.10, 30.20, 30.30, 31.30 (no row), 31.40, 31.50 (no module)
    names = [r["release"] for r in rows]
    assert hostdriver.place("6.16.6", rows) == (names.index("30.20"),) * 2
    assert hostdriver.place("6.16.20", rows) == (names.index("30.30"),) * 2  # a later 30.30.x package
    assert hostdriver.place("6.13.1", rows) == (0, 1)  # between 6.4 and 30.10: not a known release
    assert hostdriver.place("6.2.4", rows) == (-1, 0)
    assert hostdriver.place("6.19.14.31500000", rows) == (names.index("31.50"),) * 2  # the appended release decides
    assert hostdriver.place("not a version", rows) is None
    assert hostdriver.place("6.8.0-60-generic", rows) is not None  # a kernel-like string parses as 6.8.0


def test_a_version_newer_than_every_known_module_is_not_called_fitting(tree: Tree) -> None:
    verdict = hostdriver.verdict(hostdriver.HostDriver("packaged", "6.25.1"), driver_range("7.2"))
    assert verdict.status == "not-stated" and "newer than every driver" in verdict.detail
