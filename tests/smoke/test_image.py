"""torch-smoke in a real image with real (CPU) torch, run the way users run it: `docker run IMAGE torch-smoke`.

Cells other than the baked-in one are handed to the program in the container (--cell or RIF_CELL_FILE), and
device trees are faked under --root, so nothing here depends on the host having (or lacking) a GPU.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from builder.buildkit.engine import run_captured
from testkit.matrices import BARE_TORCH, cpu_matrix
from tests.fakes.checkout import builder_cli

pytestmark = pytest.mark.docker

TAG = "cpu_debian12_py3.11_torch2.13.0_devel"  # devel: its compiler lets the simulated torch.compile run
GFX110X = ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]
BASE_CHECKS = ["import", "torch_version", "torchvision_version", "torchaudio_version", "hip_version",
               "cuda_version", "arch_list", "libs", "pip_constraint", "cpu_matmul", "cpu_svd", "numpy",
               "torchvision_nms"]
GPU_CHECKS = ["gpu", "gpu_env", "gpu_arch", "gpu_matmul_fp32", "gpu_matmul_fp16", "gpu_matmul_bf16", "gpu_conv",
              "gpu_sdpa", "gpu_training", "gpu_synchronize", "gpu_compile", "gpu_tflops", "gpu_hip_kernel"]
# Writes $RIF_TEST_CELL to /tmp/cell.json, then runs torch-smoke with the remaining arguments.
WITH_CELL = 'printf "%s" "$RIF_TEST_CELL" > /tmp/cell.json && exec torch-smoke "$@"'
# A fake /dev and /sys under /tmp/fake: devices owned by group 110 (the host's render GID, unknown to the
# image), one gfx1100 in the kfd topology; then torch-smoke as uid 1000 in groups 1000 and 44 (video).
FAKE_TREE = """set -e
R=/tmp/fake N=$R/sys/class/kfd/kfd/topology/nodes
mkdir -p $R/dev/dri $N/0 $N/1
touch $R/dev/kfd $R/dev/dri/renderD128
chown 0:110 $R/dev/kfd $R/dev/dri/renderD128 && chmod 0660 $R/dev/kfd $R/dev/dri/renderD128
printf 'cpu_cores_count 16\\ngfx_target_version 0\\n' > $N/0/properties
printf 'simd_count 192\\ngfx_target_version 110000\\nvendor_id 4098\\ndevice_id 29772\\n' > $N/1/properties
printf "%s" "$RIF_TEST_CELL" > /tmp/cell.json
exec python3 -c 'import os, sys; os.setgroups([44]); os.setgid(1000); os.setuid(1000)
os.execvp(sys.argv[1], sys.argv[1:])' torch-smoke --cell /tmp/cell.json --root $R "$@"
"""


def cell(**changes: Any) -> dict[str, Any]:
    base = {"tag": TAG, "platform": "cpu", "channel": "pytorch", "os": "debian-12", "flavor": "devel",
            "python": "3.11", "user": "root", "torch": "2.13.0", "torchvision": None, "torchaudio": None,
            "hip": None, "gfx_family": None, "gfx_targets": []}
    return {**base, **changes}


ROCM = {"platform": "rocm7.2", "hip": "7.2", "gfx_family": "gfx110X-all", "gfx_targets": GFX110X}


@pytest.fixture(scope="module")
def image(docker_client: docker.DockerClient, base_image: str, wheelhouse: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One CPU image, built by `builder build` as in production (its own name: runs never share it)."""
    tmp = tmp_path_factory.mktemp("smoke-image")
    matrix, report = tmp / "matrix.yaml", tmp / "report.json"
    matrix.write_text(cpu_matrix(BARE_TORCH, image=f"smoke{uuid.uuid4().hex[:8]}") + "  flavor: [devel]\n")
    proc = builder_cli("build", "--matrix", str(matrix), "--wheelhouse", str(wheelhouse), "--quiet",
                       "--report", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ref = str(json.loads(report.read_text())["images"][0]["local_image"])
    yield ref
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.remove(ref)


def smoke(client: docker.DockerClient, image: str, *args: str, with_cell: dict[str, Any] | None = None,
          script: str = WITH_CELL, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """docker run IMAGE torch-smoke ARGS, or with another cell handed in through the environment."""
    if with_cell is None and script == WITH_CELL:
        return run_captured(client, image, ["torch-smoke", *args], timeout=300, environment=env or {})
    return run_captured(client, image, ["sh", "-c", script, "sh", *args], timeout=300,
                        environment={"RIF_TEST_CELL": json.dumps(with_cell), **(env or {})})


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r["status"] for r in report["results"]}


def result(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["name"] == name)


def test_cpu_checks_pass_with_no_arguments(docker_client: docker.DockerClient, image: str) -> None:
    code, out, err = smoke(docker_client, image)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0] == f"torch-smoke for {TAG} (cpu, torch 2.13.0)"
    for name in ("import", "torch_version", "hip_version", "cuda_version", "libs", "pip_constraint", "cpu_matmul",
                 "cpu_svd", "numpy"):
        assert any(line.split()[:2] == ["PASS", name] for line in lines), (name, out)
    assert "torch 2.13.0+cpu from /opt/venv/lib/python3.11/site-packages/torch, no warnings" in out
    assert any(line.split()[:3] == ["SKIP", "gpu", "CPU"] for line in lines)
    assert lines[-1] == "9 passed, 0 failed, 0 warnings, 6 skipped, 0 info: exit 0 (all required checks passed)"


