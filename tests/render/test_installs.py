"""builder.render.installs: what each image installs, in its generic shape (channel and OS family specifics are
the variants' own, and change with them): torch pinned in every step, nothing twice, a family's extras on top.
"""

from __future__ import annotations

from pathlib import Path

from builder.core.spec import CellSpec
from builder.matrix.expand import load_matrix
from builder.render import installs
from testkit.matrices import FAMILIES, load_cells
from tests.fakes.checkout import DATA


def some_cells(tmp_path: Path) -> list[CellSpec]:
    return [*load_matrix(DATA / "golden.yaml"), *load_cells(tmp_path, FAMILIES)]


def name(requirement: str) -> str:
    return requirement.split("[")[0].split("=")[0]


def test_the_small_step_pins_torch_again_and_adds_its_companions_and_numpy(tmp_path: Path) -> None:
    for cell in some_cells(tmp_path):
        small = installs.small_requirements(cell)
        assert small[0] == f"torch=={cell.torch_wheel}" and small[-1] == "numpy"
        assert ("torchvision" in map(name, small)) == bool(cell.torchvision)
        assert ("torchaudio" in map(name, small)) == bool(cell.torchaudio)


def test_device_requirements_carry_the_extras_or_are_empty(tmp_path: Path) -> None:
    for cell in some_cells(tmp_path):
        extras, device = installs.device_extras(cell), installs.device_requirements(cell)
        assert bool(extras) == bool(device)
        assert all(r.startswith(f"{name(r)}{extras}==") for r in device)
        if extras:
            assert extras == "[" + ",".join(f"device-{t}" for t in cell.gfx_targets) + "]"


def test_requirements_name_each_package_once_the_device_pins_first(tmp_path: Path) -> None:
    for cell in some_cells(tmp_path):
        found = installs.requirements(cell)
        names = [name(r) for r in found]
        assert len(names) == len(set(names)), cell.tag
        device = installs.device_requirements(cell)
        assert found[:len(device)] == device and set(installs.sdk_requirements(cell)) <= set(found)


def test_only_a_devel_image_gets_an_sdk(tmp_path: Path) -> None:
    for cell in some_cells(tmp_path):
        if not cell.has_rocm_sdk:
            assert installs.sdk_requirements(cell) == [] and installs.os_sdk_steps(cell) == []
    assert any(installs.sdk_requirements(c) for c in some_cells(tmp_path) if c.flavor == "devel")

