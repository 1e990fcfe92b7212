"""torch-smoke's diagnostics on fake device trees: devices, permissions, the render GID, environment, kfd."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.smoke.torch_smoke.diagnostics import diagnose, docker_flags, gpu_env, kfd_gpus, no_gpu_fix
from builder.smoke.torch_smoke.platforms import ROCM
from tests.fakes.smoke import CUDA_CELL, ROCM_CELL, Tree, by_name


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def test_kfd_topology_lists_gpu_nodes_only(tree: Tree) -> None:
    tree.kfd_node(0, 0).kfd_node(1, 110000).kfd_node(2, 90402, 0x74A1).kfd_node(10, 90010)
    gpus = kfd_gpus(tree.root / "sys/class/kfd/kfd/topology/nodes")
    assert [(g.node, g.target) for g in gpus] == [("1", "gfx1100"), ("2", "gfx942"), ("10", "gfx90a")]
    assert gpus[1].device_id == 0x74A1


def test_missing_kfd_names_the_device_flags(tree: Tree) -> None:
    findings = diagnose(tree.view(uid=0, gids=frozenset({0})), ROCM_CELL)
    found = by_name(findings)
    assert found["dev_kfd"].result.status == "warn"
    assert "/dev/kfd is not in the container" in found["dev_kfd"].result.detail
    assert found["dev_dri"].result.status == "warn"
    flags = docker_flags(findings)
    assert flags == ["--device=/dev/kfd", "--device=/dev/dri"]  # root needs no group
    assert no_gpu_fix(findings, ROCM) == "run with: docker run --device=/dev/kfd --device=/dev/dri IMAGE torch-smoke"


def test_missing_kfd_for_a_user_also_names_the_groups(tree: Tree) -> None:
    flags = docker_flags(diagnose(tree.view(), ROCM_CELL))
    assert flags[:2] == ["--device=/dev/kfd", "--device=/dev/dri"]
    assert "--group-add video" in flags and any("getent group render" in f for f in flags)


def test_gid_mismatch_names_the_numeric_group(tree: Tree) -> None:
    tree.rocm_devices(gid=110).kfd_node(1, 110000)
    findings = diagnose(tree.view(), ROCM_CELL)
    kfd = by_name(findings)["dev_kfd"].result
    assert kfd.status == "warn"
    assert "GID mismatch" in kfd.detail and "group 110" in kfd.detail
    assert "whose render group is 992" in kfd.detail and "44, 1000" in kfd.detail
    assert "--group-add 110" in kfd.fix
    assert docker_flags(findings) == ["--group-add 110"]
    assert no_gpu_fix(findings, ROCM) == "run with: docker run --group-add 110 IMAGE torch-smoke"


def test_no_permission_even_for_the_group_points_at_the_host(tree: Tree) -> None:
    tree.device("kfd", gid=110, mode=0o600).device("dri/renderD128", gid=110, mode=0o600)
    findings = diagnose(tree.view(gids=frozenset({1000, 110})), ROCM_CELL)
    kfd = by_name(findings)["dev_kfd"].result
    assert kfd.status == "warn" and "mode 0600" in kfd.detail and "udev" in kfd.fix
    assert docker_flags(findings) == []
    assert no_gpu_fix(findings, ROCM) == "the devices are passed in: fix what the WARN lines below say"


def test_root_needs_no_group(tree: Tree) -> None:
    tree.rocm_devices(gid=110)
    kfd = by_name(diagnose(tree.view(uid=0, gids=frozenset({0})), ROCM_CELL))["dev_kfd"].result
    assert kfd.status == "pass" and "root: no group needed" in kfd.detail


def test_overrides_and_visibility_variables_are_flagged(tree: Tree) -> None:
    tree.rocm_devices(gid=44)
    env = {"HSA_OVERRIDE_GFX_VERSION": "10.3.0", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": "1",
           "CUDA_VISIBLE_DEVICES": "-1"}
    env_result = by_name(diagnose(tree.view(env=env), ROCM_CELL))["gpu_env"].result
    assert env_result.status == "warn"
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in env_result.detail and "gfx1030" in env_result.detail
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        assert var in env_result.detail and f"unset {var}" in env_result.fix
    assert "risky" in env_result.fix


def test_with_a_gpu_visible_a_device_list_is_information_and_the_override_a_warning() -> None:
    assert gpu_env({"HIP_VISIBLE_DEVICES": "0,1"}, gpu_visible=True).result.status == "info"
    assert gpu_env({"HIP_VISIBLE_DEVICES": ""}, gpu_visible=True).result.status == "warn"
    assert gpu_env({"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}, gpu_visible=True).result.status == "warn"
    assert gpu_env({}, gpu_visible=True).result.status == "pass"


def test_everything_fine(tree: Tree) -> None:
    tree.rocm_devices(gid=110).kfd_node(0, 0).kfd_node(1, 110000)
    findings = diagnose(tree.view(gids=frozenset({1000, 44, 110})), ROCM_CELL)
    assert {f.result.name: f.result.status for f in findings} == {
        "dev_kfd": "pass", "dev_dri": "pass", "gpu_env": "pass", "gpu_target": "pass", "host_driver": "info"}
    assert "gfx1100 (node 1, device 0x744c), in family gfx110X-all" in by_name(findings)["gpu_target"].result.detail
    assert docker_flags(findings) == []
    assert "yet torch sees no GPU: check the host's driver (`dmesg`, `rocminfo`" in no_gpu_fix(findings, ROCM)


def test_host_gpu_outside_the_family_is_named_even_without_torch_seeing_it(tree: Tree) -> None:
    tree.kfd_node(1, 100301)  # gfx1031, RX 6700 XT
    target = by_name(diagnose(tree.view(), ROCM_CELL))["gpu_target"].result
    assert target.status == "warn"
    assert "gfx1031 is not in this image's family gfx110X-all" in target.detail
    assert "HSA_OVERRIDE_GFX_VERSION" in target.fix and "risky" in target.fix


def test_no_kfd_driver_is_information(tree: Tree) -> None:
    target = by_name(diagnose(tree.view(), ROCM_CELL))["gpu_target"].result
    assert target.status == "info" and "no /sys/class/kfd" in target.detail


def test_cuda_cells_look_for_nvidia_devices(tree: Tree) -> None:
    findings = diagnose(tree.view(), CUDA_CELL)
    assert [f.result.name for f in findings] == ["dev_nvidia", "gpu_env"]
    assert docker_flags(findings) == ["--gpus all"]
    tree.device("nvidiactl", gid=0, mode=0o666).device("nvidia0", gid=0, mode=0o666)
    assert by_name(diagnose(tree.view(), CUDA_CELL))["dev_nvidia"].result.status == "pass"
