"""torch-smoke under Apptainer: detected from its environment or /.singularity.d, its fixes in Apptainer's words
(on recorded trees, as the Docker diagnostics are), the host's ROCm libraries flagged, a read-only image named."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import pytest

from builder.smoke.torch_smoke import apptainer, libs
from builder.smoke.torch_smoke.__main__ import main
from builder.smoke.torch_smoke.diagnostics import diagnose, docker_flags
from builder.smoke.torch_smoke.runner import run_check
from tests.fakes.smoke import GFX110X, ROCM_CELL, Tree, fake_torch, outcome, smoke
from tests.smoke.test_libs import fake_torch_tree

SIF = "/scratch/project/me/pytorch.sif"
# ldd in a container run with --rocm: the host's HSA runtime and libnuma come before the image's own.
BOUND_LDD = """#!/bin/sh
printf '\\tlibhsa-runtime64.so.1 => /.singularity.d/libs/libhsa-runtime64.so.1 (0x1)\\n'
printf '\\tlibnuma.so.1 => /.singularity.d/libs/libnuma.so.1 (0x2)\\n\\tlibc.so.6 => /lib/libc.so.6 (0x3)\\n'
"""


def test_apptainer_is_detected_by_its_variables_or_its_folder(tmp_path: Path) -> None:
    assert not apptainer.detect({}, tmp_path)
    assert apptainer.detect({"APPTAINER_CONTAINER": SIF}, tmp_path)
    assert apptainer.detect({"SINGULARITY_CONTAINER": SIF}, tmp_path)
    (tmp_path / ".singularity.d").mkdir()
    assert apptainer.detect({}, tmp_path)


def report_for(tree: Path, cell: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    main(["--json", "--cell", str(cell), "--root", str(tree)])
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    return report


def test_without_gpu_devices_the_fixes_are_apptainer_lines_not_docker_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded host under Apptainer (its environment, /.singularity.d): a gfx1100 in the kfd topology, no
    /dev/kfd or /dev/dri bound in (--containall without --rocm)."""
    (tmp_path / "root").mkdir()
    tree = Tree(tmp_path / "root").kfd_node(0, 0).kfd_node(1, 110000)
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(ROCM_CELL))
    monkeypatch.setitem(sys.modules, "torch", fake_torch(archs=tuple(GFX110X)))
    docker = report_for(tree.root, cell, capsys)  # the same host seen from docker run
    assert docker["runtime"] == "docker" and docker["apptainer_flags"] == []
    assert docker["docker_flags"][:2] == ["--device=/dev/kfd", "--device=/dev/dri"]  # type: ignore[index]

    (tree.root / ".singularity.d" / "libs").mkdir(parents=True)
    monkeypatch.setenv("APPTAINER_CONTAINER", SIF)
    report = report_for(tree.root, cell, capsys)
    assert (report["runtime"], report["docker_flags"], report["apptainer_flags"]) == ("apptainer", [], ["--rocm"])
    results = {r["name"]: r for r in report["results"]}  # type: ignore[attr-defined]
    assert results["gpu"]["fix"].startswith("run with: apptainer exec --rocm IMAGE.sif torch-smoke (or --bind "
                                            "/dev/kfd,/dev/dri instead of --rocm")
    assert "render and video groups" in results["gpu"]["fix"]
    for name in ("dev_kfd", "dev_dri"):
        assert results[name]["status"] == "warn" and "apptainer exec --rocm" in results[name]["fix"]
    text = json.dumps(report["results"])
    assert "docker run" not in text and "--group-add" not in text and "--device" not in text


def test_a_device_group_the_user_lacks_is_fixed_on_the_host_not_with_group_add(tmp_path: Path) -> None:
    tree = Tree(tmp_path).rocm_devices(gid=110).kfd_node(1, 110000)
    findings = diagnose(tree.view(apptainer=True), ROCM_CELL)
    kfd = next(f for f in findings if f.result.name == "dev_kfd").result
    assert kfd.status == "warn" and "group 110" in kfd.detail
    assert "usermod -aG render,video" in kfd.fix and "getent group 110" in kfd.fix
    assert "--group-add" not in kfd.fix.replace("has no --group-add", "")
    assert docker_flags(findings) == []


def test_a_visibility_variable_is_unset_on_the_apptainer_side(tmp_path: Path) -> None:
    env = {"HIP_VISIBLE_DEVICES": ""}
    found = diagnose(Tree(tmp_path).view(env=env, apptainer=True), ROCM_CELL, ["gpu_env"])[0].result
    assert "APPTAINERENV_HIP_VISIBLE_DEVICES" in found.fix and "docker run" not in found.fix


def test_torch_libraries_from_the_hosts_singularity_libs_are_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ldd = tmp_path / "ldd"
    ldd.write_text(BOUND_LDD)
    ldd.chmod(0o755)
    torch_dir = fake_torch_tree(tmp_path, "libtorch_hip.so")
    monkeypatch.setattr(libs, "package_folders", lambda: {"torch": torch_dir})
    result = outcome(lambda s: libs.libs(s, command=[str(ldd)]), smoke(ROCM_CELL, fake_torch()))
    assert result.status == "warn"
    assert result.detail == (
        "2 of torch's libraries resolve from the host's /.singularity.d/libs (apptainer --rocm), not from this "
        "image: libhsa-runtime64.so.1 from /.singularity.d/libs/libhsa-runtime64.so.1, libnuma.so.1 from "
        "/.singularity.d/libs/libnuma.so.1")
    assert "without --rocm and with --bind /dev/kfd,/dev/dri" in result.fix


def test_a_check_that_cannot_write_reports_a_read_only_environment() -> None:
    def writes() -> str:
        raise OSError(errno.EROFS, "Read-only file system", "/opt/venv/lib/python3.12/site-packages/x")

    under = run_check("hip_compile", writes, 5, "sdk", under_apptainer=True)
    assert under.status == "fail" and under.detail.startswith("read-only environment: OSError: [Errno 30]")
    assert "--writable-tmpfs" in under.fix and "--system-site-packages" in under.fix
    docker = run_check("hip_compile", writes, 5, "sdk")
    assert docker.detail.startswith("read-only environment") and "--read-only" in docker.fix
    plain = run_check("hip_compile", lambda: 1 / 0, 5, "sdk", under_apptainer=True)  # type: ignore[arg-type,return-value]
    assert not plain.detail.startswith("read-only")
