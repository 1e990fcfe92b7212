"""torch_smoke.smoke: the state the checks share: torch once, the GPU, the cell's promised versions and archs."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.smoke.torch_smoke.core import Fail, Outcome, Skip
from builder.smoke.torch_smoke.devices import CpuStandIn
from builder.smoke.torch_smoke.smoke import Smoke
from tests.fakes.smoke import CPU_CELL, CUDA_CELL, GFX110X, ROCM_CELL, Tree, fake_torch


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def test_without_torch_every_check_is_skipped(tree: Tree) -> None:
    with pytest.raises(Skip, match="torch did not import"):
        Smoke(CPU_CELL, tree.view()).need_torch()


def test_the_devices_are_made_once_and_simulated_when_asked(tree: Tree) -> None:
    smoke = Smoke(ROCM_CELL, tree.view(), fake_torch())
    assert smoke.devices() is smoke.devices() and not smoke.devices().simulated
    assert isinstance(Smoke(CPU_CELL, tree.view(), fake_torch(), simulate="gfx1100").devices(), CpuStandIn)


def test_a_version_is_compared_without_its_local_part(tree: Tree) -> None:
    smoke = Smoke(CPU_CELL, tree.view())
    assert smoke.version("torch", "2.13.0+cpu") == "torch 2.13.0+cpu"
    with pytest.raises(Fail, match=r"torch 2\.12\.0 is installed, the image promises 2\.13\.0"):
        smoke.version("torch", "2.12.0")


def test_wanted_archs_by_kind(tree: Tree) -> None:
    assert Smoke(ROCM_CELL, tree.view()).wanted_archs() == GFX110X
    assert Smoke(CPU_CELL, tree.view()).wanted_archs() == []
    assert Smoke({**CUDA_CELL, "cuda_archs": ["9.0", "sm_80"]}, tree.view()).wanted_archs() == ["sm_90", "sm_80"]
    with pytest.raises(Skip, match="lists no expected archs"):
        Smoke(CUDA_CELL, tree.view()).wanted_archs()
    assert Smoke(CUDA_CELL, tree.view()).wanted_archs(required=False) == []
    assert Smoke(ROCM_CELL, tree.view()).family_text() == f"gfx110X-all ({', '.join(GFX110X)})"


def test_arch_list_falls_back_to_the_compiled_in_flags_without_a_gpu(tree: Tree) -> None:
    assert Smoke(ROCM_CELL, tree.view(), fake_torch(archs=("gfx1100:xnack-", "gfx1100"))).arch_list() == ["gfx1100"]
    flags = fake_torch(flags="-gencode;gfx942,gfx90a")
    assert Smoke(ROCM_CELL, tree.view(), flags).arch_list() == ["-gencode", "gfx942", "gfx90a"]


def test_a_pass_under_an_override_is_a_warning_naming_the_real_target(tree: Tree) -> None:
    tree.kfd_node(1, 110501)
    plain = Smoke(ROCM_CELL, tree.view())
    assert plain.override_verdict("runs") == "runs"
    verdict = Smoke(ROCM_CELL, tree.view(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"})).override_verdict("runs")
    assert isinstance(verdict, Outcome) and verdict.status == "warn"
    assert verdict.detail == "runs, as reported under HSA_OVERRIDE_GFX_VERSION=11.0.0; the hardware is gfx1151"
    assert Smoke(CPU_CELL, tree.view(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"})).override_verdict("x") == "x"
