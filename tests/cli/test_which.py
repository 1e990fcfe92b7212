"""`builder which` (builder.cli.which): the answer printed for a person or as JSON, exit codes, no traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builder.cli.which import _gpu_rows
from testkit.matrices import write_matrix
from tests.fakes.checkout import builder_cli
from tests.fakes.hosts import HOSTS, MATRIX, RUN, SECCOMP


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    return write_matrix(tmp_path, MATRIX)


def test_cli_text_for_mi300x(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--root", str(HOSTS / "mi300x"), "--registry", "ghcr.io/acme")
    assert result.returncode == 0, result.stderr
    assert re.search(r"HIP 0-7 +8 x AMD Instinct MI300X  gfx942  family gfx94X-dcgpu  dGPU", result.stdout)
    assert (f"{RUN} --group-add 109 {SECCOMP} ghcr.io/acme/pytorch:"
            "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx94X-dcgpu_therock_runtime\n") in result.stdout



def test_cli_json_structure(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--sysfs", str(HOSTS / "apu-rx6800"), "--json",
                         "--registry", "ghcr.io/acme")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"matrix", "source", "gpus", "other_gpus", "recommended", "unmatched", "cpu_image",
                         "render_gids", "gid_source", "notes", "exit_code", "host_driver"}
    assert set(data["gpus"][0]) == {"index", "kfd_node", "pci", "device_id", "revision", "name", "target", "family",
                                    "igpu", "render_node", "supported"}
    assert set(data["recommended"]) == {"target", "family", "gpus", "for", "image", "docker_run", "apptainer_pull",
                                        "apptainer_exec", "alternatives", "choices"}
    assert set(data["recommended"]["image"]) == {"tag", "ref", "gfx", "gfx_targets", "rocm", "torch", "python", "os",
                                                 "flavor", "channel"}
    assert set(data["unmatched"][0]) == {"target", "family", "gpus", "for", "why", "message", "override"}
    assert set(data["unmatched"][0]["override"]) == {"value", "poses_as", "risk", "image", "docker_run",
                                                     "apptainer_pull", "apptainer_exec"}
    assert data["recommended"]["image"]["ref"].startswith("ghcr.io/acme/pytorch:") and data["exit_code"] == 0



def test_cli_without_an_amd_gpu_exits_1_with_a_message_not_a_traceback(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--root", str(HOSTS / "no-amd-gpu"))
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    assert result.stdout.startswith("no AMD GPU found") and "NVIDIA 0x2684" in result.stdout



def test_cli_bad_gfx_is_exit_2(matrix: Path) -> None:
    result = builder_cli("which", "-m", str(matrix), "--gfx", "gfx94X-dcgpu")
    assert result.returncode == 2 and "is a family, not a target" in result.stderr


def gpu(index: int | None, name: str = "AMD Instinct MI300X", target: str | None = "gfx942", pci: str = "",
        supported: bool = True) -> dict[str, object]:
    return {"index": index, "name": name, "target": target, "family": "gfx94X-dcgpu" if target else None,
            "igpu": False, "supported": supported, "pci": pci}


def test_alike_gpus_in_a_row_share_one_line_others_get_their_own() -> None:
    rows = _gpu_rows([gpu(0), gpu(1), gpu(4), gpu(2, "Radeon 890M", None, "0000:c5:00.0", False), gpu(3)])
    assert rows == ["HIP 0,1,4 3 x AMD Instinct MI300X  gfx942  family gfx94X-dcgpu  dGPU",
                    "HIP 2     Radeon 890M  gfx?  family -  dGPU  PCI 0000:c5:00.0  [yellow]no image[/yellow]",
                    "HIP 3     AMD Instinct MI300X  gfx942  family gfx94X-dcgpu  dGPU"]


def test_gpus_without_a_hip_index_have_none_shown() -> None:
    assert _gpu_rows([gpu(None), gpu(None)])[0].startswith("-         2 x AMD")
