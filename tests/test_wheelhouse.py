"""builder.wheelhouse: one pip download per Python version and index."""

from __future__ import annotations

from pathlib import Path

from builder import wheelhouse
from builder.matrix import load_matrix
from tests.conftest import DATA


def test_wheelhouse_downloads_per_python_and_index(tmp_path: Path) -> None:
    cells = load_matrix(DATA / "golden.yaml")  # therock rocm7.2 py3.12, cpu py3.11, pytorch rocm7.1 py3.10
    commands = wheelhouse.download_commands(cells, tmp_path, None, use_pip_config=False)
    assert len(commands) == 3
    by_python = {c[c.index("--python-version") + 1]: c for c in commands}
    rocm = by_python["3.12"]
    assert rocm[rocm.index("--index-url") + 1] == "https://repo.amd.com/rocm/whl-multi-arch/"
    assert rocm[-4:] == ["numpy", "torch[device-gfx942]==2.9.1", "torchaudio==2.9.1",
                         "torchvision[device-gfx942]==0.24.1"]
    assert "--only-binary=:all:" in rocm and "manylinux_2_28_x86_64" in rocm
    cpu = by_python["3.11"]
    assert cpu[cpu.index("--index-url") + 1] == "https://mirror.example.org/whl/cpu"
    assert cpu[-2:] == ["numpy", "torch==2.13.0"]
    local = wheelhouse.download_commands(cells, tmp_path, None, use_pip_config=True)
    assert all("--index-url" not in c for c in local)
