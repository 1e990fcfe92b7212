"""torch-smoke's command line, in process: a complete JSON report, the text report, an unreadable cell file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from builder.smoke.torch_smoke.__main__ import main
from builder.smoke.torch_smoke.diagnostics import HostView
from tests.fakes.smoke import GFX110X, ROCM_CELL, Tree, fake_torch


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def test_json_is_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A ROCm cell on a host without GPU, with a fake torch that cannot compute: every check is reported."""
    tree = Tree(tmp_path).rocm_devices(gid=110).kfd_node(1, 110000)
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(ROCM_CELL))
    monkeypatch.setitem(sys.modules, "torch", fake_torch(archs=tuple(GFX110X)))
    monkeypatch.setattr(HostView, "current", classmethod(lambda cls, root: tree.view()))  # uid 1000
    code, out = run_main(["--json", "--cell", str(cell), "--root", str(tree.root)], capsys)
    report = json.loads(out)
    names = [r["name"] for r in report["results"]]
    assert names == ["import", "torch_version", "torchvision_version", "torchaudio_version", "hip_version",
                     "cuda_version", "arch_list", "libs", "pip_constraint", "cpu_matmul", "cpu_svd", "numpy",
                     "torchvision_nms", "hip_compile", "gpu", "dev_kfd", "dev_dri", "gpu_env", "gpu_target",
                     "host_driver"]
    fields = {"name", "status", "detail", "fix", "seconds", "section", "timed_out"}
    assert all(set(r) == fields for r in report["results"])
    assert {k: report[k] for k in ("platform", "exit_code", "gpu_visible", "simulated_gpu")} == {
        "platform": "rocm", "exit_code": 1, "gpu_visible": False, "simulated_gpu": False}
    assert report["cell"] == ROCM_CELL and code == 1
    assert sum(report["summary"].values()) == len(names)
    assert all(r["fix"] for r in report["results"] if r["status"] == "fail")
    assert report["docker_flags"] == ["--group-add 110"]
    gpu = next(r for r in report["results"] if r["name"] == "gpu")
    assert gpu["fix"] == "run with: docker run --group-add 110 IMAGE torch-smoke"
    # The text report carries the same checks.
    _, text = run_main(["--cell", str(cell), "--root", str(tree.root)], capsys)
    assert all(f"  {name} " in text for name in names)


def test_unreadable_cell_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cell", str(tmp_path / "missing.json")]) == 1
    assert "cannot read the expectations" in capsys.readouterr().err
