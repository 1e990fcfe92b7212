"""The zipapp baked into images: the same bytes every time (the content hash covers them), and it runs.

The runs use a fake torch package on PYTHONPATH, so they take the same time on any machine.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from builder.smoke import PROGRAM, bundle
from tests.fakes.smoke import CPU_CELL

PACKAGE = Path(__file__).resolve().parents[2] / "builder" / "smoke" / "torch_smoke"
# A torch that imports and reports versions but cannot compute; HANG makes torch.tensor block for good.
FAKE_TORCH = """import os, threading
__version__ = "2.13.0+cpu"
class version:
    hip = None
    cuda = None
def tensor(*args, **kwargs):
    if os.environ.get("HANG"):
        threading.Event().wait()
    raise RuntimeError("this fake torch cannot compute")
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bundle") / PROGRAM
    path.write_bytes(bundle())
    return path


def test_the_bytes_are_identical_on_every_call() -> None:
    first, second = bundle(), bundle()
    assert first == second
    assert first.startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        infos = archive.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert set(names) == {"__main__.py", *(f"torch_smoke/{p.name}" for p in PACKAGE.glob("*.py"))}
    assert {(i.date_time, i.compress_type, i.external_attr >> 16) for i in infos} == {
        ((1980, 1, 1, 0, 0, 0), zipfile.ZIP_STORED, 0o644)}


def run(program: Path, *args: str, root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The zipapp as `python3 torch-smoke.pyz ARGS` with the fake torch importable (safety limit only)."""
    fake = root / "fake-torch"
    (fake / "torch").mkdir(parents=True, exist_ok=True)
    (fake / "torch" / "__init__.py").write_text(FAKE_TORCH)
    environ = {**os.environ, "PYTHONPATH": str(fake), **env}
    return subprocess.run([sys.executable, str(program), *args], capture_output=True, text=True, env=environ,
                          cwd=root, timeout=120, check=False)


def test_it_runs_as_a_plain_file(program: Path, tmp_path: Path) -> None:
    proc = run(program, "--help", root=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: torch-smoke [-h] [--json] [--require-gpu] [--cell CELL]")
    assert "proves PyTorch works in this image" in proc.stdout


def test_it_reports_with_a_torch_that_cannot_compute(program: Path, tmp_path: Path) -> None:
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(CPU_CELL))
    proc = run(program, "--json", "--cell", str(cell), root=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == report["exit_code"] == 1, proc.stderr
    got = {r["name"]: r["status"] for r in report["results"]}
    assert {k: got[k] for k in ("import", "torch_version", "hip_version", "arch_list", "cpu_matmul", "gpu")} == {
        "import": "pass", "torch_version": "pass", "hip_version": "pass", "arch_list": "skip", "cpu_matmul": "fail",
        "gpu": "skip"}


def test_a_hung_check_fails_at_the_limit_and_the_program_still_exits(program: Path, tmp_path: Path) -> None:
    """torch.tensor blocks for good: cpu_matmul fails after RIF_CHECK_TIMEOUT seconds, and its thread does not
    keep the process alive."""
    cell = tmp_path / "cell.json"
    cell.write_text(json.dumps(CPU_CELL))
    proc = run(program, "--cell", str(cell), root=tmp_path, HANG="1", RIF_CHECK_TIMEOUT="1")
    assert proc.returncode == 1, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if " cpu_matmul " in line)
    assert line.split()[0] == "FAIL" and line.endswith("did not finish within 1 s")
    assert "fix: the GPU or driver may be hung" in proc.stdout
