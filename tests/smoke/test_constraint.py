"""The pip constraint: the file written at build time from the installed distributions, and torch-smoke's report
that it is in force. Distributions are dist-info folders with METADATA as wheels install them (`Name:`, `Version:`;
TheRock's names as its index serves them: rocm, rocm-sdk-core, rocm-sdk-device-gfx942, amd-torch-device-gfx942)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.smoke.torch_smoke import constraint
from tests.fakes.smoke import ROCM_CELL, fake_torch, outcome, smoke

THEROCK = {"torch": "2.12.0+rocm7.14.0", "torchvision": "0.27.0+rocm7.14.0", "torchaudio": "2.11.0+rocm7.14.0",
           "rocm": "7.14.0", "rocm_sdk_core": "7.14.0", "rocm-sdk-device-gfx942": "7.14.0",
           "amd_torch_device_gfx942": "2.12.0+rocm7.14.0", "numpy": "2.3.1", "pytorch-triton-rocm": "3.5.0"}


def site(tmp_path: Path, dists: dict[str, str]) -> Path:
    folder = tmp_path / "site-packages"
    for name, version in dists.items():
        info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder


def test_the_file_pins_the_torch_family_and_therocks_packages_not_the_rest(tmp_path: Path) -> None:
    folder = site(tmp_path, THEROCK)
    target = tmp_path / "constraints.txt"
    assert constraint.main([str(target)], [str(folder)]) == 0
    pins = constraint.read_pins(target)
    assert pins == {"amd-torch-device-gfx942": "2.12.0+rocm7.14.0", "pytorch-triton-rocm": "3.5.0", "rocm": "7.14.0",
                    "rocm-sdk-core": "7.14.0", "rocm-sdk-device-gfx942": "7.14.0", "torch": "2.12.0+rocm7.14.0",
                    "torchaudio": "2.11.0+rocm7.14.0", "torchvision": "0.27.0+rocm7.14.0"}
    assert "PIP_CONSTRAINT= pip install" in target.read_text()  # how to lift it, in the file itself
    assert not list(tmp_path.glob(".constraints.txt.tmp"))


def test_no_torch_no_file(tmp_path: Path) -> None:
    target = tmp_path / "constraints.txt"
    assert constraint.main([str(target)], [str(site(tmp_path, {"numpy": "2.3.1"}))]) == 1
    assert not target.exists()
    assert constraint.main([], []) == 2


REAL_INSTALLED = constraint.installed


@pytest.fixture
def pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A constraint file written from a site folder, which the check then reads as what is installed."""
    folder = site(tmp_path, {"torch": "2.13.0+cpu", "torchvision": "0.28.0+cpu"})
    target = tmp_path / "constraints.txt"
    assert constraint.main([str(target)], [str(folder)]) == 0
    monkeypatch.setattr(constraint, "installed", lambda path=None: REAL_INSTALLED([str(folder)]))
    return target


def test_in_force(pinned: Path) -> None:
    env = {"PIP_CONSTRAINT": str(pinned), "UV_CONSTRAINT": str(pinned)}
    result = outcome(constraint.pip_constraint, smoke(ROCM_CELL, fake_torch(), env=env))
    assert result.status == "pass"
    assert result.detail == f"in force: PIP_CONSTRAINT={pinned} pins torch==2.13.0+cpu, torchvision==0.28.0+cpu; " \
                            "UV_CONSTRAINT too"


def test_lifted_is_reported_with_how_to_restore(pinned: Path) -> None:
    result = outcome(constraint.pip_constraint, smoke(ROCM_CELL, fake_torch(), env={}))
    assert result.status == "info" and "pip may replace this image's torch" in result.detail
    assert f"export PIP_CONSTRAINT={constraint.FILE}" in result.fix


def test_a_file_that_no_longer_matches_what_is_installed_warns(pinned: Path) -> None:
    pinned.write_text("torch==2.0.0\n")
    result = outcome(constraint.pip_constraint, smoke(ROCM_CELL, fake_torch(), env={"PIP_CONSTRAINT": str(pinned)}))
    assert result.status == "warn" and "torch==2.0.0 (installed: 2.13.0+cpu)" in result.detail


def test_a_missing_file_warns(tmp_path: Path) -> None:
    env = {"PIP_CONSTRAINT": str(tmp_path / "gone.txt")}
    result = outcome(constraint.pip_constraint, smoke(ROCM_CELL, fake_torch(), env=env))
    assert result.status == "warn" and "cannot be read" in result.detail