def test_json_is_valid_and_complete(docker_client: docker.DockerClient, image: str) -> None:
    code, out, err = smoke(docker_client, image, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert statuses(report) == {
        "import": "pass", "torch_version": "pass", "torchvision_version": "skip", "torchaudio_version": "skip",
        "hip_version": "pass", "cuda_version": "pass", "arch_list": "skip", "libs": "pass", "pip_constraint": "pass",
        "cpu_matmul": "pass", "cpu_svd": "pass", "numpy": "pass", "torchvision_nms": "skip",
        "hip_compile": "skip", "gpu": "skip"}
    assert [r["section"] for r in report["results"]] == ["install"] * 9 + ["cpu"] * 4 + ["sdk", "gpu"]
    assert all(set(r) == {"name", "status", "detail", "fix", "seconds", "section", "timed_out"}
               for r in report["results"])
    baked = json.loads(docker_client.containers.run(image, ["cat", "/opt/rif/cell.json"], remove=True))
    assert report["cell"] == baked and baked["tag"] == TAG
    assert (report["exit_code"], report["gpu_visible"], report["docker_flags"]) == (0, False, [])
    assert report["summary"] == {"pass": 9, "fail": 0, "warn": 0, "skip": 6, "info": 0}


def test_wrong_expected_versions_fail_with_a_clear_message(docker_client: docker.DockerClient, image: str) -> None:
    code, out, _ = smoke(docker_client, image, "--cell", "/tmp/cell.json",
                         with_cell=cell(torch="2.12.0", torchvision="0.28.0"))
    assert code == 1
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["FAIL", "torch_version"])
    assert lines[at].endswith("torch 2.13.0+cpu is installed, the image promises 2.12.0")
    assert lines[at + 1].strip().startswith("fix: the image was built from the wrong wheels")
    assert "torchvision is not installed, the image promises 0.28.0" in out
    assert lines[-1].startswith("8 passed, 2 failed") and lines[-1].endswith("exit 1 (a check failed)")


def test_cell_file_from_the_environment(docker_client: docker.DockerClient, image: str) -> None:
    code, out, _ = smoke(docker_client, image, "--json", with_cell=cell(torch="2.12.0"),
                         env={"RIF_CELL_FILE": "/tmp/cell.json"})
    report = json.loads(out)
    assert code == report["exit_code"] == 1
    assert {n for n, s in statuses(report).items() if s == "fail"} == {"torch_version"}


def test_require_gpu_without_a_gpu_exits_3(docker_client: docker.DockerClient, image: str) -> None:
    code, out, _ = smoke(docker_client, image, "--require-gpu")
    assert code == 3
    assert out.splitlines()[-1].endswith("exit 3 (--require-gpu was given and no GPU is visible)")


