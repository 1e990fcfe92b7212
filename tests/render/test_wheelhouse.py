"""builder.render.wheelhouse: one pip download per Python version and index."""

from __future__ import annotations

from pathlib import Path

from builder.matrix.expand import load_matrix
from builder.render import wheelhouse
from tests.fakes.checkout import DATA


def test_wheelhouse_downloads_per_python_and_index(tmp_path: Path) -> None:
    cells = load_matrix(DATA / "golden.yaml")  # therock rocm7.13 py3.12, cpu py3.11, pytorch rocm7.1 py3.10
    commands = wheelhouse.download_commands(cells, tmp_path, None, use_pip_config=False)
    assert len(commands) == 3
    by_python = {c[c.index("--python-version") + 1]: c for c in commands}
    rocm = by_python["3.12"]
    assert rocm[rocm.index("--index-url") + 1] == "https://repo.amd.com/rocm/whl-multi-arch/"
    # torch and its companions pin TheRock's full local version (the index serves one torch for several TheRock
    # releases), and a devel image's SDK comes from the same release
    assert rocm[-5:] == ["numpy", "rocm[devel]==7.13.0", "torch[device-gfx942]==2.8.0+rocm7.13.0",
                         "torchaudio==2.8.0+rocm7.13.0", "torchvision[device-gfx942]==0.23.0+rocm7.13.0"]
    assert "--only-binary=:all:" in rocm and "manylinux_2_28_x86_64" in rocm
    cpu = by_python["3.11"]
    assert cpu[cpu.index("--index-url") + 1] == "https://mirror.example.org/whl/cpu"
    assert cpu[-2:] == ["numpy", "torch==2.13.0"]
    pytorch = by_python["3.10"]
    assert pytorch[pytorch.index("--index-url") + 1] == "https://download.pytorch.org/whl/rocm7.1"
    assert pytorch[-4:] == ["numpy", "torch==2.12.0+rocm7.1", "torchaudio==2.11.0", "torchvision==0.27.0"]
    local = wheelhouse.download_commands(cells, tmp_path, None, use_pip_config=True)
    assert all("--index-url" not in c for c in local)