def test_rocm_cell_in_a_fake_tree_names_the_render_gid_fix(docker_client: docker.DockerClient, image: str) -> None:
    code, out, err = smoke(docker_client, image, "--json", with_cell=cell(**ROCM), script=FAKE_TREE)
    report = json.loads(out)
    assert code == 1, err  # CPU torch in a ROCm cell: hip_version and arch_list fail, as they must
    assert "this torch is not a ROCm build (want ROCm 7.2)" in result(report, "hip_version")["detail"]
    assert statuses(report)["arch_list"] == "fail"
    gpu = result(report, "gpu")
    assert gpu["status"] == "skip" and gpu["fix"] == "run with: docker run --group-add 110 IMAGE torch-smoke"
    kfd = result(report, "dev_kfd")
    assert kfd["status"] == "warn" and "GID mismatch: uid 1000" in kfd["detail"]
    assert "group 110 (unknown to this image" in kfd["detail"] and "--group-add 110" in kfd["fix"]
    assert result(report, "dev_dri")["status"] == "warn"
    assert result(report, "gpu_target")["status"] == "pass"
    assert "gfx1100 (node 1, device 0x744c)" in result(report, "gpu_target")["detail"]
    assert report["docker_flags"] == ["--group-add 110"]


def test_rocm_cell_without_devices_names_the_device_flags_and_flags_the_override(
        docker_client: docker.DockerClient, image: str) -> None:
    script = WITH_CELL.replace("exec torch-smoke", "mkdir -p /tmp/empty && exec torch-smoke")
    code, out, _ = smoke(docker_client, image, "--json", "--cell", "/tmp/cell.json", "--root", "/tmp/empty",
                         with_cell=cell(**ROCM), script=script, env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"})
    report = json.loads(out)
    assert code == report["exit_code"] == 1
    assert report["docker_flags"] == ["--device=/dev/kfd", "--device=/dev/dri"]  # root: no group needed
    assert result(report, "gpu")["fix"] == "run with: docker run --device=/dev/kfd --device=/dev/dri IMAGE torch-smoke"
    env = result(report, "gpu_env")
    assert env["status"] == "warn" and "HSA_OVERRIDE_GFX_VERSION=11.0.0" in env["detail"] and "risky" in env["fix"]
    assert result(report, "gpu_target")["status"] == "info"
    text = smoke(docker_client, image, "--cell", "/tmp/cell.json", "--root", "/tmp/empty",
                 with_cell=cell(**ROCM), script=script)[1]
    assert "diagnostics:" in text and "fix: add --device=/dev/kfd to docker run" in text


def test_gpu_checks_run_on_real_torch_when_simulated(docker_client: docker.DockerClient, image: str) -> None:
    """No GPU here: --simulate-gpu (a test hook) runs every GPU check's code with real torch on the CPU."""
    code, out, err = smoke(docker_client, image, "--json", "--simulate-gpu", "gfx1100")
    report = json.loads(out)
    assert code == 0, out + err
    # the host's driver range is read where a GPU is seen, after gpu_env (no amdgpu module here: not a pass)
    assert [r["name"] for r in report["results"]] == [*BASE_CHECKS, "hip_compile", *GPU_CHECKS[:2], "host_driver",
                                                      *GPU_CHECKS[2:]]
    got = {n: s for n, s in statuses(report).items() if n in GPU_CHECKS}
    assert got == {**dict.fromkeys(GPU_CHECKS, "pass"), "gpu_arch": "info", "gpu_tflops": "info",
                   "gpu_hip_kernel": "skip"}, out
    assert report["simulated_gpu"] is True and report["gpu_visible"] is True
    assert "TFLOP/s" in result(report, "gpu_tflops")["detail"]


def test_builder_test_gpu_without_a_gpu_fails_and_says_why(image: str) -> None:
    proc = builder_cli("test", image, "--gpu")
    assert proc.returncode == 1
    assert "torch-smoke exited 3: a GPU was required and none is visible" in proc.stderr
